//! `drover import gunicorn`: a gunicorn command line and its `gunicorn.conf.py` to a Python
//! pool (`pools.d/NAME.toml`), `drover.toml`, and the nginx change from `proxy_pass` to
//! `fastcgi_pass`.
//!
//! The config file is Python, so it is run as gunicorn runs it, by the Python drover
//! embeds: `drover-python --read-gunicorn-config FILE` prints its settings as JSON
//! ([`read_config`], the only I/O besides the shell's). [`parse_args`] reads the flags;
//! [`map`] (pure) merges both as gunicorn does (the command line wins) and maps them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

use super::doc::Doc;
use super::{GunicornArgs, Note};

/// gunicorn's hooks that drover calls, with gunicorn's names and arguments, from the file
/// that `[python] hooks` names: a config file that defines one becomes the pool's hooks.
const DROVER_HOOKS: &[&str] = &[
    "on_starting",
    "pre_fork",
    "when_ready",
    "post_fork",
    "post_worker_init",
    "worker_exit",
    "child_exit",
    "worker_abort",
    "on_exit",
    "pre_request",
    "post_request",
];

/// gunicorn's other hooks: drover has no such moment.
const OTHER_HOOKS: &[&str] = &[
    "on_reload",
    "pre_exec",
    "worker_int",
    "nworkers_changed",
    "ssl_context",
];

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// The config file, at this line.
    File { file: String, line: usize },
    /// The command line: the flag and its value as written.
    Flag(String),
}

/// One gunicorn setting, by gunicorn's name (`workers`, `raw_env`, `post_fork`).
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub name: String,
    pub value: Json,
    /// A function (a hook).
    pub callable: bool,
    /// The file's value, when JSON cannot hold it (shown, never carried over).
    pub repr: Option<String>,
    pub origin: Origin,
}

/// The command line: `-c FILE`, the flags (as settings), and the app.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cli {
    pub config: Option<String>,
    pub settings: Vec<Setting>,
    pub app: Option<String>,
}

/// How a flag takes its value.
#[derive(Clone, Copy, PartialEq)]
enum Takes {
    One,
    /// Repeatable: each adds to a list (`-b`, `-e`).
    Many,
    /// No value: sets the setting to true.
    Switch,
}

/// gunicorn's flags the importer knows: (short, long, setting, how it takes its value).
const FLAGS: &[(Option<char>, &str, &str, Takes)] = &[
    (Some('c'), "config", "config", Takes::One),
    (Some('b'), "bind", "bind", Takes::Many),
    (Some('w'), "workers", "workers", Takes::One),
    (None, "max-requests", "max_requests", Takes::One),
    (
        None,
        "max-requests-jitter",
        "max_requests_jitter",
        Takes::One,
    ),
    (Some('t'), "timeout", "timeout", Takes::One),
    (None, "graceful-timeout", "graceful_timeout", Takes::One),
    (None, "preload", "preload_app", Takes::Switch),
    (None, "chdir", "chdir", Takes::One),
    (None, "pythonpath", "pythonpath", Takes::One),
    (Some('e'), "env", "raw_env", Takes::Many),
    (Some('u'), "user", "user", Takes::One),
    (Some('g'), "group", "group", Takes::One),
    (Some('m'), "umask", "umask", Takes::One),
    (Some('k'), "worker-class", "worker_class", Takes::One),
    (None, "threads", "threads", Takes::One),
    (None, "worker-connections", "worker_connections", Takes::One),
    (None, "backlog", "backlog", Takes::One),
    (None, "keep-alive", "keepalive", Takes::One),
    (Some('n'), "name", "proc_name", Takes::One),
    (Some('p'), "pid", "pidfile", Takes::One),
    (None, "access-logfile", "accesslog", Takes::One),
    (None, "access-logformat", "access_log_format", Takes::One),
    (None, "error-logfile", "errorlog", Takes::One),
    (None, "log-file", "errorlog", Takes::One),
    (None, "log-level", "loglevel", Takes::One),
    (None, "capture-output", "capture_output", Takes::Switch),
    (None, "reload", "reload", Takes::Switch),
    (Some('D'), "daemon", "daemon", Takes::Switch),
    (
        None,
        "forwarded-allow-ips",
        "forwarded_allow_ips",
        Takes::One,
    ),
    (None, "proxy-allow-from", "proxy_allow_ips", Takes::One),
    (None, "proxy-protocol", "proxy_protocol", Takes::Switch),
    (None, "limit-request-line", "limit_request_line", Takes::One),
    (
        None,
        "limit-request-fields",
        "limit_request_fields",
        Takes::One,
    ),
    (
        None,
        "limit-request-field_size",
        "limit_request_field_size",
        Takes::One,
    ),
    (None, "worker-tmp-dir", "worker_tmp_dir", Takes::One),
    (None, "initgroups", "initgroups", Takes::Switch),
    (None, "certfile", "certfile", Takes::One),
    (None, "keyfile", "keyfile", Takes::One),
    (None, "statsd-host", "statsd_host", Takes::One),
    (None, "statsd-prefix", "statsd_prefix", Takes::One),
    (None, "log-config", "logconfig", Takes::One),
    (None, "log-syslog", "syslog", Takes::Switch),
    (None, "reuse-port", "reuse_port", Takes::Switch),
    (None, "no-sendfile", "sendfile", Takes::Switch),
    (None, "check-config", "check_config", Takes::Switch),
    (None, "print-config", "print_config", Takes::Switch),
    (None, "spew", "spew", Takes::Switch),
    (None, "paste", "paste", Takes::One),
];

