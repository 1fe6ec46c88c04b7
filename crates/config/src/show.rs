//! What `drover -t` shows for one key ([`Shown`]), asked of each section's model struct
//! ([`Shows`], which `keys!` writes from the keys' declarations), and how a value of the
//! model is written as TOML ([`Toml`]). Below the model: the model's structs answer in
//! these terms, and `render.rs` walks them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `drover -t` shows for one key of a section.
pub(crate) enum Shown<'a> {
    /// `key = TEXT`, the value as TOML.
    Value(String),
    /// `# key = (WHY)`: the key has no value, or does not apply to this pool.
    Unset(Cow<'static, str>),
    /// A table whose keys are the rows of its own section.
    Table(&'a dyn Shows),
    /// A table of names the operator chose (`[env]`, `[php.ini]`).
    Map(&'a BTreeMap<String, String>),
    /// `# [table] (WHY)`: a table that does not apply to this pool.
    NoTable(&'static str),
    /// Nothing at all: a runtime's table on another runtime's pool, the HTTP keys of a
    /// FastCGI pool.
    Hidden,
}

impl Shown<'_> {
    /// The value, as its type writes it.
    pub fn of<T: Toml + ?Sized>(value: &T) -> Self {
        Shown::Value(value.toml())
    }

    /// A key that has no value here, or does not apply.
    pub fn unset(why: impl Into<Cow<'static, str>>) -> Self {
        Shown::Unset(why.into())
    }

    /// `value`, or `why` there is none.
    pub fn or<T: Toml + ?Sized>(value: Option<&T>, why: &'static str) -> Self {
        value.map_or_else(|| Shown::unset(why), Shown::of)
    }

    /// An optional key: its value, or "not set".
    pub fn optional<T: Toml + ?Sized>(value: Option<&T>) -> Self {
        Self::or(value, "not set")
    }
}

/// A section's model struct, asked for each of its keys in the table's order.
pub(crate) trait Shows {
    /// What `key` (a name of this section's rows) shows; `None` for a name the section
    /// does not know, a bug the render test meets first.
    fn shown(&self, key: &str) -> Option<Shown<'_>>;
}

/// A value of the model as `drover -t` writes it: TOML that loads back to the same value.
pub(crate) trait Toml {
    fn toml(&self) -> String;
}

macro_rules! displayed {
    ($($ty:ty),*) => {$(
        impl Toml for $ty {
            fn toml(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

displayed!(bool, u32, i32);

impl Toml for str {
    fn toml(&self) -> String {
        toml::Value::String(self.to_owned()).to_string()
    }
}

impl Toml for String {
    fn toml(&self) -> String {
        self.as_str().toml()
    }
}

impl Toml for Path {
    fn toml(&self) -> String {
        self.display().to_string().toml()
    }
}

impl Toml for PathBuf {
    fn toml(&self) -> String {
        self.as_path().toml()
    }
}

impl Toml for Duration {
    fn toml(&self) -> String {
        humantime::format_duration(*self).to_string().toml()
    }
}

impl<T: Toml> Toml for [T] {
    fn toml(&self) -> String {
        let items: Vec<String> = self.iter().map(Toml::toml).collect();
        format!("[{}]", items.join(", "))
    }
}

impl<T: Toml> Toml for Vec<T> {
    fn toml(&self) -> String {
        self.as_slice().toml()
    }
}

/// A size in bytes, written in the largest binary unit that states it exactly, so that it
/// parses back unchanged.
pub(crate) struct Size(pub u64);

impl Toml for Size {
    fn toml(&self) -> String {
        size(self.0).toml()
    }
}

pub(crate) fn size(bytes: u64) -> String {
    for (unit, factor) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}
