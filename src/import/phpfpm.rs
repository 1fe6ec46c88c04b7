//! `drover import php-fpm`: php-fpm's configuration (php-fpm.conf and pool `.conf` files)
//! to `drover.toml` and `pools.d/NAME.toml`.
//!
//! Two halves: [`read`] reads the files and follows `include=` (the only I/O), giving the
//! directives in the order php-fpm meets them; [`map`] turns them into drover's files and
//! a report of every directive not carried over as written, with its file:line and why.
//! [`map`] is pure, so every rule is unit-tested on text.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::Note;
use super::doc::{Doc, Value};
use super::ini::{self, Item};

/// php-fpm stops following `include` this many files deep (`fpm_conf.c`).
const MAX_INCLUDE_DEPTH: usize = 5;

/// Where a directive was read: the file as the user named it (or as a glob matched it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    pub line: usize,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// What the files say, in php-fpm's reading order (an included file's lines where its
/// `include` was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Section {
        place: Place,
        name: String,
    },
    Entry {
        place: Place,
        key: String,
        value: String,
        /// As written, for the report.
        written: String,
    },
    /// An `include=` and how many files its glob matched (they follow it).
    Include {
        place: Place,
        pattern: String,
        matched: usize,
    },
    /// A line php-fpm could not parse, or a file that could not be read.
    Error {
        place: Place,
        message: String,
    },
}

/// Reads `files` and what they include. A relative `include` resolves against `prefix`
/// (php-fpm's `-p`) when given, else against the including file's folder.
pub fn read(files: &[PathBuf], prefix: Option<&Path>) -> Result<Vec<Read>, String> {
    let mut out = Vec::new();
    for file in files {
        let text = crate::config::read_text(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let mut stack = vec![std::path::absolute(file).unwrap_or_else(|_| file.clone())];
        read_text(file, &text, prefix, &mut stack, &mut out);
    }
    Ok(out)
}

fn read_text(
    file: &Path,
    text: &str,
    prefix: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    out: &mut Vec<Read>,
) {
    let shown = file.display().to_string();
    let place = |line| Place {
        file: shown.clone(),
        line,
    };
    for item in ini::parse(text) {
        match item {
            Item::Section { name, line } => out.push(Read::Section {
                place: place(line),
                name,
            }),
            Item::Error { message, line } => out.push(Read::Error {
                place: place(line),
                message,
            }),
            Item::Entry {
                key, value, line, ..
            } if key == "include" => {
                let base = prefix.map_or_else(
                    || file.parent().unwrap_or(Path::new(".")).to_path_buf(),
                    Path::to_path_buf,
                );
                let pattern = base.join(&value);
                let mut matched: Vec<PathBuf> = glob::glob(&pattern.to_string_lossy())
                    .map(|paths| paths.filter_map(Result::ok).collect())
                    .unwrap_or_default();
                matched.sort();
                out.push(Read::Include {
                    place: place(line),
                    pattern: value,
                    matched: matched.len(),
                });
                for path in matched {
                    let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
                    let refused = if stack.contains(&absolute) {
                        Some("includes itself (an include loop); not followed".to_owned())
                    } else if stack.len() >= MAX_INCLUDE_DEPTH {
                        Some(format!(
                            "includes {} past php-fpm's depth of {MAX_INCLUDE_DEPTH} files; \
                             not followed",
                            path.display()
                        ))
                    } else {
                        None
                    };
                    if let Some(message) = refused {
                        out.push(Read::Error {
                            place: place(line),
                            message,
                        });
                        continue;
                    }
                    match crate::config::read_text(&path) {
                        Ok(text) => {
                            stack.push(absolute);
                            read_text(&path, &text, prefix, stack, out);
                            stack.pop();
                        }
                        Err(e) => out.push(Read::Error {
                            place: place(line),
                            message: format!("cannot read {}: {e}", path.display()),
                        }),
                    }
                }
            }
            Item::Entry {
                key,
                value,
                written,
                line,
            } => out.push(Read::Entry {
                place: place(line),
                key,
                value,
                written,
            }),
        }
    }
}

/// What the importer found beside the files, which php-fpm would have used.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The `php.ini` in the folder of the global `php-fpm.conf` (Debian's
    /// `/etc/php/8.2/fpm/php.ini`): php-fpm loads the php.ini of its own configuration
    /// folder, drover-php another one unless the pool names it.
    pub php_ini: Option<PathBuf>,
}

/// The files to write and what the operator must read.
#[derive(Debug, Clone, Default)]
pub struct Import {
    pub global: Doc,
    /// (pool name, its file), in the order the pools first appear.
    pub pools: Vec<(String, Doc)>,
    pub report: Vec<Note>,
}

#[derive(Debug, Clone)]
struct Seen {
    place: Place,
    key: String,
    value: String,
    written: String,
}

