//! One php-fpm pool section to `pools.d/NAME.toml`.

use std::net::SocketAddr;

use super::{Context, Mapper, Place, Seen, parse_time, relative_path_note};
use crate::import::Note;
use crate::import::doc::{Doc, Value};

/// The listen address as drover reads it, from php-fpm's spelling.
pub(super) enum Listen {
    Unix,
    Tcp,
}

pub(super) fn pool_doc(
    name: &str,
    section: &Place,
    seen: &[Seen],
    context: &Context,
    report: &mut Vec<Note>,
) -> Doc {
    let mut m = Mapper {
        doc: Doc::default(),
        report,
    };
    m.doc.header(&format!(
        "The pool {name}, written by `drover import php-fpm` from [{name}] at {section}.\n\
         Each value names the directive it came from. Check with: drover -t -c drover.toml"
    ));
    // `$pool` is php-fpm's name for the pool's name, in any value.
    let seen: Vec<Seen> = seen
        .iter()
        .map(|s| Seen {
            value: s.value.replace("$pool", name),
            ..s.clone()
        })
        .collect();
    let facts = Facts::of(&seen);
    m.doc.ensure("");
    for s in &seen {
        if s.value.contains("${") {
            m.note(
                s,
                "not carried over: php-fpm expands ${...} from its own environment when it \
                 starts; write the value it stands for",
            );
        } else if let Some((kind, inner)) = bracketed(&s.key) {
            map_array(&mut m, s, kind, inner);
        } else {
            directive(&mut m, s, &facts);
        }
    }
    if let Some(first) = seen.iter().find(|s| s.key == "access.suppress_path[]") {
        m.set(
            "",
            "access_suppress_path",
            Value::Strs(
                seen.iter()
                    .filter(|s| s.key == "access.suppress_path[]")
                    .map(|s| s.value.clone())
                    .collect(),
            ),
            first,
        );
    }
    m.doc.ensure("php");
    if let Some(ini) = &context.php_ini {
        let ini = ini.display().to_string();
        m.doc.set(
            "php",
            "ini_file",
            Value::Str(ini),
            "the php.ini beside php-fpm.conf, which php-fpm loads",
        );
    }
    m.doc
}

/// What one directive's mapping may depend on among the pool's other directives.
struct Facts {
    /// How the pool listens, if it says.
    listen: Option<Listen>,
    /// The pool's own socket, when it listens on one (for a status socket beside it).
    unix_listen: Option<String>,
    has_status_listen: bool,
    pm_mode: String,
    terminate: Option<std::time::Duration>,
    has_slowlog: bool,
}

impl Facts {
    fn of(seen: &[Seen]) -> Facts {
        let find = |key: &str| seen.iter().find(|s| s.key == key);
        let listened = find("listen").map(|s| listen(&s.value));
        Facts {
            listen: listened.as_ref().map(|l| match l {
                Ok((_, Listen::Tcp, _)) => Listen::Tcp,
                _ => Listen::Unix,
            }),
            unix_listen: match listened {
                Some(Ok((address, Listen::Unix, _))) => Some(address),
                _ => None,
            },
            has_status_listen: find("pm.status_listen").is_some(),
            pm_mode: find("pm").map(|s| s.value.clone()).unwrap_or_default(),
            terminate: find("request_terminate_timeout")
                .and_then(|s| parse_time(&s.value))
                .and_then(|t| humantime::parse_duration(&t).ok())
                .filter(|d| !d.is_zero()),
            has_slowlog: find("slowlog").is_some_and(|s| !s.value.is_empty()),
        }
    }

    fn tcp(&self) -> bool {
        matches!(self.listen, Some(Listen::Tcp))
    }
}

