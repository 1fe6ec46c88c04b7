//! The one rule on the names of the files an import writes: a pool is written to
//! `pools.d/NAME.toml`, so NAME, which comes from the imported files (a php-fpm `[www]`
//! section, a supervisord `[program:x]`, gunicorn's `proc_name`), must be a plain file
//! name that drover's loader takes as a pool's name. A name such as `../../x` or `/abs/x`
//! would otherwise put the file outside the `-o` folder, and an import is often run as
//! root on files another user wrote.

use super::Note;

/// Why `name` cannot name a pool file, if it cannot: drover's own pool-name rule
/// ([`drover_config::POOL_NAME_RULE`]), and no leading dot (`.`, `..` and hidden files).
pub fn refusal(name: &str) -> Option<String> {
    if drover_config::valid_pool_name(name) && !name.starts_with('.') {
        return None;
    }
    Some(format!(
        "refused: {name:?} cannot name a pool file: drover writes a pool to \
         pools.d/NAME.toml, and a pool's name must match {} and not start with a dot; \
         rename it (nothing was written)",
        drover_config::POOL_NAME_RULE
    ))
}

/// A refusal of `name`, written as `setting` at `place`, as the note an import stops on.
pub fn refused(place: &impl std::fmt::Display, setting: &str, name: &str) -> Option<Note> {
    refusal(name).map(|why| Note::new(place, setting, &why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_pool_names_make_files() {
        for good in ["www", "laravel-worker", "app_2", "a.b"] {
            assert_eq!(refusal(good), None, "{good}");
        }
        for bad in [
            "", ".", "..", ".hidden", "../../x", "/abs/x", "./a", "a/b", "a\0b", "a\nb", "a b",
            "www@2", "café",
        ] {
            let why = refusal(bad).unwrap_or_else(|| panic!("{bad:?} taken"));
            assert!(why.contains("[A-Za-z0-9_.-]+"), "{why}");
        }
    }
}
