//! `[python] app`: `"package.module:callable"`, or an app factory called with literal
//! arguments, `"package.module:create_app('prod', debug=False)"`, checked as gunicorn's
//! `import_app` checks it, so that a mistake is a load error with its file and line rather
//! than a zygote that fails to start.
//!
//! gunicorn parses the part after `:` with Python's `ast` and takes only a name, or a call of
//! a name whose arguments `ast.literal_eval` accepts: strings and bytes, numbers (also
//! complex, `1+2j`), `True`, `False`, `None`, and tuples, lists, dicts and sets of them.
//! Anything else (an attribute, a variable, an expression, `*args`) is refused. This module
//! is that grammar without Python; the zygote parses the same text with Python's own `ast`
//! and calls the factory (`crates/python`).

/// The part after `:`: `callable` or `factory(args)`. Returns the rule broken, if any.
pub fn check_callable(text: &str) -> Result<(), String> {
    let mut p = Parser { s: text, at: 0 };
    p.space();
    let name = p
        .identifier()
        .ok_or_else(|| format!("expected a callable's name{}", p.here()))?;
    if KEYWORDS.contains(&name) {
        return Err(format!(
            "{name:?} is a Python keyword, not the name of a callable"
        ));
    }
    p.space();
    if p.eat("(") {
        p.arguments()?;
        p.space();
    }
    if p.at < p.s.len() {
        return Err(format!(
            "only a name or a call of a name with literal arguments may follow \":\"{}",
            p.here()
        ));
    }
    Ok(())
}

