//! [`keys!`]: a model struct declared with its keys, field by field, so that a key is
//! written once: the field it fills, its row (name, type, default, range, refusals,
//! documentation), how its table's parser reads it and what `drover -t` shows for it.
//!
//! ```text
//! keys! {
//!     /// `drover.toml`.
//!     pub struct Global: Section::Global, given GlobalGiven {
//!         /// Written at start, removed at exit.
//!         pub pid_file: Option<PathBuf> = [key("pid_file", Type::Path, Unset, "A file ...")]
//!             => read(given), show(optional);
//!         ...
//!     }
//! }
//! ```
//!
//! Each entry is one of:
//! - `pub FIELD: TYPE = [ROW] => read(READ), show(SHOW);` a field and its key; a field
//!   that holds several keys lists their rows, in the table's order, and may splice a
//!   sub-struct's after them (`= [ROW, ...] + Struct::ROWS`): it is read `given`;
//! - `pub FIELD: TYPE => read(given);` a field no key writes (the pool's name);
//! - `in FIELD = [ROW, ...] (+ Struct::ROWS)? => show(HOOK);` rows whose value is inside
//!   another field (`[php] worker`, in `runtime`'s variant), shown by a hook.
//!
//! `READ` is how the generated `Struct::read(t, given)` fills the field:
//! - `value`, `optional`, `required`: the getter of that name (`keys/read.rs`) reads the
//!   field's one row: its type, its range and its default are the row's;
//! - a function `fn(&Table) -> Option<T>`, beside the declaration: it reads the key and
//!   applies the rules on its value alone (`rlimit_files` in `model/pool.rs`);
//! - `given`: the parser of the table reads it (rules across keys, a value built from
//!   several, the machine) and hands it in the `given` struct this macro declares, one
//!   `Option<T>` per such field (`None`: an error was reported).
//!
//! `SHOW` is what the generated [`Shows`](crate::show::Shows) answers for the rows:
//! `of` (the value), `optional` (the value or "not set"), `name` (a [`Choice`]'s word),
//! `table` (a sub-table's struct), `map` (a table of names), or a hook
//! `fn(&Struct, key: &str) -> Option<Shown>` beside the declaration (`show_socket`) for
//! anything else (a value that depends on the runtime, a unit, a reason it does not
//! apply).
//!
//! Every row gets the struct's section; the struct's `ROWS` are its rows in order, and
//! `KEYS` (`table.rs`) chains the sections' structs.
//!
//! [`Choice`]: super::Choice

