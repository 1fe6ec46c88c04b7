//! Every key of `drover.toml` and of a pool file, declared once, with the model field it
//! fills: each section's struct in `model/` is written with `keys!` (`declare.rs`),
//! which makes of one declaration per key the field, the key's row, the reading of a plain
//! key and what `drover -t` shows. [`KEYS`] (`table.rs`) chains the structs' rows in the
//! reference's order, as php-fpm's option table lists each directive once.
//!
//! A row says where the key lives ([`Section`]), its [`Type`], its
//! [`Default`](enum@Default), the runtimes that refuse it (and with which rule), whether
//! only an HTTP pool reads it, and its one documentation line. From the rows follow:
//! - the known keys of each table, for the unknown-key errors (`names`);
//! - the refusals by runtime (`refuse_by_runtime`) and by protocol (`http_only`);
//! - the reference page docs/pool-keys.md ([`markdown`]), which a test keeps in step;
//! - the checks, by tests, that `drover -t` renders every key in this order with these
//!   defaults, and that each key's type is the one its parser asks for.
//!
//! A key whose value is one of a few words names an enum implementing `Choice`
//! (`choice.rs`): the row's type, the parser, the error and `drover -t` take the words
//! from it.
//!
//! What a key *does* is still code: the rules a plain read does not apply (in the parser of
//! its table, which hands the value in), and its use.

mod choice;
mod declare;
mod doc;
mod read;
mod rows;
mod table;

pub(crate) use choice::{Choice, choice};
pub(crate) use declare::{chain, count, keys};
pub(crate) use rows::{
    ALWAYS_RUNNING, BUILTIN_PATHS, MAX_THREADS, NO_COUNT, NO_REQUESTS, NO_SOCKET, at_least,
    between, http, key, refused,
};

pub use doc::markdown;
pub use rows::STOP_SIGNALS;
pub use table::KEYS;

use super::value::Table;

/// The table a key is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The top level of `drover.toml`.
    Global,
    /// `drover.toml`'s `[control]`.
    Control,
    /// The top level of a pool file.
    Pool,
    Pm,
    Php,
    Python,
    Command,
    /// `[program]`: a background pool (`config/program.rs`).
    Program,
}

impl Section {
    /// Every section, in the order the reference lists them.
    pub const ALL: [Section; 8] = [
        Section::Global,
        Section::Control,
        Section::Pool,
        Section::Pm,
        Section::Php,
        Section::Python,
        Section::Command,
        Section::Program,
    ];

    /// The table's dotted name in its file (`""` for a file's top level).
    pub fn table(self) -> &'static str {
        match self {
            Section::Global | Section::Pool => "",
            Section::Control => "control",
            Section::Pm => "pm",
            Section::Php => "php",
            Section::Python => "python",
            Section::Command => "command",
            Section::Program => "program",
        }
    }

    /// Whether the section is in `drover.toml` (else in a pool file).
    pub fn global(self) -> bool {
        matches!(self, Section::Global | Section::Control)
    }

    /// The runtimes whose pools may hold the section at all.
    pub fn runtimes(self) -> Runtimes {
        match self {
            Section::Php => Runtimes::PHP,
            Section::Python => Runtimes::PYTHON,
            Section::Command => Runtimes::COMMAND,
            Section::Program => Runtimes::PROGRAM,
            _ => Runtimes::ALL,
        }
    }
}

/// What a key's value is written as. The parser of each key asks for this type; a test
/// writes every key with another type and checks the error names this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String,
    /// A string naming a file or folder; relative paths resolve against drover.toml's folder.
    Path,
    /// A string, one of these.
    Choice(&'static [&'static str]),
    Bool,
    Int,
    /// A string with a unit: `"30s"`, `"5m"`, `"1h 30m"`.
    Duration,
    /// A string with a unit: `"256MiB"`, `"1G"`.
    Size,
    Strings,
    /// A table whose keys are rows of their own [`Section`].
    Table,
    /// A table of names the operator chooses (`[env]`, `[php.ini]`).
    Map,
}

impl Type {
    /// How the reference writes the type.
    pub fn describe(self) -> String {
        match self {
            Type::String => "string".into(),
            Type::Path => "path".into(),
            Type::Choice(values) => {
                let quoted: Vec<String> = values.iter().map(|v| format!("`\"{v}\"`")).collect();
                quoted.join(" \\| ")
            }
            Type::Bool => "boolean".into(),
            Type::Int => "integer".into(),
            Type::Duration => "duration".into(),
            Type::Size => "size".into(),
            Type::Strings => "array of strings".into(),
            Type::Table => "table".into(),
            Type::Map => "table of names".into(),
        }
    }

    /// The start of the rule a value of another type breaks (`expected ...`), as the
    /// getters in `value.rs` word it.
    pub fn expected(self) -> &'static str {
        match self {
            Type::String | Type::Path | Type::Choice(_) => "expected a string",
            Type::Bool => "expected a boolean",
            Type::Int => "expected an integer",
            Type::Duration => "expected a duration string",
            Type::Size => "expected a size string",
            Type::Strings => "expected an array of strings",
            Type::Table | Type::Map => "expected a table",
        }
    }
}

/// What a key is when the file leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// The file must write it.
    Required,
    /// Nothing: the feature is off, or the other keys decide.
    Unset,
    /// This value, as TOML (`511`, `"10s"`, `true`); `drover -t` renders the same text.
    Value(&'static str),
    /// Depends on other keys or on the machine, as said.
    Note(&'static str),
}

/// One runtime a pool can run on, as the key rules tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `[php] runtime = "embed"`: drover-php.
    Embed,
    /// `[php] runtime = "cgi"`: php-cgi.
    Cgi,
    /// `[python]`, `interface = "wsgi"`.
    Wsgi,
    /// `[python]`, `interface = "asgi"`.
    Asgi,
    /// `[command]`.
    Command,
    /// `[program]`: a background pool, no socket.
    Program,
}

