//! The typed configuration: what [`load`](super::load) returns once every file is valid,
//! and all that the rest of drover reads. Built only by the loader; never raw TOML.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::choices::PhpProgram;
use super::keys::{Choice, choice};

/// The whole resolved configuration: global settings and every pool, in file-name order.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `drover.toml` this was loaded from; relative paths resolve against its folder.
    pub path: PathBuf,
    pub global: Global,
    pub pools: Vec<Pool>,
}

/// `drover.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    /// Where the master writes its log (and captured worker output).
    pub error_log: LogTarget,
    pub log_level: LogLevel,
    /// `log_format`: how each line of the error log is written.
    pub log_format: LogFormat,
    /// Written at start, removed at exit.
    pub pid_file: Option<PathBuf>,
    /// Globs, relative to `drover.toml`'s folder, that select the pool files.
    pub include: Vec<String>,
    /// How long workers get to finish in-flight requests on a graceful stop before SIGKILL.
    pub process_control_timeout: Duration,
    /// php-fpm's: this many workers dying of SIGSEGV/SIGBUS within the interval restarts
    /// every pool. 0 = off.
    pub emergency_restart_threshold: u32,
    pub emergency_restart_interval: Duration,
    pub control: Control,
    /// On TERM and QUIT: how long the pools keep serving, with `/readyz` answering 503,
    /// before the graceful stop begins (so that load balancers stop sending first).
    pub shutdown_delay: Duration,
    /// A pool whose app fails to load stops drover (exit 3), not only the pool: what
    /// `drover serve`, one pool, wants.
    pub exit_on_app_failure: bool,
    /// Where the master serves `/livez` and `/readyz` (Kubernetes' probes). None: only on
    /// the control socket.
    pub health_listen: Option<ListenAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Control {
    /// Unix socket of the control API, which `drover ctl` talks to. None: no control socket.
    pub listen: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    Stderr,
    File(PathBuf),
}

/// `log_format`: the layout of drover's own error log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `TIME  LEVEL message`, as tracing-subscriber writes it.
    #[default]
    Text,
    /// One JSON object per line: `time`, `level`, `message`, and `pool`, `pid` when known.
    Json,
}

choice!(LogFormat {
    Text = "text",
    Json = "json",
});

impl LogFormat {
    /// The value of `log_format` that selects it.
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// php-fpm's level names are accepted too: alert → error, warning → warn, notice → info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

choice!(LogLevel {
    Error = "error",
    Warn = "warn",
    Info = "info",
    Debug = "debug",
    Trace = "trace",
} {
    const ALIASES: &'static [(&'static str, Self)] = &[
        ("alert", LogLevel::Error),
        ("warning", LogLevel::Warn),
        ("notice", LogLevel::Info),
    ];
    const NOTE: &'static str = "(php-fpm's alert, warning, notice also work)";
});

/// `pools.d/NAME.toml`: one pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The file name without `.toml`.
    pub name: String,
    /// The file the pool was read from, for messages.
    pub file: PathBuf,
    pub listen: ListenAddr,
    /// listen(2) backlog; php-fpm's Linux default 511.
    pub listen_backlog: i32,
    /// Unix sockets only: owner, group and mode applied after bind (mode default 0660).
    pub listen_owner: Option<String>,
    pub listen_group: Option<String>,
    pub listen_mode: u32,
    /// TCP only: client addresses allowed to connect; empty = any.
    pub listen_allowed_clients: Vec<IpAddr>,
    /// Workers run as this user/group when drover runs as root. Required then: a pool that
    /// runs as root says `user = "root"`.
    pub user: Option<String>,
    pub group: Option<String>,
    pub chdir: Option<PathBuf>,
    /// Start workers with an empty environment plus `[env]` and what the runtime needs.
    pub clear_env: bool,
    pub request_slowlog_timeout: Option<Duration>,
    pub request_slowlog_trace_depth: u32,
    pub slowlog: Option<PathBuf>,
    /// `slowlog_format = "json"`: one JSON object per entry instead of php-fpm's text.
    pub slowlog_json: bool,
    /// php-fpm's `decorate_workers_output`: false writes what a worker prints to the error
    /// log as it is, one line per write, without drover's prefix.
    pub decorate_workers_output: bool,
    /// php-fpm's `process.dumpable`: false (the default) makes a drover-php or Python
    /// zygote and its workers non-dumpable (`PR_SET_DUMPABLE` 0), so that no process of the
    /// pool's user can attach to them with ptrace or read their memory; true leaves them as
    /// the kernel makes them, for an operator's debugger or profiler.
    pub process_dumpable: bool,
    /// php-fpm's `rlimit_files`: RLIMIT_NOFILE, soft and hard, of the pool's processes (set
    /// on the exec'd one, inherited by what it forks); `None`: the soft limit drover was
    /// started with.
    pub rlimit_files: Option<u32>,
    pub request_terminate_timeout: Option<Duration>,
    /// Python pools: how long a worker asked to abort its request past
    /// `request_terminate_timeout` (SIGUSR1, which raises inside the request) may take to
    /// end it before SIGKILL. Others are killed at once.
    pub terminate_grace: Duration,
    /// A request's headers and body must arrive within this time from the accept; `None`:
    /// no bound (`"0s"`). A worker waiting on them counts as busy ("reading").
    pub request_read_timeout: Option<Duration>,
    /// A connection waiting longer than this for a worker is answered 503 by the master
    /// (`src/master/shed.rs`); None: off (`"0s"`).
    pub queue_timeout: Option<Duration>,
    pub status_listen: Option<ListenAddr>,
    /// php-fpm's `pm.status_path`: a request whose `SCRIPT_NAME` is this gets the pool's
    /// status through the pool's own socket, fetched by the worker from `status_listen`.
    pub status_path: Option<String>,
    /// php-fpm's `ping.path`: a request whose `SCRIPT_NAME` is this gets `ping_response`.
    pub ping_path: Option<String>,
    /// php-fpm's `ping.response` (default `pong`).
    pub ping_response: String,
    /// php-fpm's `access.log`: the file the workers write a line per request to; None:
    /// off. drover-python and drover-php only (the runtimes that know a response's status).
    pub access_log: Option<PathBuf>,
    /// php-fpm's `access.format`, or `"json"`; checked with `drover_proto::access::parse`.
    pub access_format: String,
    /// php-fpm's `access.suppress_path`: request URIs not logged (a health check).
    pub access_suppress_path: Vec<String>,
    /// `protocol = "http"`: the workers speak HTTP/1.1 on `listen` (Python pools only);
    /// None: FastCGI, the default.
    pub http: Option<Http>,
    pub pm: Pm,
    pub env: BTreeMap<String, String>,
    pub runtime: Runtime,
}

