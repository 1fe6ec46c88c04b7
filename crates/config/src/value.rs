//! Typed getters over one parsed TOML table. Each getter reports a located error and carries
//! on, so that one pass over a file finds every problem in it (serde's derive stops at the
//! first).

use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::source::Source;

/// What a getter found: the caller picks the default for `Absent`; `Invalid` means an error
/// has been reported and any rule that depends on this key must stay quiet.
pub(super) enum Got<T> {
    Absent,
    Invalid,
    Valid(T),
}

impl<T> Got<T> {
    /// `None` when invalid (already reported), the default when absent.
    pub fn or(self, default: T) -> Option<T> {
        self.or_else(|| default)
    }

    pub fn or_else(self, default: impl FnOnce() -> T) -> Option<T> {
        match self {
            Got::Absent => Some(default()),
            Got::Invalid => None,
            Got::Valid(v) => Some(v),
        }
    }

    /// For optional keys: `Some(None)` when absent, `None` when invalid.
    pub fn optional(self) -> Option<Option<T>> {
        match self {
            Got::Absent => Some(None),
            Got::Invalid => None,
            Got::Valid(v) => Some(Some(v)),
        }
    }

    /// For required keys: absent is reported at the table's header.
    pub fn required(self, table: &Table<'_, '_>, key: &str) -> Option<T> {
        match self {
            Got::Absent => {
                table.missing(key);
                None
            }
            Got::Invalid => None,
            Got::Valid(v) => Some(v),
        }
    }
}

/// A view of one table of a file: `prefix` builds dotted key paths and `at` is where errors
/// about missing keys point (the `[table]` header, or the start of the file for the root).
#[derive(Clone)]
pub(super) struct Table<'a, 'i> {
    pub source: &'a Source,
    table: &'a DeTable<'i>,
    prefix: String,
    at: usize,
}

type Entry<'a, 'i> = (
    &'a Spanned<std::borrow::Cow<'i, str>>,
    &'a Spanned<DeValue<'i>>,
);

impl<'a, 'i> Table<'a, 'i> {
    pub fn root(source: &'a Source, table: &'a DeTable<'i>) -> Self {
        Table {
            source,
            table,
            prefix: String::new(),
            at: 0,
        }
    }

    /// The table's dotted name (`"pm"`, `""` for a file's top level).
    pub fn name(&self) -> &str {
        &self.prefix
    }

    /// `key` with this table's path in front: `pm.max_children`.
    pub fn path(&self, key: &str) -> String {
        // Quoted as TOML would need it, so `env."A B"` reads as one key.
        let key = toml_key(key);
        if self.prefix.is_empty() {
            key
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = Entry<'a, 'i>> + 'a {
        self.table.iter()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    fn entry(&self, key: &str) -> Option<Entry<'a, 'i>> {
        self.table.get_key_value(key)
    }

    /// Whether `key` is the string `value`, reporting nothing (its parser reports).
    pub fn is(&self, key: &str, value: &str) -> bool {
        matches!(self.entry(key).map(|(_, v)| v.get_ref()), Some(DeValue::String(s)) if s == value)
    }

    /// Reports every key not in `known`, suggesting the nearest known one.
    pub fn check_keys(&self, known: &[&str]) {
        for (key, _) in self.entries() {
            let name: &str = key.get_ref();
            if known.contains(&name) {
                continue;
            }
            let rule = match suggest(name, known) {
                Some(near) => format!("unknown key; did you mean {near}?"),
                None => format!("unknown key; known keys: {}", known.join(", ")),
            };
            self.source
                .report(key.span().start, &self.path(name), None, rule);
        }
    }

    /// Where an error about `key` points: the key when it is written (with its value as
    /// written), the table otherwise.
    pub fn locate(&self, key: &str) -> (usize, Option<String>) {
        match self.entry(key) {
            // A `[table]`'s span is its header; echoing a table back is noise.
            Some((_, v)) if matches!(v.get_ref(), DeValue::Table(_)) => (v.span().start, None),
            Some((k, v)) => (k.span().start, Some(self.source.written(v.span()))),
            None => (self.at, None),
        }
    }

    pub fn fail(&self, key: &str, rule: impl Into<String>) {
        let (offset, written) = self.locate(key);
        self.source.report(offset, &self.path(key), written, rule);
    }

    /// An error about one element of an array, located at the element.
    pub fn fail_at(&self, key: &str, span: Range<usize>, rule: impl Into<String>) {
        let written = self.source.written(span.clone());
        self.source
            .report(span.start, &self.path(key), Some(written), rule);
    }

    pub fn missing(&self, key: &str) {
        self.fail(key, "missing required key");
    }

    fn type_error(&self, key: &str, expected: &str, found: &DeValue<'_>) {
        self.fail(
            key,
            format!("expected {expected}, found {}", found.type_str()),
        );
    }

    pub fn string(&self, key: &str) -> Got<&'a str> {
        self.string_as(key, "a string")
    }

    /// A string, with `expected` naming what a wrong type should have been instead
    /// ("a duration string with a unit, like \"30s\"").
    fn string_as(&self, key: &str, expected: &str) -> Got<&'a str> {
        match self.entry(key).map(|(_, v)| v.get_ref()) {
            None => Got::Absent,
            Some(DeValue::String(s)) => Got::Valid(s.as_ref()),
            Some(other) => {
                self.type_error(key, expected, other);
                Got::Invalid
            }
        }
    }

