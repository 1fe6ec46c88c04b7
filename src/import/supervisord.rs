//! `drover import supervisord`: supervisord's `[program:x]` sections (with the files its
//! `[include]` names) to background pools, `pools.d/x.toml` with a `[program]` table, and
//! a `drover.toml`. Every setting with no equivalent, or carried over differently, is
//! reported with its file and line.
//!
//! supervisord's files are Python's configparser dialect: `key = value` or `key: value`,
//! `;` and `#` comment lines, an inline comment after ` ;`, and indented continuation
//! lines. [`parse`] reads one file's text (pure); [`read`] follows `[include] files`;
//! [`map`] (pure) maps the sections.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Note;
use super::doc::{Doc, Value};

/// One `[name]` section of one file, its entries in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    /// `FILE:LINE` of its header.
    pub place: String,
    pub file: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Lowercased, as configparser reads it.
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// One file's sections; a line that is neither a header, an entry nor a continuation is
/// returned as `Err(line, message)`.
pub fn parse(file: &str, text: &str) -> (Vec<Section>, Vec<(usize, String)>) {
    let mut sections: Vec<Section> = Vec::new();
    let mut errors = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        let continuation = raw.starts_with([' ', '\t']);
        if continuation && let Some(entry) = sections.last_mut().and_then(|s| s.entries.last_mut())
        {
            entry.value.push('\n');
            entry.value.push_str(strip_comment(trimmed));
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            match rest.split_once(']') {
                Some((name, _)) => sections.push(Section {
                    name: name.trim().to_owned(),
                    place: format!("{file}:{line}"),
                    file: file.to_owned(),
                    entries: Vec::new(),
                }),
                None => errors.push((line, "a section header without its closing ]".into())),
            }
            continue;
        }
        let split = trimmed.find(['=', ':']);
        let (Some(at), Some(section)) = (split, sections.last_mut()) else {
            errors.push((
                line,
                "neither a [section], a key = value nor a comment".into(),
            ));
            continue;
        };
        section.entries.push(Entry {
            key: trimmed[..at].trim().to_ascii_lowercase(),
            value: strip_comment(trimmed[at + 1..].trim()).to_owned(),
            line,
        });
    }
    (sections, errors)
}

/// A value without its inline comment (` ;` as configparser's `inline_comment_prefixes`).
fn strip_comment(value: &str) -> &str {
    match value.find(" ;").or_else(|| value.find("\t;")) {
        Some(at) => value[..at].trim_end(),
        None => value,
    }
}

/// What [`read`] found: the sections of every file, in order, and the lines it could not
/// read (as report notes).
#[derive(Debug, Default)]
pub struct Read {
    pub sections: Vec<Section>,
    pub errors: Vec<Note>,
}

/// Reads `files`, and the files their `[include] files` globs name (relative to the
/// including file's folder, as supervisord resolves them), each once.
pub fn read(files: &[PathBuf]) -> Result<Read, String> {
    let mut out = Read::default();
    let mut seen = Vec::new();
    for file in files {
        read_one(file, &mut seen, &mut out, true)?;
    }
    Ok(out)
}

fn read_one(
    file: &Path,
    seen: &mut Vec<PathBuf>,
    out: &mut Read,
    named: bool,
) -> Result<(), String> {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    if seen.contains(&absolute) {
        return Ok(());
    }
    seen.push(absolute);
    let text = match crate::config::read_text(file) {
        Ok(text) => text,
        Err(e) if named => return Err(format!("cannot read {}: {e}", file.display())),
        Err(e) => {
            out.errors.push(Note::new(
                &file.display(),
                "[include]",
                &format!("cannot read it: {e}"),
            ));
            return Ok(());
        }
    };
    let shown = file.display().to_string();
    let (sections, errors) = parse(&shown, &text);
    for (line, message) in errors {
        out.errors
            .push(Note::new(&format!("{shown}:{line}"), "line", &message));
    }
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    for section in sections {
        let includes: Vec<Entry> = section
            .entries
            .iter()
            .filter(|e| section.name == "include" && e.key == "files")
            .cloned()
            .collect();
        out.sections.push(section);
        for entry in includes {
            for pattern in entry.value.split_whitespace() {
                let pattern = base.join(pattern);
                let mut matched: Vec<PathBuf> = glob::glob(&pattern.to_string_lossy())
                    .map(|paths| paths.filter_map(Result::ok).collect())
                    .unwrap_or_default();
                matched.sort();
                for path in matched {
                    read_one(&path, seen, out, false)?;
                }
            }
        }
    }
    Ok(())
}

