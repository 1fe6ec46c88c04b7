//! One `[program:x]` section to a background pool's file: each value expanded as
//! supervisord expands it (`expand`), then mapped to drover's key, or reported.
//!
//! The environment: supervisord starts a program with its own environment, plus
//! `[supervisord] environment`, plus the program's `environment`. The pool gets
//! `clear_env = false` (drover's environment, which under systemd is the unit's, as
//! supervisord's was) and both `environment` settings in `[env]`, the program's winning.

use std::path::Path;

use super::expand::{self, Names};
use super::values::{environment, split_command};
use super::{Context, Entry, Note, Section};
use crate::import::doc::{Doc, Value};

/// supervisord's default for the key drover writes when the section leaves it out.
const DEFAULT_STOPWAITSECS: i64 = 10;

/// The most copies the importer writes: each is a process, and the master holds a
/// descriptor for each; past this a `numprocs` is more likely a slip than a plan, and
/// the operator writes `[pm] max_children` by hand.
pub const MAX_COPIES: i64 = 1024;

/// `[supervisord] environment`, for every pool's `[env]`: (name, value, origin).
pub type Shared = Vec<(String, String, String)>;

/// Who the program is, for its expansions.
pub struct Target<'a> {
    pub name: &'a str,
    /// Its `[group:x]`, or its own name.
    pub group: &'a str,
    pub shared: &'a Shared,
    pub context: &'a Context,
}

