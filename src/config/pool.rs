//! One pool file, `pools.d/NAME.toml`: its top-level keys and `[env]`; `[pm]` and the
//! runtime tables have their own files.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeValue;

use super::listen::{Claim, overlap, parse_listen};
use super::model::{Http, Interface, ListenAddr, Php, PhpRuntime, Pool, Runtime};
use super::value::{Got, Table, log_file, resolve};
use super::{pm, runtime};

const KEYS: &[&str] = &[
    "listen",
    "listen_backlog",
    "listen_owner",
    "listen_group",
    "listen_mode",
    "listen_allowed_clients",
    "user",
    "group",
    "chdir",
    "clear_env",
    "request_slowlog_timeout",
    "request_slowlog_trace_depth",
    "slowlog",
    "slowlog_format",
    "decorate_workers_output",
    "process_dumpable",
    "request_terminate_timeout",
    "terminate_grace",
    "request_read_timeout",
    "status_listen",
    "status_path",
    "ping_path",
    "ping_response",
    "access_log",
    "access_format",
    "access_suppress_path",
    "protocol",
    "keepalive_timeout",
    "forwarded_allow_ips",
    "max_request_body",
    "ws_max_size",
    "send_timeout",
    "pm",
    "env",
    "php",
    "python",
    "command",
];

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
    root.check_keys(KEYS);
    let listen = root
        .parse("listen", |s| parse_listen(base, s))
        .required(root, "listen");
    let status_listen = root
        .parse("status_listen", |s| parse_listen(base, s))
        .optional();
    for (key, addr) in [
        ("listen", &listen),
        ("status_listen", &status_listen.clone().flatten()),
    ] {
        if let Some(addr) = addr {
            let (offset, written) = root.locate(key);
            let (file, pool) = (pool.index, pool.name.to_owned());
            claims.push(Claim {
                addr: addr.clone(),
                file,
                pool,
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
    let socket = socket_options(root, listen.as_ref());
    let user = root.string("user").optional();
    let group = root.string("group").optional();
    let chdir = root.parse("chdir", |s| directory(base, s)).optional();
    let clear_env = root.bool("clear_env").or(true);
    let slowlog = slowlog(root, base);
    let slowlog_json = root
        .parse("slowlog_format", |s| match s {
            "text" => Ok(false),
            "json" => Ok(true),
            _ => Err("must be \"text\" or \"json\"".to_owned()),
        })
        .or(false);
    let decorate_workers_output = root.bool("decorate_workers_output").or(true);
    let process_dumpable = root.bool("process_dumpable").or(false);
    let pm = match root.table("pm") {
        Got::Absent => {
            root.fail("pm", "missing required table [pm]");
            None
        }
        Got::Invalid => None,
        Got::Valid(table) => pm::parse(&table),
    };
    let request_read_timeout = root
        .duration("request_read_timeout")
        .or(DEFAULT_REQUEST_READ_TIMEOUT)
        .map(|d| Some(d).filter(|d| !d.is_zero()));
    let env = env(root);
    let runtime = runtime::parse(root, base);
    enforceable_clients(root, listen.as_ref(), runtime.as_ref());
    enforceable_dumpable(root, process_dumpable, runtime.as_ref());
    let access = access(root, base, runtime.as_ref());
    let http = http(root);
    let (status_path, ping_path, ping_response) =
        builtin_paths(root, status_listen.as_ref(), runtime.as_ref());
    let terminate_grace = terminate_grace(root, slowlog.as_ref(), runtime.as_ref());
    threads_speak_fastcgi(root, runtime.as_ref(), http.as_ref());
    websockets_are_asgi(root, runtime.as_ref(), http.as_ref());
    send_timeout_is_wsgi_only(root, runtime.as_ref());
    let (listen_backlog, listen_owner, listen_group, listen_mode, listen_allowed_clients) = socket?;
    let (request_slowlog_timeout, request_slowlog_trace_depth, slowlog, request_terminate_timeout) =
        slowlog?;
    let (access_log, access_format, access_suppress_path) = access?;
    Some(Pool {
        name: pool.name.to_owned(),
        file: pool.file.to_path_buf(),
        listen: listen?,
        listen_backlog,
        listen_owner,
        listen_group,
        listen_mode,
        listen_allowed_clients,
        user: user?.map(str::to_owned),
        group: group?.map(str::to_owned),
        chdir: chdir?,
        clear_env: clear_env?,
        request_slowlog_timeout,
        request_slowlog_trace_depth,
        slowlog,
        slowlog_json: slowlog_json?,
        decorate_workers_output: decorate_workers_output?,
        process_dumpable: process_dumpable?,
        request_terminate_timeout,
        terminate_grace: terminate_grace?,
        request_read_timeout: request_read_timeout?,
        status_listen: status_listen?,
        status_path: status_path?,
        ping_path: ping_path?,
        ping_response: ping_response?,
        access_log,
        access_format,
        access_suppress_path,
        http: http?,
        pm: pm?,
        env: env?,
        runtime: runtime?,
    })
}

/// How long a client may take to send a request's headers and body (slowloris), unless the
/// pool file says otherwise. nginx's own `client_body_timeout` is 60 s between two reads;
/// 30 s for the whole request is php-fpm-free territory, so it follows Apache's
/// `RequestReadTimeout` body default (20–40 s).
pub const DEFAULT_REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);

type Socket = (i32, Option<String>, Option<String>, u32, Vec<IpAddr>);

/// The keys that shape the listening socket; which of them apply depends on its kind.
fn socket_options(root: &Table<'_, '_>, listen: Option<&ListenAddr>) -> Option<Socket> {
    let backlog = root.int("listen_backlog", 1..=i32::MAX.into()).or(511);
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
    let owner = owner?.map(str::to_owned);
    let group = group?.map(str::to_owned);
    Some((backlog?, owner, group, mode?, allowed?))
}

/// `listen_allowed_clients` is passed to the workers as `FCGI_WEB_SERVER_ADDRS`; a runtime
/// that would not check it must not be given it, or the pool looks protected and is not.
/// drover-php and drover-python check it in their shared accept loop (`drover-worker`).
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
        Some(Runtime::Command(_)) => false,
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

fn enforceable_clients(
    root: &Table<'_, '_>,
    listen: Option<&ListenAddr>,
    runtime: Option<&Runtime>,
) {
    if !root.contains("listen_allowed_clients") {
        return;
    }
    let embed = |php: &Php| matches!(php.runtime, PhpRuntime::Embed { .. });
    let on_drover_php = matches!(runtime, Some(Runtime::Php(php)) if embed(php));
    if root.contains("php") && !on_drover_php {
        root.fail(
            "listen_allowed_clients",
            "php-cgi does not enforce it: it reads FCGI_WEB_SERVER_ADDRS only for a socket it \
             binds itself, and drover hands it the pool's socket; limit who connects with a \
             unix socket (listen_owner, listen_group, listen_mode) or a firewall rule, or run \
             the pool on drover-php (runtime = \"embed\"), which checks it",
        );
    } else if root.contains("command")
        // A bare port listens dual-stack: IPv4 clients arrive as IPv6 addresses.
        && (matches!(listen, Some(ListenAddr::Tcp(a)) if a.is_ipv6())
            || matches!(listen, Some(ListenAddr::AnyAddress(_))))
    {
        root.fail(
            "listen_allowed_clients",
            "a [command] program built on libfcgi checks FCGI_WEB_SERVER_ADDRS for IPv4 \
             clients only, so on an IPv6 listen address nothing would be checked; listen on \
             an IPv4 address or a unix socket, or use a firewall rule",
        );
    }
}

/// `access_log`, `access_format`, `access_suppress_path`. The workers write the log, so
/// only the runtimes whose worker knows a response's status have one: drover-python and
/// drover-php. A runtime that cannot honour a setting is refused it at load.
fn access(
    root: &Table<'_, '_>,
    base: &Path,
    runtime: Option<&Runtime>,
) -> Option<(Option<PathBuf>, String, Vec<String>)> {
    let file = root.parse("access_log", |s| log_file(base, s)).optional();
    let format = root
        .parse("access_format", |s| {
            drover_proto::access::parse(s).map(|_| s.to_owned())
        })
        .or_else(|| drover_proto::access::DEFAULT_FORMAT.to_owned());
    let suppress = root.strings("access_suppress_path").or(Vec::new());
    if root.contains("access_log") {
        let embed = |php: &Php| matches!(php.runtime, PhpRuntime::Embed { .. });
        if root.contains("php") && !matches!(runtime, Some(Runtime::Php(php)) if embed(php)) {
            root.fail(
                "access_log",
                "php-cgi cannot know a response's status, so drover cannot write its access \
                 log; run the pool on drover-php (runtime = \"embed\") or log in the web server",
            );
        } else if root.contains("command") {
            root.fail(
                "access_log",
                "a [command] program's responses are not seen by drover, so it cannot write \
                 their access log; log in the program or the web server",
            );
        }
    }
    let suppress = suppress?.into_iter().map(|(s, _)| s.to_owned()).collect();
    Some((file?, format?, suppress))
}

/// php-fpm's `pm.status_path`, `ping.path` and `ping.response`: answered by drover's own
/// workers (drover-php, WSGI), which see every request first; php-cgi, a `[command]`
/// program and an ASGI app's event loop do not, so they are refused there. The status comes
/// from the master through `status_listen`, which it therefore needs.
fn builtin_paths(
    root: &Table<'_, '_>,
    status_listen: Option<&Option<ListenAddr>>,
    runtime: Option<&Runtime>,
) -> (
    Option<Option<String>>,
    Option<Option<String>>,
    Option<String>,
) {
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
    let ping_response = root.string("ping_response").or("pong").map(str::to_owned);
    let own_workers = match runtime {
        Some(Runtime::Php(php)) => matches!(php.runtime, PhpRuntime::Embed { .. }),
        Some(Runtime::Python(py)) => py.interface == Interface::Wsgi,
        Some(Runtime::Command(_)) => false,
        None => true,
    };
    for key in ["status_path", "ping_path"] {
        if !root.contains(key) || own_workers {
            continue;
        }
        root.fail(
            key,
            "drover's own workers answer it, which this pool's do not run (php-cgi, a \
             [command] program or an ASGI app); use status_listen's /status and /ping",
        );
    }
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
    (status_path, ping_path, ping_response)
}

/// `send_timeout` is enforced by the WSGI worker's HTTP loop; the ASGI one writes through
/// asyncio, which does not apply it yet: set on an ASGI pool, it is refused, not ignored.
fn send_timeout_is_wsgi_only(root: &Table<'_, '_>, runtime: Option<&Runtime>) {
    let asgi = matches!(runtime, Some(Runtime::Python(py)) if py.interface == Interface::Asgi);
    if asgi && root.contains("send_timeout") {
        root.fail(
            "send_timeout",
            "WSGI pools only, for now: the ASGI HTTP listener does not enforce it yet",
        );
    }
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

/// `ws_max_size`: only an ASGI app takes WebSockets (a WSGI app gets an `Upgrade` request
/// as a plain one), so the key is refused on any other pool rather than ignored; a FastCGI
/// pool refuses it with the other HTTP keys.
fn websockets_are_asgi(
    root: &Table<'_, '_>,
    runtime: Option<&Runtime>,
    http: Option<&Option<Http>>,
) {
    let asgi = matches!(runtime, Some(Runtime::Python(py)) if py.interface == Interface::Asgi);
    let on_http = matches!(http, Some(Some(_)));
    if on_http && runtime.is_some() && !asgi && root.contains("ws_max_size") {
        root.fail(
            "ws_max_size",
            "only for interface = \"asgi\" (WebSockets are served to ASGI apps only)",
        );
    }
}

/// `protocol`, and the keys of an HTTP pool. Only drover-python's workers speak HTTP: a
/// PHP or [command] pool is refused it, and the HTTP keys are refused on a FastCGI pool,
/// where nothing would read them.
fn http(root: &Table<'_, '_>) -> Option<Option<Http>> {
    const HTTP_KEYS: [&str; 5] = [
        "keepalive_timeout",
        "forwarded_allow_ips",
        "max_request_body",
        "ws_max_size",
        "send_timeout",
    ];
    let protocol = root
        .parse("protocol", |s| match s {
            "fastcgi" => Ok(false),
            "http" => Ok(true),
            _ => Err("must be \"fastcgi\" or \"http\"".to_owned()),
        })
        .or(false)?;
    if !protocol {
        let mut valid = true;
        for key in HTTP_KEYS.into_iter().filter(|key| root.contains(key)) {
            root.fail(
                key,
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
    let keepalive_timeout = root
        .duration("keepalive_timeout")
        .or(DEFAULT_KEEPALIVE_TIMEOUT);
    let max_request_body = root.size("max_request_body").optional();
    let ws_max_size = root.size("ws_max_size").or(DEFAULT_WS_MAX_SIZE);
    let send_timeout = root.duration("send_timeout").or(DEFAULT_SEND_TIMEOUT);
    if let Some(timeout) = &send_timeout
        && timeout.is_zero()
    {
        root.fail("send_timeout", "must be more than 0s");
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
    let http = Http {
        keepalive_timeout: keepalive_timeout?,
        forwarded_allow_ips,
        max_request_body: max_request_body?,
        ws_max_size: ws_max_size?,
        send_timeout: send_timeout?,
    };
    valid.then_some(Some(http))
}

/// uvicorn's `--ws-max-size` default: a WebSocket message larger than this is closed 1009.
pub const DEFAULT_WS_MAX_SIZE: u64 = 16 << 20;
/// nginx's `send_timeout` default: a response write that makes no progress this long
/// ends the connection.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// gunicorn's `keepalive` default: a kept connection idle this long is closed.
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);

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
    let nonzero = |d: Option<Duration>| d.filter(|d| !d.is_zero());
    let slow = root
        .duration("request_slowlog_timeout")
        .optional()
        .map(nonzero);
    let depth = root
        .int("request_slowlog_trace_depth", 0..=u32::MAX.into())
        .or(20);
    let file = root.parse("slowlog", |s| log_file(base, s)).optional();
    let terminate = root
        .duration("request_terminate_timeout")
        .optional()
        .map(nonzero);
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

/// How long a Python worker asked to abort a request past `request_terminate_timeout` has
/// to end it (its `finally:` blocks, `worker_abort`) before SIGKILL, unless the pool says.
pub const DEFAULT_TERMINATE_GRACE: Duration = Duration::from_secs(1);

/// `terminate_grace`: WSGI pools with a `request_terminate_timeout` only. A PHP or command
/// worker is killed at once (nothing in it can run a `finally:`), and so is an ASGI worker
/// (the abort raises inside one request; an ASGI worker runs many at once on one event
/// loop): the key would be a promise drover cannot keep there. Zero for them: no abort.
fn terminate_grace(
    root: &Table<'_, '_>,
    slowlog: Option<&Slowlog>,
    runtime: Option<&Runtime>,
) -> Option<Duration> {
    let asgi = matches!(runtime, Some(Runtime::Python(py)) if py.interface == Interface::Asgi);
    // A threaded WSGI worker's main thread runs no request, and CPython runs signal
    // handlers there only: nothing can abort a request from inside.
    let threaded = matches!(runtime, Some(Runtime::Python(py)) if py.threads > 1);
    let grace = root.duration("terminate_grace").or(DEFAULT_TERMINATE_GRACE);
    if root.contains("terminate_grace") {
        if !root.contains("python") {
            root.fail(
                "terminate_grace",
                "Python pools only: a PHP or [command] worker past request_terminate_timeout \
                 is killed at once, with nothing in it to run first",
            );
        } else if asgi {
            root.fail(
                "terminate_grace",
                "WSGI pools only: an ASGI worker runs many requests on one event loop, so one \
                 past request_terminate_timeout cannot be aborted alone; the worker is killed \
                 at once",
            );
        } else if threaded {
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

/// Linux's bound on one string of a new program's environment or arguments
/// (`MAX_ARG_STRLEN`, 32 pages), counting `NAME=`, the value and the closing NUL. A longer
/// one makes execve fail with E2BIG when a worker starts, long after the check.
pub const MAX_EXEC_STRING: usize = 128 * 1024;

/// The most bytes `[env]` may hold in all (each `NAME=value` and its NUL). Linux refuses an
/// execve whose arguments and environment pass a quarter of the stack limit (2 MiB with the
/// usual 8 MiB); this leaves room for the runtime's own arguments, its variables and, with
/// `clear_env = false`, drover's environment.
pub const MAX_ENV_BYTES: usize = 512 * 1024;

/// The rule a `NAME=value` string of `len` bytes (without the NUL) breaks, if any.
pub(super) fn exec_string_rule(len: usize) -> Option<String> {
    (len + 1 > MAX_EXEC_STRING).then(|| {
        format!(
            "NAME=value is {} bytes with its NUL; Linux refuses (E2BIG) one longer than \
             {MAX_EXEC_STRING} bytes (MAX_ARG_STRLEN) when the worker starts",
            len + 1
        )
    })
}

/// `[env]`: names a shell would accept, string values only (a number's formatting would
/// otherwise be ours rather than the writer's), each and all within what execve takes.
fn env(root: &Table<'_, '_>) -> Option<BTreeMap<String, String>> {
    let table = match root.table("env") {
        Got::Absent => return Some(BTreeMap::new()),
        Got::Invalid => return None,
        Got::Valid(table) => table,
    };
    let mut out = BTreeMap::new();
    let mut valid = true;
    let mut total = 0;
    for (key, value) in table.entries() {
        let name: &str = key.get_ref();
        let mut chars = name.chars();
        let good_name = chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !good_name {
            table.fail(
                name,
                "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            );
            valid = false;
        }
        match value.get_ref() {
            DeValue::String(s) => {
                let len = name.len() + 1 + s.len();
                if let Some(rule) = exec_string_rule(len) {
                    table.fail(name, rule);
                    valid = false;
                }
                total += len + 1;
                out.insert(name.to_owned(), s.to_string());
            }
            other => {
                table.fail(
                    name,
                    format!("expected a string, found {}", other.type_str()),
                );
                valid = false;
            }
        }
    }
    if total > MAX_ENV_BYTES {
        root.fail(
            "env",
            format!(
                "[env] holds {total} bytes (NAME=value and a NUL each); at most \
                 {MAX_ENV_BYTES} (512 KiB), so that a worker's execve stays within Linux's \
                 limit on arguments and environment"
            ),
        );
        valid = false;
    }
    valid.then_some(out)
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

    #[test]
    fn exec_strings_stop_at_max_arg_strlen() {
        assert_eq!(exec_string_rule(MAX_EXEC_STRING - 1), None);
        let rule = exec_string_rule(MAX_EXEC_STRING).unwrap();
        assert!(
            rule.contains("131073 bytes") && rule.contains("E2BIG"),
            "{rule}"
        );
    }
}