/// An HTTP pool's settings (gunicorn's names and defaults where it has them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http {
    /// How long a kept connection may idle between requests (gunicorn's `keepalive`, 2 s).
    pub keepalive_timeout: Duration,
    /// Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or "*".
    pub forwarded_allow_ips: Vec<String>,
    /// Larger request bodies are refused with 413; None: no bound.
    pub max_request_body: Option<u64>,
    /// ASGI pools: the largest WebSocket message taken (uvicorn's `--ws-max-size`, 16 MiB);
    /// a larger one, or a frame that declares more, closes the WebSocket with 1009.
    pub ws_max_size: u64,
    /// A response write that makes no progress this long ends the connection (nginx's
    /// `send_timeout`): a client that reads nothing does not hold a worker forever.
    pub send_timeout: Duration,
    /// `certfile`: the listener speaks TLS; None: plain HTTP.
    pub tls: Option<Tls>,
}

/// An HTTP pool's TLS: the files as the master read them at load (a reload reads them
/// again, so that a renewed certificate changes the pool and its next generation serves
/// it), and the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub certfile: PathBuf,
    /// None: the key is in certfile.
    pub keyfile: Option<PathBuf>,
    pub ca_certs: Option<PathBuf>,
    pub settings: drover_proto::tls::Settings,
    /// What the files held (the key is not printed by Debug).
    pub material: drover_proto::tls::Material,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmMode {
    Static,
    Dynamic,
    Ondemand,
}

choice!(PmMode {
    Static = "static",
    Dynamic = "dynamic",
    Ondemand = "ondemand",
});

/// The `[pm]` table, with php-fpm's defaults resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Pm {
    pub mode: PmMode,
    pub max_children: u32,
    /// dynamic only; default `min_spare + (max_spare - min_spare) / 2`. The three spare
    /// fields are only written for dynamic (elsewhere they are a config error); the loader
    /// fills them with max_children for static and 0 for ondemand.
    pub start_servers: u32,
    pub min_spare_servers: u32,
    pub max_spare_servers: u32,
    /// dynamic: cap of the doubling spawn batch (32).
    pub max_spawn_rate: u32,
    /// ondemand: retire a worker idle this long (10s).
    pub process_idle_timeout: Duration,
    /// A worker exits after this many requests; 0 = never.
    pub max_requests: u32,
    /// Each worker draws its own limit in `max_requests ..= max_requests + jitter`.
    pub max_requests_jitter: u32,
    /// Retire a worker whose resident memory passes this many bytes.
    pub max_memory: Option<u64>,
    /// Sizing by memory: `max_children = "auto"`, `memory_reserve`, `max_pool_memory`.
    pub memory: PmMemory,
}