/// Python's keywords: none is the name of a callable.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Where the parser stopped, for an error.
    fn here(&self) -> String {
        match self.rest() {
            "" => " (the text ended)".to_string(),
            rest => format!(" at {:?}", rest.chars().take(20).collect::<String>()),
        }
    }

    /// Skips blanks and comments (`ast.parse` takes `# ...` to the end of the line).
    fn space(&mut self) {
        loop {
            let trimmed = self
                .rest()
                .trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
            self.at = self.s.len() - trimmed.len();
            if !trimmed.starts_with('#') {
                return;
            }
            self.at += trimmed.find('\n').unwrap_or(trimmed.len());
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn identifier(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        let first = rest.chars().next()?;
        if !(first == '_' || first.is_alphabetic()) {
            return None;
        }
        let len = rest
            .char_indices()
            .find(|&(_, c)| !(c == '_' || c.is_alphanumeric()))
            .map_or(rest.len(), |(i, _)| i);
        self.at += len;
        Some(&rest[..len])
    }

    /// After `(`: literal arguments, then keyword ones, up to `)`.
    fn arguments(&mut self) -> Result<(), String> {
        let mut keywords: Vec<&str> = Vec::new();
        loop {
            self.space();
            if self.eat(")") {
                return Ok(());
            }
            if self.rest().starts_with('*') {
                return Err("*args and **kwargs are not literal arguments".into());
            }
            let start = self.at;
            let keyword = self.identifier().filter(|_| {
                self.space();
                self.rest().starts_with('=') && !self.rest().starts_with("==")
            });
            match keyword {
                Some(name) => {
                    self.eat("=");
                    if KEYWORDS.contains(&name) {
                        return Err(format!("{name:?} is a Python keyword"));
                    }
                    // A repeated keyword passes `ast.parse`: gunicorn calls with the last.
                    keywords.push(name);
                }
                None => {
                    self.at = start;
                    if !keywords.is_empty() {
                        return Err("a positional argument follows a keyword argument".to_string());
                    }
                }
            }
            self.literal()?;
            self.space();
            if !self.eat(",") {
                self.space();
                if self.eat(")") {
                    return Ok(());
                }
                return Err(format!("expected \",\" or \")\"{}", self.here()));
            }
        }
    }

    /// One literal, as `ast.literal_eval` takes it.
    fn literal(&mut self) -> Result<(), String> {
        self.space();
        let not_literal = |p: &Self| {
            Err(format!(
                "the factory's arguments must be literals (strings, bytes, numbers, True, \
                 False, None, and tuples, lists, dicts or sets of them), as gunicorn takes \
                 them{}",
                p.here()
            ))
        };
        match self.peek() {
            None => not_literal(self),
            Some('(') => {
                self.at += 1;
                self.sequence(")", false)
            }
            Some('[') => {
                self.at += 1;
                self.sequence("]", false)
            }
            Some('{') => {
                self.at += 1;
                self.braces()
            }
            Some('-' | '+') | Some('0'..='9' | '.') => self.signed_number(),
            Some(_) => {
                if self.string()? {
                    return Ok(());
                }
                let start = self.at;
                match self.identifier() {
                    Some("True" | "False" | "None") => Ok(()),
                    _ => {
                        self.at = start;
                        not_literal(self)
                    }
                }
            }
        }
    }

    /// Literals separated by commas up to `close` (a tuple, a list, a set).
    fn sequence(&mut self, close: &str, _set: bool) -> Result<(), String> {
        loop {
            self.space();
            if self.eat(close) {
                return Ok(());
            }
            self.literal()?;
            self.space();
            if !self.eat(",") {
                self.space();
                if self.eat(close) {
                    return Ok(());
                }
                return Err(format!("expected \",\" or {close:?}{}", self.here()));
            }
        }
    }

    /// After `{`: a dict (`{}` too) or a set.
    fn braces(&mut self) -> Result<(), String> {
        self.space();
        if self.eat("}") {
            return Ok(());
        }
        self.literal()?;
        self.space();
        if !self.eat(":") {
            // A set: its first item is read.
            if self.eat(",") {
                return self.sequence("}", true);
            }
            self.space();
            if self.eat("}") {
                return Ok(());
            }
            return Err(format!("expected \",\", \":\" or \"}}\"{}", self.here()));
        }
        loop {
            self.literal()?;
            self.space();
            if !self.eat(",") {
                self.space();
                if self.eat("}") {
                    return Ok(());
                }
                return Err(format!("expected \",\" or \"}}\"{}", self.here()));
            }
            self.space();
            if self.eat("}") {
                return Ok(());
            }
            self.literal()?;
            self.space();
            if !self.eat(":") {
                return Err(format!("expected \":\" in a dict{}", self.here()));
            }
        }
    }

    /// A number with an optional sign, or a complex `REAL+IMAGj` (`literal_eval`'s only
    /// arithmetic).
    fn signed_number(&mut self) -> Result<(), String> {
        let signed = self.eat("-") || self.eat("+");
        if signed {
            self.space();
        }
        let imaginary = self.number()?;
        if imaginary {
            return Ok(());
        }
        let before = self.at;
        self.space();
        if self.eat("+") || self.eat("-") {
            self.space();
            if !self.number()? {
                return Err("only an imaginary number (\"2j\") may be added to a number".into());
            }
        } else {
            self.at = before;
        }
        Ok(())
    }

    /// An unsigned int, float or imaginary literal; true when imaginary.
    fn number(&mut self) -> Result<bool, String> {
        let rest = self.rest();
        let len = rest
            .char_indices()
            .find(|&(i, c)| {
                let exponent_sign = (c == '+' || c == '-')
                    && i > 0
                    && matches!(rest.as_bytes()[i - 1], b'e' | b'E')
                    && !rest.starts_with("0x")
                    && !rest.starts_with("0X");
                !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || exponent_sign)
            })
            .map_or(rest.len(), |(i, _)| i);
        let token = &rest[..len];
        let bad = || format!("{token:?} is not a Python number");
        if token.is_empty() {
            return Err(format!("expected a number{}", self.here()));
        }
        // Underscores only between digits.
        if token.starts_with('_') || token.ends_with('_') || token.contains("__") {
            return Err(bad());
        }
        let lower = token.to_ascii_lowercase();
        let digits_ok = |body: &str, radix: u32| {
            !body.is_empty()
                && !body.starts_with('_')
                && body.chars().all(|c| c == '_' || c.is_digit(radix))
        };
        let imaginary = lower.ends_with('j');
        let valid = if let Some(body) = lower.strip_prefix("0x") {
            digits_ok(body, 16)
        } else if let Some(body) = lower.strip_prefix("0o") {
            digits_ok(body, 8)
        } else if let Some(body) = lower.strip_prefix("0b") {
            digits_ok(body, 2)
        } else {
            decimal(lower.strip_suffix('j').unwrap_or(&lower))
        };
        if !valid {
            return Err(bad());
        }
        self.at += len;
        Ok(imaginary)
    }

    /// A string or bytes literal, with implicit concatenation: false when none starts here.
    fn string(&mut self) -> Result<bool, String> {
        let mut kind = None;
        let mut any = false;
        loop {
            self.space();
            let start = self.at;
            let rest = self.rest();
            let prefix_len = rest
                .char_indices()
                .find(|&(_, c)| !c.is_ascii_alphabetic())
                .map_or(rest.len(), |(i, _)| i);
            let (prefix, body) = rest.split_at(prefix_len);
            if !body.starts_with(['\'', '"']) {
                self.at = start;
                return Ok(any);
            }
            let lower = prefix.to_ascii_lowercase();
            let bytes = match lower.as_str() {
                "" | "u" | "r" => false,
                "b" | "br" | "rb" => true,
                "f" | "rf" | "fr" => {
                    return Err("an f-string is not a literal".into());
                }
                _ => {
                    self.at = start;
                    return Ok(any);
                }
            };
            if kind.is_some_and(|k| k != bytes) {
                return Err("bytes and str literals cannot be concatenated".into());
            }
            kind = Some(bytes);
            self.at += prefix_len;
            self.quoted()?;
            any = true;
        }
    }

    /// A quoted body (single or triple quotes); a backslash always escapes the next
    /// character, also in a raw string (`r"\""` is one string).
    fn quoted(&mut self) -> Result<(), String> {
        let rest = self.rest();
        let quote = &rest[..1];
        let triple = rest.starts_with(&quote.repeat(3));
        let close = if triple {
            quote.repeat(3)
        } else {
            quote.to_string()
        };
        let mut i = close.len();
        let bytes = rest.as_bytes();
        while i < rest.len() {
            if rest[i..].starts_with(&close) {
                self.at += i + close.len();
                return Ok(());
            }
            match bytes[i] {
                b'\\' => i += 2,
                b'\n' if !triple => break,
                _ => i += 1,
            }
        }
        Err("a string is not closed".into())
    }
}

