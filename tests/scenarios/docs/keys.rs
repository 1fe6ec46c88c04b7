//! The keys the manual documents are the keys drover knows, both ways:
//! - every TOML block is loaded through `drover::config::load_texts`, as a pool file and as
//!   `drover.toml`, and must load without an unknown key in one of the two;
//! - every row of a reference table (`| key | ...`) in docs/configuration.md (and
//!   docs/pool-keys.md, once generated) names a key that loads the same way;
//! - every key `drover -t` shows (`Config::render`) is named in those pages.
//!
//! Each load first proves it is not blind: a made-up key in each table must be reported.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::markdown::{Block, heading, pages, root, split};

/// A key no version of drover has: the loader must call it unknown wherever it is written.
const BOGUS: &str = "drover_docs_no_such_key";

/// Tables whose keys are the operator's own (`[env]` names, php.ini settings).
const FREE_TABLES: &[&str] = &["env", "php.ini", "php.admin_ini"];

/// Where a TOML text is loaded: as `drover.toml`, or as a pool file beside an empty one.
#[derive(Clone, Copy, Debug)]
enum Role {
    Global,
    Pool,
}

/// The key paths `load_texts` reports as unknown for `text` in `role`.
fn unknown_keys(role: Role, text: &str) -> Vec<String> {
    let dir = PathBuf::from("/nonexistent/drover-docs");
    let main = dir.join("drover.toml");
    let files = match role {
        Role::Global => BTreeMap::from([(main.clone(), text.to_string())]),
        Role::Pool => BTreeMap::from([
            (main.clone(), String::new()),
            (dir.join("pools.d/doc.toml"), text.to_string()),
        ]),
    };
    match drover::config::load_texts(&main, &files) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .0
            .into_iter()
            .filter(|e| e.rule.starts_with("unknown key"))
            .map(|e| e.key)
            .collect(),
    }
}

/// `text` with `BOGUS = 0` written into each of `tables` (`""`: the top level).
fn with_bogus(text: &str, tables: &[String]) -> String {
    let mut out = String::new();
    if tables.iter().any(String::is_empty) {
        out.push_str(&format!("{BOGUS} = 0\n"));
    }
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        let header = line
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.split(']').next());
        if header.is_some_and(|h| tables.iter().any(|t| t == h.trim())) {
            out.push_str(&format!("{BOGUS} = 0\n"));
        }
    }
    out
}

/// The tables a TOML text writes keys into, `""` for the top level, free tables left out.
fn tables_of(text: &str) -> Vec<String> {
    let mut tables = vec![String::new()];
    for line in text.lines() {
        let header = line
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.split(']').next());
        if let Some(name) = header.map(|h| h.trim().trim_matches('"').to_string())
            && !FREE_TABLES.contains(&name.as_str())
            && !tables.contains(&name)
        {
            tables.push(name);
        }
    }
    tables
}

/// Why `text` documents a key drover does not know, or proves nothing; `None` when every key
/// in it is known, in the role where the loader also reports a made-up key in each table.
fn check(text: &str) -> Option<String> {
    let tables = tables_of(text);
    let mut why = Vec::new();
    for role in [Role::Pool, Role::Global] {
        let unknown = unknown_keys(role, text);
        if !unknown.is_empty() {
            why.push(format!("as {role:?}: unknown {}", unknown.join(", ")));
            continue;
        }
        let seen = unknown_keys(role, &with_bogus(text, &tables));
        if seen.len() == tables.len() && seen.iter().all(|k| k.ends_with(BOGUS)) {
            return None;
        }
        why.push(format!(
            "as {role:?}: a made-up key in each of {tables:?} gave only {seen:?}"
        ));
    }
    Some(why.join("; "))
}

#[test]
fn every_toml_block_names_known_keys() {
    let mut errors = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        let (_, blocks) = split(&text);
        for Block { info, text, line } in blocks.iter().filter(|b| b.info == "toml") {
            checked += 1;
            if let Err(e) = text.parse::<toml::Table>() {
                errors.push(format!("{}:{line}: {info}: not TOML: {e}", page.display()));
            } else if let Some(why) = check(text) {
                errors.push(format!("{}:{line}: {why}", page.display()));
            }
        }
    }
    assert!(checked > 15, "only {checked} TOML blocks found");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The keys of a page's reference tables (`| key | ...`, or `| table | key | ...`), each as