/// The `[pm]` keys that size a pool by memory (see the master's `pm::memory`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PmMemory {
    /// `max_children = "auto"`: (auto_min_children, auto_max_children). The pool's
    /// `max_children` is then the ceiling; the master keeps the live count.
    pub auto: Option<(u32, u32)>,
    /// `memory_reserve`: left out of the budget; None: a tenth of the limit (32 MiB–1 GiB).
    pub reserve: Option<u64>,
    /// `max_pool_memory`: above this PSS total the largest idle worker retires.
    pub max_pool_memory: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Runtime {
    Php(Php),
    Python(Python),
    Command(Command),
    Program(Program),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Php {
    /// Which program runs PHP, with the settings only it can enforce.
    pub runtime: PhpRuntime,
    /// `ini_file`: the php.ini PHP loads (drover-php's `PhpArgs::ini_file`, php-cgi's `-c`); `None`:
    /// PHP's own search.
    pub ini_file: Option<PathBuf>,
    /// `[php.ini]`, php-fpm's `php_value`: drover-php's `--ini name=value`, php-cgi's
    /// `-d name=value`. A script may change them with `ini_set`.
    pub ini: BTreeMap<String, String>,
}

/// `[php] runtime`: the program that runs a PHP pool's scripts.
#[derive(Debug, Clone, PartialEq)]
pub enum PhpRuntime {
    /// `"embed"`: `drover-php`, which links libphp, as the pool's zygote in every pm mode.
    Embed {
        /// `[php.admin_ini]`, php-fpm's `php_admin_value`: values a script cannot change.
        admin_ini: BTreeMap<String, String>,
        /// `limit_extensions`, php-fpm's `security.limit_extensions`: the suffixes of the
        /// scripts PHP runs; empty: any file.
        limit_extensions: Vec<String>,
        /// `worker`: worker mode's script, an existing file; `None`: classic mode.
        worker: Option<PathBuf>,
        /// `worker_boot = "zygote"`: the worker script boots once, in the zygote.
        boot_in_zygote: bool,
    },
    /// `"cgi"`: php-cgi.
    Cgi {
        /// `binary`, resolved to an existing executable (searched on PATH when not a path).
        binary: PathBuf,
        /// `limit_extensions = []`: the pool lets any file run, which php-cgi does when it
        /// walks up a path (`cgi.fix_pathinfo = 1`); without it, drover runs php-cgi with
        /// `cgi.fix_pathinfo = 0` and refuses 1 (the master's `runtime::php`).
        any_file: bool,
    },
}

impl PhpRuntime {
    /// The value of `runtime` that selects it.
    pub fn name(&self) -> &'static str {
        match self {
            PhpRuntime::Embed { .. } => PhpProgram::Embed,
            PhpRuntime::Cgi { .. } => PhpProgram::Cgi,
        }
        .name()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Python {
    /// "package.module:callable"; the callable defaults to `application`.
    pub module: String,
    /// What follows the `:`: the app's name, or a factory call with literal arguments
    /// (`create_app('prod', debug=False)`), checked as gunicorn checks it; the zygote calls
    /// the factory once (or each worker, without preload).
    pub callable: String,
    pub python_path: Vec<PathBuf>,
    pub virtualenv: Option<PathBuf>,
    pub preload: bool,
    /// SCRIPT_NAME prefix the app is mounted at ("" = root).
    pub mount: String,
    /// Request paths (with an optional query) the zygote sends through the app before it
    /// forks, so that what the app builds on its first requests is shared by the workers.
    pub warmup: Vec<String>,
    /// `hooks`: gunicorn's lifecycle hooks, from a module name or a .py file (a
    /// gunicorn.conf.py; a relative path resolves as every path does, and must exist).
    pub hooks: Option<String>,
    /// How the app is called: a WSGI callable, one request at a time per worker, or an
    /// ASGI 3.0 app on an event loop, many requests at once per worker.
    pub interface: Interface,
    /// `threads`: how many threads of each WSGI worker accept and serve requests, as
    /// gunicorn's gthread worker (1: the worker's own thread, one request at a time).
    pub threads: u32,
}

/// `[python] interface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    #[default]
    Wsgi,
    Asgi,
}

choice!(Interface {
    Wsgi = "wsgi",
    Asgi = "asgi",
});

#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// `argv[0]` resolved like `[php] binary`.
    pub argv: Vec<String>,
}

/// `[program]`: a background pool, `max_children` copies of a long-running command (a
/// queue consumer, a scheduler), no socket (`config/program.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// `command`, its program resolved like `[command] argv`'s.
    pub command: Vec<String>,
    /// What asks a copy to stop (supervisord's `stopsignal`), by its name without `SIG`.
    pub stop_signal: String,
    /// How long a copy asked to stop may take before SIGKILL (supervisord's
    /// `stopwaitsecs`); `None`: the global `process_control_timeout`.
    pub stop_timeout: Option<Duration>,
    /// A copy is restarted (gracefully) after running this long; `None`: never.
    pub max_lifetime: Option<Duration>,
    /// Each copy's lifetime is `max_lifetime` plus up to this much, so that copies started
    /// together are not all restarted at once.
    pub max_lifetime_jitter: Duration,
}

impl Runtime {
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::Php(_) => "php",
            Runtime::Python(_) => "python",
            Runtime::Command(_) => "command",
            Runtime::Program(_) => "program",
        }
    }
}

impl PmMode {
    pub fn as_str(self) -> &'static str {
        self.name()
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
