//! Slow-request entries: a header naming the request (time, pool, pid, method, URI and
//! query, script, elapsed, and its id when the worker gave one) and its stack, innermost frame first, as php-fpm's text or as one
//! JSON object per line (`slowlog_format = "json"`). Pure formatting plus an append; the
//! master decides when a request is slow and gets the stack from the runtime: php-cgi's
//! memory, Python's faulthandler (turned into frames here), or drover-php's frame lines,
//! which are frames as they come.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// One slow request, as the master saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub time: SystemTime,
    pub pool: String,
    pub pid: i32,
    pub method: String,
    pub uri: String,
    pub query: String,
    pub script: String,
    /// The request's id (`drover_worker::request_id`); empty when unknown (php-cgi).
    pub request_id: String,
    pub elapsed: Duration,
    /// `function() file:line`, innermost first.
    pub frames: Vec<String>,
}

impl Entry {
    fn target(&self) -> String {
        if self.query.is_empty() {
            self.uri.clone()
        } else {
            format!("{}?{}", self.uri, self.query)
        }
    }

    /// php-fpm's layout, with the request line it lacks (php-src#18536), and a
    /// `request_id = ...` line after the script when the id is known.
    pub fn text(&self) -> String {
        let mut out = format!(
            "\n[{}] [pool {}] pid {}\nrequest: {} {} ({:.1}s)\nscript_filename = {}\n",
            humantime::format_rfc3339_seconds(self.time),
            self.pool,
            self.pid,
            self.method,
            self.target(),
            self.elapsed.as_secs_f64(),
            self.script
        );
        if !self.request_id.is_empty() {
            out.push_str("request_id = ");
            out.push_str(&self.request_id);
            out.push('\n');
        }
        // A frame names the app's functions and files: text from the pool, kept to its line.
        for frame in &self.frames {
            drover_proto::push_log_text(&mut out, frame);
            out.push('\n');
        }
        out
    }

    /// One JSON object, one line; `request_id` is null when unknown.
    pub fn json(&self) -> String {
        let frames: Vec<String> = self.frames.iter().map(|f| json_string(f)).collect();
        let request_id = match self.request_id.as_str() {
            "" => "null".to_owned(),
            id => json_string(id),
        };
        format!(
            "{{\"time\":{},\"pool\":{},\"pid\":{},\"method\":{},\"uri\":{},\"query\":{},\"script\":{},\"request_id\":{},\"elapsed\":{:.3},\"frames\":[{}]}}\n",
            json_string(&humantime::format_rfc3339_millis(self.time).to_string()),
            json_string(&self.pool),
            self.pid,
            json_string(&self.method),
            json_string(&self.uri),
            json_string(&self.query),
            json_string(&self.script),
            request_id,
            self.elapsed.as_secs_f64(),
            frames.join(",")
        )
    }
}

/// Appends an entry to the pool's slowlog file, opened for it (so that logrotate may move
/// the file at any time), created with mode 0600 ([`crate::logging::open_append`]).
pub fn append(path: &Path, entry: &Entry, json: bool) -> std::io::Result<()> {
    let text = if json { entry.json() } else { entry.text() };
    let mut file = crate::logging::open_append(path)?;
    file.write_all(text.as_bytes())
}

/// A Python traceback line from faulthandler (`  File "app.py", line 12 in slow`) as a
/// frame in the PHP style (`slow() app.py:12`); None for other lines.
pub fn python_frame(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.split_once("\", line ")?;
    let (line_no, function) = rest.split_once(" in ")?;
    Some(format!("{}() {}:{}", function.trim(), file, line_no.trim()))
}

/// True for the lines faulthandler writes in a dump.
pub fn is_faulthandler_line(line: &str) -> bool {
    line.is_empty()
        || line.starts_with("Current thread 0x")
        || line.starts_with("Thread 0x")
        || line.starts_with("  File \"")
        || line.starts_with("  <no Python frame>")
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    drover_proto::push_json_string(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            pool: "www".into(),
            pid: 42,
            method: "GET".into(),
            uri: "/slow.php".into(),
            query: "a=\"1\"".into(),
            script: "/var/www/slow.php".into(),
            request_id: "4f1c9e0a".into(),
            elapsed: Duration::from_millis(3200),
            frames: vec![
                "usleep() (internal)".into(),
                "level3() /var/www/slow.php:2".into(),
            ],
        }
    }

    #[test]
    fn text_names_the_request_then_the_frames_innermost_first() {
        let text = entry().text();
        assert!(text.contains("[pool www] pid 42\nrequest: GET /slow.php?a=\"1\" (3.2s)\nscript_filename = /var/www/slow.php\nrequest_id = 4f1c9e0a\n"));
        let unknown = Entry {
            request_id: String::new(),
            ..entry()
        };
        assert!(!unknown.text().contains("request_id"));
        assert!(unknown.json().contains("\"request_id\":null"));
        assert!(text.ends_with("usleep() (internal)\nlevel3() /var/www/slow.php:2\n"));
    }

    #[test]
    fn json_is_one_escaped_line() {
        let json = entry().json();
        assert_eq!(json.lines().count(), 1);
        assert!(json.contains("\"query\":\"a=\\\"1\\\"\""));
        assert!(
            json.contains("\"frames\":[\"usleep() (internal)\",\"level3() /var/www/slow.php:2\"]")
        );
        assert!(json.contains("\"elapsed\":3.200"));
        assert!(json.contains("\"request_id\":\"4f1c9e0a\""));
    }

    #[test]
    fn faulthandler_lines_become_frames() {
        assert_eq!(
            python_frame("  File \"/app/slow.py\", line 12 in level3").as_deref(),
            Some("level3() /app/slow.py:12")
        );
        assert_eq!(
            python_frame("Current thread 0x00007f (most recent call first):"),
            None
        );
        assert!(is_faulthandler_line(
            "Current thread 0x00007f0 (most recent call first):"
        ));
        assert!(is_faulthandler_line("  File \"/a.py\", line 1 in f"));
        assert!(!is_faulthandler_line("hello"));
    }
}
