//! The rows: every key of `drover.toml` and of a pool file, in the order `drover -t`
//! renders them and the reference lists them. Adding a key starts here
//! (docs/ARCHITECTURE.md, "Adding a pool key").
//!
//! Longer than the ~600 lines files are split at: one table is read top to bottom, as
//! php-fpm's option table is, and a split would only scatter a section's order.

use super::Default::{Note, Required, Unset, Value};
use super::Section::{self, Command, Control, Global, Pm, Pool, Python};
use super::Type::{Bool, Choice, Duration, Int, Map, Path, Size, Strings, Table};
use super::{Choice as _, Key, Runtimes};
use crate::choices::{PhpProgram, Protocol, SlowlogFormat, WorkerBoot};
use crate::model::{Interface, LogFormat, LogLevel, PmMode};
use drover_proto::tls::CertReqs;

/// A key every runtime takes, read on FastCGI and HTTP pools alike.
const fn key(
    name: &'static str,
    section: Section,
    ty: super::Type,
    default: super::Default,
    doc: &'static str,
) -> Key {
    Key {
        name,
        section,
        ty,
        default,
        http_only: false,
        refused: &[],
        range: (0, i64::MAX),
        doc,
    }
}

/// An integer `key` of `low` or more.
const fn at_least(key: Key, low: i64) -> Key {
    Key {
        range: (low, i64::MAX),
        ..key
    }
}

/// An integer `key` from `low` to `high`.
const fn between(key: Key, low: i64, high: i64) -> Key {
    Key {
        range: (low, high),
        ..key
    }
}

/// A key of an HTTP pool's listener.
const fn http(
    name: &'static str,
    ty: super::Type,
    default: super::Default,
    doc: &'static str,
) -> Key {
    Key {
        http_only: true,
        ..key(name, Pool, ty, default, doc)
    }
}

/// `key` with the runtimes that refuse it.
const fn refused(key: Key, refused: &'static [(Runtimes, &'static str)]) -> Key {
    Key { refused, ..key }
}

const STRING: super::Type = super::Type::String;

// `Php` and `String` would shadow the model's and std's names.
const PHP: Section = Section::Php;

const BUILTIN_PATHS: &[(Runtimes, &str)] = &[
    (
        Runtimes::CGI.or(Runtimes::COMMAND).or(Runtimes::ASGI),
        "drover's own workers answer it, which this pool's do not run (php-cgi, a [command] \
         program or an ASGI app); use status_listen's /status and /ping",
    ),
    NO_REQUESTS,
];

// What a `[program]` pool (a background pool: config/program.rs) refuses, and why.
const NO_SOCKET: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool has no socket: its copies are long-running commands, not servers; \
     leave it out",
);
const NO_REQUESTS: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool serves no requests, so there is nothing for it to time, log or \
     answer; leave it out",
);
const ALWAYS_RUNNING: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool keeps max_children copies running (pm.mode = \"static\"); leave it out",
);
const NO_COUNT: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "drover cannot count a program's jobs; to restart copies regularly use [program] \
     max_lifetime",
);

/// The most threads a WSGI worker may run (`[python] threads`): gunicorn's gthread is used
/// with a handful; past this the GIL, not the waits, decides, and a slot shows one request.
const MAX_THREADS: i64 = 64;

/// The signals `[program] stop_signal` may name (supervisord's `stopsignal` set).
pub const STOP_SIGNALS: [&str; 7] = ["TERM", "INT", "QUIT", "HUP", "USR1", "USR2", "KILL"];