/// TOML: `[pm]\nmode = 0`. A heading that names a table (`` ### `[pm]` ``) holds its keys.
fn reference_keys(text: &str) -> Vec<(usize, String)> {
    let mut keys = Vec::new();
    let mut section = String::new();
    let mut columns: Vec<String> = Vec::new();
    for (line, prose) in split(text).0 {
        if let Some(h) = heading(prose) {
            // A heading that is a table's name (`[pm]`) holds that table's keys.
            section = h
                .trim_matches('`')
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or("")
                .to_string();
            continue;
        }
        let cells: Vec<&str> = prose
            .trim()
            .trim_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        if !prose.starts_with('|') {
            columns.clear();
        } else if columns.is_empty() {
            columns = cells.iter().map(|c| c.to_string()).collect();
        } else if let Some(toml) = key_line(&columns, &cells, &section) {
            keys.push((line, toml));
        }
    }
    keys
}

/// One reference row as TOML, when the table is a key table and the row names a key.
fn key_line(columns: &[String], cells: &[&str], section: &str) -> Option<String> {
    let key_at = columns.iter().position(|c| c == "key")?;
    let cell = cells.get(key_at)?;
    if cell.starts_with("---") {
        return None;
    }
    let table = match columns.iter().position(|c| c == "table") {
        Some(at) => cells
            .get(at)?
            .trim_matches('`')
            .trim_matches(['[', ']'])
            .to_string(),
        None => section.to_string(),
    };
    // `[control]` `listen`: a table named in the key cell itself.
    let (table, key) = match cell.split_once("` `") {
        Some((t, k)) => (
            t.trim_matches(['`', '[', ']']).to_string(),
            k.trim_matches('`'),
        ),
        None => (table, cell.strip_prefix('`')?.strip_suffix('`')?),
    };
    if FREE_TABLES.contains(&table.as_str()) {
        return None;
    }
    Some(match table.as_str() {
        "" => format!("{key} = 0\n"),
        t => format!("[{t}]\n{key} = 0\n"),
    })
}

#[test]
fn every_reference_key_is_known() {
    let mut rows = 0;
    let mut errors = Vec::new();
    // configuration.md's tables, and the generated key reference once it is there.
    for page in ["docs/configuration.md", "docs/pool-keys.md"] {
        let Ok(text) = std::fs::read_to_string(root().join(page)) else {
            continue;
        };
        for (line, toml) in reference_keys(&text) {
            rows += 1;
            if let Some(why) = check(&toml) {
                errors.push(format!("{page}:{line}: {toml:?}: {why}"));
            }
        }
    }
    assert!(rows > 60, "only {rows} reference rows found");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn a_made_up_key_is_refused() {
    assert!(check("listen = \"/run/x.sock\"\n[pm]\nmode = \"static\"\n").is_none());
    assert!(check("[pm]\nmax_chidren = 4\n").is_some());
    assert!(check("[control]\nlisten = \"/run/c.sock\"\n").is_none());
    assert!(check(&format!("[python]\n{BOGUS} = 1\n")).is_some());
}

/// Pools that between them make `drover -t` show every key: each runtime, dynamic `[pm]`,
/// HTTP with WSGI and with ASGI.
const RENDERED_POOLS: &[&str] = &[
    "listen = \"/run/d/cmd.sock\"\n[pm]\nmode = \"dynamic\"\nmax_children = 4\n\
     min_spare_servers = 1\nmax_spare_servers = 2\n[command]\nargv = [\"/bin/true\"]\n",
    "listen = \"127.0.0.1:9000\"\n[pm]\nmode = \"ondemand\"\nmax_children = 2\n\
     [php]\nruntime = \"cgi\"\n",
    "listen = \"127.0.0.1:9001\"\nprotocol = \"http\"\nrequest_terminate_timeout = \"5s\"\n\
     [pm]\nmode = \"static\"\nmax_children = 1\n[python]\napp = \"app:app\"\n",
    "listen = \"127.0.0.1:9002\"\nprotocol = \"http\"\n[pm]\nmode = \"static\"\n\
     max_children = 1\n[python]\napp = \"main:app\"\ninterface = \"asgi\"\n",
];

/// Every key `drover -t` shows for [`RENDERED_POOLS`] and a `drover.toml` with a control
/// socket, set or not (`# key = (not set)`), free tables left out.
fn rendered_keys() -> Vec<String> {
    let dir = PathBuf::from("/nonexistent/drover-docs");
    let main = dir.join("drover.toml");
    let mut files = BTreeMap::from([(
        main.clone(),
        "[control]\nlisten = \"/run/d/c.sock\"\n".into(),
    )]);
    for (n, text) in RENDERED_POOLS.iter().enumerate() {
        files.insert(dir.join(format!("pools.d/p{n}.toml")), (*text).to_string());
    }
    let config = drover::config::load_texts(&main, &files).unwrap_or_else(|errors| {
        let lines: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
        panic!("the pools do not load:\n{}", lines.join("\n"))
    });
    let mut keys = Vec::new();
    let mut table = String::new();
    for line in config.render().lines() {
        let line = line.trim_start_matches("# ");
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = name.to_string();
        } else if let Some((key, _)) = line.split_once(" = ")
            && !FREE_TABLES.contains(&table.as_str())
            && !keys.iter().any(|k| k == key)
        {
            keys.push(key.to_string());
        }
    }
    keys
}

