//! `drover import php-fpm`: php-fpm's configuration (php-fpm.conf and pool `.conf` files)
//! to `drover.toml` and `pools.d/NAME.toml`.
//!
//! Two halves: [`read`] reads the files and follows `include=` (the only I/O), giving the
//! directives in the order php-fpm meets them; [`map`] turns them into drover's files and
//! a report of every directive not carried over as written, with its file:line and why.
//! [`map`] is pure, so every rule is unit-tested on text.

use std::path::{Path, PathBuf};

use super::Note;
use super::doc::{Doc, Value};
use super::ini::{self, Item};

mod global;
mod pool;

use global::global_doc;
#[cfg(test)]
use pool::listen;
use pool::pool_doc;

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
        let text = drover_config::read_text(file)
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
                    match drover_config::read_text(&path) {
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
    /// What stops the import before anything is written: a pool name that cannot name a
    /// file (`[../x]`), with its file and line.
    pub refused: Vec<Note>,
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
    let mut refused = Vec::new();
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
                refused.extend(super::name::refused(place, &format!("[{name}]"), name));
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
        refused,
    };
    for (name, place, seen) in &pools {
        if super::name::refusal(name).is_some() {
            continue;
        }
        let doc = pool_doc(name, place, seen, context, &mut import.report);
        import.pools.push((name.clone(), doc));
    }
    import
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

#[cfg(test)]
mod tests;