/// What an import makes: drover.toml, one pool file per program, and the report.
#[derive(Debug, Default)]
pub struct Import {
    pub global: Doc,
    pub pools: Vec<(String, Doc)>,
    pub report: Vec<Note>,
}

/// supervisord's defaults for the keys drover writes when the section leaves them out.
const DEFAULT_STOPWAITSECS: i64 = 10;

/// The sections that have nothing of a program in them: configuration of supervisord
/// itself and of its control interfaces.
fn own_section(name: &str) -> bool {
    matches!(
        name,
        "supervisord" | "unix_http_server" | "inet_http_server" | "supervisorctl" | "include"
    ) || name.starts_with("rpcinterface:")
}

pub fn map(read: &Read) -> Import {
    let mut import = Import {
        report: read.errors.clone(),
        ..Import::default()
    };
    import.global.header(
        "Written by `drover import supervisord`. Each program is a background pool in\n\
         pools.d/ (docs/programs.md).",
    );
    import.global.set(
        "",
        "include",
        Value::Strs(vec!["pools.d/*.toml".into()]),
        "",
    );
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for section in &read.sections {
        if let Some(name) = section.name.strip_prefix("program:") {
            let name = name.trim();
            if let Some(first) = names.get(name) {
                import.report.push(Note::new(
                    &section.place,
                    &format!("[{}]", section.name),
                    &format!("a second program of this name (the first is at {first}); skipped"),
                ));
                continue;
            }
            names.insert(name.to_owned(), section.place.clone());
            let doc = program(name, section, &mut import.report);
            import.pools.push((name.to_owned(), doc));
        } else if own_section(&section.name) {
            for entry in &section.entries {
                if section.name == "include" && entry.key == "files" {
                    continue;
                }
                let why = match (section.name.as_str(), entry.key.as_str()) {
                    ("supervisord", "logfile") => {
                        "drover logs to its error_log (drover.toml), the programs' output \
                         included"
                    }
                    ("supervisord", "pidfile") => "drover.toml's pid_file, if wanted",
                    ("supervisord", "nodaemon") => "drover always runs in the foreground",
                    ("unix_http_server" | "inet_http_server", _) => {
                        "drover's control socket is drover.toml's [control] listen (drover ctl)"
                    }
                    ("supervisorctl", _) => "drover ctl takes the control socket with --socket",
                    _ => "supervisord's own setting; drover has no equivalent",
                };
                import.report.push(Note::new(
                    &format!("{}:{}", section.file, entry.line),
                    &format!("[{}] {}", section.name, entry.key),
                    why,
                ));
            }
        } else {
            let why = if section.name.starts_with("group:") {
                "drover has no groups: each program is its own pool (drover ctl reload POOL)"
            } else if section.name.starts_with("eventlistener:") {
                "drover has no event listeners"
            } else if section.name.starts_with("fcgi-program:") {
                "a FastCGI program is a [command] pool: write one by hand (docs/configuration.md)"
            } else {
                "not a section drover knows"
            };
            import.report.push(Note::new(
                &section.place,
                &format!("[{}]", section.name),
                why,
            ));
        }
    }
    import
}

