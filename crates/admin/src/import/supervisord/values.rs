//! The values supervisord splits further: `command` as `shlex.split` splits it, and
//! `environment` as `dict_of_key_value_pairs` reads it.

/// `command`: split as supervisord splits it (Python's `shlex.split`: spaces separate,
/// single quotes take everything literally, double quotes and backslashes escape).
pub fn split_command(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unclosed ' quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("an unclosed \" quote".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("an unclosed \" quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("a \\ at the end".into()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

/// `environment`: `KEY="value",KEY2=value2`, as supervisord reads it (values may be
/// quoted; a comma inside quotes is the value's).
pub fn environment(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            return Err(format!("{rest:?} is not KEY=value"));
        };
        let key = key.trim().trim_start_matches(',').trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{key:?} is not a variable name"));
        }
        let after = after.trim_start();
        let (value, next) = match after.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let body = &after[1..];
                let Some(end) = body.find(quote) else {
                    return Err(format!("the value of {key} has no closing {quote}"));
                };
                (body[..end].to_owned(), &body[end + 1..])
            }
            _ => match after.find(',') {
                Some(end) => (after[..end].trim().to_owned(), &after[end..]),
                None => (after.trim().to_owned(), ""),
            },
        };
        out.push((key.to_owned(), value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Ok(out)
}
