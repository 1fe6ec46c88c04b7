//! Reading a key by its declaration: the row's type picks the getter, its range bounds an
//! integer, and its default, when the file leaves the key out, is read from the row's text
//! by the same getter, so that the value `drover -t` shows and docs/pool-keys.md states is
//! the value the parser takes (`listen_backlog = 511` is written once, in the row).

use std::path::PathBuf;
use std::time::Duration;

use toml::de::DeTable;

use super::super::source::Source;
use super::super::value::{Got, Table};
use super::{Choice, Default, KEYS, Key, Type};

/// A Rust type a key's [`Type`] is read into.
pub(crate) trait Read: Sized {
    /// Reads `key` of `t` with the getter of its declared type.
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self>;
}

impl Read for bool {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert_eq!(key.ty, Type::Bool, "{}", key.path());
        t.bool(key.name)
    }
}

impl Read for Duration {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert_eq!(key.ty, Type::Duration, "{}", key.path());
        t.duration(key.name)
    }
}

impl Read for String {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert!(
            matches!(key.ty, Type::String | Type::Path | Type::Choice(_)),
            "{}",
            key.path()
        );
        match t.string(key.name) {
            Got::Valid(s) => Got::Valid(s.to_owned()),
            Got::Absent => Got::Absent,
            Got::Invalid => Got::Invalid,
        }
    }
}

impl Read for Vec<String> {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert_eq!(key.ty, Type::Strings, "{}", key.path());
        match t.strings(key.name) {
            Got::Valid(items) => Got::Valid(items.into_iter().map(|(s, _)| s.to_owned()).collect()),
            Got::Absent => Got::Absent,
            Got::Invalid => Got::Invalid,
        }
    }
}

/// A [`Type::Choice`]: the variant its word names.
impl<T: Choice> Read for T {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert_eq!(key.ty, Type::Choice(T::NAMES), "{}", key.path());
        t.parse(key.name, T::from_name)
    }
}

/// A [`Type::Size`], in bytes.
impl Read for u64 {
    fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
        debug_assert_eq!(key.ty, Type::Size, "{}", key.path());
        t.size(key.name)
    }
}

/// A [`Type::Int`] within the row's range and the type's.
macro_rules! int {
    ($($ty:ty),*) => {$(
        impl Read for $ty {
            fn read(t: &Table<'_, '_>, key: &Key) -> Got<Self> {
                debug_assert_eq!(key.ty, Type::Int, "{}", key.path());
                let (low, high) = key.range;
                let high = high.min(i64::from(<$ty>::MAX));
                t.int(key.name, low.max(i64::from(<$ty>::MIN))..=high)
            }
        }
    )*};
}

int!(u32, i32);

impl Table<'_, '_> {
    /// The key `name` of this table, as its row declares it: its type, its range, and its
    /// [`Default::Value`] when the file leaves it out. `None`: an error was reported.
    pub fn value<T: Read>(&self, name: &str) -> Option<T> {
        let key = declared(self.name(), name);
        T::read(self, key).or_else(|| default(key))
    }

    /// A key the file must write (its row's default is [`Default::Required`]); absent, it
    /// is reported missing.
    pub fn required<T: Read>(&self, name: &str) -> Option<T> {
        let key = declared(self.name(), name);
        debug_assert_eq!(key.default, Default::Required, "{}", key.path());
        T::read(self, key).required(self, name)
    }

    /// An optional key (its row's default is [`Default::Unset`] or a [`Default::Note`]):
    /// `Some(None)` when the file leaves it out.
    pub fn optional<T: Read>(&self, name: &str) -> Option<Option<T>> {
        let key = declared(self.name(), name);
        debug_assert!(
            !matches!(key.default, Default::Value(_) | Default::Required),
            "{} has a default",
            key.path()
        );
        T::read(self, key).optional()
    }
}

/// The row of key `name` in the table named `table` (`""`: a file's top level, `"pm"`).
/// A name the table lacks is a bug the tests meet first.
fn declared(table: &str, name: &str) -> &'static Key {
    KEYS.iter()
        .find(|k| k.section.table() == table && k.name == name)
        .unwrap_or_else(|| panic!("no row declares {table}.{name} (config/model/)"))
}

/// The row's [`Default::Value`], read from its text by the getter of its type.
fn default<T: Read>(key: &Key) -> T {
    let Default::Value(text) = key.default else {
        panic!("{} has no default value in its row", key.path());
    };
    let line = format!("{} = {text}", key.name);
    let source = Source::new(PathBuf::from("config/model/"), line);
    let read = match DeTable::parse(source.text()) {
        Ok(table) => match T::read(&Table::root(&source, table.get_ref()), key) {
            Got::Valid(value) => Some(value),
            Got::Absent | Got::Invalid => None,
        },
        Err(_) => None,
    };
    match (read, source.into_errors().as_slice()) {
        (Some(value), []) => value,
        (_, errors) => panic!("{}'s default {text} does not read: {errors:?}", key.path()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default a row states reads, by the getter of the row's type, as the parser
    /// would read it from a file (else the first pool leaving the key out would panic).
    #[test]
    fn every_stated_default_reads_by_its_type() {
        for key in KEYS {
            if !matches!(key.default, Default::Value(_)) {
                continue;
            }
            match key.ty {
                Type::Bool => _ = default::<bool>(key),
                Type::Duration => _ = default::<Duration>(key),
                Type::Int => _ = default::<i32>(key),
                Type::Size => _ = default::<u64>(key),
                Type::Strings => _ = default::<Vec<String>>(key),
                Type::String | Type::Choice(_) | Type::Path => _ = default::<String>(key),
                Type::Table | Type::Map => {}
            }
        }
    }

    #[test]
    fn a_row_is_found_by_its_table_and_name_and_names_no_other() {
        for key in KEYS {
            assert!(std::ptr::eq(declared(key.section.table(), key.name), key));
        }
        assert_eq!(declared("pm", "max_spawn_rate").range, (1, i64::MAX));
    }
}
