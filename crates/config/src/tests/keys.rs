//! The key table (`config::keys`) against what the code does: every key written with the
//! wrong type is refused naming the table's type, every runtime refusal in the table is
//! what loading reports, `drover -t` renders the table's keys in its order with its
//! defaults, docs/pool-keys.md is the table's, and the shipped examples load and name only
//! keys of the table.

use std::path::{Path, PathBuf};

use super::assume;
use super::*;
use crate::keys::{self, Flavour, KEYS, Key, Runtimes, Section, Type};

/// A pool of each runtime (and protocol), written with few keys, as (section, lines).
struct Base {
    flavour: Flavour,
    http: bool,
    /// (table, `key = value`) lines; the table is `""` for the top level.
    lines: &'static [(&'static str, &'static str)],
}

const PM: [(&str, &str); 4] = [
    ("pm", "mode = \"dynamic\""),
    ("pm", "max_children = 4"),
    ("pm", "min_spare_servers = 1"),
    ("pm", "max_spare_servers = 2"),
];

macro_rules! base {
    ($flavour:expr, $http:expr, [$($line:expr),* $(,)?]) => {
        Base {
            flavour: $flavour,
            http: $http,
            lines: &[$($line,)* PM[0], PM[1], PM[2], PM[3]],
        }
    };
}

const BASES: [Base; 7] = [
    base!(
        Flavour::Cgi,
        false,
        [
            ("", "listen = \"/run/drover/www.sock\""),
            ("php", "binary = \"/bin/sh\"")
        ]
    ),
    base!(
        Flavour::Embed,
        false,
        [
            ("", "listen = \"/run/drover/www.sock\""),
            ("php", "runtime = \"embed\"")
        ]
    ),
    base!(
        Flavour::Wsgi,
        false,
        [
            ("", "listen = \"/run/drover/www.sock\""),
            ("", "request_terminate_timeout = \"1m\""),
            ("python", "app = \"app\""),
        ]
    ),
    base!(
        Flavour::Wsgi,
        true,
        [
            ("", "listen = \"/run/drover/www.sock\""),
            ("", "protocol = \"http\""),
            ("python", "app = \"app\""),
        ]
    ),
    base!(
        Flavour::Asgi,
        true,
        [
            ("", "listen = \"/run/drover/www.sock\""),
            ("", "protocol = \"http\""),
            ("python", "app = \"app\""),
            ("python", "interface = \"asgi\""),
        ]
    ),
    base!(
        Flavour::Command,
        false,
        [
            ("", "listen = \"127.0.0.1:9000\""),
            ("command", "argv = [\"sh\", \"-c\", \"true\"]"),
        ]
    ),
    // A background pool: no socket, a static count.
    Base {
        flavour: Flavour::Program,
        http: false,
        lines: &[
            ("program", "command = [\"sh\", \"-c\", \"sleep 1\"]"),
            ("pm", "mode = \"static\""),
            ("pm", "max_children = 2"),
        ],
    },
];

impl Base {
    /// Whether `key` is taken by this pool's runtime and protocol.
    fn takes(&self, key: &Key) -> bool {
        key.runtimes().has(self.flavour) && (self.http || !key.http_only)
    }

    /// The pool's text with `key = value` written in its table (replacing the base's line
    /// for it; a table-typed key replaces the base's table).
    fn with(&self, key: &Key, value: &str) -> String {
        let table = key.section.table();
        let replaced = |(t, line): &(&str, &str)| {
            (*t == table && line.split(" = ").next() == Some(key.name))
                || (table.is_empty() && *t == key.name)
        };
        let mut lines: Vec<(&str, String)> = self
            .lines
            .iter()
            .filter(|l| !replaced(l))
            .map(|(t, l)| (*t, (*l).to_owned()))
            .collect();
        lines.push((table, format!("{} = {value}", key.name)));
        render_lines(&lines)
    }

    fn text(&self) -> String {
        let lines: Vec<(&str, String)> = self
            .lines
            .iter()
            .map(|(t, l)| (*t, (*l).to_owned()))
            .collect();
        render_lines(&lines)
    }

    /// The paths (`pm.mode`) the base writes itself.
    fn written(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|(t, l)| {
                let name = l.split(" = ").next().unwrap_or_default();
                if t.is_empty() {
                    name.to_owned()
                } else {
                    format!("{t}.{name}")
                }
            })
            .collect()
    }
}

/// TOML from (table, line) pairs: the top level first, then each table once.
fn render_lines(lines: &[(&str, String)]) -> String {
    let mut tables: Vec<&str> = vec![""];
    for (t, _) in lines {
        if !tables.contains(t) {
            tables.push(t);
        }
    }
    let mut out = String::new();
    for table in tables {
        if !table.is_empty() {
            out += &format!("[{table}]\n");
        }
        for (_, line) in lines.iter().filter(|(t, _)| *t == table) {
            out += &format!("{line}\n");
        }
    }
    out
}

/// The first base that takes `key`.
fn base_for(key: &Key) -> &'static Base {
    BASES
        .iter()
        .find(|b| b.takes(key))
        .unwrap_or_else(|| panic!("no base pool takes {}", key.path()))
}

