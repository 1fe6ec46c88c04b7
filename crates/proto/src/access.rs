//! The access log's format (`access_format`), php-fpm's `access.format`, parsed once: by
//! the master at config load (to refuse an unknown token or modifier with file:line:key)
//! and by each zygote into the [`Part`]s its workers render every line from.
//!
//! Tokens, with php-fpm's meanings (`sapi/fpm/fpm/fpm_log.c`): `%R` remote address, `%u`
//! remote user, `%t` when the request began and `%T` when its line is written
//! (`%{strftime}t`, `%{strftime}T`), `%m` method, `%r` request URI, `%q` query, `%Q` `?`
//! when there is a query, `%s` status, `%f` script, `%d` duration (`%{seconds|mili|
//! miliseconds|milli|milliseconds|micro|microseconds}d`), `%M` peak memory
//! (`%{bytes|kilo|kilobytes|mega|megabytes}M`), `%C` CPU % of the duration
//! (`%{total|user|system}C`), `%l` content length, `%{Name}o` a response header,
//! `%{VAR}e` a FastCGI param, `%p` pid, `%P` parent pid, `%n` pool name, `%%`. drover
//! adds `%{Header-Name}i`, a request header, and `%I`, the request's id (its
//! X-Request-Id, nginx's `$request_id`, or one the worker made). Modifiers are case-insensitive, as in
//! php-fpm. `"json"` instead of a format writes one JSON object per line.

/// php-fpm's `access.format` default.
pub const DEFAULT_FORMAT: &str = "%R - %u %t \"%m %r\" %s";

/// The `%t` time format when none is given: php-fpm's (Apache's common log time).
pub const DEFAULT_TIME: &str = "%d/%b/%Y:%H:%M:%S %z";

/// The unit `%d` shows a duration in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds with milliseconds (`0.012`), php-fpm's `%d`.
    Seconds,
    /// Milliseconds with microseconds (`12.345`), `%{mili}d`.
    Millis,
    /// Whole microseconds (`12345`), `%{micro}d`.
    Micros,
}

/// The unit `%M` shows the peak memory in; php-fpm divides by 1024 and truncates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryUnit {
    Bytes,
    Kilobytes,
    Megabytes,
}

/// Which CPU time `%C` shows (user mode, system mode or both), as a percentage of the
/// request's duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMode {
    /// User and system.
    Total,
    User,
    System,
}

/// Which moment a time token shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// `%t`: when the request began.
    Start,
    /// `%T`: when the line is written (the request has ended).
    End,
}

/// One piece of a parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    RemoteAddr,
    RemoteUser,
    /// A moment, in a strftime format.
    Time(Moment, String),
    Method,
    Uri,
    Query,
    QueryMark,
    Status,
    Script,
    Duration(Unit),
    Memory(MemoryUnit),
    Cpu(CpuMode),
    ContentLength,
    /// A request header, by the name of its param in the `HTTP_` form (`User-Agent` →
    /// `HTTP_USER_AGENT`).
    Header(String),
    /// A response header, by its name as the app wrote it (matched case-sensitively, as
    /// php-fpm does).
    ResponseHeader(String),
    /// A FastCGI param by name.
    Param(String),
    Pid,
    ParentPid,
    Pool,
    /// `%I`: the request's id (drover's; php-fpm has none).
    RequestId,
}

/// A parsed `access_format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    Text(Vec<Part>),
    /// One JSON object per line with every field.
    Json,
}

impl Format {
    /// Whether a line shows a response header (`%{Name}o`): only then does a worker keep
    /// a copy of each response's head.
    pub fn shows_response_headers(&self) -> bool {
        match self {
            Format::Text(parts) => parts.iter().any(|p| matches!(p, Part::ResponseHeader(_))),
            Format::Json => false,
        }
    }
}

/// Parses `access_format` (`"json"` or a php-fpm format); the error names the token and
/// the rule it breaks.
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
            token = chars
                .next()
                .ok_or_else(|| format!("%{{{inner}}} lacks its token letter"))?;
            arg = Some(inner);
        }
        if token == '%' && arg.is_none() {
            literal.push('%');
            continue;
        }
        let part = token_part(token, arg)?;
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