    /// A string turned into `T` by `parse`, whose `Err` is the rule broken.
    pub fn parse<T>(&self, key: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Got<T> {
        self.parse_as(key, "a string", parse)
    }

    fn parse_as<T>(
        &self,
        key: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Got<T> {
        match self.string_as(key, expected) {
            Got::Valid(s) => match parse(s) {
                Ok(v) => Got::Valid(v),
                Err(rule) => {
                    self.fail(key, rule);
                    Got::Invalid
                }
            },
            Got::Absent => Got::Absent,
            Got::Invalid => Got::Invalid,
        }
    }

    pub fn bool(&self, key: &str) -> Got<bool> {
        match self.entry(key).map(|(_, v)| v.get_ref()) {
            None => Got::Absent,
            Some(DeValue::Boolean(b)) => Got::Valid(*b),
            Some(other) => {
                self.type_error(key, "a boolean (true or false)", other);
                Got::Invalid
            }
        }
    }

    /// An integer within `range`.
    pub fn int<T: TryFrom<i64>>(&self, key: &str, range: std::ops::RangeInclusive<i64>) -> Got<T> {
        let n = match self.entry(key).map(|(_, v)| v.get_ref()) {
            None => return Got::Absent,
            Some(DeValue::Integer(n)) => i64::from_str_radix(n.as_str(), n.radix()).ok(),
            Some(other) => {
                self.type_error(key, "an integer", other);
                return Got::Invalid;
            }
        };
        let rule = match n {
            Some(n) if n < *range.start() => format!("must be at least {}", range.start()),
            Some(n) if range.contains(&n) => match T::try_from(n) {
                Ok(v) => return Got::Valid(v),
                Err(_) => format!("must be at most {}", range.end()),
            },
            _ => format!("must be at most {}", range.end()),
        };
        self.fail(key, rule);
        Got::Invalid
    }

    /// An integer within `range`, or the string `word` (`max_children = "auto"`):
    /// `Some(n)` or `None` for the word.
    pub fn int_or_word<T: TryFrom<i64>>(
        &self,
        key: &str,
        word: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Got<Option<T>> {
        match self.entry(key).map(|(_, v)| v.get_ref()) {
            None => Got::Absent,
            Some(DeValue::String(s)) if s.as_ref() == word => Got::Valid(None),
            Some(DeValue::Integer(_)) => match self.int(key, range) {
                Got::Valid(n) => Got::Valid(Some(n)),
                Got::Absent => Got::Absent,
                Got::Invalid => Got::Invalid,
            },
            Some(other) => {
                self.type_error(key, &format!("an integer or \"{word}\""), other);
                Got::Invalid
            }
        }
    }

    /// A humantime duration: "30s", "5m", "1h 30m".
    pub fn duration(&self, key: &str) -> Got<Duration> {
        self.parse_as(key, "a duration string with a unit, like \"30s\"", |s| {
            humantime::parse_duration(s).map_err(|e| format!("invalid duration: {e}"))
        })
    }

    /// A byte size with a unit: "256MiB", "1G".
    pub fn size(&self, key: &str) -> Got<u64> {
        self.parse_as(key, "a size string with a unit, like \"256MiB\"", |s| {
            // A bare number parses as bytes; demanding the unit keeps "256" from meaning
            // 256 bytes when the writer thought in megabytes.
            if s.trim().chars().all(|c| c.is_ascii_digit()) {
                return Err("a size needs a unit, like \"256MiB\"".into());
            }
            s.parse::<bytesize::ByteSize>()
                .map(|b| b.as_u64())
                .map_err(|e| format!("invalid size: {e}"))
        })
    }

    /// A path; relative paths resolve against `base` (drover.toml's folder).
    pub fn path_buf(&self, key: &str, base: &Path) -> Got<PathBuf> {
        self.parse(key, |s| resolve(base, s))
    }

    /// An array of strings; each element comes with its span for element-level errors.
    /// Elements of another type are reported and left out, so the caller still checks the
    /// rest (the load fails on the reported error either way).
    pub fn strings(&self, key: &str) -> Got<Vec<(&'a str, Range<usize>)>> {
        let items = match self.entry(key).map(|(_, v)| v.get_ref()) {
            None => return Got::Absent,
            Some(DeValue::Array(items)) => items,
            Some(other) => {
                self.type_error(key, "an array of strings", other);
                return Got::Invalid;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push((s.as_ref(), item.span())),
                other => {
                    let rule = format!("expected a string, found {}", other.type_str());
                    self.fail_at(key, item.span(), rule);
                }
            }
        }
        Got::Valid(out)
    }

    pub fn table(&self, key: &str) -> Got<Table<'a, 'i>> {
        match self.entry(key) {
            None => Got::Absent,
            Some((_, v)) => match v.get_ref() {
                DeValue::Table(table) => Got::Valid(Table {
                    source: self.source,
                    table,
                    prefix: self.path(key),
                    at: v.span().start,
                }),
                other => {
                    self.type_error(key, "a table", other);
                    Got::Invalid
                }
            },
        }
    }
}

/// Resolves a path as written against drover.toml's folder. Rebuilding from components
/// drops `.` and doubled slashes, so equal files compare equal (two pools on one socket).
pub(super) fn resolve(base: &Path, written: &str) -> Result<PathBuf, String> {
    if written.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(base.join(written).components().collect())
}

/// A log file's path (`error_log`, `slowlog`, `access_log`), resolved as [`resolve`] does,
/// checked as the master will open it: its folder exists (drover creates none, as
/// php-fpm does not), and this process may create the file there or append to the one
/// there. The master opens every log file itself, as root when it runs as root, so that
/// the pools' users need no right on it (`drover -t` run as another user than the
/// master's may report what the master would not).
pub(super) fn log_file(base: &Path, written: &str) -> Result<PathBuf, String> {
    let path = resolve(base, written)?;
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("/"),
    };
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a folder", folder.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "the folder {} does not exist (drover creates none)",
                folder.display()
            ));
        }
        Err(e) => return Err(format!("{}: {e}", folder.display())),
    }
    // What the master's open refuses in a folder others can write (a link, a hard link, a
    // FIFO, a device): named here with the key, before the start or reload meets it.
    if let (Ok(found), Ok(parent)) = (std::fs::symlink_metadata(&path), std::fs::metadata(folder))
        && !crate::logfile::only_root_writes(&parent)
    {
        if found.file_type().is_symlink() {
            return Err(crate::logfile::link_refused(&path));
        }
        if let Some(why) = crate::logfile::not_plain(&path, &found) {
            return Err(why);
        }
    }
    let (checked, mode) = match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => return Err(format!("{} is a folder", path.display())),
        Ok(_) => (path.as_path(), libc::W_OK),
        Err(_) => (folder, libc::W_OK | libc::X_OK),
    };
    if let Err(e) = writable(checked, mode) {
        let what = if checked == folder {
            "create a file in"
        } else {
            "append to"
        };
        return Err(format!(
            "drover (uid {}) cannot {what} {}: {e}",
            nix::unistd::Uid::effective(),
            checked.display()
        ));
    }
    Ok(path)
}

