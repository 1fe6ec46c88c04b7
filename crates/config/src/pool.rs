//! One pool file, `pools.d/NAME.toml`: its top-level keys, and the rules between them;
//! `[env]`, `[pm]` and the runtime tables have their own files. Which keys exist, which
//! runtimes refuse them, and how the plain ones are read is their declaration's (`Pool`'s
//! `Http`'s and `Tls`'s in `model/pool.rs`); this file reads the others and hands them in.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::choices::Protocol;
use super::keys::{self, Flavour, Section};
use super::listen::{Claim, overlap, parse_listen};
use super::model::{Http, HttpGiven, Interface, ListenAddr, PhpRuntime, Pool, PoolGiven, Runtime};
use super::value::{Got, Table, log_file, resolve};
use super::{env, pm, runtime};

/// Where a pool's file is and what it is called; the source says where its text is.
pub(super) struct PoolFile<'p> {
    pub name: &'p str,
    pub file: &'p Path,
    /// Position of this file in load order, for claims.
    pub index: usize,
}

/// Checks every key of one pool. Addresses it listens on are pushed to `claims` even when
/// the pool has other errors, so clashes with other pools are reported in the same run.
pub(super) fn parse(
    root: &Table<'_, '_>,
    pool: &PoolFile<'_>,
    base: &Path,
    claims: &mut Vec<Claim>,
) -> Option<Pool> {
    root.check_keys(&keys::names(Section::Pool));
    let program = root.contains("program");
    let (listen, status_listen) = addresses(root, pool, base, claims);
    let socket = socket_options(root, listen.as_ref());
    let chdir = root.parse("chdir", |s| directory(base, s)).optional();
    let slowlog = slowlog(root, base);
    let process_dumpable = root.value("process_dumpable");
    let pm = match root.table("pm") {
        Got::Absent => {
            root.fail("pm", "missing required table [pm]");
            None
        }
        Got::Invalid => None,
        Got::Valid(table) => pm::parse(&table),
    };
    let nonzero = |d: Option<Duration>| d.map(|d| Some(d).filter(|d| !d.is_zero()));
    let request_read_timeout = nonzero(root.value("request_read_timeout"));
    let queue_timeout = nonzero(root.value("queue_timeout"));
    let env = env::env(root);
    let (runtime, flavour) = runtime::parse(root, base);
    if program {
        super::program::check_pm(root, pm.as_ref());
    }
    enforceable_clients(root, listen.as_ref());
    enforceable_dumpable(root, process_dumpable, runtime.as_ref());
    let (access_log, access_format) = access(root, base);
    let http = http(root, base);
    let (status_path, ping_path) = builtin_paths(root, status_listen.as_ref());
    let terminate_grace = terminate_grace(root, slowlog.as_ref(), runtime.as_ref(), flavour);
    threads_speak_fastcgi(root, runtime.as_ref(), http.as_ref());
    let over_http = matches!(http, Some(Some(_))) || root.is("protocol", "http");
    let (listen_owner, listen_group, listen_mode, listen_allowed_clients) = socket;
    let (request_slowlog_timeout, request_slowlog_trace_depth, slowlog, request_terminate_timeout) =
        match slowlog {
            Some((slow, depth, file, terminate)) => {
                (Some(slow), Some(depth), Some(file), Some(terminate))
            }
            None => (None, None, None, None),
        };
    let pool = Pool::read(
        root,
        PoolGiven {
            name: Some(pool.name.to_owned()),
            file: Some(pool.file.to_path_buf()),
            listen,
            listen_owner,
            listen_group,
            listen_mode,
            listen_allowed_clients,
            chdir,
            request_slowlog_timeout,
            request_slowlog_trace_depth,
            slowlog,
            process_dumpable,
            request_terminate_timeout,
            terminate_grace,
            request_read_timeout,
            queue_timeout,
            status_listen,
            status_path,
            ping_path,
            access_log,
            access_format,
            http,
            pm,
            env,
            runtime,
        },
    );
    // What the runtime refuses, by the declarations, once the runtime is known (after the
    // reading, so that a key's own errors come first). An HTTP pool whose HTTP keys have
    // errors is still judged as one (an ASGI pool's unreadable certfile is refused for the
    // runtime too).
    keys::refuse_by_runtime(root, Section::Pool, flavour, over_http);
    pool
}