/// One token, with its `{modifier}` when it has one.
fn token_part(token: char, arg: Option<String>) -> Result<Part, String> {
    // php-fpm reads an empty `{}` as no modifier.
    let arg = arg.filter(|a| !a.is_empty());
    let modifier = arg.as_deref().map(str::to_ascii_lowercase);
    let part = match (token, modifier.as_deref()) {
        ('t', _) => Part::Time(Moment::Start, arg.unwrap_or_else(|| DEFAULT_TIME.into())),
        ('T', _) => Part::Time(Moment::End, arg.unwrap_or_else(|| DEFAULT_TIME.into())),
        ('d', None | Some("seconds")) => Part::Duration(Unit::Seconds),
        ('d', Some("mili" | "miliseconds" | "milli" | "milliseconds")) => {
            Part::Duration(Unit::Millis)
        }
        ('d', Some("micro" | "microseconds")) => Part::Duration(Unit::Micros),
        ('M', None | Some("bytes")) => Part::Memory(MemoryUnit::Bytes),
        ('M', Some("kilo" | "kilobytes")) => Part::Memory(MemoryUnit::Kilobytes),
        ('M', Some("mega" | "megabytes")) => Part::Memory(MemoryUnit::Megabytes),
        ('C', None | Some("total")) => Part::Cpu(CpuMode::Total),
        ('C', Some("user")) => Part::Cpu(CpuMode::User),
        ('C', Some("system")) => Part::Cpu(CpuMode::System),
        ('d' | 'M' | 'C', Some(_)) => {
            let allowed = match token {
                'd' => "seconds, mili, miliseconds, milli, milliseconds, micro or microseconds",
                'M' => "bytes, kilo, kilobytes, mega or megabytes",
                _ => "total, user or system",
            };
            let given = arg.unwrap_or_default();
            return Err(format!(
                "%{{{given}}}{token}: the modifier of %{token} must be {allowed}"
            ));
        }
        ('i' | 'o' | 'e', Some(_)) => {
            let name = arg.unwrap_or_default();
            match token {
                'i' => Part::Header(header_param(&name)),
                'o' => Part::ResponseHeader(name),
                _ => Part::Param(name),
            }
        }
        ('i' | 'o' | 'e', _) => {
            let what = match token {
                'i' => "a request header's name",
                'o' => "a response header's name",
                _ => "a FastCGI param's name",
            };
            return Err(format!("%{token} needs {what}: %{{NAME}}{token}"));
        }
        (token, Some(_)) if simple(token).is_some() => {
            let given = arg.unwrap_or_default();
            return Err(format!(
                "%{{{given}}}{token}: %{token} takes no {{modifier}}"
            ));
        }
        (token, None) => simple(token).ok_or_else(|| format!("unknown token %{token}"))?,
        (token, Some(_)) => {
            let given = arg.unwrap_or_default();
            return Err(format!("unknown token %{{{given}}}{token}"));
        }
    };
    Ok(part)
}