/// See the module's documentation.
macro_rules! keys {
    (
        $(#[$meta:meta])*
        pub struct $name:ident: $section:path, given $given:ident {
            $($body:tt)*
        }
    ) => {
        $crate::keys::keys!(@entry [$(#[$meta])*] $name ($section) $given [t given key this]
            fields[] givens[] parts[] reads[] build[] shows[]
            $($body)*
        );
    };

    // A field with its rows, which its parser hands in.
    (@entry $meta:tt $name:ident $section:tt $given:ident [$t:ident $g:ident $k:ident $s:ident]
        fields[$($fields:tt)*] givens[$($givens:tt)*] parts[$($parts:tt)*] reads[$($reads:tt)*]
        build[$($build:tt)*] shows[$($shows:tt)*]
        $(#[$fm:meta])* pub $field:ident : $fty:ty = [$($row:expr),* $(,)?] $(+ $splice:path)?
            => read(given), show($($show:tt)+);
        $($rest:tt)*
    ) => {
        $crate::keys::keys!(@entry $meta $name $section $given [$t $g $k $s]
            fields[$($fields)* $(#[$fm])* pub $field: $fty,]
            givens[$($givens)* pub $field: Option<$fty>,]
            parts[$($parts)* &[$($row),*], $($splice,)?]
            reads[$($reads)* let $field = $g.$field;]
            build[$($build)* $field: $field?,]
            shows[$($shows)* $crate::keys::keys!(@show $s $k [$($row),*] [$($splice)?] $field $($show)+);]
            $($rest)*
        );
    };

    // A field with its one row, read by the row or by a function.
    (@entry $meta:tt $name:ident $section:tt $given:ident [$t:ident $g:ident $k:ident $s:ident]
        fields[$($fields:tt)*] givens[$($givens:tt)*] parts[$($parts:tt)*] reads[$($reads:tt)*]
        build[$($build:tt)*] shows[$($shows:tt)*]
        $(#[$fm:meta])* pub $field:ident : $fty:ty = [$row:expr $(,)?]
            => read($($read:tt)+), show($($show:tt)+);
        $($rest:tt)*
    ) => {
        $crate::keys::keys!(@entry $meta $name $section $given [$t $g $k $s]
            fields[$($fields)* $(#[$fm])* pub $field: $fty,]
            givens[$($givens)*]
            parts[$($parts)* &[$row],]
            reads[$($reads)* let $field = $crate::keys::keys!(@read $t $row, $($read)+);]
            build[$($build)* $field: $field?,]
            shows[$($shows)* $crate::keys::keys!(@show $s $k [$row] [] $field $($show)+);]
            $($rest)*
        );
    };

    // A field no key writes.
    (@entry $meta:tt $name:ident $section:tt $given:ident [$t:ident $g:ident $k:ident $s:ident]
        fields[$($fields:tt)*] givens[$($givens:tt)*] parts[$($parts:tt)*] reads[$($reads:tt)*]
        build[$($build:tt)*] shows[$($shows:tt)*]
        $(#[$fm:meta])* pub $field:ident : $fty:ty => read(given);
        $($rest:tt)*
    ) => {
        $crate::keys::keys!(@entry $meta $name $section $given [$t $g $k $s]
            fields[$($fields)* $(#[$fm])* pub $field: $fty,]
            givens[$($givens)* pub $field: Option<$fty>,]
            parts[$($parts)*]
            reads[$($reads)* let $field = $g.$field;]
            build[$($build)* $field: $field?,]
            shows[$($shows)*]
            $($rest)*
        );
    };

    // Rows whose value is inside another field.
    (@entry $meta:tt $name:ident $section:tt $given:ident [$t:ident $g:ident $k:ident $s:ident]
        fields[$($fields:tt)*] givens[$($givens:tt)*] parts[$($parts:tt)*] reads[$($reads:tt)*]
        build[$($build:tt)*] shows[$($shows:tt)*]
        $(#[$fm:meta])* in $field:ident = [$($row:expr),* $(,)?] $(+ $splice:path)?
            => show($hook:path);
        $($rest:tt)*
    ) => {
        $crate::keys::keys!(@entry $meta $name $section $given [$t $g $k $s]
            fields[$($fields)*]
            givens[$($givens)*]
            parts[$($parts)* &[$($row),*], $($splice,)?]
            reads[$($reads)*]
            build[$($build)*]
            shows[$($shows)* $crate::keys::keys!(@show $s $k [$($row),*] [$($splice)?] $field $hook);]
            $($rest)*
        );
    };

    // Every entry read: the struct, its given values, its rows, its reader and its shows.
    (@entry [$($meta:tt)*] $name:ident ($section:path) $given:ident [$t:ident $g:ident $k:ident $s:ident]
        fields[$($fields:tt)*] givens[$($givens:tt)*] parts[$($parts:tt)*] reads[$($reads:tt)*]
        build[$($build:tt)*] shows[$($shows:tt)*]
    ) => {
        $($meta)*
        pub struct $name {
            $($fields)*
        }

        #[doc = concat!("The fields of [`", stringify!($name), "`] its parser reads itself.")]
        pub(crate) struct $given {
            $($givens)*
        }

        impl $name {
            /// The rows of the keys this struct holds, in the table's order.
            pub(crate) const ROWS: &'static [$crate::keys::Key] = {
                const PARTS: &[&[$crate::keys::Key]] = &[$($parts)*];
                const ROWS: [$crate::keys::Key; $crate::keys::count(PARTS)] =
                    $crate::keys::chain(PARTS, Some($section));
                &ROWS
            };

            /// Reads the fields the rows read; the others are `given`.
            #[allow(
                unused_variables,
                reason = "a struct whose fields are all given reads nothing from the table"
            )]
            pub(crate) fn read($t: &$crate::value::Table<'_, '_>, $g: $given) -> Option<Self> {
                $($reads)*
                Some($name { $($build)* })
            }
        }

        impl $crate::show::Shows for $name {
            fn shown(&self, $k: &str) -> Option<$crate::show::Shown<'_>> {
                let $s = self;
                $($shows)*
                None
            }
        }
    };

    (@read $t:ident $row:expr, value) => { $t.value($crate::keys::keys!(@name $row)) };
    (@read $t:ident $row:expr, optional) => { $t.optional($crate::keys::keys!(@name $row)) };
    (@read $t:ident $row:expr, required) => { $t.required($crate::keys::keys!(@name $row)) };
    (@read $t:ident $row:expr, $read:path) => { $read($t) };

    // A row's name, from a constant: a row's refusals may be built by const calls, which a
    // constant's body keeps for the program's life and a function's would not.
    (@name $row:expr) => {{
        const ROW: $crate::keys::Key = $row;
        ROW.name
    }};

    (@show $s:ident $k:ident [$($row:expr),*] [$($splice:path)?] $field:ident $($show:tt)+) => {
        if [$($crate::keys::keys!(@name $row)),*].contains(&$k) $(|| $splice.iter().any(|row| row.name == $k))? {
            return $crate::keys::keys!(@shown $s $k $field $($show)+);
        }
    };

    (@shown $s:ident $k:ident $field:ident of) => {
        Some($crate::show::Shown::of(&$s.$field))
    };
    (@shown $s:ident $k:ident $field:ident optional) => {
        Some($crate::show::Shown::optional($s.$field.as_ref()))
    };
    (@shown $s:ident $k:ident $field:ident name) => {
        Some($crate::show::Shown::of($s.$field.name()))
    };
    (@shown $s:ident $k:ident $field:ident table) => {
        Some($crate::show::Shown::Table(&$s.$field))
    };
    (@shown $s:ident $k:ident $field:ident map) => {
        Some($crate::show::Shown::Map(&$s.$field))
    };
    (@shown $s:ident $k:ident $field:ident $hook:path) => {
        $hook($s, $k)
    };
}

pub(crate) use keys;

use super::{Key, Section};

/// How many rows `parts` hold.
pub(crate) const fn count(parts: &[&[Key]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// The rows of `parts`, one after the other, each given `section` (when `Some`).
pub(crate) const fn chain<const N: usize>(parts: &[&[Key]], section: Option<Section>) -> [Key; N] {
    let mut rows = [super::rows::key("", super::Type::Bool, super::Default::Unset, ""); N];
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            rows[n] = parts[i][j];
            if let Some(section) = section {
                rows[n].section = section;
            }
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "the rows do not fill the table");
    rows
}
