//! A pool file's top level (`Pool`; the keys only an HTTP pool reads are `Http`'s and
//! `Tls`'s, `http.rs`), each key declared with the field it fills (`keys!`,
//! `keys/declare.rs`); and where a pool listens.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::{Http, Interface, PhpRuntime, Pm, Runtime};
use crate::choices::{Protocol, SlowlogFormat};
use crate::keys::Default::{Note, Required, Unset, Value};
use crate::keys::{
    BUILTIN_PATHS, Choice, NO_REQUESTS, NO_SOCKET, Runtimes, Section, Type, at_least, key, keys,
    refused,
};
use crate::show::{Shown, Shows};
use crate::value::Table;

keys! {
    /// `pools.d/NAME.toml`: one pool.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Pool: Section::Pool, given PoolGiven {
        /// The file name without `.toml`.
        pub name: String => read(given);
        /// The file the pool was read from, for messages.
        pub file: PathBuf => read(given);
        pub listen: ListenAddr = [refused(
            key(
                "listen",
                Type::String,
                Required,
                "Where the workers accept: a unix socket path, `IP:PORT`, `[IPv6]:PORT`, or a bare \
                 port for every address (as php-fpm reads it).",
            ),
            &[NO_SOCKET],
        )] => read(given), show(show_socket);
        /// listen(2) backlog; php-fpm's Linux default 511.
        pub listen_backlog: i32 = [at_least(
            refused(
                key(
                    "listen_backlog",
                    Type::Int,
                    Value("511"),
                    "The listen(2) backlog (php-fpm's `listen.backlog`).",
                ),
                &[NO_SOCKET],
            ),
            1,
        )] => read(value), show(of);
        /// Unix sockets only: owner, group and mode applied after bind (mode default 0660).
        pub listen_owner: Option<String> = [refused(
            key(
                "listen_owner",
                Type::String,
                Unset,
                "Unix sockets only: the socket's owner, set after bind.",
            ),
            &[NO_SOCKET],
        )] => read(given), show(show_socket);
        pub listen_group: Option<String> = [refused(
            key(
                "listen_group",
                Type::String,
                Unset,
                "Unix sockets only: the socket's group, set after bind.",
            ),
            &[NO_SOCKET],
        )] => read(given), show(show_socket);
        pub listen_mode: u32 = [refused(
            key(
                "listen_mode",
                Type::String,
                Value("\"0660\""),
                "Unix sockets only: the socket's mode, an octal string.",
            ),
            &[NO_SOCKET],
        )] => read(given), show(show_socket);
        /// TCP only: client addresses allowed to connect; empty = any.
        pub listen_allowed_clients: Vec<IpAddr> = [refused(
            key(
                "listen_allowed_clients",
                Type::Strings,
                Value("[]"),
                "TCP only: the client addresses allowed to connect (`FCGI_WEB_SERVER_ADDRS`); \
                 empty: any. A command pool takes it on an IPv4 address only.",
            ),
            &[
                (
                    Runtimes::CGI,
                    "php-cgi does not enforce it: it reads FCGI_WEB_SERVER_ADDRS only for a socket it \
             binds itself, and drover hands it the pool's socket; limit who connects with a \
             unix socket (listen_owner, listen_group, listen_mode) or a firewall rule, or run \
             the pool on drover-php (runtime = \"embed\"), which checks it",
                ),
                NO_SOCKET,
            ],
        )] => read(given), show(show_socket);
        /// Workers run as this user/group when drover runs as root. Required then: a pool that
        /// runs as root says `user = "root"`.
        pub user: Option<String> = [key(
            "user",
            Type::String,
            Unset,
            "The workers' user when drover runs as root, where it is required (`\"root\"` to \
             mean it).",
        )] => read(optional), show(optional);
        pub group: Option<String> = [key(
            "group",
            Type::String,
            Unset,
            "The workers' group; default: the user's.",
        )] => read(optional), show(optional);
        pub chdir: Option<PathBuf> = [key(
            "chdir",
            Type::Path,
            Unset,
            "The folder the workers start in; it must exist.",
        )] => read(given), show(optional);
        /// Start workers with an empty environment plus `[env]` and what the runtime needs.
        pub clear_env: bool = [key(
            "clear_env",
            Type::Bool,
            Value("true"),
            "Start the workers with an empty environment plus `[env]` and what the runtime needs.",
        )] => read(value), show(of);
        pub request_slowlog_timeout: Option<Duration> = [refused(
            key(
                "request_slowlog_timeout",
                Type::Duration,
                Value("\"0s\""),
                "A request running this long is written to `slowlog` with its stack; 0s is off.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(show_off);
        pub request_slowlog_trace_depth: u32 = [refused(
            key(
                "request_slowlog_trace_depth",
                Type::Int,
                Value("20"),
                "The most stack frames of a slowlog entry.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(of);
        pub slowlog: Option<PathBuf> = [refused(
            key(
                "slowlog",
                Type::Path,
                Unset,
                "The file slow requests are written to; needed by `request_slowlog_timeout`.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(optional);
        /// `slowlog_format = "json"`: one JSON object per entry instead of php-fpm's text.
        pub slowlog_json: bool = [refused(
            key(
                "slowlog_format",
                Type::Choice(SlowlogFormat::NAMES),
                Value("\"text\""),
                "php-fpm's text entries, or one JSON object per entry.",
            ),
            &[NO_REQUESTS],
        )] => read(slowlog_json), show(show_slowlog_format);
        /// php-fpm's `decorate_workers_output`: false writes what a worker prints to the error
        /// log as it is, one line per write, without drover's prefix.
        pub decorate_workers_output: bool = [key(
            "decorate_workers_output",
            Type::Bool,
            Value("true"),
            "false: what a worker prints goes to the error log as it is, without drover's prefix.",
        )] => read(value), show(of);
        /// php-fpm's `process.dumpable`: false (the default) makes a drover-php or Python
        /// zygote and its workers non-dumpable (`PR_SET_DUMPABLE` 0), so that no process of the
        /// pool's user can attach to them with ptrace or read their memory; true leaves them as
        /// the kernel makes them, for an operator's debugger or profiler.
        pub process_dumpable: bool = [key(
            "process_dumpable",
            Type::Bool,
            Value("false"),
            "true leaves the workers dumpable (ptrace, core files) for a debugger; false, the \
             default, is enforced by drover-php and Python zygotes only, so php-cgi and command \
             pools take only true.",
        )] => read(given), show(show_process_dumpable);
        /// php-fpm's `rlimit_files`: RLIMIT_NOFILE, soft and hard, of the pool's processes (set
        /// on the exec'd one, inherited by what it forks); `None`: the soft limit drover was
        /// started with.
        pub rlimit_files: Option<u32> = [at_least(
            key(
                "rlimit_files",
                Type::Int,
                Unset,
                "php-fpm's `rlimit_files`: the most files each process of the pool may have open \
                 (RLIMIT_NOFILE, soft and hard); at most the kernel's `fs.nr_open`, and, unless \
                 drover runs as root, its own hard limit; none: the limit drover was started with.",
            ),
            1,
        )] => read(rlimit_files), show(optional);
        pub request_terminate_timeout: Option<Duration> = [refused(
            key(
                "request_terminate_timeout",
                Type::Duration,
                Value("\"0s\""),
                "A request running this long has its worker killed; 0s is off.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(show_off);
        /// Python pools: how long a worker asked to abort its request past
        /// `request_terminate_timeout` (SIGUSR1, which raises inside the request) may take to
        /// end it before SIGKILL. Others are killed at once.
        // Time for a Python worker's `finally:` blocks and `worker_abort` before SIGKILL.
        pub terminate_grace: Duration = [refused(
            key(
                "terminate_grace",
                Type::Duration,
                Value("\"1s\""),
                "WSGI pools with a `request_terminate_timeout`, not with `threads` above 1: how \
                 long a worker asked to abort its request (SIGUSR1) has before SIGKILL.",
            ),
            &[
                (
                    Runtimes::PHP.or(Runtimes::COMMAND),
                    "Python pools only: a PHP or [command] worker past request_terminate_timeout \
                     is killed at once, with nothing in it to run first",
                ),
                (
                    Runtimes::ASGI,
                    "WSGI pools only: an ASGI worker runs many requests on one event loop, so one \
                     past request_terminate_timeout cannot be aborted alone; the worker is killed \
                     at once",
                ),
                NO_REQUESTS,
            ],
        )] => read(given), show(show_terminate_grace);
        /// A request's headers and body must arrive within this time from the accept; `None`:
        /// no bound (`"0s"`). A worker waiting on them counts as busy ("reading").
        // 30s for a request's headers and body (slowloris): nginx's own client_body_timeout is
        // 60s between two reads; this follows Apache's RequestReadTimeout body default (20-40s).
        pub request_read_timeout: Option<Duration> = [refused(
            key(
                "request_read_timeout",
                Type::Duration,
                Value("\"30s\""),
                "A request's headers and body must arrive within this time from the accept; 0s: no \
                 bound.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(show_off);
        /// A connection waiting longer than this for a worker is answered 503 by the master
        /// (`src/master/shed.rs`); None: off (`"0s"`).
        pub queue_timeout: Option<Duration> = [refused(
            key(
                "queue_timeout",
                Type::Duration,
                Value("\"0s\""),
                "A connection that has waited this long for a worker is answered 503 with \
                 `Retry-After` by the master (FastCGI or HTTP, as the pool speaks); 0s is off.",
            ),
            &[
                (
                    Runtimes::CGI.or(Runtimes::COMMAND),
                    "drover-php and Python pools only: php-cgi and [command] workers do not count the \
             connections they accept, which the master needs to tell how long the oldest \
             waiting one has waited",
                ),
                NO_REQUESTS,
            ],
        )] => read(given), show(show_queue_timeout);
        pub status_listen: Option<ListenAddr> = [key(
            "status_listen",
            Type::String,
            Unset,
            "An address (as `listen`) where the master serves the pool's status, `/status` and \
             `/ping`.",
        )] => read(given), show(show_status_listen);
        /// php-fpm's `pm.status_path`: a request whose `SCRIPT_NAME` is this gets the pool's
        /// status through the pool's own socket, fetched by the worker from `status_listen`.
        pub status_path: Option<String> = [refused(
            key(
                "status_path",
                Type::String,
                Unset,
                "php-fpm's `pm.status_path`: a request for this script gets the pool's status, \
                 answered by the workers; needs `status_listen`.",
            ),
            BUILTIN_PATHS,
        )] => read(given), show(optional);
        /// php-fpm's `ping.path`: a request whose `SCRIPT_NAME` is this gets `ping_response`.
        pub ping_path: Option<String> = [refused(
            key(
                "ping_path",
                Type::String,
                Unset,
                "php-fpm's `ping.path`: a request for this script gets `ping_response`.",
            ),
            BUILTIN_PATHS,
        )] => read(given), show(optional);
        /// php-fpm's `ping.response` (default `pong`).
        pub ping_response: String = [refused(
            key(
                "ping_response",
                Type::String,
                Value("\"pong\""),
                "php-fpm's `ping.response`.",
            ),
            &[NO_REQUESTS],
        )] => read(value), show(of);
        /// php-fpm's `access.log`: the file the workers write a line per request to; None:
        /// off. drover-python and drover-php only (the runtimes that know a response's status).
        pub access_log: Option<PathBuf> = [refused(
            key(
                "access_log",
                Type::Path,
                Unset,
                "php-fpm's `access.log`: the file the workers write a line per request to.",
            ),
            &[
                (
                    Runtimes::CGI,
                    "php-cgi cannot know a response's status, so drover cannot write its access \
                     log; run the pool on drover-php (runtime = \"embed\") or log in the web server",
                ),
                (
                    Runtimes::COMMAND,
                    "a [command] program's responses are not seen by drover, so it cannot write \
                     their access log; log in the program or the web server",
                ),
                NO_REQUESTS,
            ],
        )] => read(given), show(optional);
        /// php-fpm's `access.format`, or `"json"`; checked with `drover_proto::access::parse`.
        pub access_format: String = [refused(
            key(
                "access_format",
                Type::String,
                Value("'%R - %u %t \"%m %r\" %s'"),
                "php-fpm's `access.format` (its %-tokens), or `\"json\"`.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(of);
        /// php-fpm's `access.suppress_path`: request URIs not logged (a health check).
        pub access_suppress_path: Vec<String> = [refused(
            key(
                "access_suppress_path",
                Type::Strings,
                Value("[]"),
                "php-fpm's `access.suppress_path`: request URIs not logged (a health check).",
            ),
            &[NO_REQUESTS],
        )] => read(value), show(of);
        /// `protocol = "http"`: the workers speak HTTP/1.1 on `listen` (Python pools only);
        /// None: FastCGI, the default. The HTTP listener's keys follow `protocol`'s row.
        pub http: Option<Http> = [refused(
            key(
                "protocol",
                Type::Choice(Protocol::NAMES),
                Value("\"fastcgi\""),
                "What the workers speak on `listen`; `\"http\"` (HTTP/1.1, no web server in front) \
                 for Python pools only.",
            ),
            &[NO_SOCKET],
        )] + Http::ROWS => read(given), show(show_http);
        pub pm: Pm = [key(
            "pm",
            Type::Table,
            Required,
            "The process manager's table, `[pm]`.",
        )] => read(given), show(table);
        pub env: BTreeMap<String, String> = [key(
            "env",
            Type::Map,
            Unset,
            "`[env]`: variables set in the workers' environment, string values only.",
        )] => read(given), show(map);
        /// The one of `[php]`, `[python]`, `[command]`, `[program]` the pool has.
        pub runtime: Runtime = [
            key(
                "php",
                Type::Table,
                Note("one of `[php]`, `[python]`, `[command]`"),
                "A PHP pool's table, `[php]`.",
            ),
            key(
                "python",
                Type::Table,
                Note("one of `[php]`, `[python]`, `[command]`"),
                "A Python pool's table, `[python]`.",
            ),
            key(
                "command",
                Type::Table,
                Note("one of `[php]`, `[python]`, `[command]`"),
                "A FastCGI program's table, `[command]`.",
            ),
            key(
                "program",
                Type::Table,
                Note("one of `[php]`, `[python]`, `[command]`, `[program]`"),
                "A background pool's table, `[program]`: copies of a long-running command, no socket.",
            ),
        ] => read(given), show(show_runtime);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListenAddr {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// A bare port (`listen = "9000"`, as in the official php-fpm image): every address,
    /// bound as php-fpm binds it: `[::]:PORT` taking IPv4 clients too (IPV6_V6ONLY off),
    /// or `0.0.0.0:PORT` on a host without IPv6.
    AnyAddress(u16),
    /// No socket: a `[program]` pool (a background pool), whose copies get /dev/null as
    /// fd 0.
    NoSocket,
}

impl ListenAddr {
    /// A TCP address, of one IP or of every one.
    pub fn is_tcp(&self) -> bool {
        !matches!(self, ListenAddr::Unix(_))
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Unix(p) => write!(f, "{}", p.display()),
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::AnyAddress(port) => write!(f, "{port}"),
            ListenAddr::NoSocket => write!(f, "none"),
        }
    }
}

// The rules on a key's own value, applied as it is read (`read(FUNCTION)`).

/// `rlimit_files`: a limit the spawn could not set is refused now rather than failing
/// every spawn of the pool: the kernel refuses one above `fs.nr_open`, to root too, and
/// only root may raise a hard limit (a master not run as root keeps its own).
fn rlimit_files(root: &Table<'_, '_>) -> Option<Option<u32>> {
    let files = root.optional::<u32>("rlimit_files")?;
    let Some(n) = files.map(u64::from) else {
        return Some(None);
    };
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open");
    if let Some(ceiling) = nr_open.ok().and_then(|s| s.trim().parse::<u64>().ok())
        && n > ceiling
    {
        root.fail(
            "rlimit_files",
            format!("must be at most {ceiling}: the kernel's fs.nr_open, for root too"),
        );
        return None;
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let hard = limit.rlim_max;
    if read && n > hard && !nix::unistd::geteuid().is_root() {
        root.fail(
            "rlimit_files",
            format!(
                "must be at most {hard}: drover's hard limit on open files, which only root \
                 may raise"
            ),
        );
        return None;
    }
    Some(files)
}

/// `slowlog_format`: whether entries are JSON objects.
fn slowlog_json(root: &Table<'_, '_>) -> Option<bool> {
    root.value("slowlog_format")
        .map(|format: SlowlogFormat| format == SlowlogFormat::Json)
}

// What `drover -t` shows for the keys whose declaration names a hook (`show(FUNCTION)`):
// each answers for its entry's rows, as `(struct, key)`.

impl Pool {
    /// Whether a zygote of drover's own starts the workers (drover-php, Python).
    fn zygote(&self) -> bool {
        match &self.runtime {
            Runtime::Php(php) => matches!(php.runtime, PhpRuntime::Embed { .. }),
            Runtime::Python(_) => true,
            Runtime::Command(_) | Runtime::Program(_) => false,
        }
    }

    fn interface(&self) -> Option<Interface> {
        match &self.runtime {
            Runtime::Python(python) => Some(python.interface),
            _ => None,
        }
    }
}

fn address(addr: &ListenAddr) -> String {
    addr.to_string()
}

/// The socket's keys: which apply depends on its kind.
fn show_socket<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let unix = !pool.listen.is_tcp();
    let unix_only = |shown: Shown<'static>| match unix {
        true => shown,
        false => Shown::unset("unix sockets only"),
    };
    Some(match key {
        "listen" if pool.listen == ListenAddr::NoSocket => {
            Shown::unset("a [program] pool has no socket")
        }
        "listen" => Shown::of(&address(&pool.listen)),
        "listen_owner" => unix_only(Shown::optional(pool.listen_owner.as_ref())),
        "listen_group" => unix_only(Shown::optional(pool.listen_group.as_ref())),
        "listen_mode" => unix_only(Shown::of(&format!("{:04o}", pool.listen_mode))),
        "listen_allowed_clients" if unix => Shown::unset("TCP addresses only"),
        "listen_allowed_clients" => {
            let clients = pool.listen_allowed_clients.iter().map(|ip| ip.to_string());
            Shown::of(&clients.collect::<Vec<_>>())
        }
        _ => return None,
    })
}

/// A timeout whose `"0s"` is off (`None` in the model).
fn show_off<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let timeout = match key {
        "request_slowlog_timeout" => pool.request_slowlog_timeout,
        "request_terminate_timeout" => pool.request_terminate_timeout,
        "request_read_timeout" => pool.request_read_timeout,
        _ => return None,
    };
    Some(Shown::of(&timeout.unwrap_or_default()))
}

fn show_slowlog_format<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    let format = match pool.slowlog_json {
        true => SlowlogFormat::Json,
        false => SlowlogFormat::Text,
    };
    Some(Shown::of(format.name()))
}

fn show_process_dumpable<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(match pool.zygote() || pool.process_dumpable {
        true => Shown::of(&pool.process_dumpable),
        false => Shown::unset(
            "drover-php and Python pools; php-cgi and [command] programs stay dumpable",
        ),
    })
}

fn show_terminate_grace<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    let wsgi = pool.interface() == Some(Interface::Wsgi);
    Some(match wsgi && pool.request_terminate_timeout.is_some() {
        true => Shown::of(&pool.terminate_grace),
        false => Shown::unset("WSGI pools with a request_terminate_timeout only"),
    })
}

fn show_queue_timeout<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(match pool.zygote() {
        true => Shown::of(&pool.queue_timeout.unwrap_or_default()),
        false => Shown::unset("drover-php and Python pools only"),
    })
}

fn show_status_listen<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::optional(
        pool.status_listen.as_ref().map(address).as_ref(),
    ))
}

/// `protocol`, and the HTTP pool's keys (`Http`'s rows): none on a FastCGI pool, and an
/// ASGI pool's WebSockets.
fn show_http<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let protocol = match pool.http {
        Some(_) => Protocol::Http,
        None => Protocol::FastCgi,
    };
    let asgi = pool.interface() == Some(Interface::Asgi);
    Some(match (&pool.http, key) {
        (_, "protocol") => Shown::of(protocol.name()),
        (None, _) => Shown::Hidden,
        (Some(_), "ws_max_size") if !asgi => Shown::unset("ASGI pools only"),
        (Some(_), "send_timeout") if asgi => Shown::unset("WSGI pools only, for now"),
        (Some(http), _) => return http.shown(key),
    })
}

fn show_runtime<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    if key != pool.runtime.name() {
        return Some(Shown::Hidden);
    }
    Some(Shown::Table(match &pool.runtime {
        Runtime::Php(php) => php as &dyn Shows,
        Runtime::Python(python) => python,
        Runtime::Command(command) => command,
        Runtime::Program(program) => program,
    }))
}
