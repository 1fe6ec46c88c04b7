//! The pool's access log (`access_log`), written by each worker itself: one line per
//! request, no hop through the master.
//!
//! The master opens the file (as root, mode 0600 when it creates it) and passes it to the
//! zygote at the terms' `access_log_fd`; every worker inherits the descriptor. The pool's user needs
//! no right on the file or its folder, and the zygote never opens it by path. A line is
//! formatted into a reused buffer and written with one `write_all`, so that lines of
//! concurrent workers never interleave (O_APPEND makes each write land whole at the end).
//! After logrotate moved the file, the master's USR1 gives the pool a new generation, with
//! a descriptor on the new file: these workers write to the one they have until they exit.
//!
//! `access_suppress_path` leaves out what php-fpm 8.2 leaves out: a GET or HEAD without
//! a query or a body, answered with a 2xx status, on one of the paths. A failing health
//! check is still logged.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use drover_fastcgi::Params;
use drover_proto::access::{CpuMode, Format, MemoryUnit, Moment, Part, Unit, header_param, parse};
use drover_proto::push_json_string;
use drover_proto::zygote::ZygoteArgs;

use crate::cpu::CpuTime;

/// An open access log and how to write its lines.
pub struct AccessLog {
    /// The path the master opened, for messages.
    path: PathBuf,
    file: File,
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
    pub cpu: CpuTime,
    pub memory: Option<u64>,
    pub script: &'a str,
    /// The response's CGI head as the runtime wrote it, for `%{Name}o`: empty unless the
    /// format shows a response header (see [`AccessLog::shows_response_headers`]).
    pub head: &'a [u8],
    /// The request's id ([`crate::request_id`]), for `%I` and JSON's `request_id`.
    pub request_id: &'a str,
}

impl AccessLog {
    /// The zygote's side: takes the descriptor of the terms' `access_log_fd` when given (call this
    /// once: it owns the descriptor from here). A format that does not parse is an error
    /// (the master checked it), as is a descriptor that is not open.
    pub fn open(args: &ZygoteArgs) -> io::Result<Option<AccessLog>> {
        let Some(fd) = args.access_log_fd else {
            return Ok(None);
        };
        let format = parse(&args.access_format).map_err(io::Error::other)?;
        // SAFETY: fcntl on a descriptor number only reads its flags; EBADF when not open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the master put the pool's access log at this open descriptor, for the
        // zygote alone, and nothing else here takes it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        // Not inherited by what a worker's app runs (std's own files are close-on-exec).
        // SAFETY: fcntl on the descriptor just taken.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        Ok(Some(AccessLog {
            file,
            path: args
                .access_log
                .clone()
                .unwrap_or_else(|| PathBuf::from(format!("fd {fd}"))),
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
            format: self.format.clone(),
            suppress: self.suppress.clone(),
            pool: self.pool.clone(),
            buf: String::with_capacity(256),
        })
    }

    /// Whether the format shows a response header: then each response's head must be kept
    /// for [`Entry::head`].
    pub fn shows_response_headers(&self) -> bool {
        self.format.shows_response_headers()
    }

    /// Writes the line of one request, unless it is suppressed. Errors go to stderr.
    pub fn write(&mut self, entry: &Entry<'_>) {
        if suppressed(&self.suppress, entry) {
            return;
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

/// php-fpm 8.2's `access.suppress_path`: only a successful GET or HEAD without a query or
/// a body is left out, so that a failing health check, or a request that only looks like
/// one, is still logged.
fn suppressed(paths: &[String], entry: &Entry<'_>) -> bool {
    let p = entry.params;
    !paths.is_empty()
        && matches!(param(p, "REQUEST_METHOD"), "GET" | "HEAD")
        && entry.status.is_some_and(|s| (200..300).contains(&s))
        && param(p, "QUERY_STRING").is_empty()
        && content_length(p) == 0
        && paths.iter().any(|path| path == uri(p))
}

/// The request body's length, as the web server gave it; 0 when none.
fn content_length(params: &Params) -> u64 {
    param(params, "CONTENT_LENGTH").trim().parse().unwrap_or(0)
}

/// The remote user, as php-fpm's `%u`: the user of a Basic `Authorization` header (what
/// PHP puts in `PHP_AUTH_USER`); else `REMOTE_USER`, which a web server that
/// authenticates by other means sets.
fn remote_user(params: &Params) -> String {
    let basic = param(params, "HTTP_AUTHORIZATION")
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, token)| {
            base64::engine::general_purpose::STANDARD
                .decode(token.trim())
                .ok()
        })
        .and_then(|decoded| {
            let text = String::from_utf8(decoded).ok()?;
            text.split_once(':').map(|(user, _)| user.to_owned())
        });
    basic
        .filter(|user| !user.is_empty())
        .unwrap_or_else(|| param(params, "REMOTE_USER").to_owned())
}