/// The tokens that take no modifier.
fn simple(token: char) -> Option<Part> {
    Some(match token {
        'R' => Part::RemoteAddr,
        'u' => Part::RemoteUser,
        'm' => Part::Method,
        'r' => Part::Uri,
        'q' => Part::Query,
        'Q' => Part::QueryMark,
        's' => Part::Status,
        'f' => Part::Script,
        'l' => Part::ContentLength,
        'p' => Part::Pid,
        'P' => Part::ParentPid,
        'n' => Part::Pool,
        'I' => Part::RequestId,
        _ => return None,
    })
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
                Part::Time(Moment::Start, DEFAULT_TIME.into()),
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
                Part::Time(Moment::Start, "%H".into()),
                Part::Literal(" 100%".into()),
            ]
        );
    }

    #[test]
    fn json_is_a_format_of_its_own() {
        assert_eq!(parse("json"), Ok(Format::Json));
    }

    /// The one part of a format of one token.
    fn one(format: &str) -> Part {
        match parse(format) {
            Ok(Format::Text(parts)) if parts.len() == 1 => parts.into_iter().next().unwrap(),
            other => panic!("{format}: {other:?}"),
        }
    }

    #[test]
    fn php_fpms_own_sample_format_parses() {
        let sample = "%R - %u %t \"%m %r%Q%q\" %s %f %{mili}d %{kilo}M %C%%";
        let Format::Text(parts) = parse(sample).unwrap() else {
            panic!("text expected");
        };
        let tokens: Vec<_> = parts
            .into_iter()
            .filter(|p| !matches!(p, Part::Literal(_)))
            .collect();
        assert_eq!(
            tokens,
            vec![
                Part::RemoteAddr,
                Part::RemoteUser,
                Part::Time(Moment::Start, DEFAULT_TIME.into()),
                Part::Method,
                Part::Uri,
                Part::QueryMark,
                Part::Query,
                Part::Status,
                Part::Script,
                Part::Duration(Unit::Millis),
                Part::Memory(MemoryUnit::Kilobytes),
                Part::Cpu(CpuMode::Total),
            ]
        );
    }

    #[test]
    fn duration_modifiers_are_php_fpms_in_any_case() {
        for (modifier, unit) in [
            ("seconds", Unit::Seconds),
            ("mili", Unit::Millis),
            ("miliseconds", Unit::Millis),
            ("milli", Unit::Millis),
            ("milliseconds", Unit::Millis),
            ("MiliSeconds", Unit::Millis),
            ("micro", Unit::Micros),
            ("microseconds", Unit::Micros),
            ("MICRO", Unit::Micros),
        ] {
            assert_eq!(one(&format!("%{{{modifier}}}d")), Part::Duration(unit));
        }
        assert_eq!(one("%d"), Part::Duration(Unit::Seconds));
        assert_eq!(one("%{}d"), Part::Duration(Unit::Seconds));
    }

    #[test]
    fn memory_modifiers_are_php_fpms_in_any_case() {
        for (modifier, unit) in [
            ("bytes", MemoryUnit::Bytes),
            ("kilo", MemoryUnit::Kilobytes),
            ("kilobytes", MemoryUnit::Kilobytes),
            ("Kilo", MemoryUnit::Kilobytes),
            ("mega", MemoryUnit::Megabytes),
            ("megabytes", MemoryUnit::Megabytes),
            ("MEGA", MemoryUnit::Megabytes),
        ] {
            assert_eq!(one(&format!("%{{{modifier}}}M")), Part::Memory(unit));
        }
        assert_eq!(one("%M"), Part::Memory(MemoryUnit::Bytes));
    }

    #[test]
    fn cpu_modifiers_are_php_fpms_in_any_case() {
        assert_eq!(one("%C"), Part::Cpu(CpuMode::Total));
        assert_eq!(one("%{total}C"), Part::Cpu(CpuMode::Total));
        assert_eq!(one("%{user}C"), Part::Cpu(CpuMode::User));
        assert_eq!(one("%{System}C"), Part::Cpu(CpuMode::System));
    }

    #[test]
    fn end_time_parent_pid_and_response_headers() {
        assert_eq!(one("%T"), Part::Time(Moment::End, DEFAULT_TIME.into()));
        assert_eq!(one("%{%s}T"), Part::Time(Moment::End, "%s".into()));
        assert_eq!(one("%P"), Part::ParentPid);
        assert_eq!(
            one("%{Content-Type}o"),
            Part::ResponseHeader("Content-Type".into())
        );
        assert_eq!(one("%l"), Part::ContentLength);
        assert!(parse("%{X-Id}o").unwrap().shows_response_headers());
        assert!(!parse(DEFAULT_FORMAT).unwrap().shows_response_headers());
        assert!(!parse("json").unwrap().shows_response_headers());
    }

    #[test]
    fn bad_tokens_and_modifiers_are_named_with_the_rule() {
        assert_eq!(parse("%z").unwrap_err(), "unknown token %z");
        assert_eq!(parse("%{x}z").unwrap_err(), "unknown token %{x}z");
        assert_eq!(
            parse("%{hours}d").unwrap_err(),
            "%{hours}d: the modifier of %d must be seconds, mili, miliseconds, milli, \
             milliseconds, micro or microseconds"
        );
        assert_eq!(
            parse("%{giga}M").unwrap_err(),
            "%{giga}M: the modifier of %M must be bytes, kilo, kilobytes, mega or megabytes"
        );
        assert_eq!(
            parse("%{idle}C").unwrap_err(),
            "%{idle}C: the modifier of %C must be total, user or system"
        );
        assert_eq!(parse("%{x}R").unwrap_err(), "%{x}R: %R takes no {modifier}");
        assert_eq!(
            parse("%i").unwrap_err(),
            "%i needs a request header's name: %{NAME}i"
        );
        assert_eq!(
            parse("%o").unwrap_err(),
            "%o needs a response header's name: %{NAME}o"
        );
        assert_eq!(
            parse("%{}e").unwrap_err(),
            "%e needs a FastCGI param's name: %{NAME}e"
        );
        assert!(parse("%{abc").unwrap_err().contains("not closed"));
        assert!(
            parse("%{abc}")
                .unwrap_err()
                .contains("lacks its token letter")
        );
        assert!(parse("50%").unwrap_err().contains("lone %"));
    }
}