#[test]
fn every_key_drover_shows_is_documented() {
    let mut reference = std::fs::read_to_string(root().join("docs/configuration.md"))
        .expect("docs/configuration.md");
    // The generated key reference, once there, documents keys too.
    reference
        .push_str(&std::fs::read_to_string(root().join("docs/pool-keys.md")).unwrap_or_default());
    let keys = rendered_keys();
    assert!(
        keys.len() > 50,
        "only {} keys rendered: {keys:?}",
        keys.len()
    );
    let missing: Vec<&String> = keys
        .iter()
        .filter(|key| !reference.contains(&format!("`{key}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "keys drover -t shows that docs/configuration.md does not document: {missing:?}"
    );
}

#[test]
fn configuration_md_names_the_keys_of_the_generated_reference() {
    let keys_of = |page: &str| -> std::collections::BTreeSet<String> {
        let text = std::fs::read_to_string(root().join(page)).expect(page);
        reference_keys(&text)
            .into_iter()
            .map(|(_, toml)| toml)
            .collect()
    };
    // Where the two pages lay the same keys out differently: the generated page lists each
    // table as a key of its parent (`pm`, `[php] ini`), and heads `[control]` as
    // "drover.toml `[control]`", so its `listen` reads as a top-level key (which the pool
    // files have too); configuration.md gives the tables their own headings.
    let tables = [
        "command", "control", "env", "php", "pm", "program", "python",
    ];
    let laid_out_as_tables = |toml: &String| {
        tables.iter().any(|t| *toml == format!("{t} = 0\n"))
            || *toml == "[php]\nini = 0\n"
            || *toml == "[php]\nadmin_ini = 0\n"
            || *toml == "[control]\nlisten = 0\n"
    };
    let detailed: std::collections::BTreeSet<String> = keys_of("docs/configuration.md")
        .into_iter()
        .filter(|toml| !laid_out_as_tables(toml))
        .collect();
    let generated: std::collections::BTreeSet<String> = keys_of("docs/pool-keys.md")
        .into_iter()
        .filter(|toml| !laid_out_as_tables(toml))
        .collect();
    assert!(
        generated.len() > 50,
        "only {} keys in docs/pool-keys.md",
        generated.len()
    );
    let missing: Vec<_> = generated.difference(&detailed).collect();
    let extra: Vec<_> = detailed.difference(&generated).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/configuration.md's reference and docs/pool-keys.md (the declarations in crates/config/src/model/) \
         disagree: not in configuration.md: {missing:?}; not in the table: {extra:?}"
    );
}
