//! Reading the files: drover.toml, then every pool file its `include` globs select, then the
//! checks that span files. Every file is checked even when an earlier one has errors.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use super::error::{ConfigError, ConfigErrors};
use super::files::{Disk, Files, Memory};
use super::global::{self, DEFAULT_INCLUDE};
use super::listen::{Claim, collisions};
use super::model::{Config, Global, Pool};
use super::pool::{self, PoolFile};
use super::source::Source;
use super::value::{Got, Table};

pub const DEFAULT_CONFIG_PATH: &str = "/etc/drover/drover.toml";

/// Reads and validates `path` and the pool files it includes. On failure the error list
/// holds every problem in every file, in file then line order.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    load_from(&Disk, path)
}

/// [`load`] with the files given as text: `files` maps each path to its content, and must
/// hold `path` (drover.toml); the `include` globs select among the other paths. Paths that
/// rules check on disk (a `php-cgi` binary, `chdir`) are still looked up there. For fuzzing
/// and tests: the rules and messages are those of [`load`].
pub fn load_texts(path: &Path, files: &BTreeMap<PathBuf, String>) -> Result<Config, ConfigErrors> {
    load_from(&Memory(files), path)
}

fn load_from(fs: &dyn Files, path: &Path) -> Result<Config, ConfigErrors> {
    // Globs keep the folder as the user wrote it so messages show paths they recognise;
    // values resolve against the absolute folder so they still hold after a chdir.
    let shown_dir = path.parent().unwrap_or(Path::new(""));
    let base = if shown_dir.as_os_str().is_empty() {
        std::env::current_dir()
    } else {
        std::path::absolute(shown_dir)
    }
    .unwrap_or_else(|_| shown_dir.to_path_buf());

    let main = read(fs, path).map_err(|e| ConfigErrors(vec![e]))?;
    let mut claims = Vec::new();
    let (global, include) = parse_main(&main, &base, &mut claims);
    // Without a usable `include` there is no telling which pool files were meant.
    let files = include.map_or_else(Vec::new, |include| {
        pool_files(fs, &main, shown_dir, &include)
    });

    let mut sources = vec![main];
    let mut pools = Vec::new();
    let mut names: Vec<(&str, &Path)> = Vec::new();
    for (name, file) in &files {
        let index = sources.len();
        let source = match read(fs, file) {
            Ok(source) => source,
            Err(e) => {
                sources.push(Source::new(file.clone(), String::new()));
                sources[index].report(0, "", None, e.rule);
                continue;
            }
        };
        if let Some(rule) = bad_name(name, file, &names) {
            source.report(0, "", None, rule);
        }
        names.push((name, file));
        let pool_file = PoolFile { name, file, index };
        pools.push(parse_pool(&source, &pool_file, &base, &mut claims));
        sources.push(source);
    }
    report_collisions(&claims, &sources);

    let mut errors: Vec<ConfigError> = sources.into_iter().flat_map(Source::into_errors).collect();
    match (global, pools.into_iter().collect::<Option<Vec<Pool>>>()) {
        (Some(global), Some(pools)) if errors.is_empty() => Ok(Config {
            path: path.to_path_buf(),
            global,
            pools,
        }),
        _ => {
            // Every rejection reports its reason; an empty list would leave the operator
            // with "invalid" and nothing to fix, so say so rather than print nothing.
            if errors.is_empty() {
                let rule = "rejected without a located reason (a drover bug; please report it)";
                errors.push(read_error(path, rule.into()));
            }
            Err(ConfigErrors(errors))
        }
    }
}

/// Reports each listener whose address an earlier one (in another file) already took, on
/// the later one, naming the earlier.
fn report_collisions(claims: &[Claim], sources: &[Source]) {
    for (later, earlier) in collisions(claims) {
        let (claim, other) = (&claims[later], &claims[earlier]);
        let owner = match other.pool.as_str() {
            "" => String::new(),
            pool => format!(" of pool {pool}"),
        };
        let other_file = sources[other.file].path().display();
        let rule = format!(
            "{} is already used by {}{owner} ({other_file})",
            claim.addr, other.key
        );
        sources[claim.file].report(claim.offset, claim.key, claim.written.clone(), rule);
    }
}

fn read(fs: &dyn Files, path: &Path) -> Result<Source, ConfigError> {
    match fs.read(path) {
        Ok(text) => Ok(Source::new(path.to_path_buf(), text)),
        Err(e) => Err(read_error(path, e.to_string())),
    }
}

/// An error about a whole file, before there is a `Source` to report to.
fn read_error(path: &Path, rule: String) -> ConfigError {
    ConfigError {
        file: path.to_path_buf(),
        line: 1,
        column: 1,
        key: String::new(),
        value: None,
        rule,
    }
}

/// Parses the TOML, reporting every syntax error; `None` when there was one, since the
/// recovered document would only add confusing follow-on errors.
fn parse_toml(source: &Source) -> Option<toml::Spanned<DeTable<'_>>> {
    let (table, errors) = DeTable::parse_recoverable(source.text());
    for error in &errors {
        let offset = error.span().map_or(0, |s| s.start);
        source.report(
            offset,
            "",
            None,
            format!("invalid TOML: {}", error.message()),
        );
    }
    errors.is_empty().then_some(table)
}

