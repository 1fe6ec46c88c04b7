//! Located configuration errors and how they print.

use std::fmt;
use std::path::PathBuf;

/// One problem in one file: where it is, which key, what value, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// Dotted key path, e.g. `pm.max_children`. Empty for errors about the whole file
    /// (unreadable, invalid TOML, bad pool name).
    pub key: String,
    /// The offending value as written, when there is one.
    pub value: Option<String>,
    pub rule: String,
}

/// Every error found, in file then line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// `{file}:{line}:{column}: {key}: {rule} (value: {value})`, the shape compilers use, so
/// editors and terminals can jump to the spot.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        // A file-level error has no key; "file:1:1: : rule" would read as a typo.
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.rule)?;
        if let Some(value) = &self.value {
            write!(f, " (value: {value})")?;
        }
        Ok(())
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(key: &str, value: Option<&str>) -> ConfigError {
        ConfigError {
            file: PathBuf::from("pools.d/www.toml"),
            line: 7,
            column: 1,
            key: key.into(),
            value: value.map(Into::into),
            rule: "unknown key; did you mean max_children?".into(),
        }
    }

    #[test]
    fn display_matches_the_documented_shape() {
        assert_eq!(
            error("pm.max_chidren", None).to_string(),
            "pools.d/www.toml:7:1: pm.max_chidren: unknown key; did you mean max_children?"
        );
        assert_eq!(
            error("pm.max_chidren", Some("5")).to_string(),
            "pools.d/www.toml:7:1: pm.max_chidren: unknown key; did you mean max_children? (value: 5)"
        );
        assert_eq!(
            error("", None).to_string(),
            "pools.d/www.toml:7:1: unknown key; did you mean max_children?"
        );
    }

    #[test]
    fn errors_print_one_per_line() {
        let all = ConfigErrors(vec![error("a", None), error("b", None)]);
        assert_eq!(all.to_string().lines().count(), 2);
    }
}
