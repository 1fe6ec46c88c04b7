//! gunicorn's settings to drover's files (pure): each setting carried over with its origin
//! in a comment, or reported; gunicorn's defaults written where drover's differ, so the
//! pool behaves as gunicorn did.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{Cli, Context, DROVER_HOOKS, Import, OTHER_HOOKS, Origin, Setting};
use crate::import::Note;
use crate::import::doc::{Doc, Value};

mod listen;

#[cfg(test)]
pub(super) use listen::listen_of;
use listen::{listen, nginx, socket_access};

/// gunicorn's defaults that drover's differ from, written so that nothing changes silently.
const DEFAULT_TIMEOUT: i64 = 30;
const DEFAULT_GRACEFUL_TIMEOUT: i64 = 30;
pub(super) const DEFAULT_BIND: &str = "127.0.0.1:8000";

/// Merges the file's settings and the command line's (which win, as in gunicorn) and maps
/// them. An error only when there is no app to serve.
pub fn map(file: &[Setting], cli: &Cli, context: &Context) -> Result<Import, String> {
    // gunicorn's order: the file, then GUNICORN_CMD_ARGS, then the command line.
    let mut settings: Vec<Setting> = file.to_vec();
    for setting in context.env_args.iter().chain(&cli.settings) {
        settings.retain(|s| s.name != setting.name);
        settings.push(setting.clone());
    }
    let find = |name: &str| settings.iter().find(|s| s.name == name);
    let app = match (&cli.app, find("wsgi_app").and_then(|s| s.value.as_str())) {
        (Some(app), _) => app.clone(),
        (None, Some(app)) => app.to_owned(),
        (None, None) => {
            return Err(
                "no app: name it last, as gunicorn takes it (module:callable), or set \
                        wsgi_app in the config file"
                    .into(),
            );
        }
    };
    let chdir = find("chdir").and_then(|s| s.value.as_str()).map(Path::new);
    let mut m = Mapper {
        global: Doc::default(),
        pool: Doc::default(),
        report: Vec::new(),
        folder: chdir.map_or_else(|| context.cwd.clone(), |dir| context.cwd.join(dir)),
    };
    let name = pool_name(find("proc_name"), &app, &mut m);
    m.global.header(
        "drover.toml, written by `drover import gunicorn`. Each value names the gunicorn \
         setting it came from.",
    );
    m.pool.header(&format!(
        "The pool {name}, written by `drover import gunicorn`. Each value names the gunicorn\n\
         setting it came from. Check with: drover -t -c drover.toml"
    ));
    m.pool.ensure("");
    let bind = find("bind").cloned();
    let listen = listen(bind.as_ref(), &mut m);
    if let Some((address, unix)) = &listen {
        let origin = bind
            .as_ref()
            .map_or("gunicorn's default bind".to_owned(), origin);
        m.pool.set("", "listen", Value::str(address), &origin);
        if *unix {
            socket_access(find("umask"), find("user"), find("group"), &mut m);
        }
    }
    m.pool.set(
        "pm",
        "mode",
        Value::str("static"),
        "gunicorn's fixed worker count",
    );
    m.pool.set(
        "python",
        "app",
        Value::str(&app),
        &app_origin(cli, find("wsgi_app")),
    );
    for s in &settings {
        m.setting(s);
    }
    m.defaults(&settings, context);
    m.hooks(&settings, context);
    let nginx = nginx(
        bind.as_ref(),
        listen.as_ref().map(|(a, u)| (a.as_str(), *u)),
    );
    Ok(Import {
        global: m.global,
        pool_name: name,
        pool: m.pool,
        nginx,
        report: m.report,
    })
}

struct Mapper {
    global: Doc,
    pool: Doc,
    report: Vec<Note>,
    /// The folder gunicorn ran in (its chdir, else where it started): relative paths were
    /// relative to it, and drover would read them against drover.toml's folder.
    folder: PathBuf,
}

/// Where a setting came from, for the comment after its value.
fn origin(s: &Setting) -> String {
    match &s.origin {
        Origin::File { file, line } => format!("{file}:{line} {}", s.name),
        Origin::Flag(flag) => flag.clone(),
    }
}

fn app_origin(cli: &Cli, wsgi_app: Option<&Setting>) -> String {
    match (&cli.app, wsgi_app) {
        (Some(app), _) => format!("the app on gunicorn's command line, {app}"),
        (None, Some(s)) => origin(s),
        (None, None) => String::new(),
    }
}

