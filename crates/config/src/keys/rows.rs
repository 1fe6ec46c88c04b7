//! What the keys' declarations (`model/`, `keys!`) write their rows with: [`key`] and the
//! functions that add a range, the runtimes that refuse it or the HTTP pools' mark to it,
//! and the refusals several keys share.

use super::{Key, Runtimes, Section};

/// A key every runtime takes, read on FastCGI and HTTP pools alike. Its section is the
/// struct's that declares it (`keys!` sets it).
pub(crate) const fn key(
    name: &'static str,
    ty: super::Type,
    default: super::Default,
    doc: &'static str,
) -> Key {
    Key {
        name,
        section: Section::Global,
        ty,
        default,
        http_only: false,
        refused: &[],
        range: (0, i64::MAX),
        doc,
    }
}

/// An integer `key` of `low` or more.
pub(crate) const fn at_least(key: Key, low: i64) -> Key {
    Key {
        range: (low, i64::MAX),
        ..key
    }
}

/// An integer `key` from `low` to `high`.
pub(crate) const fn between(key: Key, low: i64, high: i64) -> Key {
    Key {
        range: (low, high),
        ..key
    }
}

/// A key of an HTTP pool's listener.
pub(crate) const fn http(
    name: &'static str,
    ty: super::Type,
    default: super::Default,
    doc: &'static str,
) -> Key {
    Key {
        http_only: true,
        ..key(name, ty, default, doc)
    }
}

/// `key` with the runtimes that refuse it.
pub(crate) const fn refused(key: Key, refused: &'static [(Runtimes, &'static str)]) -> Key {
    Key { refused, ..key }
}

pub(crate) const BUILTIN_PATHS: &[(Runtimes, &str)] = &[
    (
        Runtimes::CGI.or(Runtimes::COMMAND).or(Runtimes::ASGI),
        "drover's own workers answer it, which this pool's do not run (php-cgi, a [command] \
         program or an ASGI app); use status_listen's /status and /ping",
    ),
    NO_REQUESTS,
];

// What a `[program]` pool (a background pool: config/program.rs) refuses, and why.
pub(crate) const NO_SOCKET: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool has no socket: its copies are long-running commands, not servers; \
     leave it out",
);
pub(crate) const NO_REQUESTS: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool serves no requests, so there is nothing for it to time, log or \
     answer; leave it out",
);
pub(crate) const ALWAYS_RUNNING: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "a [program] pool keeps max_children copies running (pm.mode = \"static\"); leave it out",
);
pub(crate) const NO_COUNT: (Runtimes, &str) = (
    Runtimes::PROGRAM,
    "drover cannot count a program's jobs; to restart copies regularly use [program] \
     max_lifetime",
);

/// The most threads a WSGI worker may run (`[python] threads`): gunicorn's gthread is used
/// with a handful; past this the GIL, not the waits, decides, and a slot shows one request.
pub(crate) const MAX_THREADS: i64 = 64;

/// The signals `[program] stop_signal` may name (supervisord's `stopsignal` set).
pub const STOP_SIGNALS: [&str; 7] = ["TERM", "INT", "QUIT", "HUP", "USR1", "USR2", "KILL"];