impl Flavour {
    pub const ALL: [Flavour; 6] = [
        Flavour::Embed,
        Flavour::Cgi,
        Flavour::Wsgi,
        Flavour::Asgi,
        Flavour::Command,
        Flavour::Program,
    ];

    /// How the reference names it.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Embed => "drover-php",
            Flavour::Cgi => "php-cgi",
            Flavour::Wsgi => "WSGI",
            Flavour::Asgi => "ASGI",
            Flavour::Command => "command",
            Flavour::Program => "program",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Flavour::Embed => 1,
            Flavour::Cgi => 2,
            Flavour::Wsgi => 4,
            Flavour::Asgi => 8,
            Flavour::Command => 16,
            Flavour::Program => 32,
        }
    }
}

/// A set of [`Flavour`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtimes(u8);

impl Runtimes {
    pub const NONE: Runtimes = Runtimes(0);
    pub const EMBED: Runtimes = Runtimes(1);
    pub const CGI: Runtimes = Runtimes(2);
    pub const PHP: Runtimes = Runtimes(1 | 2);
    pub const WSGI: Runtimes = Runtimes(4);
    pub const ASGI: Runtimes = Runtimes(8);
    pub const PYTHON: Runtimes = Runtimes(4 | 8);
    pub const COMMAND: Runtimes = Runtimes(16);
    pub const PROGRAM: Runtimes = Runtimes(32);
    pub const ALL: Runtimes = Runtimes(63);

    pub const fn or(self, other: Runtimes) -> Runtimes {
        Runtimes(self.0 | other.0)
    }

    pub fn and(self, other: Runtimes) -> Runtimes {
        Runtimes(self.0 & other.0)
    }

    pub fn minus(self, other: Runtimes) -> Runtimes {
        Runtimes(self.0 & !other.0)
    }

    pub fn has(self, flavour: Flavour) -> bool {
        self.0 & flavour.bit() != 0
    }

    pub fn flavours(self) -> impl Iterator<Item = Flavour> {
        Flavour::ALL.into_iter().filter(move |f| self.has(*f))
    }
}

/// The runtimes whose workers speak HTTP (`protocol = "http"`): drover-python's. The
/// pool parser refuses the protocol on the others (`pool.rs`, `http`).
pub const HTTP_RUNTIMES: Runtimes = Runtimes::PYTHON;

/// One key.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub section: Section,
    pub ty: Type,
    pub default: Default,
    /// Only an HTTP pool (`protocol = "http"`) reads it; a FastCGI pool refuses it.
    pub http_only: bool,
    /// The runtimes that refuse the key wherever it is written, each with the rule their
    /// error states. Refusals that depend on the value (`process_dumpable = false`,
    /// `threads` above 1) are the parser's, and said in [`Key::doc`].
    pub refused: &'static [(Runtimes, &'static str)],
    /// An integer's bounds, both included (the integer type's own bounds apply too).
    pub range: (i64, i64),
    /// The reference's line for it.
    pub doc: &'static str,
}

impl Key {
    /// The runtimes whose pools take the key.
    pub fn runtimes(&self) -> Runtimes {
        let refused = self
            .refused
            .iter()
            .fold(Runtimes::NONE, |all, (r, _)| all.or(*r));
        let mut runtimes = self.section.runtimes();
        if self.http_only {
            runtimes = runtimes.and(HTTP_RUNTIMES);
        }
        runtimes.minus(refused)
    }

    /// The key as written in its file: `pm.max_children`, `listen`.
    pub fn path(&self) -> String {
        match self.section.table() {
            "" => self.name.to_owned(),
            table => format!("{table}.{}", self.name),
        }
    }
}

/// The names of `section`'s keys, in the table's order (a sub-table by its name).
pub(super) fn names(section: Section) -> Vec<&'static str> {
    KEYS.iter()
        .filter(|k| k.section == section)
        .map(|k| k.name)
        .collect()
}

/// The keys only an HTTP pool reads.
pub(super) fn http_only() -> impl Iterator<Item = &'static Key> {
    KEYS.iter().filter(|k| k.http_only)
}

/// Whether a file may set `key` in `table` (`""`: its top level), as the importers write
/// them: a key of the table, or any name in a [`Type::Map`] table.
pub fn known(table: &str, key: &str) -> bool {
    let is_map = |name: &str| KEYS.iter().any(|k| k.ty == Type::Map && k.path() == name);
    is_map(table)
        || KEYS
            .iter()
            .any(|k| k.section.table() == table && k.name == key)
}

/// Refuses each key of `section` written in `t` that the pool's runtime (`flavour`, `None`
/// when unknown: its table has an error, or there are several) refuses, with the rule of
/// its row. An HTTP-only key is judged only on an HTTP pool (`over_http`): a FastCGI pool
/// refuses it for its protocol already.
pub(super) fn refuse_by_runtime(
    t: &Table<'_, '_>,
    section: Section,
    flavour: Option<Flavour>,
    over_http: bool,
) {
    let Some(flavour) = flavour else {
        return;
    };
    for key in KEYS.iter().filter(|k| k.section == section) {
        if !t.contains(key.name) || (key.http_only && !over_http) {
            continue;
        }
        if let Some((_, rule)) = key.refused.iter().find(|(r, _)| r.has(flavour)) {
            t.fail(key.name, *rule);
        }
    }
}