/// One `[program:NAME]` section as a pool file.
fn program(name: &str, section: &Section, report: &mut Vec<Note>) -> Doc {
    let mut doc = Doc::default();
    doc.header(&format!(
        "Pool {name}: supervisord's [program:{name}] ({}).",
        section.place
    ));
    let value = |key: &str| section.entries.iter().rev().find(|e| e.key == key);
    let place = |entry: &Entry| format!("{}:{}", section.file, entry.line);
    let origin = |entry: &Entry| format!("{} = {}", entry.key, entry.value.replace('\n', " "));
    let note = |report: &mut Vec<Note>, entry: &Entry, why: &str| {
        report.push(Note::new(&place(entry), &origin(entry), why));
    };
    let numprocs = value("numprocs");
    let here = Path::new(&section.file).parent().map(std::path::absolute);
    let here = match here {
        Some(Ok(dir)) => dir.display().to_string(),
        _ => ".".to_owned(),
    };
    let expand = |text: &str| expand(text, name, &here);
    // The tables in drover's order: the top level, [pm], [env], the runtime's.
    doc.ensure("pm");
    if value("environment").is_some() {
        doc.ensure("env");
    }
    let mut handled = vec!["command", "numprocs"];
    match value("command") {
        Some(entry) => match split_command(&expand(&entry.value)) {
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
        },
        None => report.push(Note::new(
            &section.place,
            &format!("[program:{name}]"),
            "no command (supervisord requires one); write [program] command by hand",
        )),
    }
    doc.set(
        "pm",
        "mode",
        Value::str("static"),
        "a copy per process, as numprocs",
    );
    let copies = numprocs
        .map(|entry| match entry.value.trim().parse::<i64>() {
            Ok(n) if n >= 1 => n,
            _ => {
                note(report, entry, "not a count of 1 or more; 1 copy written");
                1
            }
        })
        .unwrap_or(1);
    doc.set(
        "pm",
        "max_children",
        Value::Int(copies),
        &numprocs.map_or("numprocs's default, 1".to_owned(), origin),
    );
    for (key, to) in [("user", "user"), ("directory", "chdir")] {
        handled.push(key);
        if let Some(entry) = value(key) {
            doc.set("", to, Value::str(expand(&entry.value)), &origin(entry));
        }
    }
    // supervisord passes its own environment on (adding `environment`).
    doc.set(
        "",
        "clear_env",
        Value::Bool(false),
        "supervisord passes its environment on",
    );
    handled.push("environment");
    if let Some(entry) = value("environment") {
        match environment(&expand(&entry.value)) {
            Ok(vars) => {
                doc.ensure("env");
                for (key, val) in vars {
                    doc.set("env", &key, Value::str(val), &format!("environment {key}"));
                }
            }
            Err(why) => note(report, entry, &format!("{why}; write [env] by hand")),
        }
    }
    handled.push("stopsignal");
    if let Some(entry) = value("stopsignal") {
        let signal = entry.value.trim().to_ascii_uppercase();
        let signal = signal.strip_prefix("SIG").unwrap_or(&signal).to_owned();
        if crate::config::STOP_SIGNALS.contains(&signal.as_str()) {
            doc.set("program", "stop_signal", Value::str(signal), &origin(entry));
        } else {
            note(report, entry, "not a signal drover sends; TERM written");
            doc.set("program", "stop_signal", Value::str("TERM"), &origin(entry));
        }
    }
    handled.push("stopwaitsecs");
    let wait = value("stopwaitsecs");
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
    // What drover does its own way, or not at all.
    for entry in &section.entries {
        if handled.contains(&entry.key.as_str()) {
            continue;
        }
        let value = entry.value.trim().to_ascii_lowercase();
        let why: String = match entry.key.as_str() {
            "autorestart" if value == "true" || value == "unexpected" => {
                "drover restarts every copy that exits (unexpected exits and clean ones alike)"
                    .into()
            }
            "autorestart" => "drover restarts every copy that exits; a one-shot command has no \
                 equivalent"
                .into(),
            "startsecs" => format!(
                "drover counts a copy that exits within {}s of its start as a failed start, \
                 and backs off (1 s doubling to 60 s)",
                crate::pm::STARTUP_WINDOW.as_secs()
            ),
            "startretries" => {
                "drover never gives up on a failing program: it retries with a backoff \
                 (1 s doubling to 60 s)"
                    .into()
            }
            "exitcodes" => "drover restarts a copy whatever its exit code".into(),
            "autostart" if value == "true" => "drover starts every pool it loads".into(),
            "autostart" => {
                "drover starts every pool it loads; leave the file out of pools.d to not run it"
                    .into()
            }
            "process_name" => {
                "drover names each copy by its pool and pid in the log and the status".into()
            }
            "priority" => "drover starts and stops every pool at once".into(),
            "stopasgroup" | "killasgroup" => {
                "drover signals the copy itself (each copy leads its own process group)".into()
            }
            "redirect_stderr" => {
                "drover captures stdout and stderr together into its error log, each line \
                 prefixed with the pool and pid"
                    .into()
            }
            key if key.starts_with("stdout_") || key.starts_with("stderr_") => {
                "drover captures the output into its error log (drover.toml's error_log), \
                 each line prefixed with the pool and pid; decorate_workers_output = false \
                 writes it as it is"
                    .into()
            }
            "umask" => "drover does not change the umask of a pool's processes".into(),
            "serverurl" => "drover has no supervisorctl server URL".into(),
            _ => "no equivalent in drover".into(),
        };
        note(report, entry, &why);
    }
    doc
}

