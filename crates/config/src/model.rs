//! The typed configuration: what [`load`](super::load) returns once every file is valid,
//! and all that the rest of drover reads. Built only by the loader; never raw TOML.
//!
//! Each key is declared here, once, as the field it fills: a section's struct is written
//! with `keys!` (`keys/declare.rs`), whose entries give the field, the key's row (name,
//! type, default, range, refusals, documentation), how the section's reader fills it and
//! what `drover -t` shows. The entries are in the reference's order, which is
//! `drover -t`'s. Adding a key: docs/ARCHITECTURE.md, "Adding a pool key".
//!
//! Longer than the ~600 lines files are split at: the declarations are read top to bottom,
//! as php-fpm's option table is, and a split would only scatter a section's order.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use drover_proto::tls::CertReqs;

use super::choices::{PhpProgram, Protocol, SlowlogFormat, WorkerBoot};
use super::keys::Default::{Note, Required, Unset, Value};
use super::keys::{
    ALWAYS_RUNNING, BUILTIN_PATHS, Choice, MAX_THREADS, NO_COUNT, NO_REQUESTS, NO_SOCKET, Runtimes,
    STOP_SIGNALS, Section, Type, at_least, between, choice, http, key, keys, refused,
};
use super::render::shown;
use super::{pm, pool, program};

/// The whole resolved configuration: global settings and every pool, in file-name order.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `drover.toml` this was loaded from; relative paths resolve against its folder.
    pub path: PathBuf,
    pub global: Global,
    pub pools: Vec<Pool>,
}

keys! {
    /// `drover.toml`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Global: Section::Global, given GlobalGiven {
        /// Where the master writes its log (and captured worker output).
        pub error_log: LogTarget = [key(
            "error_log",
            Type::Path,
            Value("\"stderr\""),
            "Where drover writes its log and the workers' captured output: `\"stderr\"` (under \
             systemd, the journal) or a file, created 0600 in a folder that must exist; USR1 \
             reopens it.",
        )] => read(given), show(shown::error_log);
        pub log_level: LogLevel = [key(
            "log_level",
            Type::Choice(LogLevel::NAMES),
            Value("\"info\""),
            "The least severe lines logged; php-fpm's `alert`, `warning` and `notice` are taken too.",
        )] => read(value), show(name);
        /// `log_format`: how each line of the error log is written.
        pub log_format: LogFormat = [key(
            "log_format",
            Type::Choice(LogFormat::NAMES),
            Value("\"text\""),
            "`text` (time, level, message) or `json`: one object per line with `time`, `level`, \
             `message`, and `pool`, `pid` when known.",
        )] => read(value), show(name);
        /// Written at start, removed at exit.
        pub pid_file: Option<PathBuf> = [key(
            "pid_file",
            Type::Path,
            Unset,
            "A file drover writes its pid to at start and removes at exit.",
        )] => read(given), show(optional);
        /// Globs, relative to `drover.toml`'s folder, that select the pool files (read by the
        /// loader, which needs them even when another global key is wrong).
        pub include: Vec<String> = [key(
            "include",
            Type::Strings,
            Value("[\"pools.d/*.toml\"]"),
            "Globs, relative to drover.toml's folder, that select the pool files; each file is one \
             pool named after it.",
        )] => read(given), show(of);
        /// How long workers get to finish in-flight requests on a graceful stop before SIGKILL.
        pub process_control_timeout: Duration = [key(
            "process_control_timeout",
            Type::Duration,
            Value("\"10s\""),
            "How long workers get to finish their requests on a graceful stop or retirement before \
             SIGKILL.",
        )] => read(value), show(of);
        /// php-fpm's: this many workers dying of SIGSEGV/SIGBUS within the interval restarts
        /// every pool. 0 = off.
        pub emergency_restart_threshold: u32 = [key(
            "emergency_restart_threshold",
            Type::Int,
            Value("0"),
            "php-fpm's: this many workers dying of SIGSEGV or SIGBUS within \
             `emergency_restart_interval` restart every pool; 0 is off.",
        )] => read(given), show(of);
        pub emergency_restart_interval: Duration = [key(
            "emergency_restart_interval",
            Type::Duration,
            Value("\"0s\""),
            "The window of `emergency_restart_threshold`; more than 0s when the threshold is set.",
        )] => read(given), show(of);
        /// On TERM and QUIT: how long the pools keep serving, with `/readyz` answering 503,
        /// before the graceful stop begins (so that load balancers stop sending first).
        pub shutdown_delay: Duration = [key(
            "shutdown_delay",
            Type::Duration,
            Value("\"0s\""),
            "On TERM and QUIT: how long the pools keep serving, `/readyz` answering 503, before \
             the graceful stop (so that a load balancer or Kubernetes stops sending first); 0s: \
             stop at once.",
        )] => read(value), show(of);
        /// A pool whose app fails to load stops drover (exit 3), not only the pool: what
        /// `drover serve`, one pool, wants.
        pub exit_on_app_failure: bool = [key(
            "exit_on_app_failure",
            Type::Bool,
            Value("false"),
            "When a pool's app fails to load (a Python app that cannot be imported, a worker \
             script that cannot boot), drover stops and exits 3, as gunicorn does, instead of \
             stopping that pool alone until a reload; `drover serve` sets it.",
        )] => read(value), show(of);
        /// Where the master serves `/livez` and `/readyz` (Kubernetes' probes). None: only on
        /// the control socket.
        pub health_listen: Option<ListenAddr> = [key(
            "health_listen",
            Type::String,
            Unset,
            "An address (as a pool's `listen`) where the master serves `/livez` and `/readyz` for \
             Kubernetes' httpGet probes; the control socket serves them too.",
        )] => read(given), show(shown::health_listen);
        pub control: Control = [key(
            "control",
            Type::Table,
            Unset,
            "The control socket's table, `[control]`.",
        )] => read(given), show(table);
    }
}

