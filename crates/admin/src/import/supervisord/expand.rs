//! supervisord's expansions: every value goes through Python's `%` operator with a dict
//! of names (`supervisor.options.expand`), so `%(name)s` and `%(name)02d` are replaced,
//! `%%` is a `%`, and any other `%`, or a name it does not know, makes supervisord refuse
//! the file. The names: `program_name`, `group_name`, `host_node_name`, `here`,
//! `process_num`, `numprocs` and `ENV_X` for each variable of supervisord's environment
//! (plus those `[supervisord] environment` and the program's `environment` set).
//!
//! The importer expands what means the same for every copy: `ENV_X` from its own
//! environment (what supervisord started with may differ: each one taken is reported),
//! and `process_num` only when there is one copy.

use std::collections::BTreeMap;

use super::Context;

/// What a name expands to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Text(String),
    Number(i64),
    /// A variable of `drover import`'s own environment (`ENV_X`).
    Environment(String),
    /// `process_num` of a program with this many copies.
    PerCopy(i64),
}

/// The names one value may use.
#[derive(Debug, Clone, Default)]
pub struct Names {
    names: BTreeMap<String, Source>,
}

impl Names {
    /// `[include] files`: `here`, `host_node_name` and the environment.
    pub fn for_include(here: &str, context: &Context) -> Names {
        let mut names = Names::default();
        for (key, value) in &context.env {
            let source = Source::Environment(value.clone());
            names.names.insert(format!("ENV_{key}"), source);
        }
        names.text("here", here);
        names.text("host_node_name", &context.host);
        names
    }

    pub fn text(&mut self, name: &str, value: &str) {
        self.names
            .insert(name.to_owned(), Source::Text(value.to_owned()));
    }

    /// `numprocs` and `process_num` (`start`: `numprocs_start`).
    pub fn copies(&mut self, numprocs: i64, start: i64) {
        self.names
            .insert("numprocs".into(), Source::Number(numprocs));
        let process_num = if numprocs == 1 {
            Source::Number(start)
        } else {
            Source::PerCopy(numprocs)
        };
        self.names.insert("process_num".into(), process_num);
    }
}

/// An expanded value, and the variables of the importer's environment it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    pub from_environment: Vec<String>,
}

/// Why a value cannot be expanded as supervisord expanded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Unknown(String),
    Unset(String),
    PerCopy(i64),
    Format(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Unknown(name) => write!(
                f,
                "%({name})s is not a name supervisord expands (it refuses such a file)"
            ),
            Problem::Unset(name) => write!(
                f,
                "%(ENV_{name})s: {name} is not set in the environment of drover import \
                 (supervisord refuses to start without it); set it and import again"
            ),
            Problem::PerCopy(copies) => write!(
                f,
                "%(process_num)s differs in each of the numprocs = {copies} copies, and \
                 drover's copies all run alike; write one pool per copy (max_children = 1) \
                 by hand"
            ),
            Problem::Format(why) => write!(f, "{why} (supervisord refuses it too)"),
        }
    }
}

/// `text % names`, as Python formats it.
pub fn expand(text: &str, names: &Names) -> Result<Expanded, Problem> {
    let mut out = Expanded {
        text: String::with_capacity(text.len()),
        from_environment: Vec::new(),
    };
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.text.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('%') {
            out.text.push('%');
            rest = after;
            continue;
        }
        let Some(inner) = rest.strip_prefix('(') else {
            return Err(Problem::Format(
                "a % that is neither %% nor %(name)s: write %% for a %".into(),
            ));
        };
        let Some(close) = inner.find(')') else {
            return Err(Problem::Format("a %( without its )".into()));
        };
        let name = &inner[..close];
        let (spec, after) = conversion(&inner[close + 1..])?;
        let Some(value) = names.names.get(name) else {
            return Err(match name.strip_prefix("ENV_") {
                Some(var) => Problem::Unset(var.to_owned()),
                None => Problem::Unknown(name.to_owned()),
            });
        };
        if let Source::Environment(_) = value
            && !out.from_environment.iter().any(|n| n == name)
        {
            out.from_environment.push(name.to_owned());
        }
        out.text.push_str(&spec.format(name, value)?);
        rest = after;
    }
    out.text.push_str(rest);
    Ok(out)
}

/// A conversion after `%(name)`: flags, width, precision, type.
#[derive(Debug, Default)]
struct Spec {
    left: bool,
    zero: bool,
    sign: Option<char>,
    width: usize,
    precision: Option<usize>,
    kind: char,
}

