//! `drover.toml`'s keys: the master's own settings (`Global`) and `[control]`, each key
//! declared with the field it fills (`keys!`, `keys/declare.rs`).

use std::path::PathBuf;
use std::time::Duration;

use super::ListenAddr;
use crate::keys::Default::{Unset, Value};
use crate::keys::{Choice, Section, Type, choice, key, keys};
use crate::show::Shown;

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
        )] => read(given), show(show_error_log);
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
        )] => read(given), show(show_health_listen);
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

// What `drover -t` shows for the keys whose declaration names a hook (`show(FUNCTION)`):
// each answers for its entry's rows, as `(struct, key)`.

fn show_error_log<'a>(global: &'a Global, _key: &str) -> Option<Shown<'a>> {
    Some(match &global.error_log {
        LogTarget::Stderr => Shown::of("stderr"),
        LogTarget::File(path) => Shown::of(path),
    })
}

fn show_health_listen<'a>(global: &'a Global, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::optional(
        global
            .health_listen
            .as_ref()
            .map(ToString::to_string)
            .as_ref(),
    ))
}