/// `listen` and `status_listen`, each pushed to `claims` (when valid), so that a clash with
/// another pool is reported in the same run. A background pool has no socket; its `listen`
/// is refused with the other socket keys.
fn addresses(
    root: &Table<'_, '_>,
    pool: &PoolFile<'_>,
    base: &Path,
    claims: &mut Vec<Claim>,
) -> (Option<ListenAddr>, Option<Option<ListenAddr>>) {
    let listen = if root.contains("program") {
        Some(ListenAddr::NoSocket)
    } else {
        root.parse("listen", |s| parse_listen(base, s))
            .required(root, "listen")
    };
    let status_listen = root
        .parse("status_listen", |s| parse_listen(base, s))
        .optional();
    for (key, addr) in [
        ("listen", &listen),
        ("status_listen", &status_listen.clone().flatten()),
    ] {
        if let Some(addr) = addr.as_ref().filter(|a| **a != ListenAddr::NoSocket) {
            let (offset, written) = root.locate(key);
            claims.push(Claim {
                addr: addr.clone(),
                file: pool.index,
                pool: pool.name.to_owned(),
                key,
                offset,
                written,
            });
        }
    }
    if let (Some(listen), Some(Some(status))) = (&listen, &status_listen)
        && overlap(listen, status)
    {
        root.fail("status_listen", "must differ from listen");
    }
    (listen, status_listen)
}

/// `listen_owner`, `listen_group`, `listen_mode` and `listen_allowed_clients`, each `None`
/// when invalid.
type Socket = (
    Option<Option<String>>,
    Option<Option<String>>,
    Option<u32>,
    Option<Vec<IpAddr>>,
);

/// The keys that shape the listening socket; which of them apply depends on its kind.
fn socket_options(root: &Table<'_, '_>, listen: Option<&ListenAddr>) -> Socket {
    let owner = root.string("listen_owner").optional();
    let group = root.string("listen_group").optional();
    let mode = root.parse("listen_mode", octal_mode).or(0o660);
    let allowed = allowed_clients(root);
    match listen {
        Some(ListenAddr::Tcp(_) | ListenAddr::AnyAddress(_)) => {
            for key in ["listen_owner", "listen_group", "listen_mode"] {
                if root.contains(key) {
                    root.fail(key, "only for unix sockets (listen is a TCP address)");
                }
            }
        }
        Some(ListenAddr::Unix(_)) if root.contains("listen_allowed_clients") => {
            root.fail(
                "listen_allowed_clients",
                "only for TCP addresses (listen is a unix socket)",
            );
        }
        _ => {}
    }
    let owner = owner.map(|owner| owner.map(str::to_owned));
    let group = group.map(|group| group.map(str::to_owned));
    (owner, group, mode, allowed)
}

/// `process_dumpable = false` is drover-php's and Python's: their zygotes make themselves
/// non-dumpable. php-cgi and a `[command]` program are exec'd as they are, and stay
/// dumpable (which `true` asks for, and is accepted).
fn enforceable_dumpable(root: &Table<'_, '_>, dumpable: Option<bool>, runtime: Option<&Runtime>) {
    if !root.contains("process_dumpable") || dumpable != Some(false) {
        return;
    }
    let zygote = match runtime {
        Some(Runtime::Php(php)) => matches!(php.runtime, PhpRuntime::Embed { .. }),
        Some(Runtime::Python(_)) => true,
        Some(Runtime::Command(_) | Runtime::Program(_)) => false,
        None => return,
    };
    if !zygote {
        root.fail(
            "process_dumpable",
            "drover-php and Python pools only: php-cgi and a [command] program are exec'd as \
             they are, and the kernel leaves them dumpable; run the pool on drover-php \
             (runtime = \"embed\") to have its processes non-dumpable",
        );
    }
}

/// `listen_allowed_clients` is passed to the workers as `FCGI_WEB_SERVER_ADDRS`; a runtime
/// that would not check it must not be given it, or the pool looks protected and is not.
/// drover-php and drover-python check it in their shared accept loop (`drover-worker`);
/// php-cgi does not check it at all (refused by its declaration, model/pool.rs); a `[command]`
/// program built on libfcgi checks it for IPv4 clients only, refused here on IPv6.
fn enforceable_clients(root: &Table<'_, '_>, listen: Option<&ListenAddr>) {
    // A bare port listens dual-stack: IPv4 clients arrive as IPv6 addresses.
    let ipv6 = matches!(listen, Some(ListenAddr::Tcp(a)) if a.is_ipv6())
        || matches!(listen, Some(ListenAddr::AnyAddress(_)));
    if root.contains("listen_allowed_clients") && root.contains("command") && ipv6 {
        root.fail(
            "listen_allowed_clients",
            "a [command] program built on libfcgi checks FCGI_WEB_SERVER_ADDRS for IPv4 \
             clients only, so on an IPv6 listen address nothing would be checked; listen on \
             an IPv4 address or a unix socket, or use a firewall rule",
        );
    }
}