fn conversion(text: &str) -> Result<(Spec, &str), Problem> {
    let mut spec = Spec::default();
    let mut chars = text.char_indices().peekable();
    while let Some(&(_, c)) = chars.peek() {
        match c {
            '-' => spec.left = true,
            '0' => spec.zero = true,
            '+' | ' ' => spec.sign = Some(c),
            '#' => {}
            _ => break,
        }
        chars.next();
    }
    let number = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        let mut n: Option<usize> = None;
        while let Some(&(_, c)) = chars.peek()
            && let Some(digit) = c.to_digit(10)
        {
            n = Some(
                n.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(digit as usize),
            );
            chars.next();
        }
        n
    };
    spec.width = number(&mut chars).unwrap_or(0).min(4096);
    if chars.peek().is_some_and(|&(_, c)| c == '.') {
        chars.next();
        spec.precision = Some(number(&mut chars).unwrap_or(0));
    }
    if chars.peek().is_some_and(|&(_, c)| "hlL".contains(c)) {
        chars.next();
    }
    let Some((at, kind)) = chars.next() else {
        return Err(Problem::Format(
            "a %(name) without its conversion (s, d)".into(),
        ));
    };
    spec.kind = kind;
    Ok((spec, &text[at + kind.len_utf8()..]))
}

impl Spec {
    fn format(&self, name: &str, value: &Source) -> Result<String, Problem> {
        let body = match (self.kind, value) {
            (_, Source::PerCopy(copies)) => return Err(Problem::PerCopy(*copies)),
            ('s', Source::Text(s) | Source::Environment(s)) => match self.precision {
                Some(n) => s.chars().take(n).collect(),
                None => s.clone(),
            },
            ('s', Source::Number(n)) => n.to_string(),
            ('d' | 'i' | 'u', Source::Number(n)) => {
                let digits = n.unsigned_abs().to_string();
                let sign = if *n < 0 {
                    "-".to_owned()
                } else {
                    self.sign.map(String::from).unwrap_or_default()
                };
                let pad = self.width.saturating_sub(sign.len() + digits.len());
                if self.zero && !self.left {
                    return Ok(format!("{sign}{}{digits}", "0".repeat(pad)));
                }
                format!("{sign}{digits}")
            }
            ('d' | 'i' | 'u', _) => {
                return Err(Problem::Format(format!(
                    "%({name}){} takes a number, and {name} is text",
                    self.kind
                )));
            }
            (kind, _) => {
                return Err(Problem::Format(format!(
                    "%({name}){kind}: a conversion the importer does not make (s and d only)"
                )));
            }
        };
        let pad = " ".repeat(self.width.saturating_sub(body.chars().count()));
        Ok(if self.left {
            format!("{body}{pad}")
        } else {
            format!("{pad}{body}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        let context = Context {
            env: [("USER".to_owned(), "op".to_owned())].into(),
            host: "box".into(),
        };
        let mut names = Names::for_include("/etc", &context);
        names.text("program_name", "queue");
        names.copies(1, 7);
        names
    }

    #[test]
    fn python_conversions_with_widths_and_padding() {
        let expanded = |text: &str| expand(text, &names()).map(|e| e.text);
        assert_eq!(
            expanded("%(process_num)03d|%(process_num)-3d|%(process_num)+d").unwrap(),
            "007|7  |+7"
        );
        assert_eq!(
            expanded("%(program_name)8s|%(program_name).2s|%(numprocs)s").unwrap(),
            "   queue|qu|1"
        );
        assert_eq!(
            expanded("50%% of %(here)s on %(host_node_name)s").unwrap(),
            "50% of /etc on box"
        );
        assert!(matches!(
            expand("%(program_name)r", &names()),
            Err(Problem::Format(_))
        ));
        assert!(matches!(
            expand("%(program_name", &names()),
            Err(Problem::Format(_))
        ));
        assert!(matches!(
            expand("%(program_name)", &names()),
            Err(Problem::Format(_))
        ));
    }

    #[test]
    fn env_names_say_where_they_came_from() {
        let mut names = names();
        let done = expand("%(ENV_USER)s %(ENV_USER)s", &names).unwrap();
        assert_eq!(
            (done.text.as_str(), done.from_environment.as_slice()),
            ("op op", &["ENV_USER".to_owned()][..])
        );
        // Set by the configuration itself ([supervisord] or the program's environment).
        names.text("ENV_USER", "conf");
        let done = expand("%(ENV_USER)s", &names).unwrap();
        assert_eq!(
            (done.text.as_str(), done.from_environment.len()),
            ("conf", 0)
        );
        assert_eq!(
            expand("%(ENV_NOPE)s", &names),
            Err(Problem::Unset("NOPE".into()))
        );
        let mut many = names.clone();
        many.copies(3, 0);
        assert_eq!(expand("%(process_num)d", &many), Err(Problem::PerCopy(3)));
    }
}