/// Reads gunicorn's command line as gunicorn's argparse would: `-w 4`, `-w4`, `--workers 4`,
/// `--workers=4`; the last word that is not a flag or a flag's value is the app. A flag the
/// importer does not know is kept (as a switch, or with its `=value`) and reported.
pub fn parse_args(args: &[String]) -> Result<Cli, String> {
    let mut cli = Cli::default();
    let mut words = args.iter().peekable();
    while let Some(word) = words.next() {
        let (flag, inline) = if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => (Flag::Long(name), Some(value.to_owned())),
                None => (Flag::Long(long), None),
            }
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let letter = chars.next().unwrap_or('-');
            let rest = chars.as_str();
            (
                Flag::Short(letter),
                (!rest.is_empty()).then(|| rest.to_owned()),
            )
        } else {
            if let Some(app) = &cli.app {
                return Err(format!(
                    "two apps on the command line, {app} and {word}; gunicorn takes one"
                ));
            }
            cli.app = Some(word.clone());
            continue;
        };
        let known = FLAGS.iter().find(|(short, long, _, _)| match flag {
            Flag::Long(name) => *long == name,
            Flag::Short(letter) => *short == Some(letter),
        });
        let Some(&(_, long, name, takes)) = known else {
            // Unknown: a setting named after the flag, reported by the mapping.
            let name = match flag {
                Flag::Long(name) => name.replace('-', "_"),
                Flag::Short(letter) => format!("-{letter}"),
            };
            cli.settings.push(Setting {
                name,
                value: inline.clone().map_or(Json::Bool(true), Json::String),
                callable: false,
                repr: None,
                origin: Origin::Flag(word.clone()),
            });
            continue;
        };
        let value = match (takes, inline) {
            (Takes::Switch, _) => None,
            (_, Some(value)) => Some(value),
            (_, None) => Some(
                words
                    .next()
                    .ok_or_else(|| format!("{word} needs a value"))?
                    .clone(),
            ),
        };
        let shown = match &value {
            Some(value) if !word.contains('=') && word.starts_with("--") => {
                format!("--{long} {value}")
            }
            Some(value) if !word.contains('=') && word.len() == 2 => format!("{word} {value}"),
            _ => word.clone(),
        };
        if name == "config" {
            cli.config = value;
            continue;
        }
        let value = match (takes, value) {
            (Takes::Switch, _) => Json::Bool(name != "sendfile"),
            (Takes::Many, Some(value)) => {
                let mut list = match cli.settings.iter().position(|s| s.name == name) {
                    Some(at) => match cli.settings.remove(at).value {
                        Json::Array(list) => list,
                        other => vec![other],
                    },
                    None => Vec::new(),
                };
                list.push(Json::String(value));
                Json::Array(list)
            }
            (_, value) => Json::String(value.unwrap_or_default()),
        };
        cli.settings.retain(|s| s.name != name);
        cli.settings.push(Setting {
            name: name.to_owned(),
            value,
            callable: false,
            repr: None,
            origin: Origin::Flag(shown),
        });
    }
    Ok(cli)
}

/// The flags in `GUNICORN_CMD_ARGS` (split at spaces), each origin naming the variable.
fn env_args(value: Option<&str>) -> Result<Vec<Setting>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let words: Vec<String> = value.split_whitespace().map(str::to_owned).collect();
    let cli = parse_args(&words).map_err(|e| format!("GUNICORN_CMD_ARGS: {e}"))?;
    if cli.app.is_some() || cli.config.is_some() {
        return Err(
            "GUNICORN_CMD_ARGS names an app or a config file; gunicorn takes only \
                    settings there"
                .into(),
        );
    }
    Ok(cli
        .settings
        .into_iter()
        .map(|s| Setting {
            origin: match s.origin {
                Origin::Flag(flag) => Origin::Flag(format!("GUNICORN_CMD_ARGS {flag}")),
                other => other,
            },
            ..s
        })
        .collect())
}

