//! docs/pool-keys.md, the per-key reference, written from the rows of the declarations. A test compares it
//! with the committed page (`config::tests::keys`), so the page cannot drift from the code.

use std::fmt::Write as _;

use super::{Default, Flavour, KEYS, Key, Runtimes, Section};

/// The reference page, as markdown.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration keys\n\n\
         <!-- Written from the key declarations in crates/config/src/model/; do not edit by \
         hand. After changing a declaration: DROVER_BLESS=1 cargo test --profile fast -p drover-config \
         keys_reference -->\n\n\
         Every key drover reads, with its type, its default and the runtimes that take it. \
         An unknown key is an error; a key that a pool's runtime or protocol would ignore is \
         refused rather than accepted. Durations are strings with a unit (`\"30s\"`, \
         `\"5m\"`), sizes too (`\"256MiB\"`); relative paths resolve against drover.toml's \
         folder. `drover -t` prints every key of a configuration with its value.\n\n\
         Runtimes: drover-php (`[php] runtime = \"embed\"`), php-cgi (`runtime = \"cgi\"`), \
         WSGI and ASGI (`[python] interface`), command (`[command]`), program (`[program]`, a \
         background pool: docs/programs.md). \"HTTP\" marks a key \
         of `protocol = \"http\"` pools only.\n",
    );
    for section in Section::ALL {
        let _ = write!(out, "\n## {}\n\n", heading(section));
        out.push_str("| key | type | default | runtimes | |\n|---|---|---|---|---|\n");
        for key in KEYS.iter().filter(|k| k.section == section) {
            row(&mut out, key);
        }
    }
    out
}

fn heading(section: Section) -> &'static str {
    match section {
        Section::Global => "drover.toml",
        Section::Control => "drover.toml `[control]`",
        Section::Pool => "A pool file (`pools.d/NAME.toml`)",
        Section::Pm => "`[pm]`",
        Section::Php => "`[php]`",
        Section::Python => "`[python]`",
        Section::Command => "`[command]`",
        Section::Program => "`[program]`",
    }
}

fn row(out: &mut String, key: &Key) {
    let default = match key.default {
        Default::Required => "required".to_owned(),
        Default::Unset => "none".to_owned(),
        Default::Value(text) => format!("`{text}`"),
        Default::Note(text) => text.to_owned(),
    };
    let _ = writeln!(
        out,
        "| `{}` | {} | {} | {} | {} |",
        key.name,
        key.ty.describe(),
        cell(&default),
        runtimes(key),
        cell(key.doc),
    );
}

/// The runtimes column: "any" when every runtime of the section takes it.
fn runtimes(key: &Key) -> String {
    let taken = key.runtimes();
    let mut text = if key.section.global() {
        "–".to_owned()
    } else if taken == key.section.runtimes() && !key.http_only {
        "any".to_owned()
    } else {
        let names: Vec<&str> = taken.flavours().map(Flavour::name).collect();
        names.join(", ")
    };
    if key.http_only {
        text.push_str(" (HTTP)");
    }
    if taken == Runtimes::NONE {
        text = "none".to_owned();
    }
    text
}

/// A table cell: a `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
