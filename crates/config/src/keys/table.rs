//! [`KEYS`]: every key of `drover.toml` and of a pool file, in the order `drover -t`
//! renders them and the reference lists them, chained from the model's structs, which
//! declare each key with the field it fills (`model/`, `keys!`).

use super::Key;
use super::declare::{chain, count};
use crate::model::{Command, Control, Global, Php, Pm, Pool, Program, Python};

/// The sections' structs, in the order the reference lists the sections.
const SECTIONS: &[&[Key]] = &[
    Global::ROWS,
    Control::ROWS,
    Pool::ROWS,
    Pm::ROWS,
    Php::ROWS,
    Python::ROWS,
    Command::ROWS,
    Program::ROWS,
];

/// A static, not a constant: each row has one address, wherever the table is named (a
/// constant's promoted copy may differ between crates and codegen units), so a row found
/// by its table and name is the row itself.
static ROWS: [Key; count(SECTIONS)] = chain(SECTIONS, None);

pub static KEYS: &[Key] = &ROWS;
