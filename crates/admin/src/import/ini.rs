//! php-fpm's INI dialect, one file's text at a time (pure: the caller reads the files and
//! follows `include`): `[section]` headers, `key = value` lines, `;` and `#` comments,
//! double- and single-quoted values, and the INI constants PHP's parser turns into
//! `"1"` (`yes`, `on`, `true`) and `""` (`no`, `off`, `false`, `none`, `null`).

/// One meaningful line of a file, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Section {
        name: String,
        line: usize,
    },
    Entry {
        /// As written, brackets included: `php_admin_value[memory_limit]`, `env[FOO]`.
        key: String,
        /// Unquoted, comment removed, INI constants converted.
        value: String,
        /// As written, comment removed: what a report shows.
        written: String,
        line: usize,
    },
    /// A line php-fpm would refuse to parse.
    Error {
        message: String,
        line: usize,
    },
}

pub fn parse(text: &str) -> Vec<Item> {
    text.lines()
        .enumerate()
        .filter_map(|(i, raw)| parse_line(raw, i + 1))
        .collect()
}

fn parse_line(raw: &str, line: usize) -> Option<Item> {
    let text = raw.trim();
    if text.is_empty() || text.starts_with(';') || text.starts_with('#') {
        return None;
    }
    let error = |message: &str| {
        Some(Item::Error {
            message: message.to_owned(),
            line,
        })
    };
    if let Some(rest) = text.strip_prefix('[') {
        let Some((name, after)) = rest.split_once(']') else {
            return error("a section header without its closing ]");
        };
        let after = after.trim();
        if !(after.is_empty() || after.starts_with(';') || after.starts_with('#')) {
            return error("text after a section header");
        }
        return Some(Item::Section {
            name: name.trim().to_owned(),
            line,
        });
    }
    let Some((key, value)) = text.split_once('=') else {
        return error("expected `key = value`");
    };
    let key = key.trim();
    if key.is_empty() {
        return error("a value without a key");
    }
    let written = value.trim();
    match value_of(written) {
        Ok(value) => Some(Item::Entry {
            key: key.to_owned(),
            written: if let Some(quote) = written.chars().next().filter(|c| "\"'".contains(*c)) {
                format!("{quote}{value}{quote}")
            } else {
                written.split(';').next().unwrap_or("").trim().to_owned()
            },
            value,
            line,
        }),
        Err(message) => error(&message),
    }
}

/// A value as PHP's INI parser reads it.
fn value_of(text: &str) -> Result<String, String> {
    if let Some(rest) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        loop {
            match chars.next() {
                None => return Err("a double-quoted value without its closing quote".into()),
                Some('"') => break,
                Some('\\') => match chars.next() {
                    Some(c @ ('"' | '\\')) => out.push(c),
                    Some(c) => {
                        out.push('\\');
                        out.push(c);
                    }
                    None => out.push('\\'),
                },
                Some(c) => out.push(c),
            }
        }
        return after_quote(chars.as_str()).map(|()| out);
    }
    if let Some(rest) = text.strip_prefix('\'') {
        let Some((inner, after)) = rest.split_once('\'') else {
            return Err("a single-quoted value without its closing quote".into());
        };
        return after_quote(after).map(|()| inner.to_owned());
    }
    let value = text.split(';').next().unwrap_or("").trim();
    Ok(match value.to_ascii_lowercase().as_str() {
        "yes" | "on" | "true" => "1".to_owned(),
        "no" | "off" | "false" | "none" | "null" => String::new(),
        _ => value.to_owned(),
    })
}

fn after_quote(rest: &str) -> Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with(';') {
        Ok(())
    } else {
        Err(format!("text after the closing quote: {rest}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &str, line: usize) -> Item {
        Item::Entry {
            key: key.into(),
            value: value.into(),
            written: String::new(),
            line,
        }
    }

    /// The items without what they looked like as written.
    fn parse(text: &str) -> Vec<Item> {
        super::parse(text)
            .into_iter()
            .map(|item| match item {
                Item::Entry {
                    key, value, line, ..
                } => entry(&key, &value, line),
                other => other,
            })
            .collect()
    }

    #[test]
    fn the_written_value_is_kept_for_the_report() {
        let items = super::parse("daemonize = no ; comment\nx = \"a\" ; c\n");
        let written: Vec<&str> = items
            .iter()
            .map(|i| match i {
                Item::Entry { written, .. } => written.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(written, ["no", "\"a\""]);
    }

    #[test]
    fn sections_entries_comments_and_constants() {
        let text = "; comment\n# another\n\n[www] ; the pool\nuser = www-data\n\
                    listen = /run/php.sock ; where\nclear_env = no\ncatch_workers_output = yes\n\
                    php_admin_value[memory_limit] = 64M\nenv[FOO] = \"a b;c\"\n\
                    php_value[x] = 'raw \\ \"q\"'\n";
        assert_eq!(
            parse(text),
            vec![
                Item::Section {
                    name: "www".into(),
                    line: 4
                },
                entry("user", "www-data", 5),
                entry("listen", "/run/php.sock", 6),
                entry("clear_env", "", 7),
                entry("catch_workers_output", "1", 8),
                entry("php_admin_value[memory_limit]", "64M", 9),
                entry("env[FOO]", "a b;c", 10),
                entry("php_value[x]", "raw \\ \"q\"", 11),
            ]
        );
    }

    #[test]
    fn broken_lines_are_errors_with_their_line() {
        let items = parse("[www\nlisten\n= x\nk = \"open\n");
        let lines: Vec<usize> = items
            .iter()
            .map(|i| match i {
                Item::Error { line, .. } => *line,
                other => panic!("not an error: {other:?}"),
            })
            .collect();
        assert_eq!(lines, [1, 2, 3, 4]);
    }

    #[test]
    fn escaped_quotes_stay_in_double_quoted_values() {
        assert_eq!(
            parse(r#"access.format = "%R \"%m %r\" %s""#),
            vec![entry("access.format", r#"%R "%m %r" %s"#, 1)]
        );
    }
}