/// The errors of loading `main` (drover.toml) with one pool file `pool`.
fn errors_of(main: &str, pool: &str) -> Vec<ConfigError> {
    let dir = setup(main, &[("www", pool)]);
    match load_dir(&dir) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.0,
    }
}

/// A value of `ty`'s type other than `ty`.
fn wrong_type(ty: Type) -> &'static str {
    match ty {
        Type::Int | Type::Bool => "\"x\"",
        _ => "1",
    }
}

#[test]
fn every_key_refuses_a_value_of_another_type_naming_its_type() {
    assume(Ok("PHP 8.2.36 (embed)"));
    for key in KEYS {
        let value = wrong_type(key.ty);
        let errors = if key.section.global() {
            let main = match key.section {
                Section::Control => format!("[control]\n{} = {value}\n", key.name),
                _ => format!("{} = {value}\n", key.name),
            };
            errors_of(&main, MINIMAL)
        } else {
            errors_of("", &base_for(key).with(key, value))
        };
        let path = key.path();
        assert!(
            errors
                .iter()
                .any(|e| e.key == path && e.rule.starts_with(key.ty.expected())),
            "{path} = {value}: no \"{}\" error in:\n{}",
            key.ty.expected(),
            ConfigErrors(errors.clone())
        );
    }
}

/// A valid value of `ty`, for the keys a runtime refuses.
fn sample(ty: Type) -> &'static str {
    match ty {
        Type::Duration => "\"2s\"",
        Type::Size => "\"1MiB\"",
        Type::Strings => "[\"127.0.0.1\"]",
        Type::Path => "\"refused.log\"",
        Type::Bool => "true",
        Type::Int => "1",
        _ => "\"/status\"",
    }
}

#[test]
fn every_runtime_refusal_of_the_table_is_reported_with_its_rule() {
    assume(Ok("PHP 8.2.36 (embed)"));
    let mut tried = 0;
    for key in KEYS {
        for (runtimes, rule) in key.refused {
            assert_eq!(
                runtimes.minus(key.section.runtimes()),
                Runtimes::NONE,
                "{}: refused where its table cannot be",
                key.path()
            );
            let bases = BASES
                .iter()
                .filter(|b| runtimes.has(b.flavour) && (b.http || !key.http_only));
            for base in bases {
                let errors = errors_of("", &base.with(key, sample(key.ty)));
                assert!(
                    errors
                        .iter()
                        .any(|e| e.key == key.path() && e.rule == *rule),
                    "{} on {:?}: no {rule:?} in:\n{}",
                    key.path(),
                    base.flavour,
                    ConfigErrors(errors.clone())
                );
                tried += 1;
            }
        }
        // Each runtime is refused for one reason.
        let mut seen = Runtimes::NONE;
        for (runtimes, _) in key.refused {
            assert_eq!(seen.and(*runtimes), Runtimes::NONE, "{}", key.path());
            seen = seen.or(*runtimes);
        }
    }
    assert!(tried >= 10, "only {tried} refusals tried");
}

/// The keys of a rendered block, as `[table]` headers and dotted paths, leaving out the
/// names of a [`Type::Map`] table; with the values of the keys rendered uncommented.
fn rendered_keys(block: &str) -> Vec<(String, Option<String>)> {
    let maps: Vec<String> = KEYS
        .iter()
        .filter(|k| k.ty == Type::Map)
        .map(Key::path)
        .collect();
    let mut table = String::new();
    let mut out = Vec::new();
    for line in block.lines() {
        let header = line
            .strip_prefix('[')
            .or_else(|| line.strip_prefix("# ["))
            .and_then(|l| l.split_once(']'));
        if let Some((name, _)) = header {
            table = name.to_owned();
            out.push((format!("[{table}]"), None));
            continue;
        }
        if maps.contains(&table) {
            continue;
        }
        let (commented, text) = match line.strip_prefix("# ") {
            Some(text) => (true, text),
            None => (false, line),
        };
        let Some((name, value)) = text.split_once(" = ") else {
            continue;
        };
        let path = if table.is_empty() {
            name.to_owned()
        } else {
            format!("{table}.{name}")
        };
        out.push((path, (!commented).then(|| value.to_owned())));
    }
    out
}

/// What the table says a rendered block of `section`'s file holds, in order: for a pool,
/// the runtime table `runtime` (`"php"`) only, and the HTTP keys only `over_http`.
fn expected_keys(section: Section, runtime: &str, over_http: bool) -> Vec<String> {
    let mut out = Vec::new();
    for key in KEYS.iter().filter(|k| k.section == section) {
        if key.http_only && !over_http {
            continue;
        }
        match key.ty {
            Type::Table => {
                let sub = Section::ALL
                    .into_iter()
                    .find(|s| s.table() == key.path())
                    .expect("a section for each table");
                let runtime_table = [
                    Section::Php,
                    Section::Python,
                    Section::Command,
                    Section::Program,
                ];
                if runtime_table.contains(&sub) && sub.table() != runtime {
                    continue;
                }
                out.push(format!("[{}]", key.path()));
                out.extend(expected_keys(sub, runtime, over_http));
            }
            Type::Map => out.push(format!("[{}]", key.path())),
            _ => out.push(key.path()),
        }
    }
    out
}