/// `access_log` and `access_format`. The workers write the log, so only the runtimes whose
/// worker knows a response's status have one: drover-python and drover-php (the
/// declarations refuse the others).
fn access(root: &Table<'_, '_>, base: &Path) -> (Option<Option<PathBuf>>, Option<String>) {
    let file = root.parse("access_log", |s| log_file(base, s)).optional();
    let format = root
        .parse("access_format", |s| {
            drover_proto::access::parse(s).map(|_| s.to_owned())
        })
        .or_else(|| drover_proto::access::DEFAULT_FORMAT.to_owned());
    (file, format)
}

/// php-fpm's `pm.status_path`, `ping.path` and `ping.response`: answered by drover's own
/// workers (drover-php, WSGI), which see every request first; php-cgi, a `[command]`
/// program and an ASGI app's event loop do not, so the table refuses them there. The
/// status comes from the master through `status_listen`, which it therefore needs.
fn builtin_paths(
    root: &Table<'_, '_>,
    status_listen: Option<&Option<ListenAddr>>,
) -> (Option<Option<String>>, Option<Option<String>>) {
    let path = |key: &str| {
        root.parse(key, |s| {
            if s.starts_with('/') && !s.contains(char::is_whitespace) {
                Ok(s.to_owned())
            } else {
                Err("must be a path starting with /, like \"/status\"".to_owned())
            }
        })
        .optional()
    };
    let (status_path, ping_path) = (path("status_path"), path("ping_path"));
    if matches!(status_path, Some(Some(_))) && matches!(status_listen, Some(None)) {
        root.fail(
            "status_path",
            "needs status_listen: the workers fetch the status from the master there (a unix \
             socket path is enough, like \"/run/drover/www-status.sock\")",
        );
    }
    if let (Some(Some(status)), Some(Some(ping))) = (&status_path, &ping_path)
        && status == ping
    {
        root.fail("ping_path", "must differ from status_path");
    }
    (status_path, ping_path)
}

/// `[python] threads` is served over FastCGI only, for now: an HTTP worker waits on its
/// connections in one epoll set, which its threads do not share, so `threads` above 1 with
/// `protocol = "http"` is refused, not ignored.
fn threads_speak_fastcgi(
    root: &Table<'_, '_>,
    runtime: Option<&Runtime>,
    http: Option<&Option<Http>>,
) {
    let threaded = matches!(runtime, Some(Runtime::Python(py)) if py.threads > 1);
    if !threaded || !matches!(http, Some(Some(_))) {
        return;
    }
    if let Got::Valid(python) = root.table("python") {
        python.fail(
            "threads",
            "not with protocol = \"http\": threads serve FastCGI only (put nginx in front \
             with fastcgi_pass, or leave threads out)",
        );
    }
}

/// `protocol`, and the keys of an HTTP pool. Only drover-python's workers speak HTTP: a
/// PHP or [command] pool is refused it, and the HTTP keys are refused on a FastCGI pool,
/// where nothing would read them.
fn http(root: &Table<'_, '_>, base: &Path) -> Option<Option<Http>> {
    let protocol: Protocol = root.value("protocol")?;
    if protocol == Protocol::FastCgi {
        let mut valid = true;
        for key in keys::http_only().filter(|key| root.contains(key.name)) {
            root.fail(
                key.name,
                "only for protocol = \"http\" (a FastCGI pool's connections are the web \
                 server's to keep)",
            );
            valid = false;
        }
        return valid.then_some(None);
    }
    for (table, what) in [("php", "a PHP pool"), ("command", "a [command] pool")] {
        if root.contains(table) {
            root.fail(
                "protocol",
                format!(
                    "{what} speaks FastCGI only; protocol = \"http\" is for Python pools \
                     (put nginx or another web server in front of this one)"
                ),
            );
            return None;
        }
    }
    // gunicorn's default: only a proxy on this host is believed.
    let mut forwarded_allow_ips = vec!["127.0.0.1".to_owned(), "::1".to_owned()];
    let mut valid = true;
    match root.strings("forwarded_allow_ips").optional() {
        None => valid = false,
        Some(None) => {}
        Some(Some(items)) => {
            forwarded_allow_ips = Vec::with_capacity(items.len());
            for (ip, span) in items {
                if ip != "*" && ip.parse::<IpAddr>().is_err() {
                    root.fail_at("forwarded_allow_ips", span, "not an IP address or \"*\"");
                    valid = false;
                }
                forwarded_allow_ips.push(ip.to_owned());
            }
        }
    }
    let tls = super::tls::parse(root, base);
    let http = Http::read(
        root,
        HttpGiven {
            forwarded_allow_ips: Some(forwarded_allow_ips),
            tls,
        },
    );
    valid.then_some(Some(http?))
}