keys! {
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Control: Section::Control, given ControlGiven {
        /// Unix socket of the control API, which `drover ctl` talks to. None: no control socket.
        pub listen: Option<PathBuf> = [key(
            "listen",
            Type::Path,
            Unset,
            "The unix socket `drover ctl` talks to (mode 0600); none: no control socket.",
        )] => read(given), show(optional);
    }
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
        )] => read(given), show(shown::socket);
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
        )] => read(given), show(shown::socket);
        pub listen_group: Option<String> = [refused(
            key(
                "listen_group",
                Type::String,
                Unset,
                "Unix sockets only: the socket's group, set after bind.",
            ),
            &[NO_SOCKET],
        )] => read(given), show(shown::socket);
        pub listen_mode: u32 = [refused(
            key(
                "listen_mode",
                Type::String,
                Value("\"0660\""),
                "Unix sockets only: the socket's mode, an octal string.",
            ),
            &[NO_SOCKET],
        )] => read(given), show(shown::socket);
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
        )] => read(given), show(shown::socket);
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
        )] => read(given), show(shown::off);
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
        )] => read(pool::slowlog_json), show(shown::slowlog_format);
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
        )] => read(given), show(shown::process_dumpable);
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
        )] => read(pool::rlimit_files), show(optional);
        pub request_terminate_timeout: Option<Duration> = [refused(
            key(
                "request_terminate_timeout",
                Type::Duration,
                Value("\"0s\""),
                "A request running this long has its worker killed; 0s is off.",
            ),
            &[NO_REQUESTS],
        )] => read(given), show(shown::off);
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
        )] => read(given), show(shown::terminate_grace);
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
        )] => read(given), show(shown::off);
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
        )] => read(given), show(shown::queue_timeout);
        pub status_listen: Option<ListenAddr> = [key(
            "status_listen",
            Type::String,
            Unset,
            "An address (as `listen`) where the master serves the pool's status, `/status` and \
             `/ping`.",
        )] => read(given), show(shown::status_listen);
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
        )] + Http::ROWS => read(given), show(shown::http);
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
        ] => read(given), show(shown::runtime);
    }
}

