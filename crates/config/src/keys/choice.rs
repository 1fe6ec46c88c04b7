//! A key whose value is one of a few words, each naming one variant of an enum
//! ([`Choice`]). The words are declared once, with the enum (the [`choice!`] beside it):
//! the row's type is `Choice(Enum::NAMES)`, the parser reads the variant with
//! `t.value::<Enum>("key")`, the error lists the words, and `drover -t` writes
//! [`Choice::name`].

/// An enum whose variants are the values of a key.
pub(crate) trait Choice: Copy + PartialEq + 'static {
    /// The words, in the order the reference lists them.
    const NAMES: &'static [&'static str];
    /// The variants, in the order of [`Choice::NAMES`].
    const VARIANTS: &'static [Self];
    /// What each word means, said in the error after it (`"embed" (drover-php)`); empty,
    /// or one for each word.
    const MEANINGS: &'static [&'static str] = &[];
    /// Other spellings taken for a variant (php-fpm's `warning`), unlisted.
    const ALIASES: &'static [(&'static str, Self)] = &[];
    /// Said after the words in the error (`(php-fpm's alert, ... also work)`).
    const NOTE: &'static str = "";

    /// The word that selects the variant.
    fn name(self) -> &'static str;

    /// The variant `word` names, or the rule it breaks.
    fn from_name(word: &str) -> Result<Self, String> {
        let named = Self::NAMES
            .iter()
            .zip(Self::VARIANTS)
            .map(|(n, v)| (*n, *v));
        named
            .chain(Self::ALIASES.iter().copied())
            .find(|(name, _)| *name == word)
            .map(|(_, variant)| variant)
            .ok_or_else(Self::rule)
    }

    /// `must be "a", "b" or "c"`, each word with its meaning, then the note.
    fn rule() -> String {
        let words: Vec<String> = Self::NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| match Self::MEANINGS.get(i) {
                Some(meaning) => format!("\"{name}\" ({meaning})"),
                None => format!("\"{name}\""),
            })
            .collect();
        let listed = match words.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        match Self::NOTE {
            "" => format!("must be {listed}"),
            note => format!("must be {listed} {note}"),
        }
    }
}

/// Implements [`Choice`] for `Enum`, each variant with its word, then, in braces, any of
/// the trait's optional consts: `choice!(PmMode { Static = "static", ... });`.
macro_rules! choice {
    ($ty:ident { $($variant:ident = $word:literal),+ $(,)? } $({ $($rest:tt)* })?) => {
        impl $crate::keys::Choice for $ty {
            const NAMES: &'static [&'static str] = &[$($word),+];
            const VARIANTS: &'static [Self] = &[$($ty::$variant),+];
            $($($rest)*)?

            fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $word),+
                }
            }
        }
    };
}

pub(crate) use choice;