fn octal_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(mode) if mode <= 0o777 && (3..=4).contains(&s.len()) => Ok(mode),
        _ => Err("expected an octal mode like \"0660\"".into()),
    }
}

fn allowed_clients(root: &Table<'_, '_>) -> Option<Vec<IpAddr>> {
    let items = root.strings("listen_allowed_clients").or(Vec::new())?;
    let mut valid = true;
    let mut out = Vec::with_capacity(items.len());
    for (s, span) in items {
        match s.parse::<IpAddr>() {
            Ok(ip) => out.push(ip),
            Err(_) => {
                root.fail_at("listen_allowed_clients", span, "not an IP address");
                valid = false;
            }
        }
    }
    valid.then_some(out)
}

fn directory(base: &Path, s: &str) -> Result<PathBuf, String> {
    let path = resolve(base, s)?;
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        Ok(_) => Err(format!("{} is not a directory", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

type Slowlog = (Option<Duration>, u32, Option<PathBuf>, Option<Duration>);

/// A zero timeout means off, as in php-fpm.
fn slowlog(root: &Table<'_, '_>, base: &Path) -> Option<Slowlog> {
    let nonzero = |d: Duration| Some(d).filter(|d| !d.is_zero());
    let slow = root.value("request_slowlog_timeout").map(nonzero);
    let depth = root.value("request_slowlog_trace_depth");
    let file = root.parse("slowlog", |s| log_file(base, s)).optional();
    let terminate = root.value("request_terminate_timeout").map(nonzero);
    if let (Some(Some(_)), Some(None)) = (slow, &file) {
        root.fail(
            "request_slowlog_timeout",
            "needs slowlog, the file slow requests are written to",
        );
    }
    if let (Some(Some(slow)), Some(Some(terminate))) = (slow, terminate)
        && slow >= terminate
    {
        let terminate = humantime::format_duration(terminate);
        root.fail(
            "request_slowlog_timeout",
            format!("must be shorter than request_terminate_timeout ({terminate})"),
        );
    }
    Some((slow?, depth?, file?, terminate?))
}

/// `terminate_grace`: WSGI pools with a `request_terminate_timeout` only. A PHP or command
/// worker is killed at once (nothing in it can run a `finally:`), and so is an ASGI worker
/// (the abort raises inside one request; an ASGI worker runs many at once on one event
/// loop): the key would be a promise drover cannot keep there, and the table refuses it.
/// Zero for them: no abort. Here: what a WSGI pool needs for it.
fn terminate_grace(
    root: &Table<'_, '_>,
    slowlog: Option<&Slowlog>,
    runtime: Option<&Runtime>,
    flavour: Option<Flavour>,
) -> Option<Duration> {
    let asgi = matches!(runtime, Some(Runtime::Python(py)) if py.interface == Interface::Asgi);
    // A threaded WSGI worker's main thread runs no request, and CPython runs signal
    // handlers there only: nothing can abort a request from inside.
    let threaded = matches!(runtime, Some(Runtime::Python(py)) if py.threads > 1);
    let grace = root.value("terminate_grace");
    if root.contains("terminate_grace") && flavour == Some(Flavour::Wsgi) {
        if threaded {
            root.fail(
                "terminate_grace",
                "not with [python] threads above 1: Python runs the abort on a worker's main \
                 thread, which serves no request when threads do; the worker is killed at once",
            );
        } else if slowlog.is_some_and(|s| s.3.is_none()) {
            root.fail(
                "terminate_grace",
                "needs request_terminate_timeout, the limit whose abort it gives time to",
            );
        }
    }
    if asgi || threaded {
        return Some(Duration::ZERO);
    }
    grace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_octal_strings() {
        assert_eq!(octal_mode("0660"), Ok(0o660));
        assert_eq!(octal_mode("600"), Ok(0o600));
        assert!(octal_mode("0999").is_err());
        assert!(octal_mode("1777").is_err());
        assert!(octal_mode("rw").is_err());
    }
}
