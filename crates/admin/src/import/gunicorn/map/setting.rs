//! One gunicorn setting to drover's keys: the settings whose mapping is a note or a plain
//! integer are tables ([`NOTES`], [`POOL_INTS`]); [`Mapper::setting`] dispatches the others,
//! the larger ones to a method each.

use serde_json::Value as Json;

use super::{
    DROVER_HOOKS, Mapper, OTHER_HOOKS, int, is_gunicorn_setting, origin, strings, valid_env_name,
};
use crate::import::doc::Value;
use crate::import::gunicorn::{Origin, Setting};

/// Integers carried over to a pool key: (gunicorn's name, table, key, the least value).
const POOL_INTS: &[(&str, &str, &str, i64)] = &[
    ("workers", "pm", "max_children", 1),
    ("max_requests", "pm", "max_requests", 0),
    ("max_requests_jitter", "pm", "max_requests_jitter", 0),
    ("backlog", "", "listen_backlog", 1),
];

/// The settings drover has no key for, and why: (gunicorn's names, the note).
const NOTES: &[(&[&str], &str)] = &[
    (
        &["access_log_format"],
        "no equivalent: drover's access_format takes php-fpm's tokens (%R %t %m %r \
         %s ...), not gunicorn's; see docs/logs.md, Access log",
    ),
    (
        &["worker_connections"],
        "no equivalent: a WSGI worker runs one request per thread (threads); an ASGI \
         worker's event loop takes every connection it is given",
    ),
    (
        &["capture_output", "initgroups"],
        "not needed: drover always does it",
    ),
    (
        &["daemon"],
        "not needed: drover runs in the foreground (use systemd)",
    ),
    (
        &["reload", "reload_engine", "reload_extra_files"],
        "no equivalent: drover does not watch files; reload with `drover ctl reload` \
         or systemctl reload",
    ),
    (
        &[
            "keepalive",
            "limit_request_line",
            "limit_request_fields",
            "limit_request_field_size",
        ],
        "not carried over: behind nginx, HTTP is nginx's side (keepalive_timeout, \
         large_client_header_buffers); a pool with protocol = \"http\" has \
         keepalive_timeout",
    ),
    (
        &[
            "forwarded_allow_ips",
            "proxy_allow_ips",
            "proxy_protocol",
            "secure_scheme_headers",
            "forwarder_headers",
        ],
        "not needed: nginx passes the client's address (REMOTE_ADDR) and HTTPS as \
         FastCGI params, not as headers to trust (a pool with protocol = \"http\" \
         has forwarded_allow_ips)",
    ),
    (
        &[
            "certfile",
            "keyfile",
            "ca_certs",
            "ssl_version",
            "cert_reqs",
            "ciphers",
            "do_handshake_on_connect",
            "suppress_ragged_eofs",
        ],
        "not carried over: behind nginx, TLS ends at nginx (a pool with protocol = \
         \"http\" has certfile, keyfile, ca_certs, cert_reqs, ciphers and \
         ssl_version)",
    ),
    (
        &["worker_tmp_dir"],
        "not needed: drover watches workers through shared memory, not heartbeat files",
    ),
    (
        &["statsd_host", "statsd_prefix", "dogstatsd_tags"],
        "no equivalent: drover has no statsd; scrape its /metrics (status_listen) \
         with Prometheus",
    ),
];

