//! One configuration file being checked: its text, byte offset → line/column, and the errors
//! found in it so far.

use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// The longest value echoed back in a message; a whole inline table is not useful there.
const MAX_VALUE_CHARS: usize = 60;

pub(super) struct Source {
    /// The path as the user knows it (as given, or as the include glob found it).
    path: PathBuf,
    text: String,
    /// Byte offset where each line starts.
    line_starts: Vec<usize>,
    /// Interior mutability so that readers of nested tables can all hold `&Source` and
    /// report without threading `&mut` through every getter.
    errors: RefCell<Vec<ConfigError>>,
}

impl Source {
    pub fn new(path: PathBuf, text: String) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Source {
            path,
            text,
            line_starts,
            errors: RefCell::new(Vec::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let start = self.line_starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }

    /// The value as written in the file, shortened to one line for messages.
    pub fn written(&self, span: Range<usize>) -> String {
        let raw = self.text.get(span).unwrap_or("").trim();
        let first_line = raw.lines().next().unwrap_or("");
        let mut shown: String = first_line.chars().take(MAX_VALUE_CHARS).collect();
        if shown.len() < raw.len() {
            shown.push('…');
        }
        shown
    }

    /// Records an error at byte `offset`.
    pub fn report(&self, offset: usize, key: &str, value: Option<String>, rule: impl Into<String>) {
        let (line, column) = self.position(offset);
        self.errors.borrow_mut().push(ConfigError {
            file: self.path.clone(),
            line,
            column,
            key: key.to_owned(),
            value,
            rule: rule.into(),
        });
    }

    /// The errors in line order; errors found by later passes (cross-file checks) land in
    /// their place rather than at the end.
    pub fn into_errors(self) -> Vec<ConfigError> {
        let mut errors = self.errors.into_inner();
        errors.sort_by_key(|e| (e.line, e.column));
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let src = Source::new("f".into(), "a = 1\nbé = \"x\"\n".into());
        assert_eq!(src.position(0), (1, 1));
        assert_eq!(src.position(6), (2, 1));
        // 'é' is two bytes but one column.
        assert_eq!(src.position(9), (2, 3));
        assert_eq!(src.position(src.text().len()), (3, 1));
    }

    #[test]
    fn written_values_are_shortened_to_one_line() {
        let src = Source::new("f".into(), "a = \"\"\"x\ny\"\"\"".into());
        assert_eq!(src.written(4..13), "\"\"\"x…");
    }
}