/// A directive that maps the same whatever else the pool says: where it goes, or why not.
enum Plain {
    /// Copied as a string to `(table, key)`.
    Str(&'static str, &'static str),
    /// A path, copied to `key` (a relative one with a note).
    Path(&'static str),
    /// A php-fpm integer, to `(table, key)`.
    Int(&'static str, &'static str),
    /// A php-fpm boolean, to `key`.
    Bool(&'static str),
    /// A php-fpm time (`10s`, `5m`), to `(table, key)`.
    Time(&'static str, &'static str),
    /// Not carried over, for this reason.
    Note(&'static str),
}

/// The pool directives that map without looking at another; the others are [`directive`]'s
/// own arms.
const PLAIN: &[(&str, Plain)] = &[
    ("listen.owner", Plain::Str("", "listen_owner")),
    ("listen.group", Plain::Str("", "listen_group")),
    (
        "listen.acl_users",
        Plain::Note(
            "no equivalent: drover sets no POSIX ACL on the socket; use listen_owner, \
             listen_group and listen_mode",
        ),
    ),
    (
        "listen.acl_groups",
        Plain::Note(
            "no equivalent: drover sets no POSIX ACL on the socket; use listen_owner, \
             listen_group and listen_mode",
        ),
    ),
    ("listen.setfib", Plain::Note("no equivalent: FreeBSD only")),
    ("user", Plain::Str("", "user")),
    ("group", Plain::Str("", "group")),
    ("chdir", Plain::Str("", "chdir")),
    ("clear_env", Plain::Bool("clear_env")),
    (
        "prefix",
        Plain::Note(
            "not carried over: drover resolves relative paths against drover.toml's \
             folder; the importer wrote paths as they are, so make relative ones absolute",
        ),
    ),
    ("pm.max_children", Plain::Int("pm", "max_children")),
    ("pm.start_servers", Plain::Int("pm", "start_servers")),
    (
        "pm.min_spare_servers",
        Plain::Int("pm", "min_spare_servers"),
    ),
    (
        "pm.max_spare_servers",
        Plain::Int("pm", "max_spare_servers"),
    ),
    ("pm.max_spawn_rate", Plain::Int("pm", "max_spawn_rate")),
    ("pm.max_requests", Plain::Int("pm", "max_requests")),
    (
        "pm.process_idle_timeout",
        Plain::Time("pm", "process_idle_timeout"),
    ),
    ("ping.path", Plain::Str("", "ping_path")),
    ("ping.response", Plain::Str("", "ping_response")),
    ("access.log", Plain::Path("access_log")),
    ("slowlog", Plain::Path("slowlog")),
    (
        "request_slowlog_trace_depth",
        Plain::Int("", "request_slowlog_trace_depth"),
    ),
    (
        "request_terminate_timeout",
        Plain::Time("", "request_terminate_timeout"),
    ),
    (
        "request_terminate_timeout_track_finished",
        Plain::Note(
            "no equivalent: drover's request_terminate_timeout covers the request until \
             its response ends",
        ),
    ),
    (
        "catch_workers_output",
        Plain::Note("not needed: drover always sends the workers' output to its error_log"),
    ),
    (
        "decorate_workers_output",
        Plain::Bool("decorate_workers_output"),
    ),
    ("rlimit_files", Plain::Int("", "rlimit_files")),
    (
        "rlimit_core",
        Plain::Note("no equivalent per pool: set systemd's LimitCORE= in drover.service"),
    ),
    (
        "chroot",
        Plain::Note(
            "no equivalent: drover does not chroot workers; use systemd's RootDirectory= \
             or a container",
        ),
    ),
    (
        "apparmor_hat",
        Plain::Note("no equivalent: drover does not change AppArmor hats"),
    ),
    (
        "process.priority",
        Plain::Note("no equivalent: set systemd's Nice= in drover.service"),
    ),
];

/// Maps one pool directive (not bracketed, no `${...}`) into `m`.
fn directive(m: &mut Mapper<'_>, s: &Seen, facts: &Facts) {
    let value = s.value.as_str();
    let key = s.key.as_str();
    match key {
        "listen" => match listen(value) {
            Ok((address, _, note)) => {
                if let Some(note) = note {
                    m.note(s, &note);
                }
                m.set("", "listen", Value::Str(address), s);
            }
            Err(why) => m.note(s, &why),
        },
        "listen.backlog" => match m.int(s) {
            Some(n) if n > 0 => m.set("", "listen_backlog", Value::Int(n), s),
            Some(_) => m.note(
                s,
                "not carried over: drover's listen_backlog is at least 1; its default, \
                 511, applies",
            ),
            None => {}
        },
        "listen.owner" | "listen.group" | "listen.mode" if facts.tcp() => m.note(
            s,
            "not carried over: the pool listens on TCP, where php-fpm ignores it and \
             drover refuses it",
        ),
        "listen.mode" => {
            let octal = (3..=4).contains(&value.len())
                && u32::from_str_radix(value, 8).is_ok_and(|mode| mode <= 0o777);
            if octal {
                m.set("", "listen_mode", Value::str(value), s);
            } else {
                m.note(s, "refused: not an octal mode like 0660");
            }
        }
        "listen.allowed_clients" if !facts.tcp() => m.note(
            s,
            "not carried over: the pool listens on a unix socket, where php-fpm ignores \
             it and drover refuses it",
        ),
        "listen.allowed_clients" => {
            let clients = value
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            m.set("", "listen_allowed_clients", Value::Strs(clients), s);
        }
        "pm" => match value {
            "static" | "dynamic" | "ondemand" => m.set("pm", "mode", Value::str(value), s),
            _ => m.note(s, "refused: not static, dynamic or ondemand"),
        },
        "pm.start_servers" | "pm.min_spare_servers" | "pm.max_spare_servers"
            if facts.pm_mode != "dynamic" =>
        {
            m.note(
                s,
                &format!(
                    "not carried over: only pm = dynamic uses it; php-fpm ignores it with \
                     pm = {}, drover refuses it",
                    facts.pm_mode
                ),
            );
        }
        "pm.status_path" => status_path(m, s, facts),
        "pm.status_listen" => {
            m.note(
                s,
                "carried over as status_listen, which speaks HTTP where php-fpm's spoke \
                 FastCGI: in nginx, proxy_pass to it instead of fastcgi_pass",
            );
            m.set("", "status_listen", Value::str(value), s);
        }
        "access.format" => match drover_proto::access::parse(value) {
            Ok(_) => m.set("", "access_format", Value::str(value), s),
            Err(why) => m.note(s, &format!("refused: {why}")),
        },
        "request_slowlog_timeout" => slowlog_timeout(m, s, facts),
        "security.limit_extensions" => {
            let list = value.split_whitespace().map(str::to_owned).collect();
            m.set("php", "limit_extensions", Value::Strs(list), s);
        }
        // `no` is drover's default too: only `yes` is written.
        "process.dumpable" => {
            if m.bool(s) == Some(true) {
                m.set("", "process_dumpable", Value::Bool(true), s);
            }
        }
        _ => match PLAIN.iter().find(|(name, _)| *name == key) {
            Some((_, plain)) => map_plain(m, s, plain),
            None if is_global_directive(key) => m.note(
                s,
                "refused: a global directive inside a pool section (php-fpm would refuse it too)",
            ),
            None => m.note(
                s,
                "unknown directive: not a php-fpm pool directive (php-fpm would refuse to \
                 start)",
            ),
        },
    }
}

fn map_plain(m: &mut Mapper<'_>, s: &Seen, plain: &Plain) {
    match *plain {
        Plain::Str(table, key) => m.set(table, key, Value::str(&s.value), s),
        Plain::Path(key) => {
            relative_path_note(m, s);
            m.set("", key, Value::str(&s.value), s);
        }
        Plain::Int(table, key) => {
            if let Some(n) = m.int(s) {
                m.set(table, key, Value::Int(n), s);
            }
        }
        Plain::Bool(key) => {
            if let Some(b) = m.bool(s) {
                m.set("", key, Value::Bool(b), s);
            }
        }
        Plain::Time(table, key) => {
            if let Some(t) = m.time(s) {
                m.set(table, key, Value::Str(t), s);
            }
        }
        Plain::Note(why) => m.note(s, why),
    }
}

/// `pm.status_path`: drover's workers fetch the status from the master's status_listen,
/// one beside the pool's socket when php-fpm's pool has none.
fn status_path(m: &mut Mapper<'_>, s: &Seen, facts: &Facts) {
    let value = s.value.as_str();
    if facts.has_status_listen {
        m.set("", "status_path", Value::str(value), s);
    } else if let Some(address) = &facts.unix_listen {
        let status = format!(
            "{}-status.sock",
            address.strip_suffix(".sock").unwrap_or(address)
        );
        m.note(
            s,
            &format!(
                "carried over, with status_listen = \"{status}\" added: the \
                 workers fetch the status from the master there"
            ),
        );
        m.set("", "status_listen", Value::str(&status), s);
        m.set("", "status_path", Value::str(value), s);
    } else {
        m.note(
            s,
            "not carried over: the workers fetch the status from the master's \
             status_listen; set status_listen, then status_path",
        );
    }
}

/// `request_slowlog_timeout`: refused without a slowlog, or when not shorter than
/// `request_terminate_timeout`.
fn slowlog_timeout(m: &mut Mapper<'_>, s: &Seen, facts: &Facts) {
    let Some(t) = m.time(s) else { return };
    let slow = humantime::parse_duration(&t).unwrap_or_default();
    if !slow.is_zero() && !facts.has_slowlog {
        m.note(
            s,
            "refused: it needs slowlog, the file entries go to (php-fpm refuses \
             it too)",
        );
    } else if facts
        .terminate
        .is_some_and(|terminate| !slow.is_zero() && slow >= terminate)
    {
        m.note(
            s,
            "refused: drover needs it shorter than request_terminate_timeout, or \
             the request is killed before its entry is written",
        );
    } else {
        m.set("", "request_slowlog_timeout", Value::Str(t), s);
    }
}

/// `php_value[k]`, `env[NAME]`, `access.suppress_path[]`: (the part before `[`, inside).
fn bracketed(key: &str) -> Option<(&str, &str)> {
    let (kind, rest) = key.split_once('[')?;
    let inner = rest.strip_suffix(']')?;
    Some((kind, inner))
}

fn map_array(m: &mut Mapper<'_>, s: &Seen, kind: &str, inner: &str) {
    let value = s.value.as_str();
    match kind {
        "access.suppress_path" if inner.is_empty() => {
            // Collected after the loop into one array.
        }
        "php_value" | "php_flag" | "php_admin_value" | "php_admin_flag" if !inner.is_empty() => {
            let table = if kind.starts_with("php_admin") {
                "php.admin_ini"
            } else {
                "php.ini"
            };
            // INI's off/no/false arrive as "": a flag is written 0, as PHP reads it.
            let value = match (kind.ends_with("flag"), value) {
                (true, "") => "0",
                _ => value,
            };
            m.set(table, inner, Value::str(value), s);
        }
        "env" if !inner.is_empty() => {
            let mut chars = inner.chars();
            let name_ok = chars
                .next()
                .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
            if !name_ok {
                m.note(
                    s,
                    "refused: not an environment variable name drover accepts \
                     ([A-Za-z_][A-Za-z0-9_]*)",
                );
            } else if let Some(from) = value.strip_prefix('$') {
                m.note(
                    s,
                    &format!(
                        "not carried over: php-fpm copies ${from} from its own environment; \
                         write its value in [env] (or set clear_env = false)"
                    ),
                );
            } else {
                m.set("env", inner, Value::str(value), s);
            }
        }
        _ => m.note(
            s,
            "unknown directive: not a php-fpm pool directive (php-fpm would refuse to start)",
        ),
    }
}

/// php-fpm's `listen` as drover writes it: (address, kind, a note when it changed).
pub(super) fn listen(value: &str) -> Result<(String, Listen, Option<String>), String> {
    if value.starts_with('/') {
        return Ok((value.to_owned(), Listen::Unix, None));
    }
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Ok((value.to_owned(), Listen::Tcp, None));
    }
    if value.parse::<SocketAddr>().is_ok() {
        return Ok((value.to_owned(), Listen::Tcp, None));
    }
    if let Some((host, port)) = value.rsplit_once(':')
        && port.parse::<u16>().is_ok()
    {
        return match host {
            "localhost" => Ok((
                format!("127.0.0.1:{port}"),
                Listen::Tcp,
                Some(format!(
                    "carried over as 127.0.0.1:{port}: drover takes addresses, not host names"
                )),
            )),
            "*" | "" => Ok((
                port.to_owned(),
                Listen::Tcp,
                Some(format!(
                    "carried over as \"{port}\": every address, as php-fpm binds it"
                )),
            )),
            _ => Err(format!(
                "refused: drover takes an IP address, not the host name {host}; write the \
                 address it stands for"
            )),
        };
    }
    Ok((
        value.to_owned(),
        Listen::Unix,
        Some(
            "a relative socket path: php-fpm resolved it against its prefix, drover resolves \
             it against drover.toml's folder; make it absolute"
                .to_owned(),
        ),
    ))
}

fn is_global_directive(key: &str) -> bool {
    [
        "pid",
        "error_log",
        "log_level",
        "emergency_restart_threshold",
        "emergency_restart_interval",
        "process_control_timeout",
        "process.max",
        "daemonize",
        "systemd_interval",
        "syslog.ident",
        "syslog.facility",
        "log_limit",
        "log_buffering",
        "events.mechanism",
    ]
    .contains(&key)
}
