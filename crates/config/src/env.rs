//! `[env]`, and the bound Linux puts on each string a worker's execve passes: the rule
//! both `[env]` (here) and `[php.ini]` (`runtime.rs`, passed as `-d name=value`) meet.

use std::collections::BTreeMap;

use toml::de::DeValue;

use super::value::{Got, Table};

/// Linux's bound on one string of a new program's environment or arguments
/// (`MAX_ARG_STRLEN`, 32 pages), counting `NAME=`, the value and the closing NUL. A longer
/// one makes execve fail with E2BIG when a worker starts, long after the check.
pub const MAX_EXEC_STRING: usize = 128 * 1024;

/// The most bytes `[env]` may hold in all (each `NAME=value` and its NUL). Linux refuses an
/// execve whose arguments and environment pass a quarter of the stack limit (2 MiB with the
/// usual 8 MiB); this leaves room for the runtime's own arguments, its variables and, with
/// `clear_env = false`, drover's environment.
pub const MAX_ENV_BYTES: usize = 512 * 1024;

/// The rule a `NAME=value` string of `len` bytes (without the NUL) breaks, if any.
pub(super) fn exec_string_rule(len: usize) -> Option<String> {
    (len + 1 > MAX_EXEC_STRING).then(|| {
        format!(
            "NAME=value is {} bytes with its NUL; Linux refuses (E2BIG) one longer than \
             {MAX_EXEC_STRING} bytes (MAX_ARG_STRLEN) when the worker starts",
            len + 1
        )
    })
}

/// `[env]`: names a shell would accept, string values only (a number's formatting would
/// otherwise be ours rather than the writer's), each and all within what execve takes.
pub(super) fn env(root: &Table<'_, '_>) -> Option<BTreeMap<String, String>> {
    let table = match root.table("env") {
        Got::Absent => return Some(BTreeMap::new()),
        Got::Invalid => return None,
        Got::Valid(table) => table,
    };
    let mut out = BTreeMap::new();
    let mut valid = true;
    let mut total = 0;
    for (key, value) in table.entries() {
        let name: &str = key.get_ref();
        let mut chars = name.chars();
        let good_name = chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !good_name {
            table.fail(
                name,
                "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            );
            valid = false;
        }
        match value.get_ref() {
            DeValue::String(s) => {
                let len = name.len() + 1 + s.len();
                if let Some(rule) = exec_string_rule(len) {
                    table.fail(name, rule);
                    valid = false;
                }
                total += len + 1;
                out.insert(name.to_owned(), s.to_string());
            }
            other => {
                table.fail(
                    name,
                    format!("expected a string, found {}", other.type_str()),
                );
                valid = false;
            }
        }
    }
    if total > MAX_ENV_BYTES {
        root.fail(
            "env",
            format!(
                "[env] holds {total} bytes (NAME=value and a NUL each); at most \
                 {MAX_ENV_BYTES} (512 KiB), so that a worker's execve stays within Linux's \
                 limit on arguments and environment"
            ),
        );
        valid = false;
    }
    valid.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_strings_stop_at_max_arg_strlen() {
        assert_eq!(exec_string_rule(MAX_EXEC_STRING - 1), None);
        let rule = exec_string_rule(MAX_EXEC_STRING).unwrap();
        assert!(
            rule.contains("131073 bytes") && rule.contains("E2BIG"),
            "{rule}"
        );
    }
}