/// faccessat(2) with the effective ids, as open(2) will check them.
fn writable(path: &Path, mode: libc::c_int) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path that outlives the call; no memory is written.
    let done = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A key as TOML writes it: bare when it can be, quoted otherwise (`"opcache.enable"`).
pub(super) fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        name.to_owned()
    } else {
        toml::Value::String(name.to_owned()).to_string()
    }
}

/// The known key within edit distance 2 of `unknown`, nearest first.
fn suggest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(unknown, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// A name with a `/` is a path (relative to drover.toml's folder); a bare name is looked up
/// on `PATH`, as the shell would. Either way it must be an executable file now, so a typo
/// fails `drover -t` rather than every spawn.
pub(super) fn find_executable(base: &Path, name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let path = resolve(base, name)?;
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(path),
            Ok(_) => Err(format!("{} is not an executable file", path.display())),
            Err(e) => Err(format!("{}: {e}", path.display())),
        };
    }
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .ok_or_else(|| format!("{name} is not on PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("max_chidren", "max_children"), 1);
        assert_eq!(edit_distance("mode", "mode"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("lisen", "listen"), 1);
    }

    #[test]
    fn suggestions_stop_at_distance_two() {
        assert_eq!(
            suggest("max_chidren", &["mode", "max_children"]),
            Some("max_children")
        );
        assert_eq!(suggest("workers", &["mode", "max_children"]), None);
    }
}
