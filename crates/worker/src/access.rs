//! The pool's access log (`access_log`), written by each worker itself: one line per
//! request, no hop through the master.
//!
//! The zygote opens the file once (O_APPEND, mode 0640, as the pool's user) before it forks,
//! and every worker inherits the descriptor. A line is formatted into a reused buffer and
//! written with one `write_all`, so that lines of concurrent workers never interleave
//! (O_APPEND makes each write land whole at the end). On USR1 the master bumps the pool's
//! log generation in the scoreboard; a worker that sees it changed reopens the path before
//! its next line, which is how logrotate's rename is followed.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use drover_fastcgi::Params;
use drover_proto::access::{Format, Part, Unit, header_param, parse};
use drover_proto::push_json_string;
use drover_proto::zygote::ZygoteArgs;
use drover_scoreboard::PoolStats;

/// An open access log and how to write its lines.
pub struct AccessLog {
    path: PathBuf,
    file: File,
    /// The pool's log generation when `file` was opened.
    generation: u64,
    format: Format,
    suppress: Vec<String>,
    pool: String,
    buf: String,
}

/// What one request's line is made of.
pub struct Entry<'a> {
    pub params: &'a Params,
    pub status: Option<u16>,
    pub duration: Duration,
    pub cpu: Duration,
    pub memory: Option<u64>,
    pub script: &'a str,
}

impl AccessLog {
    /// The zygote's side: opens `--access-log` when given. `pool` gives the generation the
    /// file is opened at. A format that does not parse is an error (the master checked it).
    pub fn open(args: &ZygoteArgs, pool: Option<&PoolStats>) -> io::Result<Option<AccessLog>> {
        let Some(path) = &args.access_log else {
            return Ok(None);
        };
        let format = parse(&args.access_format).map_err(io::Error::other)?;
        let generation = pool.map_or(0, PoolStats::log_generation);
        Ok(Some(AccessLog {
            file: open(path)?,
            path: path.clone(),
            generation,
            format,
            suppress: args.access_suppress_path.clone(),
            pool: args.pool.clone(),
            buf: String::with_capacity(256),
        }))
    }

    /// A copy for one worker (the same open file).
    pub fn try_clone(&self) -> io::Result<AccessLog> {
        Ok(AccessLog {
            path: self.path.clone(),
            file: self.file.try_clone()?,
            generation: self.generation,
            format: self.format.clone(),
            suppress: self.suppress.clone(),
            pool: self.pool.clone(),
            buf: String::with_capacity(256),
        })
    }

    /// Writes the line of one request, unless its URI is suppressed; reopens the file first
    /// when the master asked (`pool`'s generation changed). Errors go to stderr.
    pub fn write(&mut self, entry: &Entry<'_>, pool: Option<&PoolStats>) {
        if self.suppress.iter().any(|p| p == uri(entry.params)) {
            return;
        }
        if let Some(generation) = pool.map(PoolStats::log_generation)
            && generation != self.generation
        {
            self.generation = generation;
            match open(&self.path) {
                Ok(file) => self.file = file,
                Err(err) => eprintln!("cannot reopen {}: {err}", self.path.display()),
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        match &self.format {
            Format::Text(parts) => render(&mut buf, parts, entry, &self.pool),
            Format::Json => render_json(&mut buf, entry, &self.pool),
        }
        buf.push('\n');
        if let Err(err) = self.file.write_all(buf.as_bytes()) {
            eprintln!("cannot write to {}: {err}", self.path.display());
        }
        self.buf = buf;
    }
}

fn open(path: &std::path::Path) -> io::Result<File> {
    // O_CLOEXEC is std's default.
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
}

fn param<'a>(params: &'a Params, name: &str) -> &'a str {
    params
        .get(name)
        .and_then(|v| std::str::from_utf8(v).ok())
        .unwrap_or("")
}

/// The request URI without its query: REQUEST_URI's path, else DOCUMENT_URI.
fn uri(params: &Params) -> &str {
    let request = param(params, "REQUEST_URI");
    if request.is_empty() {
        return param(params, "DOCUMENT_URI");
    }
    request.split_once('?').map_or(request, |(path, _)| path)
}

/// `-` for an empty value, as php-fpm writes it.
fn dash(out: &mut String, value: &str) {
    out.push_str(if value.is_empty() { "-" } else { value });
}

fn cpu_percent(entry: &Entry<'_>) -> f64 {
    let wall = entry.duration.as_secs_f64();
    if wall > 0.0 {
        entry.cpu.as_secs_f64() / wall * 100.0
    } else {
        0.0
    }
}

/// When the request began, in the local time zone, as `format` (strftime) shows it.
fn time(out: &mut String, format: &str, duration: Duration) {
    let start = SystemTime::now()
        .checked_sub(duration)
        .unwrap_or_else(SystemTime::now);
    let secs = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as libc::time_t;
    let Ok(format) = std::ffi::CString::new(format) else {
        return;
    };
    // SAFETY: localtime_r fills the zeroed tm from a valid time_t; strftime writes at most
    // the buffer's length and returns how many bytes it wrote.
    let text = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        let mut buf = [0u8; 128];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), format.as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    out.push_str(&text);
}