/// Maps what [`read`] gave to drover's files. Pure.
pub fn map(items: &[Read], context: &Context) -> Import {
    let mut report = Vec::new();
    let mut global: Vec<Seen> = Vec::new();
    let mut pools: Vec<(String, Place, Vec<Seen>)> = Vec::new();
    // Entries before any section are global, as php-fpm reads them.
    let mut current: Option<usize> = None;
    for item in items {
        match item {
            Read::Section { place, name } if name == "global" => {
                let _ = place;
                current = None;
            }
            Read::Section { place, name } => {
                if let Some(why) = bad_pool_name(name) {
                    report.push(Note::new(place, &format!("[{name}]"), &why));
                }
                current = Some(match pools.iter().position(|(n, _, _)| n == name) {
                    Some(index) => index,
                    None => {
                        pools.push((name.clone(), place.clone(), Vec::new()));
                        pools.len() - 1
                    }
                });
            }
            Read::Entry {
                place,
                key,
                value,
                written,
            } => {
                let list = match current {
                    None => &mut global,
                    Some(index) => &mut pools[index].2,
                };
                let repeatable = key.ends_with("[]");
                if !repeatable && let Some(at) = list.iter().position(|s| &s.key == key) {
                    let old = list.remove(at);
                    report.push(Note::new(
                        &old.place,
                        &format!("{} = {}", old.key, old.written),
                        &format!("overridden by {place}, as php-fpm reads it"),
                    ));
                }
                list.push(Seen {
                    place: place.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    written: written.clone(),
                });
            }
            Read::Include {
                place,
                pattern,
                matched: 0,
            } => report.push(Note::new(
                place,
                &format!("include = {pattern}"),
                "matched no file (php-fpm warns and goes on)",
            )),
            Read::Include { .. } => {}
            Read::Error { place, message } => {
                report.push(Note::new(place, "(line)", &format!("skipped: {message}")));
            }
        }
    }
    let mut import = Import {
        global: global_doc(&global, &mut report),
        pools: Vec::new(),
        report,
    };
    for (name, place, seen) in &pools {
        if bad_pool_name(name).is_some() {
            continue;
        }
        let doc = pool_doc(name, place, seen, context, &mut import.report);
        import.pools.push((name.clone(), doc));
    }
    import
}

/// A pool is named after its file, so its name must make one.
fn bad_pool_name(name: &str) -> Option<String> {
    let good = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.@".contains(c));
    (!good).then(|| {
        "refused: a drover pool is named after its file pools.d/NAME.toml, so its name \
         must be letters, digits, _ - . @ and not start with a dot; rename the pool"
            .to_owned()
    })
}

/// Collects the notes and values of one target file while mapping its directives.
struct Mapper<'r> {
    doc: Doc,
    report: &'r mut Vec<Note>,
}

impl Mapper<'_> {
    fn set(&mut self, table: &str, key: &str, value: Value, from: &Seen) {
        let origin = format!("{} {}", from.place, from.key);
        self.doc.set(table, key, value, &origin);
    }

    fn note(&mut self, from: &Seen, why: &str) {
        self.report.push(Note::new(
            &from.place,
            &format!("{} = {}", from.key, from.written),
            why,
        ));
    }

    fn int(&mut self, from: &Seen) -> Option<i64> {
        let parsed = parse_int(&from.value);
        if parsed.is_none() {
            self.note(
                from,
                "refused: not an integer (php-fpm would refuse it too)",
            );
        }
        parsed
    }

    fn time(&mut self, from: &Seen) -> Option<String> {
        let parsed = parse_time(&from.value);
        if parsed.is_none() {
            self.note(
                from,
                "refused: not a time (digits with s, m, h or d; php-fpm would refuse it too)",
            );
        }
        parsed
    }

    fn bool(&mut self, from: &Seen) -> Option<bool> {
        match from.value.as_str() {
            "1" => Some(true),
            "" | "0" => Some(false),
            _ => {
                self.note(from, "refused: not yes or no (php-fpm would refuse it too)");
                None
            }
        }
    }
}

fn global_doc(seen: &[Seen], report: &mut Vec<Note>) -> Doc {
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

/// The listen address as drover reads it, from php-fpm's spelling.
enum Listen {
    Unix,
    Tcp,
}

fn pool_doc(
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
            "pm.status_path" => m.note(
                s,
                "no equivalent: drover does not serve the status through the pool's FastCGI \
                 socket; set status_listen (HTTP) and proxy it in nginx",
            ),
            "pm.status_listen" => {
                m.note(
                    s,
                    "carried over as status_listen, which speaks HTTP where php-fpm's spoke \
                     FastCGI: in nginx, proxy_pass to it instead of fastcgi_pass",
                );
                m.set("", "status_listen", Value::str(value), s);
            }
            "ping.path" => m.note(
                s,
                "no equivalent on the pool's socket: drover answers /ping on status_listen",
            ),
            "ping.response" if value == "pong" => {
                m.note(s, "not needed: drover's /ping always answers pong");
            }
            "ping.response" => m.note(s, "no equivalent: drover's /ping always answers pong"),
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
            "process.dumpable" => m.note(
                s,
                "no equivalent: drover does not set PR_SET_DUMPABLE on workers",
            ),
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
fn listen(value: &str) -> Result<(String, Listen, Option<String>), String> {
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

fn relative_path_note(m: &mut Mapper<'_>, s: &Seen) {
    if !s.value.starts_with('/') {
        m.note(
            s,
            "carried over, but a relative path: php-fpm resolved it against its prefix, drover \
             resolves it against drover.toml's folder; make it absolute",
        );
    }
}

/// php-fpm's integers: an optional `-`, then digits.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// php-fpm's times (digits, then `s`, `m`, `h` or `d`; seconds without) as drover's
/// duration strings.
fn parse_time(s: &str) -> Option<String> {
    let (digits, unit) = match s.char_indices().last()? {
        (i, c @ ('s' | 'm' | 'h' | 'd')) => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()?;
    Some(format!("{n}{unit}"))
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

#[cfg(test)]
mod tests;