/// A setting's value as written: a string as is, anything else as JSON, or the file's repr.
fn shown(s: &Setting) -> String {
    if let Some(repr) = &s.repr {
        return repr.clone();
    }
    if s.callable {
        return "a function".to_owned();
    }
    match &s.value {
        Json::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn int(value: &Json) -> Option<i64> {
    match value {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn strings(value: &Json) -> Vec<String> {
    match value {
        Json::Array(items) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        Json::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

impl Mapper {
    /// `path` as gunicorn's process saw it, absolute.
    fn path(&self, path: &str) -> String {
        self.folder.join(path).display().to_string()
    }

    fn note(&mut self, s: &Setting, why: &str) {
        let (place, setting) = match &s.origin {
            Origin::File { file, line } => (
                format!("{file}:{line}"),
                format!("{} = {}", s.name, shown(s)),
            ),
            Origin::Flag(flag) => (flag.clone(), s.name.clone()),
        };
        self.report.push(Note {
            place,
            setting,
            why: why.to_owned(),
        });
    }

    fn pool_int(&mut self, s: &Setting, table: &str, key: &str, min: i64) {
        match int(&s.value) {
            Some(n) if n >= min => self.pool.set(table, key, Value::Int(n), &origin(s)),
            _ => self.note(s, &format!("refused: not an integer of at least {min}")),
        }
    }

    /// One setting; `bind`, `umask` and hooks are mapped beside (they shape several keys).
    fn setting(&mut self, s: &Setting) {
        if s.repr.is_some() && !s.callable {
            self.note(
                s,
                "not carried over: not a value the importer can read (not JSON)",
            );
            return;
        }
        let value = &s.value;
        match s.name.as_str() {
            "bind" | "umask" | "wsgi_app" | "proc_name" | "config" => {}
            "user" | "group" => match value {
                Json::String(name) if name.parse::<u32>().is_err() => {
                    self.pool.set("", &s.name, Value::str(name), &origin(s));
                }
                _ => self.note(
                    s,
                    "not carried over: drover takes a user or group name, not a number; \
                         write the name",
                ),
            },
            "workers" => self.pool_int(s, "pm", "max_children", 1),
            "max_requests" => self.pool_int(s, "pm", "max_requests", 0),
            "max_requests_jitter" => self.pool_int(s, "pm", "max_requests_jitter", 0),
            "timeout" => match int(value) {
                Some(0) => self.note(
                    s,
                    "not carried over: 0 turns gunicorn's timeout off, as leaving \
                     request_terminate_timeout out does",
                ),
                Some(n) if n > 0 => self.pool.set(
                    "",
                    "request_terminate_timeout",
                    Value::Str(format!("{n}s")),
                    &origin(s),
                ),
                _ => self.note(s, "refused: not a number of seconds"),
            },
            "graceful_timeout" => match int(value) {
                Some(n) if n >= 0 => self.global.set(
                    "",
                    "process_control_timeout",
                    Value::Str(format!("{n}s")),
                    &origin(s),
                ),
                _ => self.note(s, "refused: not a number of seconds"),
            },
            "preload_app" => match value {
                Json::Bool(b) => self
                    .pool
                    .set("python", "preload", Value::Bool(*b), &origin(s)),
                _ => self.note(s, "refused: not True or False"),
            },
            "chdir" => match value.as_str() {
                Some(_) => {
                    let dir = self.folder.display().to_string();
                    self.pool.set("", "chdir", Value::Str(dir), &origin(s));
                }
                None => self.note(s, "refused: not a folder"),
            },
            "pythonpath" => {
                let paths: Vec<String> = strings(value)
                    .iter()
                    .flat_map(|p| p.split(','))
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| self.path(p))
                    .collect();
                self.pool
                    .set("python", "python_path", Value::Strs(paths), &origin(s));
            }
            "raw_env" => {
                for pair in strings(value) {
                    match pair.split_once('=') {
                        Some((name, val)) if valid_env_name(name) => {
                            self.pool.set("env", name, Value::str(val), &origin(s));
                        }
                        _ => self.note(
                            s,
                            &format!(
                                "{pair:?} not carried over: not NAME=value with a name drover \
                                 accepts ([A-Za-z_][A-Za-z0-9_]*)"
                            ),
                        ),
                    }
                }
            }
            "backlog" => self.pool_int(s, "", "listen_backlog", 1),
            "pidfile" => match value.as_str() {
                Some(path) => {
                    let path = self.path(path);
                    self.global
                        .set("", "pid_file", Value::Str(path), &origin(s));
                }
                None => self.note(s, "refused: not a path"),
            },
            "errorlog" => match value.as_str() {
                Some("-") => self.note(s, "not needed: drover logs to stderr by default"),
                Some(path) => {
                    let path = self.path(path);
                    self.global
                        .set("", "error_log", Value::Str(path), &origin(s));
                }
                None => self.note(s, "refused: not a path"),
            },
            "loglevel" => {
                let level = match value.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("debug") => Some("debug"),
                    Some("info") => Some("info"),
                    Some("warning") => Some("warn"),
                    Some("error" | "critical") => Some("error"),
                    _ => None,
                };
                match level {
                    Some(level) => self
                        .global
                        .set("", "log_level", Value::str(level), &origin(s)),
                    None => self.note(s, "refused: not debug, info, warning, error or critical"),
                }
            }
            "accesslog" => match value.as_str() {
                Some("-") | None => self.note(
                    s,
                    "not carried over: drover's access_log is a file, not stdout; set \
                     access_log to a path (or log in nginx)",
                ),
                Some(path) => {
                    let path = self.path(path);
                    self.pool
                        .set("", "access_log", Value::Str(path), &origin(s));
                }
            },
            "access_log_format" => self.note(
                s,
                "no equivalent: drover's access_format takes php-fpm's tokens (%R %t %m %r \
                 %s ...), not gunicorn's; see docs/logs.md, Access log",
            ),
            "worker_class" => match value.as_str() {
                Some("sync") => self.note(s, "not needed: drover's workers are synchronous"),
                // gunicorn's threaded worker: drover's `threads`, from the threads setting.
                Some("gthread") => self.note(
                    s,
                    "not needed: drover's [python] threads (carried over from threads) gives \
                     each worker gthread's threads",
                ),
                // An ASGI app: drover runs it on an event loop per worker.
                Some(
                    "uvicorn.workers.UvicornWorker"
                    | "uvicorn_worker.UvicornWorker"
                    | "uvicorn.workers.UvicornH11Worker"
                    | "asgi",
                ) => self.pool.set(
                    "python",
                    "interface",
                    Value::Str("asgi".to_owned()),
                    &origin(s),
                ),
                _ => self.note(
                    s,
                    "no equivalent: drover's workers are synchronous, one request at a time \
                     (gunicorn's sync), or an event loop for an ASGI app \
                     (interface = \"asgi\", gunicorn's UvicornWorker)",
                ),
            },
            "threads" => match int(value) {
                Some(1) => self.note(s, "not needed: drover's default (threads = 1)"),
                Some(n @ 2..=64) => {
                    self.pool
                        .set("python", "threads", Value::Int(n), &origin(s));
                }
                Some(n) if n > 64 => self.note(
                    s,
                    "refused: drover runs at most 64 threads per worker; raise workers instead",
                ),
                _ => self.note(s, "refused: not a positive integer"),
            },
            "worker_connections" => self.note(
                s,
                "no equivalent: a WSGI worker runs one request per thread (threads); an ASGI \
                 worker's event loop takes every connection it is given",
            ),
            "capture_output" | "initgroups" => {
                self.note(s, "not needed: drover always does it");
            }
            "daemon" => self.note(s, "not needed: drover runs in the foreground (use systemd)"),
            "reload" | "reload_engine" | "reload_extra_files" => self.note(
                s,
                "no equivalent: drover does not watch files; reload with `drover ctl reload` \
                 or systemctl reload",
            ),
            "keepalive"
            | "limit_request_line"
            | "limit_request_fields"
            | "limit_request_field_size" => self.note(
                s,
                "not carried over: behind nginx, HTTP is nginx's side (keepalive_timeout, \
                 large_client_header_buffers); a pool with protocol = \"http\" has \
                 keepalive_timeout",
            ),
            "forwarded_allow_ips"
            | "proxy_allow_ips"
            | "proxy_protocol"
            | "secure_scheme_headers"
            | "forwarder_headers" => self.note(
                s,
                "not needed: nginx passes the client's address (REMOTE_ADDR) and HTTPS as \
                 FastCGI params, not as headers to trust (a pool with protocol = \"http\" \
                 has forwarded_allow_ips)",
            ),
            "certfile"
            | "keyfile"
            | "ca_certs"
            | "ssl_version"
            | "cert_reqs"
            | "ciphers"
            | "do_handshake_on_connect"
            | "suppress_ragged_eofs" => {
                self.note(
                    s,
                    "not carried over: behind nginx, TLS ends at nginx (a pool with protocol = \
                     \"http\" has certfile, keyfile, ca_certs, cert_reqs, ciphers and \
                     ssl_version)",
                );
            }
            "worker_tmp_dir" => self.note(
                s,
                "not needed: drover watches workers through shared memory, not heartbeat files",
            ),
            "statsd_host" | "statsd_prefix" | "dogstatsd_tags" => self.note(
                s,
                "no equivalent: drover has no statsd; scrape its /metrics (status_listen) \
                 with Prometheus",
            ),
            name if DROVER_HOOKS.contains(&name) || OTHER_HOOKS.contains(&name) => {}
            name if is_gunicorn_setting(name) => {
                self.note(s, "no equivalent in drover");
            }
            _ if matches!(s.origin, Origin::Flag(_)) => self.note(
                s,
                "unknown flag: not one the importer knows; check it by hand",
            ),
            _ => self.note(s, "not a gunicorn setting (gunicorn ignores it too)"),
        }
    }

    /// gunicorn's defaults where drover's differ, and what gunicorn took from the machine.
    fn defaults(&mut self, settings: &[Setting], context: &Context) {
        let has = |name: &str| settings.iter().any(|s| s.name == name);
        let asgi =
            matches!(self.pool.get("python", "interface"), Some(Value::Str(i)) if i == "asgi");
        if asgi
            && self.pool.get("python", "threads").is_some()
            && let Some(threads) = settings.iter().find(|s| s.name == "threads")
        {
            // gunicorn's ASGI workers ignore threads; drover refuses it with an ASGI app.
            let threads = threads.clone();
            self.pool.remove("python", "threads");
            self.note(
                &threads,
                "not carried over: an ASGI worker's event loop serves many requests at once \
                 (gunicorn's UvicornWorker ignores threads too)",
            );
        }
        if !has("workers") {
            let (n, origin) = match context.web_concurrency.as_deref().map(str::parse::<i64>) {
                Some(Ok(n)) if n >= 1 => (n, "WEB_CONCURRENCY, gunicorn's default workers"),
                _ => (1, "gunicorn's default workers"),
            };
            self.pool.set("pm", "max_children", Value::Int(n), origin);
        }
        if !has("timeout") {
            self.pool.set(
                "",
                "request_terminate_timeout",
                Value::Str(format!("{DEFAULT_TIMEOUT}s")),
                "gunicorn's default timeout",
            );
        }
        if !has("graceful_timeout") {
            self.global.set(
                "",
                "process_control_timeout",
                Value::Str(format!("{DEFAULT_GRACEFUL_TIMEOUT}s")),
                "gunicorn's default graceful_timeout",
            );
        }
        if !has("preload_app") {
            self.pool.set(
                "python",
                "preload",
                Value::Bool(false),
                "gunicorn's default (no --preload); true shares the app copy-on-write",
            );
        }
        if !has("chdir") {
            self.pool.set(
                "",
                "chdir",
                Value::Str(context.cwd.display().to_string()),
                "the folder gunicorn was started from (the import's)",
            );
        }
        // gunicorn's workers inherit its environment (a unit's Environment=, what a
        // post_fork hook reads); drover's default clear_env = true would start the app
        // without it, and a migrated app would break without a word.
        self.pool.set(
            "",
            "clear_env",
            Value::Bool(false),
            "gunicorn's workers inherit its environment; these inherit drover's, so move \
             the Environment= of gunicorn's unit to drover's (or into [env])",
        );
        if !has("user") && context.root {
            self.pool.set(
                "",
                "user",
                Value::str("root"),
                "gunicorn started as root, without user, runs its workers as root",
            );
        }
        let max = self.pool.get("pm", "max_requests");
        if matches!(max, None | Some(Value::Int(0)))
            && let Some(jitter) = settings.iter().find(|s| s.name == "max_requests_jitter")
        {
            // Set above; gunicorn ignores it without max_requests, drover refuses it.
            let jitter = jitter.clone();
            self.pool.remove("pm", "max_requests_jitter");
            self.note(
                &jitter,
                "not carried over: without max_requests gunicorn ignores it, and drover \
                 refuses it",
            );
        }
    }

    /// The hook functions: drover calls them from the file itself (`[python] hooks`).
    fn hooks(&mut self, settings: &[Setting], context: &Context) {
        let hooks: Vec<&Setting> = settings
            .iter()
            .filter(|s| s.callable && DROVER_HOOKS.contains(&s.name.as_str()))
            .collect();
        for s in settings
            .iter()
            .filter(|s| s.callable && OTHER_HOOKS.contains(&s.name.as_str()))
        {
            self.note(
                s,
                "no equivalent: drover has no such moment, and does not call it",
            );
        }
        let Some(file) = &context.config else {
            return;
        };
        if hooks.is_empty() {
            return;
        }
        // drover calls them from the file itself, run unchanged as gunicorn runs it.
        let defined: Vec<String> = hooks
            .iter()
            .map(|s| match &s.origin {
                Origin::File { line, .. } => format!("{} (line {line})", s.name),
                Origin::Flag(_) => s.name.clone(),
            })
            .collect();
        let origin = format!("the hooks it defines: {}", defined.join(", "));
        let file = file.display().to_string();
        self.pool.set("python", "hooks", Value::Str(file), &origin);
    }
}

/// The pool's name: gunicorn's proc_name when it makes a file name, else the app's
/// top-level module.
fn pool_name(proc_name: Option<&Setting>, app: &str, m: &mut Mapper) -> String {
    // The rule on every written pool file's name (super::name): proc_name is a process
    // title to gunicorn, so one that breaks it is reported and not used, not refused.
    let usable = |name: &str| super::super::name::refusal(name).is_none();
    if let Some(s) = proc_name {
        match s.value.as_str() {
            Some(name) if usable(name) => return name.to_owned(),
            _ => m.note(
                s,
                &format!(
                    "not used as the pool's name: a pool is named after its file \
                     pools.d/NAME.toml, so {} without a leading dot",
                    crate::config::POOL_NAME_RULE
                ),
            ),
        }
    }
    let module = app.split([':', '.']).next().unwrap_or("");
    if usable(module) {
        module.to_owned()
    } else {
        "app".to_owned()
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// gunicorn's settings (gunicorn 23), for telling its own from the file's other names.
fn is_gunicorn_setting(name: &str) -> bool {
    [
        "config",
        "wsgi_app",
        "bind",
        "backlog",
        "workers",
        "worker_class",
        "threads",
        "worker_connections",
        "max_requests",
        "max_requests_jitter",
        "timeout",
        "graceful_timeout",
        "keepalive",
        "limit_request_line",
        "limit_request_fields",
        "limit_request_field_size",
        "reload",
        "reload_engine",
        "reload_extra_files",
        "spew",
        "check_config",
        "print_config",
        "preload_app",
        "sendfile",
        "reuse_port",
        "chdir",
        "daemon",
        "raw_env",
        "pidfile",
        "worker_tmp_dir",
        "user",
        "group",
        "umask",
        "initgroups",
        "tmp_upload_dir",
        "secure_scheme_headers",
        "forwarded_allow_ips",
        "accesslog",
        "disable_redirect_access_to_syslog",
        "access_log_format",
        "errorlog",
        "loglevel",
        "capture_output",
        "logger_class",
        "logconfig",
        "logconfig_dict",
        "logconfig_json",
        "syslog_addr",
        "syslog",
        "syslog_prefix",
        "syslog_facility",
        "enable_stdio_inheritance",
        "statsd_host",
        "dogstatsd_tags",
        "statsd_prefix",
        "proc_name",
        "default_proc_name",
        "pythonpath",
        "paste",
        "raw_paste_global_conf",
        "proxy_protocol",
        "proxy_allow_ips",
        "keyfile",
        "certfile",
        "ssl_version",
        "cert_reqs",
        "ca_certs",
        "suppress_ragged_eofs",
        "do_handshake_on_connect",
        "ciphers",
        "strip_header_spaces",
        "permit_unconventional_http_method",
        "permit_unconventional_http_version",
        "casefold_http_method",
        "forwarder_headers",
        "header_map",
        "permit_obsolete_folding",
        "tolerate_dangerous_framing",
        "control_socket",
        "root_path",
    ]
    .contains(&name)
}
