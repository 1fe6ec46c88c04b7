//! gunicorn's settings to drover's files (pure): each setting carried over with its origin
//! in a comment, or reported; gunicorn's defaults written where drover's differ, so the
//! pool behaves as gunicorn did.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{Cli, Context, DROVER_HOOKS, Import, OTHER_HOOKS, Origin, Setting};
use crate::import::Note;
use crate::import::doc::{Doc, Value};

mod listen;
mod setting;

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
                    drover_config::POOL_NAME_RULE
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