keys! {
    /// An HTTP pool's settings (gunicorn's names and defaults where it has them): keys of a
    /// pool file's top level that only an HTTP pool reads.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Http: Section::Pool, given HttpGiven {
        /// How long a kept connection may idle between requests (gunicorn's `keepalive`, 2 s).
        // gunicorn's `keepalive` default.
        pub keepalive_timeout: Duration = [http(
            "keepalive_timeout",
            Type::Duration,
            Value("\"2s\""),
            "How long a kept connection may idle between requests (gunicorn's `keepalive`).",
        )] => read(value), show(of);
        /// Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or "*".
        pub forwarded_allow_ips: Vec<String> = [http(
            "forwarded_allow_ips",
            Type::Strings,
            Value("[\"127.0.0.1\", \"::1\"]"),
            "Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or \
             `\"*\"`.",
        )] => read(given), show(of);
        /// Larger request bodies are refused with 413; None: no bound.
        pub max_request_body: Option<u64> = [http(
            "max_request_body",
            Type::Size,
            Unset,
            "A larger request body is refused with 413; none: no bound.",
        )] => read(optional), show(shown::max_request_body);
        /// ASGI pools: the largest WebSocket message taken (uvicorn's `--ws-max-size`, 16 MiB);
        /// a larger one, or a frame that declares more, closes the WebSocket with 1009.
        // uvicorn's `--ws-max-size` default.
        pub ws_max_size: u64 = [refused(
            http(
                "ws_max_size",
                Type::Size,
                Value("\"16MiB\""),
                "The largest WebSocket message taken (uvicorn's `--ws-max-size`); a larger one \
                 closes the WebSocket with 1009.",
            ),
            &[(
                Runtimes::WSGI,
                "only for interface = \"asgi\" (WebSockets are served to ASGI apps only)",
            )],
        )] => read(value), show(shown::ws_max_size);
        /// A response write that makes no progress this long ends the connection (nginx's
        /// `send_timeout`): a client that reads nothing does not hold a worker forever.
        // nginx's `send_timeout` default.
        pub send_timeout: Duration = [refused(
            http(
                "send_timeout",
                Type::Duration,
                Value("\"1m\""),
                "A response write that makes no progress this long ends the connection (nginx's \
                 `send_timeout`); more than 0s.",
            ),
            &[(
                Runtimes::ASGI,
                "WSGI pools only, for now: the ASGI HTTP listener does not enforce it yet",
            )],
        )] => read(pool::send_timeout), show(of);
        /// `certfile`: the listener speaks TLS; None: plain HTTP.
        pub tls: Option<Tls> = [] + Tls::ROWS => read(given), show(shown::tls);
    }
}

