//! The access log's format (`access_format`), php-fpm's `access.format`, parsed once: by
//! the master at config load (to refuse an unknown token with file:line:key) and by each
//! zygote into the [`Part`]s its workers render every line from.
//!
//! Tokens, with php-fpm's meanings: `%R` remote address, `%u` remote user, `%t` time
//! (`%{strftime}t`), `%m` method, `%r` request URI, `%q` query, `%Q` `?` when there is a
//! query, `%s` status, `%f` script, `%d` duration in seconds (`%{mili}d`, `%{micro}d`),
//! `%M` peak memory in bytes, `%C` CPU %, `%l` content length, `%{Header-Name}i` a request
//! header, `%{VAR}e` a FastCGI param, `%p` pid, `%n` pool name, `%%`. `"json"` instead of a
//! format writes one JSON object per line.

/// php-fpm's `access.format` default.
pub const DEFAULT_FORMAT: &str = "%R - %u %t \"%m %r\" %s";

/// The `%t` time format when none is given: php-fpm's (Apache's common log time).
pub const DEFAULT_TIME: &str = "%d/%b/%Y:%H:%M:%S %z";

/// The unit `%d` shows a duration in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds with milliseconds (`0.012`), php-fpm's `%d`.
    Seconds,
    Millis,
    Micros,
}

/// One piece of a parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    RemoteAddr,
    RemoteUser,
    /// strftime format.
    Time(String),
    Method,
    Uri,
    Query,
    QueryMark,
    Status,
    Script,
    Duration(Unit),
    Memory,
    Cpu,
    ContentLength,
    /// The param's name in its `HTTP_` form (`User-Agent` → `HTTP_USER_AGENT`).
    Header(String),
    /// A FastCGI param by name.
    Param(String),
    Pid,
    Pool,
}

/// A parsed `access_format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    Text(Vec<Part>),
    /// One JSON object per line with every field.
    Json,
}

/// Parses `access_format` (`"json"` or a php-fpm format); the error names the token.
pub fn parse(format: &str) -> Result<Format, String> {
    if format == "json" {
        return Ok(Format::Json);
    }
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            continue;
        }
        let mut arg = None;
        let mut token = chars.next().ok_or("a lone % at the end (write %% for %)")?;
        if token == '{' {
            let mut inner = String::new();
            loop {
                match chars.next() {
                    Some('}') => break,
                    Some(c) => inner.push(c),
                    None => return Err(format!("%{{{inner} is not closed with }}")),
                }
            }
            arg = Some(inner);
            token = chars.next().ok_or_else(|| {
                format!(
                    "%{{{}}} lacks its token letter",
                    arg.as_deref().unwrap_or("")
                )
            })?;
        }
        if token == '%' && arg.is_none() {
            literal.push('%');
            continue;
        }
        let part = match (token, arg) {
            ('R', None) => Part::RemoteAddr,
            ('u', None) => Part::RemoteUser,
            ('t', arg) => Part::Time(arg.unwrap_or_else(|| DEFAULT_TIME.to_owned())),
            ('m', None) => Part::Method,
            ('r', None) => Part::Uri,
            ('q', None) => Part::Query,
            ('Q', None) => Part::QueryMark,
            ('s', None) => Part::Status,
            ('f', None) => Part::Script,
            ('d', None) => Part::Duration(Unit::Seconds),
            ('d', Some(unit)) => Part::Duration(match unit.as_str() {
                "seconds" => Unit::Seconds,
                "mili" | "milli" | "milliseconds" => Unit::Millis,
                "micro" | "microseconds" => Unit::Micros,
                _ => {
                    return Err(format!(
                        "%{{{unit}}}d: the unit must be seconds, mili or micro"
                    ));
                }
            }),
            ('M', None) => Part::Memory,
            ('C', None) => Part::Cpu,
            ('l', None) => Part::ContentLength,
            ('i', Some(header)) if !header.is_empty() => Part::Header(header_param(&header)),
            ('e', Some(var)) if !var.is_empty() => Part::Param(var),
            ('p', None) => Part::Pid,
            ('n', None) => Part::Pool,
            ('i' | 'e', _) => return Err(format!("%{token} needs a name: %{{NAME}}{token}")),
            (token, Some(arg)) => return Err(format!("unknown token %{{{arg}}}{token}")),
            (token, None) => return Err(format!("unknown token %{token}")),
        };
        if !literal.is_empty() {
            parts.push(Part::Literal(std::mem::take(&mut literal)));
        }
        parts.push(part);
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(Format::Text(parts))
}

/// A header's FastCGI param: `User-Agent` → `HTTP_USER_AGENT`.
pub fn header_param(header: &str) -> String {
    let name: String = header
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect();
    format!("HTTP_{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_format_parses_to_its_parts() {
        let Format::Text(parts) = parse(DEFAULT_FORMAT).unwrap() else {
            panic!("text expected");
        };
        assert_eq!(
            parts,
            vec![
                Part::RemoteAddr,
                Part::Literal(" - ".into()),
                Part::RemoteUser,
                Part::Literal(" ".into()),
                Part::Time(DEFAULT_TIME.into()),
                Part::Literal(" \"".into()),
                Part::Method,
                Part::Literal(" ".into()),
                Part::Uri,
                Part::Literal("\" ".into()),
                Part::Status,
            ]
        );
    }

    #[test]
    fn braced_tokens_and_percent() {
        let Format::Text(parts) =
            parse("%{User-Agent}i %{SCRIPT_NAME}e %{micro}d %{%H}t 100%%").unwrap()
        else {
            panic!("text expected");
        };
        assert_eq!(
            parts,
            vec![
                Part::Header("HTTP_USER_AGENT".into()),
                Part::Literal(" ".into()),
                Part::Param("SCRIPT_NAME".into()),
                Part::Literal(" ".into()),
                Part::Duration(Unit::Micros),
                Part::Literal(" ".into()),
                Part::Time("%H".into()),
                Part::Literal(" 100%".into()),
            ]
        );
    }

    #[test]
    fn json_is_a_format_of_its_own() {
        assert_eq!(parse("json"), Ok(Format::Json));
    }

    #[test]
    fn bad_tokens_are_named() {
        assert_eq!(parse("%z").unwrap_err(), "unknown token %z");
        assert!(parse("%{x}d").unwrap_err().contains("%{x}d"));
        assert!(parse("%i").unwrap_err().contains("needs a name"));
        assert!(parse("%{abc").unwrap_err().contains("not closed"));
        assert!(parse("50%").unwrap_err().contains("lone %"));
        assert_eq!(parse("%{x}R").unwrap_err(), "unknown token %{x}R");
    }
}