enum Flag<'a> {
    Long(&'a str),
    Short(char),
}

/// Runs the config file with `drover-python --read-gunicorn-config` and returns its
/// settings, each with its line.
pub fn read_config(file: &Path) -> Result<Vec<Setting>, String> {
    let program = drover::runtime::python::program();
    let out = Command::new(&program)
        .arg("--read-gunicorn-config")
        .arg(file)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    // What the file printed, and a traceback when it failed.
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!(
            "{} could not run {} ({})",
            program.display(),
            file.display(),
            out.status
        ));
    }
    settings_from_json(
        &file.display().to_string(),
        &String::from_utf8_lossy(&out.stdout),
    )
}

/// The settings in drover-python's JSON, `{"NAME": {"line": N, "value": V}, ...}`.
fn settings_from_json(file: &str, text: &str) -> Result<Vec<Setting>, String> {
    let json: serde_json::Map<String, Json> = serde_json::from_str(text)
        .map_err(|e| format!("drover-python's answer is not the JSON expected: {e}"))?;
    let mut settings: Vec<Setting> = json
        .into_iter()
        .map(|(name, entry)| Setting {
            name,
            value: entry.get("value").cloned().unwrap_or(Json::Null),
            callable: entry.get("callable") == Some(&Json::Bool(true)),
            repr: entry.get("repr").and_then(Json::as_str).map(str::to_owned),
            origin: Origin::File {
                file: file.to_owned(),
                line: entry.get("line").and_then(Json::as_u64).unwrap_or(0) as usize,
            },
        })
        .collect();
    settings.sort_by_key(|s| match s.origin {
        Origin::File { line, .. } => line,
        Origin::Flag(_) => 0,
    });
    Ok(settings)
}

/// What the importer knows of the machine gunicorn ran on, which gunicorn would have used.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The folder gunicorn was started from: its default `chdir`, on `sys.path`.
    pub cwd: PathBuf,
    /// The config file, absolute: the hooks file when it defines hooks.
    pub config: Option<PathBuf>,
    /// gunicorn started as root runs its workers as root unless `user` says otherwise.
    pub root: bool,
    /// `WEB_CONCURRENCY`, gunicorn's default `workers`.
    pub web_concurrency: Option<String>,
    /// The settings of `GUNICORN_CMD_ARGS`, which gunicorn reads between the config file
    /// and the command line.
    pub env_args: Vec<Setting>,
}

/// The files to write, the nginx change, and what the operator must read.
#[derive(Debug, Clone, Default)]
pub struct Import {
    pub global: Doc,
    pub pool_name: String,
    pub pool: Doc,
    pub nginx: String,
    pub report: Vec<Note>,
}

mod map;
pub use map::map;

/// Runs `drover import gunicorn`.
pub fn run(args: GunicornArgs) -> u8 {
    match import(&args) {
        Ok((import, files)) => {
            super::finish(&args.output, &files, &import.report, Some(&import.nginx))
        }
        Err(e) => {
            eprintln!("drover import gunicorn: {e}");
            1
        }
    }
}

type Files = Vec<(PathBuf, String)>;

fn import(args: &GunicornArgs) -> Result<(Import, Files), String> {
    let cli = parse_args(&args.args)?;
    let cwd = std::env::current_dir().map_err(|e| format!("the current folder: {e}"))?;
    let config = cli.config.as_ref().map(|c| cwd.join(c));
    let file_settings = match &config {
        Some(file) => read_config(file)?,
        None => Vec::new(),
    };
    let context = Context {
        cwd,
        config,
        root: nix::unistd::geteuid().is_root(),
        web_concurrency: std::env::var("WEB_CONCURRENCY").ok(),
        env_args: env_args(std::env::var("GUNICORN_CMD_ARGS").ok().as_deref())?,
    };
    let import = map(&file_settings, &cli, &context)?;
    let files = vec![
        (PathBuf::from("drover.toml"), import.global.render()),
        (
            Path::new("pools.d").join(format!("{}.toml", import.pool_name)),
            import.pool.render(),
        ),
    ];
    Ok((import, files))
}

#[cfg(test)]
mod tests;
