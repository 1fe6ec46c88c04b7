//! supervisord's files as supervisord reads them: Python 3's configparser as supervisor's
//! `UnhosedConfigParser` sets it up (`key = value` or `key: value`, `;` and `#` comment
//! lines, an inline comment from a `;` or `#` that follows whitespace, on any line and
//! whatever the quotes, indented continuation lines), and `[include] files` followed from
//! the files named on the command line only, as supervisord follows the `[include]` of its
//! main file only.

use std::path::{Path, PathBuf};

use super::expand::{self, Names};
use super::{Context, Note};

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
    /// The file it was read from (a section of one name may span files: they merge).
    pub file: String,
    pub line: usize,
}

impl Entry {
    /// `FILE:LINE`.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// One file's sections; a line that is neither a header, an entry nor a continuation is
/// returned as `(line, message)`.
pub fn parse(file: &str, text: &str) -> (Vec<Section>, Vec<(usize, String)>) {
    let mut sections: Vec<Section> = Vec::new();
    let mut errors = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let raw = strip_comment(raw);
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        let continuation = raw.starts_with([' ', '\t']);
        if continuation && let Some(entry) = sections.last_mut().and_then(|s| s.entries.last_mut())
        {
            entry.value.push('\n');
            entry.value.push_str(trimmed);
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            // configparser's `\[(?P<header>.+)\]`: up to the last `]`, anything after it
            // ignored.
            match rest.rfind(']').filter(|&end| end > 0) {
                Some(end) => sections.push(Section {
                    name: rest[..end].to_owned(),
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
            value: trimmed[at + 1..].trim().to_owned(),
            file: file.to_owned(),
            line,
        });
    }
    (sections, errors)
}

/// A line without its comment: from the first `;` or `#` at its start or after
/// whitespace (configparser's `inline_comment_prefixes = (';', '#')`, which supervisor
/// sets; quotes do not protect one).
fn strip_comment(line: &str) -> &str {
    let mut previous = None;
    for (at, c) in line.char_indices() {
        if (c == ';' || c == '#') && previous.is_none_or(char::is_whitespace) {
            return &line[..at];
        }
        previous = Some(c);
    }
    line
}

/// What [`read`] found: the sections of every file, in order, and the lines it could not
/// read (as report notes).
#[derive(Debug, Default)]
pub struct Read {
    pub sections: Vec<Section>,
    pub errors: Vec<Note>,
}

/// Reads `files`, and the files their `[include] files` globs name (relative to the
/// including file's folder, `%(here)s`, `%(host_node_name)s` and `%(ENV_X)s` expanded, as
/// supervisord resolves them). A file is read once however often it is named (by its
/// canonical path); an `[include]` in an included file is reported, not followed.
pub fn read(files: &[PathBuf], context: &Context) -> Result<Read, String> {
    let mut out = Read::default();
    let mut seen = Vec::new();
    for file in files {
        let text = drover_config::read_text(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        seen.push(std::fs::canonicalize(file).unwrap_or_else(|_| file.clone()));
        let includes = read_text(file, &text, &mut out);
        for (entry, base) in includes {
            include(&entry, &base, context, &mut seen, &mut out);
        }
    }
    Ok(out)
}

/// Adds one file's sections to `out`; its `[include] files` entries, with its folder.
fn read_text(file: &Path, text: &str, out: &mut Read) -> Vec<(Entry, PathBuf)> {
    let shown = file.display().to_string();
    let (sections, errors) = parse(&shown, text);
    for (line, message) in errors {
        out.errors
            .push(Note::new(&format!("{shown}:{line}"), "line", &message));
    }
    // As the user named it, so that the report shows included files alike.
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut includes = Vec::new();
    for section in sections {
        if section.name == "include" {
            let files = section.entries.iter().filter(|e| e.key == "files");
            includes.extend(files.map(|e| (e.clone(), base.clone())));
        }
        out.sections.push(section);
    }
    includes
}

fn include(entry: &Entry, base: &Path, context: &Context, seen: &mut Vec<PathBuf>, out: &mut Read) {
    let folder = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let here = std::path::absolute(folder).unwrap_or_else(|_| folder.to_path_buf());
    let here = here.display().to_string();
    let names = Names::for_include(&here, context);
    let value = match expand::expand(&entry.value, &names) {
        Ok(expanded) => expanded.text,
        Err(problem) => {
            let why = format!("{problem}; the files it names are not read");
            out.errors
                .push(Note::new(&entry.place(), "[include] files", &why));
            return;
        }
    };
    for pattern in value.split_whitespace() {
        let pattern = base.join(pattern);
        let mut matched: Vec<PathBuf> = glob::glob(&pattern.to_string_lossy())
            .map(|paths| paths.filter_map(Result::ok).collect())
            .unwrap_or_default();
        matched.sort();
        if matched.is_empty() {
            let why = format!(
                "{} matches no file (supervisord warns and goes on)",
                pattern.display()
            );
            out.errors
                .push(Note::new(&entry.place(), "[include] files", &why));
        }
        for path in matched {
            let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if seen.contains(&canonical) {
                continue;
            }
            seen.push(canonical);
            let text = match drover_config::read_text(&path) {
                Ok(text) => text,
                Err(e) => {
                    let why = format!("cannot read {}: {e}", path.display());
                    out.errors
                        .push(Note::new(&entry.place(), "[include] files", &why));
                    continue;
                }
            };
            for (nested, _) in read_text(&path, &text, out) {
                out.errors.push(Note::new(
                    &nested.place(),
                    &format!("[include] files = {}", nested.value),
                    "not followed: supervisord follows the [include] of its main file \
                     only, not one in an included file",
                ));
            }
        }
    }
}
