//! `drover import supervisord`: supervisord's `[program:x]` sections (with the files its
//! `[include]` names) to background pools, `pools.d/x.toml` with a `[program]` table, and
//! a `drover.toml`. Every setting with no equivalent, or carried over differently, is
//! reported with its file and line; a program name that cannot name a pool file, or two
//! sections for one pool, stop the import before anything is written.
//!
//! - [`parse`]: supervisord's configparser dialect, one file's text (pure), and [`read`],
//!   which follows `[include] files`.
//! - `expand`: the `%(name)s` expansions supervisord makes in every value.
//! - `program`: one `[program:x]` section to a pool file.
//! - [`map`] (pure): the sections, merged by name as configparser merges them, to files.

use std::collections::BTreeMap;

use super::Note;
use super::doc::{Doc, Value};

mod expand;
mod parse;
mod program;
mod values;

pub use parse::{Entry, Read, Section, parse, read};

/// What supervisord would have expanded from the machine it ran on.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The environment of `drover import`, for `%(ENV_X)s`: supervisord's was the one it
    /// started with.
    pub env: BTreeMap<String, String>,
    /// `%(host_node_name)s`: Python's `platform.node()`, the host name.
    pub host: String,
}

impl Context {
    pub fn of_this_machine() -> Context {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        Context { env, host }
    }
}

/// What an import makes: drover.toml, one pool file per program, and the report.
#[derive(Debug, Default)]
pub struct Import {
    pub global: Doc,
    pub pools: Vec<(String, Doc)>,
    pub report: Vec<Note>,
    /// What stops the import before anything is written, each with its file and line.
    pub refused: Vec<Note>,
}

/// The sections that have nothing of a program in them: configuration of supervisord
/// itself and of its control interfaces.
fn own_section(name: &str) -> bool {
    matches!(
        name,
        "supervisord" | "unix_http_server" | "inet_http_server" | "supervisorctl" | "include"
    ) || name.starts_with("rpcinterface:")
}

pub fn map(read: &Read, context: &Context) -> Import {
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
    let sections = merge(&read.sections, &mut import.report);
    let groups = groups(&sections, &mut import.refused);
    let shared = program::shared_environment(&sections, context, &mut import.report);
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for section in &sections {
        if let Some(name) = section.name.strip_prefix("program:") {
            // supervisord strips the name (`process_or_group_name`).
            let name = name.trim();
            let setting = format!("[{}]", section.name);
            if let Some(refusal) = super::name::refused(&section.place, &setting, name) {
                import.refused.push(refusal);
                continue;
            }
            if let Some(first) = names.get(name) {
                import.refused.push(Note::new(
                    &section.place,
                    &setting,
                    &format!(
                        "refused: {first} already names the program {name:?} (supervisord \
                         strips the spaces around a name), and both would be \
                         pools.d/{name}.toml; rename one (nothing was written)"
                    ),
                ));
                continue;
            }
            names.insert(name.to_owned(), section.place.clone());
            let group = groups.get(name).map_or(name, String::as_str);
            let target = program::Target {
                name,
                group,
                shared: &shared,
                context,
            };
            let doc = program::program(&target, section, &mut import.report);
            import.pools.push((name.to_owned(), doc));
        } else if own_section(&section.name) {
            own_entries(section, &mut import.report);
        } else {
            other_section(section, &mut import.report);
        }
    }
    import
}

/// The sections by name, in the order first seen: configparser (`strict = False`, as
/// supervisor sets it) reads a second `[name]`, in the same file or another, into the
/// first, a later key replacing an earlier one.
fn merge(sections: &[Section], report: &mut Vec<Note>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for section in sections {
        match out.iter_mut().find(|s| s.name == section.name) {
            Some(first) => {
                report.push(Note::new(
                    &section.place,
                    &format!("[{}]", section.name),
                    &format!(
                        "read into the [{}] of {}, as supervisord reads it: a key set in \
                         both takes this one's value",
                        section.name, first.place
                    ),
                ));
                first.entries.extend(section.entries.iter().cloned());
            }
            None => out.push(section.clone()),
        }
    }
    out
}

/// Each program's `[group:x]` (its `%(group_name)s`); a group name supervisord refuses
/// (with a space, `:` or `/`) is refused.
fn groups(sections: &[Section], refused: &mut Vec<Note>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for section in sections {
        let Some(group) = section.name.strip_prefix("group:") else {
            continue;
        };
        let group = group.trim();
        if group.is_empty() || group.contains([' ', ':', '/']) {
            refused.push(Note::new(
                &section.place,
                &format!("[{}]", section.name),
                "refused: supervisord refuses a group name that is empty or has a space, \
                 : or / (nothing was written)",
            ));
            continue;
        }
        let programs = section.entries.iter().rev().find(|e| e.key == "programs");
        for program in programs.iter().flat_map(|e| e.value.split(',')) {
            out.entry(program.trim().to_owned())
                .or_insert_with(|| group.to_owned());
        }
    }
    out
}

/// supervisord's own settings, each reported with what drover does instead.
fn own_entries(section: &Section, report: &mut Vec<Note>) {
    for entry in &section.entries {
        let skip = match section.name.as_str() {
            "include" => entry.key == "files",
            // Carried into every pool's [env] (program::shared_environment).
            "supervisord" => entry.key == "environment",
            _ => false,
        };
        if skip {
            continue;
        }
        let why = match (section.name.as_str(), entry.key.as_str()) {
            ("supervisord", "logfile") => {
                "drover logs to its error_log (drover.toml), the programs' output included"
            }
            ("supervisord", "pidfile") => "drover.toml's pid_file, if wanted",
            ("supervisord", "nodaemon") => "drover always runs in the foreground",
            ("unix_http_server" | "inet_http_server", _) => {
                "drover's control socket is drover.toml's [control] listen (drover ctl)"
            }
            ("supervisorctl", _) => "drover ctl takes the control socket with --socket",
            _ => "supervisord's own setting; drover has no equivalent",
        };
        report.push(Note::new(
            &entry.place(),
            &format!("[{}] {}", section.name, entry.key),
            why,
        ));
    }
}

fn other_section(section: &Section, report: &mut Vec<Note>) {
    let why = if section.name.starts_with("group:") {
        "drover has no groups: each program is its own pool (drover ctl reload POOL)"
    } else if section.name.starts_with("eventlistener:") {
        "drover has no event listeners"
    } else if section.name.starts_with("fcgi-program:") {
        "a FastCGI program is a [command] pool: write one by hand (docs/configuration.md)"
    } else {
        "not a section drover knows"
    };
    report.push(Note::new(
        &section.place,
        &format!("[{}]", section.name),
        why,
    ));
}

#[cfg(test)]
mod tests;