/// A response header's value (`%{Name}o`): the first line of `head` named `name`, the
/// name compared without regard to case (php-fpm compares it as the app wrote it, so PHP's
/// own `Content-type` escapes `%{Content-Type}o` there).
pub fn response_header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    head.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        let (key, value) = line.split_at(colon);
        if !key.eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        std::str::from_utf8(&value[1..]).ok().map(str::trim)
    })
}

/// `-` for an empty value, as php-fpm writes it.
fn dash(out: &mut String, value: &str) {
    if value.is_empty() {
        out.push('-');
    } else {
        drover_proto::push_log_text(out, value);
    }
}

/// `%C`: the CPU time `mode` counts, in % of the request's duration (php-fpm's `%.2f`).
fn cpu_percent(entry: &Entry<'_>, mode: CpuMode) -> f64 {
    let cpu = match mode {
        CpuMode::Total => entry.cpu.total(),
        CpuMode::User => entry.cpu.user,
        CpuMode::System => entry.cpu.system,
    };
    let wall = entry.duration.as_secs_f64();
    if wall > 0.0 {
        cpu.as_secs_f64() / wall * 100.0
    } else {
        0.0
    }
}

/// `%t` (when the request began) or `%T` (now, when the line is written), in the local
/// time zone, as `format` (strftime) shows it.
fn time(out: &mut String, format: &str, moment: Moment, duration: Duration) {
    let now = SystemTime::now();
    let at = match moment {
        Moment::Start => now.checked_sub(duration).unwrap_or(now),
        Moment::End => now,
    };
    let secs = at
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
            Part::RemoteUser => dash(out, &remote_user(p)),
            Part::Time(moment, format) => time(out, format, *moment, entry.duration),
            Part::Method => dash(out, param(p, "REQUEST_METHOD")),
            Part::Uri => dash(out, uri(p)),
            Part::Query => drover_proto::push_log_text(out, param(p, "QUERY_STRING")),
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
            Part::Memory(unit) => match entry.memory {
                Some(bytes) => {
                    let shown = match unit {
                        MemoryUnit::Bytes => bytes,
                        MemoryUnit::Kilobytes => bytes / 1024,
                        MemoryUnit::Megabytes => bytes / 1024 / 1024,
                    };
                    let _ = write!(out, "{shown}");
                }
                None => out.push('-'),
            },
            Part::Cpu(mode) => {
                let _ = write!(out, "{:.2}", cpu_percent(entry, *mode));
            }
            Part::ContentLength => {
                let _ = write!(out, "{}", content_length(p));
            }
            Part::Header(name) | Part::Param(name) => dash(out, param(p, name)),
            Part::ResponseHeader(name) => {
                dash(out, response_header(entry.head, name).unwrap_or(""));
            }
            Part::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Part::ParentPid => {
                let _ = write!(out, "{}", std::os::unix::process::parent_id());
            }
            Part::Pool => out.push_str(pool),
            Part::RequestId => dash(out, entry.request_id),
        }
    }
}