/// supervisord's `%(name)s` expansions that mean the same for every copy:
/// `program_name`, `group_name` and `here` (the folder of the section's file). Others
/// (`process_num`, which differs per copy, `ENV_*`, supervisord's own environment) are
/// left as written, and a command that has one is reported.
fn expand(text: &str, name: &str, here: &str) -> String {
    text.replace("%(program_name)s", name)
        .replace("%(group_name)s", name)
        .replace("%(here)s", here)
}

/// `command`: split as supervisord splits it (Python's `shlex.split`: spaces separate,
/// single quotes take everything literally, double quotes and backslashes escape).
fn split_command(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unclosed ' quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("an unclosed \" quote".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("an unclosed \" quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("a \\ at the end".into()),
                }
            }
            c if c == '%' && text.contains("%(") => {
                return Err("a %(...)s expansion drover cannot make".into());
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

/// `environment`: `KEY="value",KEY2=value2`, as supervisord reads it (values may be
/// quoted; a comma inside quotes is the value's).
fn environment(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            return Err(format!("{rest:?} is not KEY=value"));
        };
        let key = key.trim().trim_start_matches(',').trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{key:?} is not a variable name"));
        }
        let after = after.trim_start();
        let (value, next) = match after.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let body = &after[1..];
                let Some(end) = body.find(quote) else {
                    return Err(format!("the value of {key} has no closing {quote}"));
                };
                (body[..end].to_owned(), &body[end + 1..])
            }
            _ => match after.find(',') {
                Some(end) => (after[..end].trim().to_owned(), &after[end..]),
                None => (after.trim().to_owned(), ""),
            },
        };
        out.push((key.to_owned(), value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_splits_as_shlex_splits_it() {
        assert_eq!(
            split_command("php /var/www/artisan queue:work --sleep=3 'a b' \"c \\\"d\\\"\"")
                .unwrap(),
            [
                "php",
                "/var/www/artisan",
                "queue:work",
                "--sleep=3",
                "a b",
                "c \"d\""
            ]
        );
        assert!(split_command("php 'open").is_err());
        assert!(split_command("worker --n=%(process_num)s").is_err());
    }

    #[test]
    fn environment_takes_quoted_and_bare_values() {
        assert_eq!(
            environment("A=\"1,2\",B=x, C='y z'").unwrap(),
            [
                ("A".to_owned(), "1,2".to_owned()),
                ("B".to_owned(), "x".to_owned()),
                ("C".to_owned(), "y z".to_owned())
            ]
        );
        assert!(environment("A").is_err());
        assert!(environment("A=\"open").is_err());
    }

    #[test]
    fn configparser_lines_comments_and_continuations() {
        let text = "; comment\n[program:q]\ncommand = php artisan ; inline\n  --tries=3\n\
                    numprocs: 2\nbogus\n";
        let (sections, errors) = parse("f.conf", text);
        assert_eq!(sections.len(), 1);
        assert_eq!(sections[0].entries[0].value, "php artisan\n--tries=3");
        assert_eq!(sections[0].entries[1].key, "numprocs");
        assert_eq!(sections[0].entries[1].value, "2");
        assert_eq!(
            errors,
            [(
                6,
                "neither a [section], a key = value nor a comment".to_owned()
            )]
        );
    }

    #[test]
    fn a_program_maps_to_a_background_pool_with_its_notes() {
        let text = "[program:worker]\ncommand=/bin/sh -c 'sleep 1000'\nnumprocs=3\n\
                    stopsignal=QUIT\nstopwaitsecs=30\nautorestart=false\n\
                    environment=APP_ENV=\"production\"\n";
        let (sections, _) = parse("w.conf", text);
        let import = map(&Read {
            sections,
            errors: Vec::new(),
        });
        let (name, doc) = &import.pools[0];
        assert_eq!(name, "worker");
        assert_eq!(doc.get("pm", "max_children"), Some(&Value::Int(3)));
        assert_eq!(doc.get("program", "stop_signal"), Some(&Value::str("QUIT")));
        assert_eq!(doc.get("program", "stop_timeout"), Some(&Value::str("30s")));
        assert_eq!(doc.get("env", "APP_ENV"), Some(&Value::str("production")));
        let notes: Vec<String> = import.report.iter().map(ToString::to_string).collect();
        assert_eq!(
            notes,
            [
                "w.conf:6: autorestart = false: drover restarts every copy that exits; a \
              one-shot command has no equivalent"
            ]
        );
    }
}