keys! {
    /// An HTTP pool's TLS: the files as the master read them at load (a reload reads them
    /// again, so that a renewed certificate changes the pool and its next generation serves
    /// it), and the settings. Built by `tls.rs`, which reads every key.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Tls: Section::Pool, given TlsGiven {
        pub certfile: PathBuf = [http(
            "certfile",
            Type::Path,
            Unset,
            "The listener speaks TLS (HTTPS) with this PEM certificate, then its chain \
             (gunicorn's `certfile`); read by the master at load and on reload.",
        )] => read(given), show(of);
        /// None: the key is in certfile.
        pub keyfile: Option<PathBuf> = [http(
            "keyfile",
            Type::Path,
            Unset,
            "certfile's PEM private key (gunicorn's `keyfile`); may be root's alone, 0600: the \
             master reads it; unset: the key in certfile.",
        )] => read(given), show(shown::keyfile);
        pub ca_certs: Option<PathBuf> = [http(
            "ca_certs",
            Type::Path,
            Unset,
            "PEM certificates of the authorities a client certificate must chain to \
             (gunicorn's `ca_certs`).",
        )] => read(given), show(optional);
        pub settings: drover_proto::tls::Settings = [
            http(
                "cert_reqs",
                Type::Choice(CertReqs::NAMES),
                Value("\"none\""),
                "Client certificates (gunicorn's `cert_reqs`, Python's `CERT_NONE`, \
                 `CERT_OPTIONAL`, `CERT_REQUIRED`): not asked for, checked when sent, or required.",
            ),
            http(
                "ciphers",
                Type::Strings,
                Unset,
                "The TLS cipher suites offered, by IANA name (`\"TLS13_AES_128_GCM_SHA256\"`); \
                 unset: rustls's defaults. A name rustls lacks is refused.",
            ),
            http(
                "ssl_version",
                Type::String,
                Value("\"TLSv1.2\""),
                "The lowest TLS version taken: `\"TLSv1.2\"` or `\"TLSv1.3\"` (rustls speaks \
                 no older one).",
            ),
        ] => read(given), show(shown::tls_settings);
        /// What the files held (the key is not printed by Debug).
        pub material: drover_proto::tls::Material => read(given);
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

keys! {
    /// The `[pm]` table, with php-fpm's defaults resolved.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Pm: Section::Pm, given PmGiven {
        pub mode: PmMode = [key(
            "mode",
            Type::Choice(PmMode::NAMES),
            Required,
            "php-fpm's `pm`: a fixed count, a count between spares, or workers started per \
             connection.",
        )] => read(given), show(name);
        pub max_children: u32 = [key(
            "max_children",
            Type::Int,
            Required,
            "The most workers at once (the count of a static pool); `\"auto\"` (dynamic and \
             ondemand): as many as fit in the memory the pool may use, from its workers' measured \
             PSS (docs/memory.md).",
        )] => read(given), show(shown::max_children);
        /// dynamic only; default `min_spare + (max_spare - min_spare) / 2`. The three spare
        /// fields are only written for dynamic (elsewhere they are a config error); the loader
        /// fills them with max_children for static and 0 for ondemand.
        pub start_servers: u32 = [refused(
            key(
                "start_servers",
                Type::Int,
                Note("`min_spare_servers + (max_spare_servers - min_spare_servers) / 2`"),
                "`mode = \"dynamic\"` only: the workers started first.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(shown::spares);
        pub min_spare_servers: u32 = [refused(
            key(
                "min_spare_servers",
                Type::Int,
                Note("required with `mode = \"dynamic\"`"),
                "`mode = \"dynamic\"` only: fewer idle workers than this start more.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(shown::spares);
        pub max_spare_servers: u32 = [refused(
            key(
                "max_spare_servers",
                Type::Int,
                Note("required with `mode = \"dynamic\"`"),
                "`mode = \"dynamic\"` only: more idle workers than this are retired.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(shown::spares);
        /// dynamic: cap of the doubling spawn batch (32).
        pub max_spawn_rate: u32 = [at_least(
            refused(
                key(
                    "max_spawn_rate",
                    Type::Int,
                    Value("32"),
                    "dynamic: the cap of the doubling batch of workers started at once.",
                ),
                &[ALWAYS_RUNNING],
            ),
            1,
        )] => read(value), show(of);
        /// ondemand: retire a worker idle this long (10s).
        pub process_idle_timeout: Duration = [refused(
            key(
                "process_idle_timeout",
                Type::Duration,
                Value("\"10s\""),
                "ondemand: a worker idle this long is retired.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(pm::process_idle_timeout), show(of);
        /// A worker exits after this many requests; 0 = never.
        pub max_requests: u32 = [refused(
            key(
                "max_requests",
                Type::Int,
                Value("0"),
                "A worker exits after this many requests; 0: never.",
            ),
            &[NO_COUNT],
        )] => read(given), show(of);
        /// Each worker draws its own limit in `max_requests ..= max_requests + jitter`.
        pub max_requests_jitter: u32 = [refused(
            key(
                "max_requests_jitter",
                Type::Int,
                Value("0"),
                "Each worker draws its limit in `max_requests ..= max_requests + jitter`.",
            ),
            &[NO_COUNT],
        )] => read(given), show(of);
        /// Retire a worker whose resident memory passes this many bytes.
        pub max_memory: Option<u64> = [key(
            "max_memory",
            Type::Size,
            Unset,
            "A worker whose resident memory passes this is retired; none: no limit.",
        )] => read(pm::max_memory), show(shown::max_memory);
        /// Sizing by memory: `max_children = "auto"`, `memory_reserve`, `max_pool_memory`.
        pub memory: PmMemory = [] + PmMemory::ROWS => read(given), show(shown::memory);
    }
}

keys! {
    /// The `[pm]` keys that size a pool by memory (docs/memory.md, the master's `pm::memory`).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct PmMemory: Section::Pm, given PmMemoryGiven {
        /// `max_children = "auto"`: (auto_min_children, auto_max_children). The pool's
        /// `max_children` is then the ceiling; the master keeps the live count.
        pub auto: Option<(u32, u32)> = [
            at_least(
                key(
                    "auto_min_children",
                    Type::Int,
                    Value("1"),
                    "`max_children = \"auto\"` only: the fewest workers it allows, whatever the memory \
                     says.",
                ),
                1,
            ),
            // The scoreboard of a zygote pool has twice this many slots; past 128 a pool is
            // better split or given a number.
            at_least(
                key(
                    "auto_max_children",
                    Type::Int,
                    Value("128"),
                    "`max_children = \"auto\"` only: the most workers it allows, at most 4096 (the \
                     master keeps a scoreboard slot for each, existing or not).",
                ),
                1,
            ),
        ] => read(given), show(shown::auto);
        /// `memory_reserve`: left out of the budget; None: a tenth of the limit (32 MiB–1 GiB).
        pub reserve: Option<u64> = [key(
            "memory_reserve",
            Type::Size,
            Note("a tenth of the limit, at least 32 MiB and at most 1 GiB"),
            "Memory under the limit (cgroup or MemAvailable) left to all but the pool's workers: \
             `\"auto\"` sizes within the rest, and a fixed `max_children` that does not fit in \
             it is warned about.",
        )] => read(optional), show(shown::memory_reserve);
        /// `max_pool_memory`: above this PSS total the largest idle worker retires.
        pub max_pool_memory: Option<u64> = [key(
            "max_pool_memory",
            Type::Size,
            Unset,
            "When the pool's processes together (PSS) pass this, its largest idle worker is \
             retired, and `\"auto\"` sizes within it; none: no limit.",
        )] => read(pm::max_pool_memory), show(shown::max_pool_memory);
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Runtime {
    Php(Php),
    Python(Python),
    Command(Command),
    Program(Program),
}

keys! {
    /// `[php]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Php: Section::Php, given PhpGiven {
        /// Which program runs PHP, with the settings only it can enforce (`binary`, and the
        /// keys below that only drover-php takes).
        pub runtime: PhpRuntime = [
            key(
                "runtime",
                Type::Choice(PhpProgram::NAMES),
                Note(
                    "`\"cgi\"` when `binary` is set, else `\"embed\"` where drover-php can run PHP, \
                     else `\"cgi\"`",
                ),
                "Which program runs the scripts: drover-php (linking libphp) or php-cgi.",
            ),
            refused(
                key(
                    "binary",
                    Type::Path,
                    Note("`\"php-cgi\"`, looked up on PATH"),
                    "php-cgi's path or name (searched on PATH); it must exist.",
                ),
                &[(
                    Runtimes::EMBED,
                    "only for runtime = \"cgi\" (php-cgi): drover-php links PHP itself; remove binary, \
                     or set runtime = \"cgi\"",
                )],
            ),
        ] => read(given), show(shown::php);
        /// `ini_file`: the php.ini PHP loads (drover-php's `PhpArgs::ini_file`, php-cgi's `-c`); `None`:
        /// PHP's own search.
        pub ini_file: Option<PathBuf> = [key(
            "ini_file",
            Type::Path,
            Unset,
            "The php.ini PHP loads; none: PHP's own search.",
        )] => read(given), show(optional);
        in runtime = [
            key(
                "limit_extensions",
                Type::Strings,
                Value("[\".php\"]"),
                "php-fpm's `security.limit_extensions`: the suffixes of the scripts PHP runs; `[]`: \
                 any file. Another list needs drover-php.",
            ),
            refused(
                key(
                    "worker",
                    Type::Path,
                    Unset,
                    "Worker mode: the script each worker runs once; it boots the app, then handles \
                     every request of the pool through `frankenphp_handle_request()` \
                     (docs/php-worker-mode.md).",
                ),
                &[(
                    Runtimes::CGI,
                    "worker mode needs drover-php (runtime = \"embed\"): php-cgi runs one script per \
                     request and cannot keep an app booted between them",
                )],
            ),
            refused(
                key(
                    "worker_boot",
                    Type::Choice(WorkerBoot::NAMES),
                    Value("\"worker\""),
                    "Where the worker script boots: in each worker, or once in the zygote, whose \
                     workers are forked from the booted app (no socket may be open after the boot).",
                ),
                &[(
                    Runtimes::CGI,
                    "worker mode needs drover-php (runtime = \"embed\")",
                )],
            ),
        ] => show(shown::php);
        /// `[php.ini]`, php-fpm's `php_value`: drover-php's `--ini name=value`, php-cgi's
        /// `-d name=value`. A script may change them with `ini_set`.
        pub ini: BTreeMap<String, String> = [key(
            "ini",
            Type::Map,
            Unset,
            "`[php.ini]`, php-fpm's `php_value`: settings a script may change.",
        )] => read(given), show(map);
        in runtime = [key(
            "admin_ini",
            Type::Map,
            Unset,
            "`[php.admin_ini]`, php-fpm's `php_admin_value`: settings a script cannot change \
             (drover-php only).",
        )] => show(shown::php);
    }
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

keys! {
    /// `[python]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Python: Section::Python, given PythonGiven {
        /// "package.module:callable"; the callable defaults to `application`.
        pub module: String = [key(
            "app",
            Type::String,
            Required,
            "`\"package.module:callable\"` (callable default `application`), or a factory called \
             with literal arguments, as gunicorn takes it.",
        )] => read(given), show(shown::app);
        /// What follows the `:`: the app's name, or a factory call with literal arguments
        /// (`create_app('prod', debug=False)`), checked as gunicorn checks it; the zygote calls
        /// the factory once (or each worker, without preload).
        pub callable: String => read(given);
        pub python_path: Vec<PathBuf> = [key(
            "python_path",
            Type::Strings,
            Value("[]"),
            "Folders put in front of `sys.path`.",
        )] => read(given), show(of);
        pub virtualenv: Option<PathBuf> = [key(
            "virtualenv",
            Type::Path,
            Unset,
            "A virtualenv whose packages the app imports.",
        )] => read(given), show(optional);
        pub preload: bool = [key(
            "preload",
            Type::Bool,
            Value("true"),
            "Load the app once in the zygote before forking (false: in each worker).",
        )] => read(given), show(of);
        /// SCRIPT_NAME prefix the app is mounted at ("" = root).
        pub mount: String = [key(
            "mount",
            Type::String,
            Value("\"\""),
            "The SCRIPT_NAME prefix the app is mounted at (`\"/app\"`); `\"\"`: the root.",
        )] => read(given), show(of);
        /// Request paths (with an optional query) the zygote sends through the app before it
        /// forks, so that what the app builds on its first requests is shared by the workers.
        pub warmup: Vec<String> = [key(
            "warmup",
            Type::Strings,
            Value("[]"),
            "Request paths the zygote sends through a preloaded WSGI app before it forks.",
        )] => read(given), show(of);
        /// `hooks`: gunicorn's lifecycle hooks, from a module name or a .py file (a
        /// gunicorn.conf.py; a relative path resolves as every path does, and must exist).
        pub hooks: Option<String> = [key(
            "hooks",
            Type::String,
            Unset,
            "gunicorn's server hooks, from a module or a .py file (a gunicorn.conf.py).",
        )] => read(given), show(optional);
        /// How the app is called: a WSGI callable, one request at a time per worker, or an
        /// ASGI 3.0 app on an event loop, many requests at once per worker.
        pub interface: Interface = [key(
            "interface",
            Type::Choice(Interface::NAMES),
            Value("\"wsgi\""),
            "A WSGI callable, one request at a time per thread, or an ASGI 3.0 app on an event \
             loop.",
        )] => read(given), show(name);
        /// `threads`: how many threads of each WSGI worker accept and serve requests, as
        /// gunicorn's gthread worker (1: the worker's own thread, one request at a time).
        pub threads: u32 = [between(
            key(
                "threads",
                Type::Int,
                Value("1"),
                "WSGI over FastCGI: the threads of each worker that serve requests (1 to 64), as \
                 gunicorn's gthread.",
            ),
            1,
            MAX_THREADS,
        )] => read(given), show(of);
    }
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

keys! {
    /// `[command]`: a FastCGI program of the operator's.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Command: Section::Command, given CommandGiven {
        /// `argv[0]` resolved like `[php] binary`.
        pub argv: Vec<String> = [key(
            "argv",
            Type::Strings,
            Required,
            "The FastCGI program and its arguments; it accepts on fd 0, one process per worker.",
        )] => read(given), show(of);
    }
}

keys! {
    /// `[program]`: a background pool, `max_children` copies of a long-running command (a
    /// queue consumer, a scheduler), no socket (`config/program.rs`, docs/programs.md).
    #[derive(Debug, Clone, PartialEq)]
    pub struct Program: Section::Program, given ProgramGiven {
        /// `command`, its program resolved like `[command] argv`'s.
        pub command: Vec<String> = [key(
            "command",
            Type::Strings,
            Required,
            "The long-running program and its arguments (`[\"php\", \"artisan\", \"queue:work\"]`); \
             `pm.max_children` copies run, stdin /dev/null, output in the error log.",
        )] => read(given), show(of);
        /// What asks a copy to stop (supervisord's `stopsignal`), by its name without `SIG`.
        pub stop_signal: String = [key(
            "stop_signal",
            Type::Choice(&STOP_SIGNALS),
            Value("\"TERM\""),
            "The signal that asks a copy to stop (supervisord's `stopsignal`), on a reload, a \
             recycle, a scale-down and drover's stop.",
        )] => read(program::stop_signal), show(of);
        /// How long a copy asked to stop may take before SIGKILL (supervisord's
        /// `stopwaitsecs`); `None`: the global `process_control_timeout`.
        pub stop_timeout: Option<Duration> = [key(
            "stop_timeout",
            Type::Duration,
            Note("`process_control_timeout`"),
            "How long a copy asked to stop may take before SIGKILL (supervisord's `stopwaitsecs`).",
        )] => read(optional), show(shown::stop_timeout);
        /// A copy is restarted (gracefully) after running this long; `None`: never.
        pub max_lifetime: Option<Duration> = [key(
            "max_lifetime",
            Type::Duration,
            Unset,
            "A copy is stopped gracefully and replaced after running this long.",
        )] => read(program::max_lifetime), show(optional);
        /// Each copy's lifetime is `max_lifetime` plus up to this much, so that copies started
        /// together are not all restarted at once.
        pub max_lifetime_jitter: Duration = [key(
            "max_lifetime_jitter",
            Type::Duration,
            Value("\"0s\""),
            "Up to this much is added to each copy's `max_lifetime`, so copies started together \
             are not restarted together.",
        )] => read(program::max_lifetime_jitter), show(of);
    }
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