/// `[supervisord] environment`, expanded with supervisord's own names.
pub fn shared_environment(
    sections: &[Section],
    context: &Context,
    report: &mut Vec<Note>,
) -> Shared {
    let Some(entry) = sections
        .iter()
        .filter(|s| s.name == "supervisord")
        .flat_map(|s| s.entries.iter())
        .rev()
        .find(|e| e.key == "environment")
    else {
        return Vec::new();
    };
    let names = Names::for_include(&here(entry), context);
    let parsed = expanded(entry, &names, report).map(|text| environment(&text));
    match parsed {
        Some(Ok(vars)) => vars
            .into_iter()
            .map(|(k, v)| {
                let origin = format!("[supervisord] environment {k} ({})", entry.place());
                (k, v, origin)
            })
            .collect(),
        Some(Err(why)) => {
            note(report, entry, &format!("{why}; not carried over"));
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// The folder of the file `entry` was read from, absolute: its `%(here)s`.
fn here(entry: &Entry) -> String {
    let folder = Path::new(&entry.file).parent().unwrap_or(Path::new("."));
    std::path::absolute(folder)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| ".".to_owned())
}

fn origin(entry: &Entry) -> String {
    format!("{} = {}", entry.key, entry.value.replace('\n', " "))
}

fn note(report: &mut Vec<Note>, entry: &Entry, why: &str) {
    report.push(Note::new(&entry.place(), &origin(entry), why));
}

/// `entry`'s value expanded, or `None` with the reason reported; each variable taken from
/// drover import's environment is reported too.
fn expanded(entry: &Entry, names: &Names, report: &mut Vec<Note>) -> Option<String> {
    let mut names = names.clone();
    names.text("here", &here(entry));
    match expand::expand(&entry.value, &names) {
        Ok(done) => {
            for name in &done.from_environment {
                note(
                    report,
                    entry,
                    &format!(
                        "%({name})s expanded from the environment of drover import; \
                         supervisord took it from its own when it started: check the \
                         written value"
                    ),
                );
            }
            Some(done.text)
        }
        Err(problem) => {
            note(
                report,
                entry,
                &format!("{problem}; {} not written", entry.key),
            );
            None
        }
    }
}

/// The program's names before its own `environment` is read.
fn names(target: &Target<'_>) -> Names {
    let mut names = Names::for_include(".", target.context);
    for (key, value, _) in target.shared {
        names.text(&format!("ENV_{key}"), value);
    }
    names.text("program_name", target.name);
    names.text("group_name", target.group);
    names
}

/// One `[program:NAME]` section as a pool file.
pub fn program(target: &Target<'_>, section: &Section, report: &mut Vec<Note>) -> Doc {
    let name = target.name;
    let mut doc = Doc::default();
    doc.header(&format!(
        "Pool {name}: supervisord's [program:{name}] ({}).",
        section.place
    ));
    let value = |key: &str| section.entries.iter().rev().find(|e| e.key == key);
    let mut names = names(target);
    // The tables in drover's order: the top level, [pm], [env], the runtime's.
    doc.ensure("pm");
    if value("environment").is_some() || !target.shared.is_empty() {
        doc.ensure("env");
    }
    copies(
        &mut doc,
        &mut names,
        value("numprocs"),
        value("numprocs_start"),
        report,
    );
    let vars = value("environment").and_then(|entry| env(entry, &mut names, report));
    match value("command") {
        Some(entry) => command(&mut doc, entry, &names, report),
        None => report.push(Note::new(
            &section.place,
            &format!("[program:{name}]"),
            "no command (supervisord requires one); write [program] command by hand",
        )),
    }
    for (key, to) in [("user", "user"), ("directory", "chdir")] {
        if let Some(entry) = value(key)
            && let Some(text) = expanded(entry, &names, report)
        {
            doc.set("", to, Value::str(text), &origin(entry));
        }
    }
    write_env(&mut doc, target.shared, vars.unwrap_or_default());
    stopping(&mut doc, value("stopsignal"), value("stopwaitsecs"), report);
    for entry in &section.entries {
        if !HANDLED.contains(&entry.key.as_str()) {
            note(report, entry, &unmapped(entry));
        }
    }
    doc
}

/// The keys [`program`] maps.
const HANDLED: [&str; 8] = [
    "command",
    "numprocs",
    "numprocs_start",
    "user",
    "directory",
    "environment",
    "stopsignal",
    "stopwaitsecs",
];

/// `numprocs` (and `numprocs_start`, `process_num`'s first value) to `[pm]`.
fn copies(
    doc: &mut Doc,
    names: &mut Names,
    numprocs: Option<&Entry>,
    start: Option<&Entry>,
    report: &mut Vec<Note>,
) {
    doc.set(
        "pm",
        "mode",
        Value::str("static"),
        "a copy per process, as numprocs",
    );
    let mut count = |entry: &Entry, least: i64| {
        let text = expanded(entry, names, report)?;
        match text.trim().parse::<i64>() {
            Ok(n) if n >= least => Some(n),
            _ => {
                note(
                    report,
                    entry,
                    &format!("not a count of {least} or more (supervisord refuses it too)"),
                );
                None
            }
        }
    };
    let first = start.and_then(|e| count(e, 0)).unwrap_or(0);
    let copies = match numprocs {
        None => Some(1),
        Some(entry) => count(entry, 1),
    };
    names.copies(copies.unwrap_or(1), first);
    match (copies, numprocs) {
        (Some(n), Some(entry)) if n > MAX_COPIES => note(
            report,
            entry,
            &format!(
                "refused: {n} copies, more than the {MAX_COPIES} the importer writes (each \
                 is a process, and drover holds a descriptor for each); write [pm] \
                 max_children by hand"
            ),
        ),
        (Some(n), entry) => doc.set(
            "pm",
            "max_children",
            Value::Int(n),
            &entry.map_or("numprocs's default, 1".to_owned(), origin),
        ),
        (None, _) => {}
    }
}

/// The program's `environment`, each variable a name (`ENV_X`) for the values read after
/// it, as in supervisord.
fn env(entry: &Entry, names: &mut Names, report: &mut Vec<Note>) -> Option<Vec<(String, String)>> {
    let text = expanded(entry, names, report)?;
    match environment(&text) {
        Ok(vars) => {
            for (key, val) in &vars {
                names.text(&format!("ENV_{key}"), val);
            }
            Some(vars)
        }
        Err(why) => {
            note(report, entry, &format!("{why}; write [env] by hand"));
            None
        }
    }
}

/// `clear_env = false`, then `[supervisord] environment` and the program's `environment`
/// in `[env]`, the program's winning.
fn write_env(doc: &mut Doc, shared: &Shared, vars: Vec<(String, String)>) {
    doc.set(
        "",
        "clear_env",
        Value::Bool(false),
        "supervisord passes its environment on",
    );
    for (key, value, from) in shared {
        doc.set("env", key, Value::str(value), from);
    }
    for (key, value) in vars {
        let from = format!("environment {key}");
        doc.set("env", &key, Value::str(value), &from);
    }
}

fn command(doc: &mut Doc, entry: &Entry, names: &Names, report: &mut Vec<Note>) {
    let Some(text) = expanded(entry, names, report) else {
        return;
    };
    match split_command(&text) {
        Ok(argv) if !argv.is_empty() => {
            doc.set("program", "command", Value::Strs(argv), &origin(entry));
        }
        Ok(_) => note(
            report,
            entry,
            "an empty command; write [program] command by hand",
        ),
        Err(why) => note(
            report,
            entry,
            &format!("{why}; write [program] command by hand"),
        ),
    }
}

/// `stopsignal` and `stopwaitsecs` to `[program]`.
fn stopping(doc: &mut Doc, signal: Option<&Entry>, wait: Option<&Entry>, report: &mut Vec<Note>) {
    if let Some(entry) = signal {
        let signal = entry.value.trim().to_ascii_uppercase();
        let signal = signal.strip_prefix("SIG").unwrap_or(&signal).to_owned();
        if drover_config::STOP_SIGNALS.contains(&signal.as_str()) {
            doc.set("program", "stop_signal", Value::str(signal), &origin(entry));
        } else {
            note(report, entry, "not a signal drover sends; TERM written");
            doc.set("program", "stop_signal", Value::str("TERM"), &origin(entry));
        }
    }
    let seconds = match wait.map(|entry| (entry, entry.value.trim().parse::<i64>())) {
        Some((_, Ok(n))) if n >= 0 => n,
        Some((entry, _)) => {
            note(
                report,
                entry,
                "not a number of seconds; supervisord's default, 10, written",
            );
            DEFAULT_STOPWAITSECS
        }
        None => DEFAULT_STOPWAITSECS,
    };
    doc.set(
        "program",
        "stop_timeout",
        Value::str(format!("{seconds}s")),
        &wait.map_or("stopwaitsecs's default, 10".to_owned(), origin),
    );
}

/// What drover does instead of `entry`, a key with no direct equivalent.
fn unmapped(entry: &Entry) -> String {
    let value = entry.value.trim().to_ascii_lowercase();
    match entry.key.as_str() {
        "autorestart" if value == "true" || value == "unexpected" => {
            "drover restarts every copy that exits (unexpected exits and clean ones alike)".into()
        }
        "autorestart" => "drover restarts every copy that exits; a one-shot command has no \
             equivalent"
            .into(),
        "startsecs" => format!(
            "drover counts a copy that exits within {}s of its start as a failed start, \
             and backs off (1 s doubling to 60 s)",
            drover::pm::STARTUP_WINDOW.as_secs()
        ),
        "startretries" => "drover never gives up on a failing program: it retries with a \
             backoff (1 s doubling to 60 s)"
            .into(),
        "exitcodes" => "drover restarts a copy whatever its exit code".into(),
        "autostart" if value == "true" => "drover starts every pool it loads".into(),
        "autostart" => {
            "drover starts every pool it loads; leave the file out of pools.d to not run it".into()
        }
        "process_name" => {
            "drover names each copy by its pool and pid in the log and the status".into()
        }
        "priority" => "drover starts and stops every pool at once".into(),
        "stopasgroup" | "killasgroup" => {
            "drover signals the copy itself (each copy leads its own process group)".into()
        }
        "redirect_stderr" => "drover captures stdout and stderr together into its error log, \
             each line prefixed with the pool and pid"
            .into(),
        key if key.starts_with("stdout_") || key.starts_with("stderr_") => {
            "drover captures the output into its error log (drover.toml's error_log), each \
             line prefixed with the pool and pid; decorate_workers_output = false writes it \
             as it is"
                .into()
        }
        "umask" => "drover does not change the umask of a pool's processes".into(),
        "serverurl" => "drover has no supervisorctl server URL".into(),
        _ => "no equivalent in drover".into(),
    }
}