/// A decimal int or float body: `12`, `1_000`, `0`, `00`, `1.`, `.5`, `1e-3`, `1.5E+2`.
fn decimal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find('e') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |d: &str| {
        !d.is_empty()
            && !d.starts_with('_')
            && !d.ends_with('_')
            && d.chars().all(|c| c == '_' || c.is_ascii_digit())
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() || digits(int))
                && (frac.is_empty() || digits(frac))
                && !(int.is_empty() && frac.is_empty())
        }
        None => {
            // A plain int: no leading zero unless it is all zeros (Python 3).
            digits(mantissa)
                && (exponent.is_some()
                    || !mantissa.starts_with('0')
                    || mantissa.chars().all(|c| c == '0' || c == '_'))
        }
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::check_callable;

    #[test]
    fn names_and_calls_with_literal_arguments_are_taken() {
        for ok in [
            "application",
            "app",
            "_private",
            "create_app()",
            "create_app( )",
            "create_app('prod')",
            "create_app(\"prod\", debug=False)",
            "create_app('prod', debug = True, )",
            "make(1, -2, +3.5, 1e-3, 0x1F, 0o17, 0b101, 1_000, .5, 1., 2j, 1+2j, -1-2.5j)",
            "make(None, True, b'raw', rb'\\d', r'\\\"', u'x', 'a' 'b', '''tri'ple''')",
            "make((), (1,), (1, 2), [], [1, [2, (3,)]], {}, {'a': 1, 'b': [2]}, {1, 2})",
            "make({'nested': {'deep': ('x', None)}}, k={'a': 1})",
            "créer()",
            "make('comma, paren) inside', x='=')",
            "make(\n  'multi',\n  line=1,\n)",
            "create_app() # a comment",
            "create_app(a=1, a=2)",
        ] {
            assert_eq!(check_callable(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn what_gunicorn_refuses_is_refused_with_its_rule() {
        for (bad, rule) in [
            ("", "expected a callable's name"),
            ("app.wsgi", "only a name or a call"),
            ("app()()", "only a name or a call"),
            ("create_app(", "must be literals"),
            ("create_app('x'", "expected \",\" or \")\""),
            ("create_app(os.environ)", "must be literals"),
            ("create_app(config)", "must be literals"),
            ("create_app(1 + 1)", "only an imaginary number"),
            ("create_app(f'{x}')", "f-string"),
            ("create_app(*args)", "*args"),
            ("create_app(**kw)", "*args"),
            ("create_app(a=1, 2)", "positional argument follows"),
            ("create_app('open)", "not closed"),
            ("create_app(b'x' 'y')", "concatenated"),
            ("create_app(012)", "not a Python number"),
            ("create_app(1__0)", "not a Python number"),
            ("create_app(0xZZ)", "not a Python number"),
            ("create_app(lambda: 1)", "must be literals"),
            ("None", "keyword"),
            ("class", "keyword"),
            ("create_app(if=1)", "keyword"),
            ("create_app(x == 1)", "must be literals"),
            ("create_app() x", "only a name or a call"),
            ("create_app(--1)", "expected a number"),
        ] {
            let err = check_callable(bad).expect_err(bad);
            assert!(err.contains(rule), "{bad:?}: {err:?} lacks {rule:?}");
        }
    }
}