/// One text line (without its line break).
pub fn render(out: &mut String, parts: &[Part], entry: &Entry<'_>, pool: &str) {
    let p = entry.params;
    for part in parts {
        match part {
            Part::Literal(text) => out.push_str(text),
            Part::RemoteAddr => dash(out, param(p, "REMOTE_ADDR")),
            Part::RemoteUser => dash(out, param(p, "REMOTE_USER")),
            Part::Time(format) => time(out, format, entry.duration),
            Part::Method => dash(out, param(p, "REQUEST_METHOD")),
            Part::Uri => dash(out, uri(p)),
            Part::Query => out.push_str(param(p, "QUERY_STRING")),
            Part::QueryMark => {
                if !param(p, "QUERY_STRING").is_empty() {
                    out.push('?');
                }
            }
            Part::Status => match entry.status {
                Some(status) => {
                    let _ = write!(out, "{status}");
                }
                None => out.push('-'),
            },
            Part::Script => dash(out, entry.script),
            Part::Duration(unit) => {
                let _ = match unit {
                    Unit::Seconds => write!(out, "{:.3}", entry.duration.as_secs_f64()),
                    Unit::Millis => write!(out, "{:.3}", entry.duration.as_secs_f64() * 1e3),
                    Unit::Micros => write!(out, "{}", entry.duration.as_micros()),
                };
            }
            Part::Memory => match entry.memory {
                Some(bytes) => {
                    let _ = write!(out, "{bytes}");
                }
                None => out.push('-'),
            },
            Part::Cpu => {
                let _ = write!(out, "{:.2}", cpu_percent(entry));
            }
            Part::ContentLength => dash(out, param(p, "CONTENT_LENGTH")),
            Part::Header(name) | Part::Param(name) => dash(out, param(p, name)),
            Part::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Part::Pool => out.push_str(pool),
        }
    }
}

/// One JSON object (without its line break): every field the text tokens can show.
pub fn render_json(out: &mut String, entry: &Entry<'_>, pool: &str) {
    let p = entry.params;
    out.push_str("{\"time\":");
    let mut time_text = String::new();
    time(&mut time_text, "%Y-%m-%dT%H:%M:%S%z", entry.duration);
    push_json_string(out, &time_text);
    for (key, value) in [
        ("pool", pool),
        ("remote_addr", param(p, "REMOTE_ADDR")),
        ("remote_user", param(p, "REMOTE_USER")),
        ("method", param(p, "REQUEST_METHOD")),
        ("uri", uri(p)),
        ("query", param(p, "QUERY_STRING")),
        ("script", entry.script),
        ("user_agent", param(p, &header_param("User-Agent"))),
    ] {
        let _ = write!(out, ",\"{key}\":");
        push_json_string(out, value);
    }
    let _ = match entry.status {
        Some(status) => write!(out, ",\"status\":{status}"),
        None => write!(out, ",\"status\":null"),
    };
    let _ = write!(
        out,
        ",\"duration\":{:.6},\"cpu\":{:.2},\"pid\":{}",
        entry.duration.as_secs_f64(),
        cpu_percent(entry),
        std::process::id()
    );
    let _ = match entry.memory {
        Some(bytes) => write!(out, ",\"memory\":{bytes}"),
        None => write!(out, ",\"memory\":null"),
    };
    let _ = match param(p, "CONTENT_LENGTH").parse::<u64>() {
        Ok(n) => write!(out, ",\"content_length\":{n}}}"),
        Err(_) => write!(out, ",\"content_length\":null}}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::access::DEFAULT_FORMAT;

    fn params() -> Params {
        let mut raw = Vec::new();
        for (name, value) in [
            ("REMOTE_ADDR", "127.0.0.1"),
            ("REQUEST_METHOD", "GET"),
            ("REQUEST_URI", "/a/b?x=1"),
            ("QUERY_STRING", "x=1"),
            ("HTTP_USER_AGENT", "curl \"8\""),
        ] {
            drover_fastcgi::encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
        }
        Params::decode(raw).unwrap()
    }

    fn entry(params: &Params) -> Entry<'_> {
        Entry {
            params,
            status: Some(404),
            duration: Duration::from_millis(1500),
            cpu: Duration::from_millis(750),
            memory: None,
            script: "app:wsgi",
        }
    }

    fn text(format: &str) -> String {
        let Format::Text(parts) = parse(format).unwrap() else {
            panic!("text expected");
        };
        let params = params();
        let mut out = String::new();
        render(&mut out, &parts, &entry(&params), "www");
        out
    }

    #[test]
    fn tokens_render_as_php_fpm_writes_them() {
        assert_eq!(
            text("%R %u %m %r%Q%q %s %f %d %{mili}d %{micro}d %M %C %l %n %%"),
            "127.0.0.1 - GET /a/b?x=1 404 app:wsgi 1.500 1500.000 1500000 - 50.00 - www %"
        );
        assert_eq!(text("%{User-Agent}i|%{QUERY_STRING}e"), "curl \"8\"|x=1");
        assert_eq!(text("%p"), std::process::id().to_string());
    }

    #[test]
    fn the_default_format_has_a_time() {
        let line = text(DEFAULT_FORMAT);
        assert!(line.starts_with("127.0.0.1 - - "), "{line}");
        assert!(line.ends_with(" \"GET /a/b\" 404"), "{line}");
    }

    #[test]
    fn json_escapes_its_strings() {
        let params = params();
        let mut out = String::new();
        render_json(&mut out, &entry(&params), "www");
        assert!(out.contains(r#""user_agent":"curl \"8\"""#), "{out}");
        assert!(out.contains(r#""status":404"#), "{out}");
        assert!(out.contains(r#""memory":null"#), "{out}");
        assert!(out.starts_with('{') && out.ends_with('}'), "{out}");
    }
}