/// Asserts that `block` holds the keys of `expected`, in its order, and that each value
/// rendered for a key not in `written` is the table's default.
fn assert_rendered(block: &str, expected: &[String], written: &[String]) {
    let rendered = rendered_keys(block);
    let names: Vec<&str> = rendered.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, expected, "rendered:\n{block}");
    for (path, value) in &rendered {
        let Some(value) = value else { continue };
        let key = KEYS.iter().find(|k| k.path() == *path);
        if let Some(keys::Default::Value(default)) = key.map(|k| k.default)
            && !written.contains(path)
        {
            assert_eq!(value, default, "{path}'s default, rendered:\n{block}");
        }
    }
}

#[test]
fn drover_t_renders_the_tables_keys_in_order_with_their_defaults() {
    assume(Ok("PHP 8.2.36 (embed)"));
    for base in &BASES {
        let (_dir, config) = loaded(&[("www", &base.text())]);
        let text = config.render();
        let (global, pool) = text.split_once("\n# pool www (").expect("a pool block");
        assert_rendered(global, &expected_keys(Section::Global, "", false), &[]);
        let runtime = base
            .lines
            .iter()
            .rev()
            .map(|(t, _)| *t)
            .find(|t| ["php", "python", "command", "program"].contains(t));
        let expected = expected_keys(Section::Pool, runtime.unwrap_or(""), base.http);
        assert_rendered(pool, &expected, &base.written());
    }
}

/// The repository: this crate is crates/config.
fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn keys_reference_is_docs_pool_keys_md() {
    let path = repo().join("docs/pool-keys.md");
    let page = keys::markdown();
    if std::env::var_os("DROVER_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/pool-keys.md is not the key table's page (the declarations in crates/config/src/model/); \
         write it with: DROVER_BLESS=1 cargo test --profile fast -p drover-config keys_reference"
    );
}

/// Errors that say a program this machine lacks, which a shipped example may name.
fn about_this_machine(e: &ConfigError) -> bool {
    [
        "command not found",
        "php binary not found",
        "drover-php is not usable",
    ]
    .iter()
    .any(|why| e.rule.contains(why))
}

#[test]
fn the_shipped_drover_toml_and_pools_load() {
    assume(Ok("PHP 8.2.36 (embed)"));
    let root = repo();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pools.d")).unwrap();
    std::fs::copy(root.join("drover.toml"), dir.path().join("drover.toml")).unwrap();
    let shipped = pool_files(&root);
    assert!(shipped.len() >= 3, "{shipped:?}");
    for file in &shipped {
        let name = file.file_name().unwrap().to_string_lossy();
        let name = name.trim_end_matches(".example");
        std::fs::copy(file, dir.path().join("pools.d").join(name)).unwrap();
    }
    // python_path and the like resolve against drover.toml's folder, as installed.
    std::os::unix::fs::symlink(root.join("examples"), dir.path().join("examples")).unwrap();
    match load_dir(&dir) {
        Ok(config) => assert_eq!(config.pools.len(), shipped.len()),
        Err(errors) => {
            let other: Vec<ConfigError> = errors
                .0
                .into_iter()
                .filter(|e| !about_this_machine(e))
                .collect();
            assert!(other.is_empty(), "{}", ConfigErrors(other));
        }
    }
}

/// pools.d's files, `.example` ones too.
fn pool_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("pools.d"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".toml") || name.ends_with(".toml.example")
        })
        .collect();
    files.sort();
    files
}

/// The `# key = value` lines of an example file, with the table they are under.
fn commented_keys(text: &str) -> Vec<(String, String, String)> {
    let mut table = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = name.to_owned();
            continue;
        }
        let Some((name, value)) = line.strip_prefix("# ").and_then(|l| l.split_once(" = ")) else {
            continue;
        };
        let bare = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit());
        if bare {
            out.push((table.clone(), name.to_owned(), value.trim().to_owned()));
        }
    }
    out
}

#[test]
fn the_shipped_examples_name_keys_of_the_table_and_drover_toml_every_global_one() {
    let root = repo();
    for file in pool_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (table, name, _) in commented_keys(&text) {
            assert!(
                keys::known(&table, &name),
                "{}: # {name} (in [{table}]) is not a key of the table",
                file.display()
            );
        }
    }
    let text = std::fs::read_to_string(root.join("drover.toml")).unwrap();
    let commented = commented_keys(&text);
    for key in KEYS
        .iter()
        .filter(|k| k.section.global() && k.ty != Type::Table)
    {
        let table = key.section.table();
        let shown = commented
            .iter()
            .find(|(t, n, _)| t == table && n == key.name)
            .unwrap_or_else(|| panic!("drover.toml does not list {}", key.path()));
        if let keys::Default::Value(default) = key.default {
            assert_eq!(shown.2, default, "drover.toml's {}", key.path());
        }
    }
    for (table, name, _) in commented {
        assert!(
            keys::known(&table, &name),
            "drover.toml: # {name} in [{table}]"
        );
    }
}
