//! php-fpm's `[global]` section to `drover.toml`.

use super::{Mapper, Seen, parse_int, parse_time, relative_path_note};
use crate::import::Note;
use crate::import::doc::{Doc, Value};

pub(super) fn global_doc(seen: &[Seen], report: &mut Vec<Note>) -> Doc {
    let mut m = Mapper {
        doc: Doc::default(),
        report,
    };
    m.doc.header(
        "drover.toml, written by `drover import php-fpm` from php-fpm's [global] section.\n\
         Each value names the directive it came from. Pools: pools.d/*.toml (the default include).",
    );
    let threshold = seen
        .iter()
        .find(|s| s.key == "emergency_restart_threshold")
        .and_then(|s| parse_int(&s.value))
        .unwrap_or(0);
    let interval = seen
        .iter()
        .find(|s| s.key == "emergency_restart_interval")
        .and_then(|s| parse_time(&s.value))
        .filter(|t| !t.starts_with('0'));
    for s in seen {
        let value = s.value.as_str();
        match s.key.as_str() {
            "pid" => {
                relative_path_note(&mut m, s);
                m.set("", "pid_file", Value::str(value), s);
            }
            "error_log" if value == "syslog" => m.note(
                s,
                "not carried over: drover logs to stderr (the journal, under systemd) or to \
                 a file, not to syslog",
            ),
            "error_log" if value == "/proc/self/fd/2" => {
                m.set("", "error_log", Value::str("stderr"), s);
            }
            "error_log" => {
                relative_path_note(&mut m, s);
                m.set("", "error_log", Value::str(value), s);
            }
            "log_level" => match value {
                "alert" | "error" | "warning" | "notice" | "debug" => {
                    m.set("", "log_level", Value::str(value), s);
                }
                _ => m.note(
                    s,
                    "refused: not one of alert, error, warning, notice, debug",
                ),
            },
            "emergency_restart_threshold" if threshold > 0 && interval.is_none() => m.note(
                s,
                "not carried over: without emergency_restart_interval php-fpm never acts on it, \
                 and drover refuses a threshold without an interval",
            ),
            "emergency_restart_threshold" => {
                if let Some(n) = m.int(s) {
                    m.set("", "emergency_restart_threshold", Value::Int(n), s);
                }
            }
            "emergency_restart_interval" => {
                if let Some(t) = m.time(s) {
                    m.set("", "emergency_restart_interval", Value::Str(t), s);
                }
            }
            "process_control_timeout" => {
                if let Some(t) = m.time(s) {
                    m.set("", "process_control_timeout", Value::Str(t), s);
                }
            }
            "daemonize" => m.note(
                s,
                "not needed: drover runs in the foreground (under systemd, Type=notify)",
            ),
            "systemd_interval" => m.note(
                s,
                "not needed: drover sends systemd its STATUS= when the activity changes, at \
                 most once a second",
            ),
            "rlimit_files" | "rlimit_core" => m.note(
                s,
                "no equivalent: set systemd's LimitNOFILE= or LimitCORE= in drover.service",
            ),
            "process.priority" => m.note(s, "no equivalent: set systemd's Nice= in drover.service"),
            "process.max" => m.note(
                s,
                "no equivalent: drover has no cap across pools; each pool's pm.max_children \
                 caps it",
            ),
            "syslog.ident" | "syslog.facility" => m.note(
                s,
                "no equivalent: drover does not log to syslog (stderr goes to the journal)",
            ),
            "log_limit" => m.note(
                s,
                "no equivalent: drover cuts worker output lines at 8 KiB, not configurable",
            ),
            "log_buffering" => m.note(s, "no equivalent: drover writes each log line at once"),
            "events.mechanism" => m.note(s, "not needed: drover uses epoll on Linux"),
            other if is_pool_directive(other) => m.note(
                s,
                "refused: a pool directive outside a pool section (php-fpm would refuse it too)",
            ),
            _ => m.note(
                s,
                "unknown directive: not a php-fpm global directive (php-fpm would refuse to \
                 start)",
            ),
        }
    }
    m.doc
}

fn is_pool_directive(key: &str) -> bool {
    key.starts_with("listen")
        || key.starts_with("pm")
        || key.starts_with("php_")
        || key.starts_with("env[")
        || key.starts_with("access.")
        || key.starts_with("request_")
        || [
            "user",
            "group",
            "chdir",
            "chroot",
            "clear_env",
            "slowlog",
            "prefix",
            "catch_workers_output",
            "decorate_workers_output",
            "security.limit_extensions",
            "ping.path",
            "ping.response",
            "apparmor_hat",
            "process.dumpable",
        ]
        .contains(&key)
}
