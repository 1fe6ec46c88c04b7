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
    let find = |key: &str| seen.iter().find(|s| s.key == key);
    let listen_kind = find("listen").map(|s| match listen(&s.value) {
        Ok((_, kind, _)) => kind,
        Err(_) => Listen::Unix,
    });
    let pm_mode = find("pm").map(|s| s.value.clone()).unwrap_or_default();
    let terminate = find("request_terminate_timeout")
        .and_then(|s| parse_time(&s.value))
        .and_then(|t| humantime::parse_duration(&t).ok())
        .filter(|d| !d.is_zero());
    let has_slowlog = find("slowlog").is_some_and(|s| !s.value.is_empty());
    m.doc.ensure("");
    for s in &seen {
        let value = s.value.as_str();
        if value.contains("${") {
            m.note(
                s,
                "not carried over: php-fpm expands ${...} from its own environment when it \
                 starts; write the value it stands for",
            );
            continue;
        }
        let key = s.key.as_str();
        if let Some((kind, inner)) = bracketed(key) {
            map_array(&mut m, s, kind, inner);
            continue;
        }
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
            "listen.owner" | "listen.group" | "listen.mode"
                if matches!(listen_kind, Some(Listen::Tcp)) =>
            {
                m.note(
                    s,
                    "not carried over: the pool listens on TCP, where php-fpm ignores it and \
                     drover refuses it",
                );
            }
            "listen.owner" => m.set("", "listen_owner", Value::str(value), s),
            "listen.group" => m.set("", "listen_group", Value::str(value), s),
            "listen.mode" => {
                let octal = (3..=4).contains(&value.len())
                    && u32::from_str_radix(value, 8).is_ok_and(|mode| mode <= 0o777);
                if octal {
                    m.set("", "listen_mode", Value::str(value), s);
                } else {
                    m.note(s, "refused: not an octal mode like 0660");
                }
            }
            "listen.allowed_clients" if !matches!(listen_kind, Some(Listen::Tcp)) => m.note(
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
            "listen.acl_users" | "listen.acl_groups" => m.note(
                s,
                "no equivalent: drover sets no POSIX ACL on the socket; use listen_owner, \
                 listen_group and listen_mode",
            ),
            "listen.setfib" => m.note(s, "no equivalent: FreeBSD only"),
            "user" | "group" => m.set("", key, Value::str(value), s),
            "chdir" => m.set("", "chdir", Value::str(value), s),
            "clear_env" => {
                if let Some(b) = m.bool(s) {
                    m.set("", "clear_env", Value::Bool(b), s);
                }
            }
            "prefix" => m.note(
                s,
                "not carried over: drover resolves relative paths against drover.toml's \
                 folder; the importer wrote paths as they are, so make relative ones absolute",
            ),
            "pm" => match value {
                "static" | "dynamic" | "ondemand" => m.set("pm", "mode", Value::str(value), s),
                _ => m.note(s, "refused: not static, dynamic or ondemand"),
            },
            "pm.start_servers" | "pm.min_spare_servers" | "pm.max_spare_servers"
                if pm_mode != "dynamic" =>
            {
                m.note(
                    s,
                    &format!(
                        "not carried over: only pm = dynamic uses it; php-fpm ignores it with \
                         pm = {pm_mode}, drover refuses it"
                    ),
                );
            }
            "pm.max_children"
            | "pm.start_servers"
            | "pm.min_spare_servers"
            | "pm.max_spare_servers"
            | "pm.max_spawn_rate"
            | "pm.max_requests" => {
                if let Some(n) = m.int(s) {
                    m.set("pm", &key["pm.".len()..], Value::Int(n), s);
                }
            }
            "pm.process_idle_timeout" => {
                if let Some(t) = m.time(s) {
                    m.set("pm", "process_idle_timeout", Value::Str(t), s);
                }
            }
            "pm.status_path" => {
                // drover's workers fetch the status from the master's status_listen: one
                // beside the pool's socket when php-fpm's pool has none.
                let unix_listen = find("listen")
                    .and_then(|l| listen(&l.value).ok())
                    .filter(|(_, kind, _)| matches!(kind, Listen::Unix))
                    .map(|(address, _, _)| address);
                if find("pm.status_listen").is_some() {
                    m.set("", "status_path", Value::str(value), s);
                } else if let Some(address) = unix_listen {
                    let status = format!(
                        "{}-status.sock",
                        address.strip_suffix(".sock").unwrap_or(&address)
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
            "pm.status_listen" => {
                m.note(
                    s,
                    "carried over as status_listen, which speaks HTTP where php-fpm's spoke \
                     FastCGI: in nginx, proxy_pass to it instead of fastcgi_pass",
                );
                m.set("", "status_listen", Value::str(value), s);
            }
            "ping.path" => m.set("", "ping_path", Value::str(value), s),
            "ping.response" => m.set("", "ping_response", Value::str(value), s),
            "access.log" => {
                relative_path_note(&mut m, s);
                m.set("", "access_log", Value::str(value), s);
            }
            "access.format" => match drover_proto::access::parse(value) {
                Ok(_) => m.set("", "access_format", Value::str(value), s),
                Err(why) => m.note(s, &format!("refused: {why}")),
            },
            "slowlog" => {
                relative_path_note(&mut m, s);
                m.set("", "slowlog", Value::str(value), s);
            }
            "request_slowlog_timeout" => {
                let Some(t) = m.time(s) else { continue };
                let slow = humantime::parse_duration(&t).unwrap_or_default();
                if !slow.is_zero() && !has_slowlog {
                    m.note(
                        s,
                        "refused: it needs slowlog, the file entries go to (php-fpm refuses \
                         it too)",
                    );
                } else if terminate.is_some_and(|terminate| !slow.is_zero() && slow >= terminate) {
                    m.note(
                        s,
                        "refused: drover needs it shorter than request_terminate_timeout, or \
                         the request is killed before its entry is written",
                    );
                } else {
                    m.set("", "request_slowlog_timeout", Value::Str(t), s);
                }
            }
            "request_slowlog_trace_depth" => {
                if let Some(n) = m.int(s) {
                    m.set("", "request_slowlog_trace_depth", Value::Int(n), s);
                }
            }
            "request_terminate_timeout" => {
                if let Some(t) = m.time(s) {
                    m.set("", "request_terminate_timeout", Value::Str(t), s);
                }
            }
            "request_terminate_timeout_track_finished" => m.note(
                s,
                "no equivalent: drover's request_terminate_timeout covers the request until \
                 its response ends",
            ),
            "catch_workers_output" => m.note(
                s,
                "not needed: drover always sends the workers' output to its error_log",
            ),
            "decorate_workers_output" => {
                if let Some(b) = m.bool(s) {
                    m.set("", "decorate_workers_output", Value::Bool(b), s);
                }
            }
            "security.limit_extensions" => {
                let list = value.split_whitespace().map(str::to_owned).collect();
                m.set("php", "limit_extensions", Value::Strs(list), s);
            }
            "rlimit_files" | "rlimit_core" => m.note(
                s,
                "no equivalent per pool: set systemd's LimitNOFILE= or LimitCORE= in \
                 drover.service",
            ),
            "chroot" => m.note(
                s,
                "no equivalent: drover does not chroot workers; use systemd's RootDirectory= \
                 or a container",
            ),
            "apparmor_hat" => m.note(s, "no equivalent: drover does not change AppArmor hats"),
            "process.priority" => m.note(s, "no equivalent: set systemd's Nice= in drover.service"),
            // `no` is drover's default too: only `yes` is written.
            "process.dumpable" => {
                if m.bool(s) == Some(true) {
                    m.set("", "process_dumpable", Value::Bool(true), s);
                }
            }
            other if is_global_directive(other) => m.note(
                s,
                "refused: a global directive inside a pool section (php-fpm would refuse it too)",
            ),
            _ => m.note(
                s,
                "unknown directive: not a php-fpm pool directive (php-fpm would refuse to \
                 start)",
            ),
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