/// One JSON object (without its line break): every field the text tokens can show.
pub fn render_json(out: &mut String, entry: &Entry<'_>, pool: &str) {
    let p = entry.params;
    out.push_str("{\"time\":");
    let mut time_text = String::new();
    time(
        &mut time_text,
        "%Y-%m-%dT%H:%M:%S%z",
        Moment::Start,
        entry.duration,
    );
    let user = remote_user(p);
    push_json_string(out, &time_text);
    for (key, value) in [
        ("pool", pool),
        ("remote_addr", param(p, "REMOTE_ADDR")),
        ("remote_user", user.as_str()),
        ("method", param(p, "REQUEST_METHOD")),
        ("uri", uri(p)),
        ("query", param(p, "QUERY_STRING")),
        ("script", entry.script),
        ("user_agent", param(p, &header_param("User-Agent"))),
        ("request_id", entry.request_id),
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
        cpu_percent(entry, CpuMode::Total),
        std::process::id()
    );
    let _ = match entry.memory {
        Some(bytes) => write!(out, ",\"memory\":{bytes}"),
        None => write!(out, ",\"memory\":null"),
    };
    let _ = write!(out, ",\"content_length\":{}}}", content_length(p));
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::access::DEFAULT_FORMAT;

    fn params_of(pairs: &[(&str, &str)]) -> Params {
        let mut raw = Vec::new();
        for (name, value) in pairs {
            drover_fastcgi::encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
        }
        Params::decode(raw).unwrap()
    }

    fn params() -> Params {
        params_of(&[
            ("REMOTE_ADDR", "127.0.0.1"),
            ("REQUEST_METHOD", "GET"),
            ("REQUEST_URI", "/a/b?x=1"),
            ("QUERY_STRING", "x=1"),
            ("HTTP_USER_AGENT", "curl \"8\""),
        ])
    }

    const HEAD: &[u8] =
        b"Status: 404 Not Found\r\nContent-type: text/html\r\nX-Request-Id: abc-1\r\n\r\n";

    fn entry(params: &Params) -> Entry<'_> {
        Entry {
            params,
            status: Some(404),
            duration: Duration::from_millis(1500),
            cpu: CpuTime {
                user: Duration::from_millis(600),
                system: Duration::from_millis(150),
            },
            memory: Some(3 * 1024 * 1024 + 512 * 1024),
            script: "app:wsgi",
            head: HEAD,
            request_id: "4f1c9e0a",
        }
    }

    fn text_with(format: &str, entry: &Entry<'_>) -> String {
        let Format::Text(parts) = parse(format).unwrap() else {
            panic!("text expected");
        };
        let mut out = String::new();
        render(&mut out, &parts, entry, "www");
        out
    }

    fn text(format: &str) -> String {
        let params = params();
        text_with(format, &entry(&params))
    }

    #[test]
    fn tokens_render_as_php_fpm_writes_them() {
        assert_eq!(
            text("%R %u %m %r%Q%q %s %f %d %{mili}d %{micro}d %C %l %n %%"),
            "127.0.0.1 - GET /a/b?x=1 404 app:wsgi 1.500 1500.000 1500000 50.00 0 www %"
        );
        assert_eq!(text("%{User-Agent}i|%{QUERY_STRING}e"), "curl \"8\"|x=1");
        assert_eq!(text("%p"), std::process::id().to_string());
        assert_eq!(text("[%I] %s"), "[4f1c9e0a] 404");
        assert_eq!(text("%P"), std::os::unix::process::parent_id().to_string());
    }

    #[test]
    fn memory_in_bytes_kilobytes_and_megabytes_truncates_as_php_fpm() {
        assert_eq!(
            text("%M %{bytes}M %{kilo}M %{kilobytes}M %{mega}M %{megabytes}M"),
            "3670016 3670016 3584 3584 3 3"
        );
        let params = params();
        let unknown = Entry {
            memory: None,
            ..entry(&params)
        };
        assert_eq!(text_with("%M %{kilo}M", &unknown), "- -");
    }

    #[test]
    fn cpu_is_a_percentage_of_the_duration_user_system_or_both() {
        assert_eq!(
            text("%C %{total}C %{user}C %{system}C"),
            "50.00 50.00 40.00 10.00"
        );
        let params = params();
        let instant = Entry {
            duration: Duration::ZERO,
            ..entry(&params)
        };
        assert_eq!(text_with("%C", &instant), "0.00");
    }

    #[test]
    fn a_response_header_is_its_value_or_a_dash() {
        assert_eq!(
            text("%{X-Request-Id}o %{Content-Type}o %{content-type}o %{Set-Cookie}o"),
            "abc-1 text/html text/html -"
        );
        assert_eq!(response_header(b"A: 1\nB:2\n\n", "B"), Some("2"));
        assert_eq!(response_header(b"", "B"), None);
        assert_eq!(response_header(b"AB: 1\r\n", "A"), None);
    }

    #[test]
    fn start_and_end_times_are_the_duration_apart() {
        // %s: seconds since the epoch; the request took 1.5 s.
        let line = text("%{%s}t %{%s}T");
        let (start, end) = line.split_once(' ').unwrap();
        let (start, end): (u64, u64) = (start.parse().unwrap(), end.parse().unwrap());
        assert!((1..=2).contains(&(end - start)), "{line}");
    }

    #[test]
    fn the_content_length_is_zero_without_a_body() {
        let params = params_of(&[("CONTENT_LENGTH", "42")]);
        assert_eq!(text_with("%l", &entry(&params)), "42");
        let params = params_of(&[("CONTENT_LENGTH", "")]);
        assert_eq!(text_with("%l", &entry(&params)), "0");
    }

    #[test]
    fn the_remote_user_is_basic_auths_else_remote_user() {
        // "alice:secret"
        let basic = params_of(&[
            ("HTTP_AUTHORIZATION", "Basic YWxpY2U6c2VjcmV0"),
            ("REMOTE_USER", "other"),
        ]);
        assert_eq!(text_with("%u", &entry(&basic)), "alice");
        let bearer = params_of(&[("HTTP_AUTHORIZATION", "Bearer abc"), ("REMOTE_USER", "bob")]);
        assert_eq!(text_with("%u", &entry(&bearer)), "bob");
        let garbled = params_of(&[("HTTP_AUTHORIZATION", "Basic !!!")]);
        assert_eq!(text_with("%u", &entry(&garbled)), "-");
    }

    /// Issue 34: `%u` printed the decoded Basic-auth user as it came, so a client could end
    /// the line and write one of its own. Every field a client sets is escaped.
    #[test]
    fn what_a_client_sends_cannot_break_a_text_line() {
        use base64::Engine as _;
        let user = base64::engine::general_purpose::STANDARD
            .encode("x\n127.0.0.1 - admin [fake] \"GET /forged\" 200:pw");
        let params = params_of(&[
            ("HTTP_AUTHORIZATION", &format!("Basic {user}")),
            ("REQUEST_METHOD", "GET"),
            ("REQUEST_URI", "/a\r\nb?q=\x1b[2J"),
            ("QUERY_STRING", "q=\x1b[2J"),
            ("HTTP_USER_AGENT", "ua\n"),
        ]);
        let line = text_with("%u %m %r%Q%q %{User-Agent}i", &entry(&params));
        assert!(!line.chars().any(|c| c.is_ascii_control()), "{line:?}");
        assert_eq!(
            line,
            "x\\x0A127.0.0.1 - admin [fake] \"GET /forged\" 200 GET /a\\x0D\\x0Ab?q=\\x1B[2J \
             ua\\x0A"
        );
    }

    #[test]
    fn only_a_successful_bodiless_get_or_head_without_query_is_suppressed() {
        let paths = vec!["/health".to_owned()];
        let request = |method: &str, uri: &str, query: &str, length: &str| {
            params_of(&[
                ("REQUEST_METHOD", method),
                ("REQUEST_URI", uri),
                ("QUERY_STRING", query),
                ("CONTENT_LENGTH", length),
            ])
        };
        let with_status = |params: &Params, status: Option<u16>| {
            let entry = Entry {
                status,
                ..entry(params)
            };
            suppressed(&paths, &entry)
        };
        let get = request("GET", "/health", "", "");
        assert!(with_status(&get, Some(200)));
        assert!(with_status(&get, Some(204)));
        assert!(with_status(&request("HEAD", "/health", "", "0"), Some(200)));
        // A failing health check is logged.
        assert!(!with_status(&get, Some(404)));
        assert!(!with_status(&get, Some(500)));
        assert!(!with_status(&get, Some(302)));
        assert!(!with_status(&get, None));
        assert!(!with_status(&request("POST", "/health", "", ""), Some(200)));
        assert!(!with_status(&request("GET", "/health", "", "3"), Some(200)));
        assert!(!with_status(
            &request("GET", "/health?x=1", "x=1", ""),
            Some(200)
        ));
        assert!(!with_status(
            &request("GET", "/health/x", "", ""),
            Some(200)
        ));
        assert!(!suppressed(&[], &entry(&get)));
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
        let unknown = Entry {
            memory: None,
            ..entry(&params)
        };
        render_json(&mut out, &unknown, "www");
        assert!(out.contains(r#""user_agent":"curl \"8\"""#), "{out}");
        assert!(out.contains(r#""status":404"#), "{out}");
        assert!(out.contains(r#""request_id":"4f1c9e0a""#), "{out}");
        assert!(out.contains(r#""memory":null"#), "{out}");
        assert!(out.contains(r#""content_length":0"#), "{out}");
        assert!(out.starts_with('{') && out.ends_with('}'), "{out}");
    }
}