impl Mapper {
    /// One setting; `bind`, `umask` and hooks are mapped beside (they shape several keys).
    pub(super) fn setting(&mut self, s: &Setting) {
        if s.repr.is_some() && !s.callable {
            self.note(
                s,
                "not carried over: not a value the importer can read (not JSON)",
            );
            return;
        }
        let name = s.name.as_str();
        if let Some(&(_, table, key, min)) = POOL_INTS.iter().find(|(n, ..)| *n == name) {
            return self.pool_int(s, table, key, min);
        }
        if let Some((_, why)) = NOTES.iter().find(|(names, _)| names.contains(&name)) {
            return self.note(s, why);
        }
        match name {
            "bind" | "umask" | "wsgi_app" | "proc_name" | "config" => {}
            "user" | "group" => self.user(s),
            "timeout" => self.timeout(s),
            "graceful_timeout" => self.graceful_timeout(s),
            "preload_app" => match s.value {
                Json::Bool(b) => self
                    .pool
                    .set("python", "preload", Value::Bool(b), &origin(s)),
                _ => self.note(s, "refused: not True or False"),
            },
            "raw_env" => self.raw_env(s),
            "chdir" => match s.value.as_str() {
                Some(_) => {
                    let dir = self.folder.display().to_string();
                    self.pool.set("", "chdir", Value::Str(dir), &origin(s));
                }
                None => self.note(s, "refused: not a folder"),
            },
            "pythonpath" => self.python_path(s),
            "pidfile" => match s.value.as_str() {
                Some(path) => {
                    let path = self.path(path);
                    self.global
                        .set("", "pid_file", Value::Str(path), &origin(s));
                }
                None => self.note(s, "refused: not a path"),
            },
            "errorlog" => self.error_log(s),
            "accesslog" => self.access_log(s),
            "loglevel" => self.log_level(s),
            "worker_class" => self.worker_class(s),
            "threads" => self.threads(s),
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

    /// `user`, `group`: a name (drover takes no number).
    fn user(&mut self, s: &Setting) {
        match &s.value {
            Json::String(name) if name.parse::<u32>().is_err() => {
                self.pool.set("", &s.name, Value::str(name), &origin(s));
            }
            _ => self.note(
                s,
                "not carried over: drover takes a user or group name, not a number; \
                     write the name",
            ),
        }
    }

    /// `timeout`: request_terminate_timeout (0 turns both off).
    fn timeout(&mut self, s: &Setting) {
        match int(&s.value) {
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
        }
    }

    /// `graceful_timeout`: process_control_timeout.
    fn graceful_timeout(&mut self, s: &Setting) {
        match int(&s.value) {
            Some(n) if n >= 0 => self.global.set(
                "",
                "process_control_timeout",
                Value::Str(format!("{n}s")),
                &origin(s),
            ),
            _ => self.note(s, "refused: not a number of seconds"),
        }
    }

    /// `raw_env`: `NAME=value` pairs to `[env]`.
    fn raw_env(&mut self, s: &Setting) {
        for pair in strings(&s.value) {
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

    /// `pythonpath`: folders, absolute against the folder gunicorn ran in.
    fn python_path(&mut self, s: &Setting) {
        let paths: Vec<String> = strings(&s.value)
            .iter()
            .flat_map(|p| p.split(','))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| self.path(p))
            .collect();
        self.pool
            .set("python", "python_path", Value::Strs(paths), &origin(s));
    }

    /// `errorlog`: drover's error_log (stderr is drover's default).
    fn error_log(&mut self, s: &Setting) {
        match s.value.as_str() {
            Some("-") => self.note(s, "not needed: drover logs to stderr by default"),
            Some(path) => {
                let path = self.path(path);
                self.global
                    .set("", "error_log", Value::Str(path), &origin(s));
            }
            None => self.note(s, "refused: not a path"),
        }
    }

    /// `accesslog`: the pool's access_log, when it is a file.
    fn access_log(&mut self, s: &Setting) {
        match s.value.as_str() {
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
        }
    }

    /// `loglevel`, in drover's levels.
    fn log_level(&mut self, s: &Setting) {
        let level = match s.value.as_str().map(str::to_ascii_lowercase).as_deref() {
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

    /// `worker_class`: how a worker runs its requests.
    fn worker_class(&mut self, s: &Setting) {
        match s.value.as_str() {
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
        }
    }

    /// `threads`: `[python] threads`, up to 64.
    fn threads(&mut self, s: &Setting) {
        match int(&s.value) {
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
        }
    }
}
