//! The TOML files an import writes: keys in drover's order, each with a comment naming
//! where its value came from, so that the operator can check every line against the
//! configuration it replaces.

/// A value as drover's configuration takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Strs(Vec<String>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    fn render(&self) -> String {
        match self {
            Value::Str(s) => quote(s),
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Strs(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }
}

/// One `key = value` line, or a comment line (an entry the operator must decide on).
#[derive(Debug, Clone)]
struct Line {
    key: String,
    /// `None`: a comment line, `key` holding its text.
    value: Option<Value>,
    /// Where the value came from, written after it as a comment.
    origin: String,
}

#[derive(Debug, Clone)]
struct Table {
    name: String,
    lines: Vec<Line>,
}

/// A TOML file under construction: top-level keys, then tables in the order first used.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    header: Vec<String>,
    tables: Vec<Table>,
}

impl Doc {
    /// A comment at the top of the file.
    pub fn header(&mut self, text: &str) {
        self.header.extend(text.lines().map(str::to_owned));
    }

    fn table(&mut self, name: &str) -> &mut Table {
        if self.tables.is_empty() {
            // The top level comes first, whatever is set first.
            self.tables.push(Table {
                name: String::new(),
                lines: Vec::new(),
            });
        }
        let index = match self.tables.iter().position(|t| t.name == name) {
            Some(index) => index,
            None => {
                self.tables.push(Table {
                    name: name.to_owned(),
                    lines: Vec::new(),
                });
                self.tables.len() - 1
            }
        };
        &mut self.tables[index]
    }

    /// Makes `table` appear even when empty (a pool's runtime is named by its table).
    pub fn ensure(&mut self, table: &str) {
        self.table(table);
    }

    /// Sets `key` in `table` (`""`: the top level); a later value replaces an earlier one,
    /// as the later directive wins in the file it came from.
    pub fn set(&mut self, table: &str, key: &str, value: Value, origin: &str) {
        // Every key an importer writes is one drover reads (the key table, config::keys):
        // a renamed or removed key fails the importers' tests here.
        debug_assert!(
            drover_config::keys::known(table, key),
            "the importer writes {table}.{key}, which is not in the key table"
        );
        let lines = &mut self.table(table).lines;
        let line = Line {
            key: key.to_owned(),
            value: Some(value),
            origin: origin.to_owned(),
        };
        match lines.iter_mut().find(|l| l.value.is_some() && l.key == key) {
            Some(old) => *old = line,
            None => lines.push(line),
        }
    }

    /// Takes `key` out of `table` again.
    pub fn remove(&mut self, table: &str, key: &str) {
        self.table(table)
            .lines
            .retain(|l| l.value.is_none() || l.key != key);
    }

    /// A comment line in `table`: something the operator should see where it would go.
    pub fn comment(&mut self, table: &str, text: &str) {
        self.table(table).lines.push(Line {
            key: text.to_owned(),
            value: None,
            origin: String::new(),
        });
    }

    /// The value of `key` in `table`, if set.
    pub fn get(&self, table: &str, key: &str) -> Option<&Value> {
        self.tables
            .iter()
            .find(|t| t.name == table)?
            .lines
            .iter()
            .find(|l| l.key == key)?
            .value
            .as_ref()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.header {
            out += &format!("# {line}\n").replace("# \n", "#\n");
        }
        for table in &self.tables {
            if table.name.is_empty() && table.lines.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            if !table.name.is_empty() {
                let name: Vec<String> = table.name.split('.').map(key).collect();
                out += &format!("[{}]\n", name.join("."));
            }
            for line in &table.lines {
                match &line.value {
                    None => out += &format!("# {}\n", line.key),
                    Some(value) => {
                        let text = format!("{} = {}", key(&line.key), value.render());
                        if line.origin.is_empty() {
                            out += &format!("{text}\n");
                        } else {
                            out += &format!("{text:<39} # {}\n", line.origin);
                        }
                    }
                }
            }
        }
        out
    }
}

/// A key bare when TOML allows it, else quoted (`"opcache.enable"`).
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { name.to_owned() } else { quote(name) }
}

/// A TOML basic string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_keys_come_before_tables_and_dotted_keys_are_quoted() {
        let mut doc = Doc::default();
        doc.set("pm", "mode", Value::str("static"), "a.conf:3 pm");
        doc.set("", "listen", Value::str("/run/x.sock"), "a.conf:2 listen");
        doc.set("php.ini", "opcache.enable", Value::str("1"), "");
        doc.set("pm", "mode", Value::str("dynamic"), "a.conf:9 pm");
        let text = doc.render();
        assert!(text.starts_with("listen = \"/run/x.sock\""), "{text}");
        assert!(text.contains("[pm]\nmode = \"dynamic\""), "{text}");
        assert!(!text.contains("static"), "{text}");
        assert!(
            text.contains("[php.ini]\n\"opcache.enable\" = \"1\"\n"),
            "{text}"
        );
        let parsed: toml::Table = text.parse().expect("valid TOML");
        assert_eq!(parsed["php"]["ini"]["opcache.enable"].as_str(), Some("1"));
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        let parsed: toml::Table = format!("k = {}", quote("x\u{1}\"\\y")).parse().unwrap();
        assert_eq!(parsed["k"].as_str(), Some("x\u{1}\"\\y"));
    }
}