/// A static, not a constant: each row has one address, wherever the table is named (a
/// constant's promoted copy may differ between crates and codegen units), so a row found
/// by its table and name is the row itself.
pub static KEYS: &[Key] = &[
    // drover.toml
    key(
        "error_log",
        Global,
        Path,
        Value("\"stderr\""),
        "Where drover writes its log and the workers' captured output: `\"stderr\"` (under \
         systemd, the journal) or a file, created 0600 in a folder that must exist; USR1 \
         reopens it.",
    ),
    key(
        "log_level",
        Global,
        Choice(LogLevel::NAMES),
        Value("\"info\""),
        "The least severe lines logged; php-fpm's `alert`, `warning` and `notice` are taken too.",
    ),
    key(
        "log_format",
        Global,
        Choice(LogFormat::NAMES),
        Value("\"text\""),
        "`text` (time, level, message) or `json`: one object per line with `time`, `level`, \
         `message`, and `pool`, `pid` when known.",
    ),
    key(
        "pid_file",
        Global,
        Path,
        Unset,
        "A file drover writes its pid to at start and removes at exit.",
    ),
    key(
        "include",
        Global,
        Strings,
        Value("[\"pools.d/*.toml\"]"),
        "Globs, relative to drover.toml's folder, that select the pool files; each file is one \
         pool named after it.",
    ),
    key(
        "process_control_timeout",
        Global,
        Duration,
        Value("\"10s\""),
        "How long workers get to finish their requests on a graceful stop or retirement before \
         SIGKILL.",
    ),
    key(
        "emergency_restart_threshold",
        Global,
        Int,
        Value("0"),
        "php-fpm's: this many workers dying of SIGSEGV or SIGBUS within \
         `emergency_restart_interval` restart every pool; 0 is off.",
    ),
    key(
        "emergency_restart_interval",
        Global,
        Duration,
        Value("\"0s\""),
        "The window of `emergency_restart_threshold`; more than 0s when the threshold is set.",
    ),
    key(
        "shutdown_delay",
        Global,
        Duration,
        Value("\"0s\""),
        "On TERM and QUIT: how long the pools keep serving, `/readyz` answering 503, before \
         the graceful stop (so that a load balancer or Kubernetes stops sending first); 0s: \
         stop at once.",
    ),
    key(
        "exit_on_app_failure",
        Global,
        Bool,
        Value("false"),
        "When a pool's app fails to load (a Python app that cannot be imported, a worker \
         script that cannot boot), drover stops and exits 3, as gunicorn does, instead of \
         stopping that pool alone until a reload; `drover serve` sets it.",
    ),
    key(
        "health_listen",
        Global,
        STRING,
        Unset,
        "An address (as a pool's `listen`) where the master serves `/livez` and `/readyz` for \
         Kubernetes' httpGet probes; the control socket serves them too.",
    ),
    key(
        "control",
        Global,
        Table,
        Unset,
        "The control socket's table, `[control]`.",
    ),
    key(
        "listen",
        Control,
        Path,
        Unset,
        "The unix socket `drover ctl` talks to (mode 0600); none: no control socket.",
    ),
    // A pool file's top level.
    refused(
        key(
            "listen",
            Pool,
            STRING,
            Required,
            "Where the workers accept: a unix socket path, `IP:PORT`, `[IPv6]:PORT`, or a bare \
             port for every address (as php-fpm reads it).",
        ),
        &[NO_SOCKET],
    ),
    at_least(
        refused(
            key(
                "listen_backlog",
                Pool,
                Int,
                Value("511"),
                "The listen(2) backlog (php-fpm's `listen.backlog`).",
            ),
            &[NO_SOCKET],
        ),
        1,
    ),
    refused(
        key(
            "listen_owner",
            Pool,
            STRING,
            Unset,
            "Unix sockets only: the socket's owner, set after bind.",
        ),
        &[NO_SOCKET],
    ),
    refused(
        key(
            "listen_group",
            Pool,
            STRING,
            Unset,
            "Unix sockets only: the socket's group, set after bind.",
        ),
        &[NO_SOCKET],
    ),
    refused(
        key(
            "listen_mode",
            Pool,
            STRING,
            Value("\"0660\""),
            "Unix sockets only: the socket's mode, an octal string.",
        ),
        &[NO_SOCKET],
    ),
    refused(
        key(
            "listen_allowed_clients",
            Pool,
            Strings,
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
    ),
    key(
        "user",
        Pool,
        STRING,
        Unset,
        "The workers' user when drover runs as root, where it is required (`\"root\"` to \
         mean it).",
    ),
    key(
        "group",
        Pool,
        STRING,
        Unset,
        "The workers' group; default: the user's.",
    ),
    key(
        "chdir",
        Pool,
        Path,
        Unset,
        "The folder the workers start in; it must exist.",
    ),
    key(
        "clear_env",
        Pool,
        Bool,
        Value("true"),
        "Start the workers with an empty environment plus `[env]` and what the runtime needs.",
    ),
    refused(
        key(
            "request_slowlog_timeout",
            Pool,
            Duration,
            Value("\"0s\""),
            "A request running this long is written to `slowlog` with its stack; 0s is off.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "request_slowlog_trace_depth",
            Pool,
            Int,
            Value("20"),
            "The most stack frames of a slowlog entry.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "slowlog",
            Pool,
            Path,
            Unset,
            "The file slow requests are written to; needed by `request_slowlog_timeout`.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "slowlog_format",
            Pool,
            Choice(SlowlogFormat::NAMES),
            Value("\"text\""),
            "php-fpm's text entries, or one JSON object per entry.",
        ),
        &[NO_REQUESTS],
    ),
    key(
        "decorate_workers_output",
        Pool,
        Bool,
        Value("true"),
        "false: what a worker prints goes to the error log as it is, without drover's prefix.",
    ),
    key(
        "process_dumpable",
        Pool,
        Bool,
        Value("false"),
        "true leaves the workers dumpable (ptrace, core files) for a debugger; false, the \
         default, is enforced by drover-php and Python zygotes only, so php-cgi and command \
         pools take only true.",
    ),
    at_least(
        key(
            "rlimit_files",
            Pool,
            Int,
            Unset,
            "php-fpm's `rlimit_files`: the most files each process of the pool may have open \
             (RLIMIT_NOFILE, soft and hard); at most the kernel's `fs.nr_open`, and, unless \
             drover runs as root, its own hard limit; none: the limit drover was started with.",
        ),
        1,
    ),
    refused(
        key(
            "request_terminate_timeout",
            Pool,
            Duration,
            Value("\"0s\""),
            "A request running this long has its worker killed; 0s is off.",
        ),
        &[NO_REQUESTS],
    ),
    // Time for a Python worker's `finally:` blocks and `worker_abort` before SIGKILL.
    refused(
        key(
            "terminate_grace",
            Pool,
            Duration,
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
    ),
    // 30s for a request's headers and body (slowloris): nginx's own client_body_timeout is 60s
    // between two reads; this follows Apache's RequestReadTimeout body default (20-40s).
    refused(
        key(
            "request_read_timeout",
            Pool,
            Duration,
            Value("\"30s\""),
            "A request's headers and body must arrive within this time from the accept; 0s: no \
             bound.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "queue_timeout",
            Pool,
            Duration,
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
    ),
    key(
        "status_listen",
        Pool,
        STRING,
        Unset,
        "An address (as `listen`) where the master serves the pool's status, `/status` and \
         `/ping`.",
    ),
    refused(
        key(
            "status_path",
            Pool,
            STRING,
            Unset,
            "php-fpm's `pm.status_path`: a request for this script gets the pool's status, \
             answered by the workers; needs `status_listen`.",
        ),
        BUILTIN_PATHS,
    ),
    refused(
        key(
            "ping_path",
            Pool,
            STRING,
            Unset,
            "php-fpm's `ping.path`: a request for this script gets `ping_response`.",
        ),
        BUILTIN_PATHS,
    ),
    refused(
        key(
            "ping_response",
            Pool,
            STRING,
            Value("\"pong\""),
            "php-fpm's `ping.response`.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "access_log",
            Pool,
            Path,
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
    ),
    refused(
        key(
            "access_format",
            Pool,
            STRING,
            Value("'%R - %u %t \"%m %r\" %s'"),
            "php-fpm's `access.format` (its %-tokens), or `\"json\"`.",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "access_suppress_path",
            Pool,
            Strings,
            Value("[]"),
            "php-fpm's `access.suppress_path`: request URIs not logged (a health check).",
        ),
        &[NO_REQUESTS],
    ),
    refused(
        key(
            "protocol",
            Pool,
            Choice(Protocol::NAMES),
            Value("\"fastcgi\""),
            "What the workers speak on `listen`; `\"http\"` (HTTP/1.1, no web server in front) \
             for Python pools only.",
        ),
        &[NO_SOCKET],
    ),
    // gunicorn's `keepalive` default.
    http(
        "keepalive_timeout",
        Duration,
        Value("\"2s\""),
        "How long a kept connection may idle between requests (gunicorn's `keepalive`).",
    ),
    http(
        "forwarded_allow_ips",
        Strings,
        Value("[\"127.0.0.1\", \"::1\"]"),
        "Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or \
         `\"*\"`.",
    ),
    http(
        "max_request_body",
        Size,
        Unset,
        "A larger request body is refused with 413; none: no bound.",
    ),
    // uvicorn's `--ws-max-size` default.
    refused(
        http(
            "ws_max_size",
            Size,
            Value("\"16MiB\""),
            "The largest WebSocket message taken (uvicorn's `--ws-max-size`); a larger one \
             closes the WebSocket with 1009.",
        ),
        &[(
            Runtimes::WSGI,
            "only for interface = \"asgi\" (WebSockets are served to ASGI apps only)",
        )],
    ),
    // nginx's `send_timeout` default.
    http(
        "send_timeout",
        Duration,
        Value("\"1m\""),
        "A response write that makes no progress this long ends the connection (nginx's \
         `send_timeout`); more than 0s.",
    ),
    http(
        "certfile",
        Path,
        Unset,
        "The listener speaks TLS (HTTPS) with this PEM certificate, then its chain \
         (gunicorn's `certfile`); read by the master at load and on reload.",
    ),
    http(
        "keyfile",
        Path,
        Unset,
        "certfile's PEM private key (gunicorn's `keyfile`); may be root's alone, 0600: the \
         master reads it; unset: the key in certfile.",
    ),
    http(
        "ca_certs",
        Path,
        Unset,
        "PEM certificates of the authorities a client certificate must chain to \
         (gunicorn's `ca_certs`).",
    ),
    http(
        "cert_reqs",
        Choice(CertReqs::NAMES),
        Value("\"none\""),
        "Client certificates (gunicorn's `cert_reqs`, Python's `CERT_NONE`, \
         `CERT_OPTIONAL`, `CERT_REQUIRED`): not asked for, checked when sent, or required.",
    ),
    http(
        "ciphers",
        Strings,
        Unset,
        "The TLS cipher suites offered, by IANA name (`\"TLS13_AES_128_GCM_SHA256\"`); \
         unset: rustls's defaults. A name rustls lacks is refused.",
    ),
    http(
        "ssl_version",
        STRING,
        Value("\"TLSv1.2\""),
        "The lowest TLS version taken: `\"TLSv1.2\"` or `\"TLSv1.3\"` (rustls speaks \
         no older one).",
    ),
    key(
        "pm",
        Pool,
        Table,
        Required,
        "The process manager's table, `[pm]`.",
    ),
    key(
        "env",
        Pool,
        Map,
        Unset,
        "`[env]`: variables set in the workers' environment, string values only.",
    ),
    key(
        "php",
        Pool,
        Table,
        Note("one of `[php]`, `[python]`, `[command]`"),
        "A PHP pool's table, `[php]`.",
    ),
    key(
        "python",
        Pool,
        Table,
        Note("one of `[php]`, `[python]`, `[command]`"),
        "A Python pool's table, `[python]`.",
    ),
    key(
        "command",
        Pool,
        Table,
        Note("one of `[php]`, `[python]`, `[command]`"),
        "A FastCGI program's table, `[command]`.",
    ),
    key(
        "program",
        Pool,
        Table,
        Note("one of `[php]`, `[python]`, `[command]`, `[program]`"),
        "A background pool's table, `[program]`: copies of a long-running command, no socket.",
    ),
    // [pm]
    key(
        "mode",
        Pm,
        Choice(PmMode::NAMES),
        Required,
        "php-fpm's `pm`: a fixed count, a count between spares, or workers started per \
         connection.",
    ),
    key(
        "max_children",
        Pm,
        Int,
        Required,
        "The most workers at once (the count of a static pool); `\"auto\"` (dynamic and \
         ondemand): as many as fit in the memory the pool may use, from its workers' measured \
         PSS (docs/memory.md).",
    ),
    refused(
        key(
            "start_servers",
            Pm,
            Int,
            Note("`min_spare_servers + (max_spare_servers - min_spare_servers) / 2`"),
            "`mode = \"dynamic\"` only: the workers started first.",
        ),
        &[ALWAYS_RUNNING],
    ),
    refused(
        key(
            "min_spare_servers",
            Pm,
            Int,
            Note("required with `mode = \"dynamic\"`"),
            "`mode = \"dynamic\"` only: fewer idle workers than this start more.",
        ),
        &[ALWAYS_RUNNING],
    ),
    refused(
        key(
            "max_spare_servers",
            Pm,
            Int,
            Note("required with `mode = \"dynamic\"`"),
            "`mode = \"dynamic\"` only: more idle workers than this are retired.",
        ),
        &[ALWAYS_RUNNING],
    ),
    at_least(
        refused(
            key(
                "max_spawn_rate",
                Pm,
                Int,
                Value("32"),
                "dynamic: the cap of the doubling batch of workers started at once.",
            ),
            &[ALWAYS_RUNNING],
        ),
        1,
    ),
    refused(
        key(
            "process_idle_timeout",
            Pm,
            Duration,
            Value("\"10s\""),
            "ondemand: a worker idle this long is retired.",
        ),
        &[ALWAYS_RUNNING],
    ),
    refused(
        key(
            "max_requests",
            Pm,
            Int,
            Value("0"),
            "A worker exits after this many requests; 0: never.",
        ),
        &[NO_COUNT],
    ),
    refused(
        key(
            "max_requests_jitter",
            Pm,
            Int,
            Value("0"),
            "Each worker draws its limit in `max_requests ..= max_requests + jitter`.",
        ),
        &[NO_COUNT],
    ),
    key(
        "max_memory",
        Pm,
        Size,
        Unset,
        "A worker whose resident memory passes this is retired; none: no limit.",
    ),
    // [pm] sizing by memory (docs/memory.md)
    at_least(
        key(
            "auto_min_children",
            Pm,
            Int,
            Value("1"),
            "`max_children = \"auto\"` only: the fewest workers it allows, whatever the memory \
             says.",
        ),
        1,
    ),
    // The scoreboard of a zygote pool has twice this many slots; past 128 a pool is better
    // split or given a number.
    at_least(
        key(
            "auto_max_children",
            Pm,
            Int,
            Value("128"),
            "`max_children = \"auto\"` only: the most workers it allows, at most 4096 (the \
             master keeps a scoreboard slot for each, existing or not).",
        ),
        1,
    ),
    key(
        "memory_reserve",
        Pm,
        Size,
        Note("a tenth of the limit, at least 32 MiB and at most 1 GiB"),
        "Memory under the limit (cgroup or MemAvailable) left to all but the pool's workers: \
         `\"auto\"` sizes within the rest, and a fixed `max_children` that does not fit in \
         it is warned about.",
    ),
    key(
        "max_pool_memory",
        Pm,
        Size,
        Unset,
        "When the pool's processes together (PSS) pass this, its largest idle worker is \
         retired, and `\"auto\"` sizes within it; none: no limit.",
    ),
    // [php]
    key(
        "runtime",
        PHP,
        Choice(PhpProgram::NAMES),
        Note(
            "`\"cgi\"` when `binary` is set, else `\"embed\"` where drover-php can run PHP, \
             else `\"cgi\"`",
        ),
        "Which program runs the scripts: drover-php (linking libphp) or php-cgi.",
    ),
    refused(
        key(
            "binary",
            PHP,
            Path,
            Note("`\"php-cgi\"`, looked up on PATH"),
            "php-cgi's path or name (searched on PATH); it must exist.",
        ),
        &[(
            Runtimes::EMBED,
            "only for runtime = \"cgi\" (php-cgi): drover-php links PHP itself; remove binary, \
             or set runtime = \"cgi\"",
        )],
    ),
    key(
        "ini_file",
        PHP,
        Path,
        Unset,
        "The php.ini PHP loads; none: PHP's own search.",
    ),
    key(
        "limit_extensions",
        PHP,
        Strings,
        Value("[\".php\"]"),
        "php-fpm's `security.limit_extensions`: the suffixes of the scripts PHP runs; `[]`: \
         any file. Another list needs drover-php.",
    ),
    refused(
        key(
            "worker",
            PHP,
            Path,
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
            PHP,
            Choice(WorkerBoot::NAMES),
            Value("\"worker\""),
            "Where the worker script boots: in each worker, or once in the zygote, whose \
             workers are forked from the booted app (no socket may be open after the boot).",
        ),
        &[(
            Runtimes::CGI,
            "worker mode needs drover-php (runtime = \"embed\")",
        )],
    ),
    key(
        "ini",
        PHP,
        Map,
        Unset,
        "`[php.ini]`, php-fpm's `php_value`: settings a script may change.",
    ),
    key(
        "admin_ini",
        PHP,
        Map,
        Unset,
        "`[php.admin_ini]`, php-fpm's `php_admin_value`: settings a script cannot change \
         (drover-php only).",
    ),
    // [python]
    key(
        "app",
        Python,
        STRING,
        Required,
        "`\"package.module:callable\"` (callable default `application`), or a factory called \
         with literal arguments, as gunicorn takes it.",
    ),
    key(
        "python_path",
        Python,
        Strings,
        Value("[]"),
        "Folders put in front of `sys.path`.",
    ),
    key(
        "virtualenv",
        Python,
        Path,
        Unset,
        "A virtualenv whose packages the app imports.",
    ),
    key(
        "preload",
        Python,
        Bool,
        Value("true"),
        "Load the app once in the zygote before forking (false: in each worker).",
    ),
    key(
        "mount",
        Python,
        STRING,
        Value("\"\""),
        "The SCRIPT_NAME prefix the app is mounted at (`\"/app\"`); `\"\"`: the root.",
    ),
    key(
        "warmup",
        Python,
        Strings,
        Value("[]"),
        "Request paths the zygote sends through a preloaded WSGI app before it forks.",
    ),
    key(
        "hooks",
        Python,
        STRING,
        Unset,
        "gunicorn's server hooks, from a module or a .py file (a gunicorn.conf.py).",
    ),
    key(
        "interface",
        Python,
        Choice(Interface::NAMES),
        Value("\"wsgi\""),
        "A WSGI callable, one request at a time per thread, or an ASGI 3.0 app on an event \
         loop.",
    ),
    between(
        key(
            "threads",
            Python,
            Int,
            Value("1"),
            "WSGI over FastCGI: the threads of each worker that serve requests (1 to 64), as \
             gunicorn's gthread.",
        ),
        1,
        MAX_THREADS,
    ),
    // [command]
    key(
        "argv",
        Command,
        Strings,
        Required,
        "The FastCGI program and its arguments; it accepts on fd 0, one process per worker.",
    ),
    // [program]: a background pool (config/program.rs, docs/programs.md)
    key(
        "command",
        Section::Program,
        Strings,
        Required,
        "The long-running program and its arguments (`[\"php\", \"artisan\", \"queue:work\"]`); \
         `pm.max_children` copies run, stdin /dev/null, output in the error log.",
    ),
    key(
        "stop_signal",
        Section::Program,
        Choice(&STOP_SIGNALS),
        Value("\"TERM\""),
        "The signal that asks a copy to stop (supervisord's `stopsignal`), on a reload, a \
         recycle, a scale-down and drover's stop.",
    ),
    key(
        "stop_timeout",
        Section::Program,
        Duration,
        Note("`process_control_timeout`"),
        "How long a copy asked to stop may take before SIGKILL (supervisord's `stopwaitsecs`).",
    ),
    key(
        "max_lifetime",
        Section::Program,
        Duration,
        Unset,
        "A copy is stopped gracefully and replaced after running this long.",
    ),
    key(
        "max_lifetime_jitter",
        Section::Program,
        Duration,
        Value("\"0s\""),
        "Up to this much is added to each copy's `max_lifetime`, so copies started together \
         are not restarted together.",
    ),
];