/// A glob from `include`, and where it is written (`None` for the default).
type Include = (String, Option<Range<usize>>);

/// The global settings and the `include` globs (`None` when either cannot be known).
fn parse_main(
    main: &Source,
    base: &Path,
    claims: &mut Vec<Claim>,
) -> (Option<Global>, Option<Vec<Include>>) {
    let default = vec![(DEFAULT_INCLUDE.to_owned(), None)];
    let Some(document) = parse_toml(main) else {
        return (None, None);
    };
    let root = Table::root(main, document.get_ref());
    let include: Option<Vec<Include>> = match root.strings("include") {
        Got::Absent => Some(default),
        Got::Invalid => None,
        Got::Valid(items) if items.is_empty() => {
            root.fail("include", "no pools: include is empty");
            Some(Vec::new())
        }
        Got::Valid(items) => Some(
            items
                .into_iter()
                .map(|(s, span)| (s.to_owned(), Some(span)))
                .collect(),
        ),
    };
    let globs = include
        .as_ref()
        .map(|i| i.iter().map(|(s, _)| s.clone()).collect());
    let control = global::control(&root, base);
    if let Some(listen) = control.as_ref().and_then(|c| c.listen.clone()) {
        let (offset, written) = match root.table("control") {
            Got::Valid(control) => control.locate("listen"),
            _ => (0, None),
        };
        let addr = super::ListenAddr::Unix(listen);
        let pool = String::new();
        claims.push(Claim {
            addr,
            file: 0,
            pool,
            key: "control.listen",
            offset,
            written,
        });
    }
    let global = global::parse(&root, base, globs, control);
    if let Some(addr) = global.as_ref().and_then(|g| g.health_listen.clone()) {
        let (offset, written) = root.locate("health_listen");
        claims.push(Claim {
            addr,
            file: 0,
            pool: String::new(),
            key: "health_listen",
            offset,
            written,
        });
    }
    (global, include)
}

/// The pool files the globs select, as (pool name, path), sorted by name. Reports globs
/// that are invalid or unreadable, and an empty result.
fn pool_files(
    fs: &dyn Files,
    main: &Source,
    shown_dir: &Path,
    include: &[Include],
) -> Vec<(String, PathBuf)> {
    let report = |span: &Option<Range<usize>>, rule: String| {
        let (offset, written) = match span {
            Some(span) => (span.start, Some(main.written(span.clone()))),
            None => (0, None),
        };
        main.report(offset, "include", written, rule);
    };
    let mut files = Vec::new();
    let mut failed = false;
    for (glob, span) in include {
        // The folder may hold glob metacharacters of its own; only the pattern is a pattern.
        let dir = glob::Pattern::escape(&shown_dir.to_string_lossy());
        let full = if Path::new(glob).is_absolute() || dir.is_empty() {
            glob.clone()
        } else {
            format!("{dir}/{glob}")
        };
        let paths = match fs.glob(&full) {
            Ok(paths) => paths,
            Err(e) => {
                report(span, format!("invalid glob: {e}"));
                failed = true;
                continue;
            }
        };
        // Whatever the glob matches is meant as a pool file: a directory (or a FIFO, a
        // device) named like one is reported when it is read, never skipped in silence.
        for entry in paths {
            match entry {
                Ok(path) => files.push(path),
                Err(e) => {
                    report(span, format!("cannot read {e}"));
                    failed = true;
                }
            }
        }
    }
    files.sort();
    files.dedup();
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            (
                p.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    named.sort();
    if named.is_empty() && !failed && !include.is_empty() {
        let shown: Vec<&str> = include.iter().map(|(g, _)| g.as_str()).collect();
        let span = include.first().and_then(|(_, span)| span.clone());
        report(
            &span,
            format!("no pools: include matched no files ({})", shown.join(", ")),
        );
    }
    named
}

/// What a pool's name, its file name without `.toml`, may hold.
pub const POOL_NAME_RULE: &str = "[A-Za-z0-9_.-]+";

/// Whether `name` meets [`POOL_NAME_RULE`] (the importers name the files they write by it).
pub fn valid_pool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Why a pool file's name cannot be a pool's name, if it cannot.
fn bad_name(name: &str, file: &Path, seen: &[(&str, &Path)]) -> Option<String> {
    if !valid_pool_name(name) {
        return Some(format!(
            "pool name {name:?} (the file name without .toml) must match {POOL_NAME_RULE}"
        ));
    }
    let (_, other) = seen.iter().find(|(n, f)| *n == name && *f != file)?;
    Some(format!(
        "pool name {name:?} is already used by {}",
        other.display()
    ))
}

fn parse_pool(
    source: &Source,
    pool: &PoolFile<'_>,
    base: &Path,
    claims: &mut Vec<Claim>,
) -> Option<Pool> {
    let document = parse_toml(source)?;
    pool::parse(&Table::root(source, document.get_ref()), pool, base, claims)
}
