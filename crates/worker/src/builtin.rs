//! php-fpm's `pm.status_path` and `ping.path`, answered on the pool's own socket: a request
//! whose `SCRIPT_NAME` is one of them never reaches the app. nginx's usual php-fpm
//! wiring (`location ~ ^/(status|ping)$ { fastcgi_pass ...; }`) and tools that speak
//! FastCGI to the pool's socket (php-fpm_exporter) keep working.
//!
//! The ping is answered here. The status is the master's (it alone knows the pool's
//! counters across reloads and its limits): the worker asks the pool's `status_listen`
//! for `/status` with the request's query (`json`, `full`, `openmetrics`), and passes the
//! answer on as its CGI response.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use drover_fastcgi::Params;
use drover_proto::zygote::ZygoteArgs;

use crate::exchange::Exchange;

/// How long the master may take to answer a status request.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// The answers a pool's workers give themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builtin {
    /// `status_path`, and where the master serves the status (`status_listen`).
    status: Option<(String, String)>,
    /// `ping_path` and `ping_response`.
    ping: Option<(String, String)>,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Status,
    Ping,
}

impl Builtin {
    /// The zygote's `status_path`/`status_from` and `ping_path`/`ping_response` terms;
    /// None without either path.
    pub fn from_args(args: &ZygoteArgs) -> Option<Builtin> {
        let status = args.status_path.clone().zip(args.status_from.clone());
        let ping = args
            .ping_path
            .clone()
            .map(|path| (path, args.ping_response.clone()));
        (status.is_some() || ping.is_some()).then_some(Builtin { status, ping })
    }

    /// Whether the request is one of these, by its `SCRIPT_NAME` (as php-fpm compares).
    pub fn asked(&self, params: &Params) -> Option<Asked> {
        let name = params.get("SCRIPT_NAME")?;
        if self
            .status
            .as_ref()
            .is_some_and(|(p, _)| p.as_bytes() == name)
        {
            Some(Asked::Status)
        } else if self
            .ping
            .as_ref()
            .is_some_and(|(p, _)| p.as_bytes() == name)
        {
            Some(Asked::Ping)
        } else {
            None
        }
    }

    /// Answers `asked` on `exchange` and ends the request (END_REQUEST); returns whether
    /// the connection may be kept, and the status answered.
    pub(crate) fn respond(
        &self,
        asked: Asked,
        params: &Params,
        exchange: &mut Exchange,
    ) -> (bool, u16) {
        let (response, status) = self.answer(asked, params);
        let keep = exchange.write_stdout(&response).is_ok() && exchange.finish(0).unwrap_or(false);
        (keep, status)
    }

    /// The CGI response (head and body) and its status. A status the master cannot give
    /// is a 503 saying why (and logged).
    pub fn answer(&self, asked: Asked, params: &Params) -> (Vec<u8>, u16) {
        match (asked, &self.status, &self.ping) {
            (Asked::Ping, _, Some((_, response))) => (ping(response), 200),
            (Asked::Status, Some((_, from)), _) => {
                let query = params.get("QUERY_STRING").unwrap_or_default();
                // It goes into the request line to the master: no spaces or controls.
                if query.iter().any(|&b| b <= b' ' || b == 0x7f) {
                    return (plain("400 Bad Request", "Bad query string.\n"), 400);
                }
                let query = String::from_utf8_lossy(query);
                match fetch(from, &query).and_then(|answer| to_cgi(&answer)) {
                    Ok(answered) => answered,
                    Err(err) => {
                        let why = format!("the status is not available from {from}: {err}");
                        let _ = writeln!(io::stderr(), "{why}");
                        (plain("503 Service Unavailable", &format!("{why}\n")), 503)
                    }
                }
            }
            _ => (plain("404 Not Found", "File not found.\n"), 404),
        }
    }
}

/// php-fpm's ping answer: its headers, the response without a newline.
fn ping(response: &str) -> Vec<u8> {
    format!(
        "Content-Type: text/plain\r\nExpires: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
         Cache-Control: no-cache, no-store, must-revalidate, max-age=0\r\n\r\n{response}"
    )
    .into_bytes()
}

fn plain(status: &str, body: &str) -> Vec<u8> {
    format!("Status: {status}\r\nContent-Type: text/plain\r\n\r\n{body}").into_bytes()
}

/// `GET /status?QUERY` from the master's `status_listen` (a socket path, or `IP:PORT`): its
/// whole HTTP answer.
fn fetch(from: &str, query: &str) -> io::Result<Vec<u8>> {
    let request = if query.is_empty() {
        "GET /status HTTP/1.0\r\nHost: drover\r\nConnection: close\r\n\r\n".to_owned()
    } else {
        format!("GET /status?{query} HTTP/1.0\r\nHost: drover\r\nConnection: close\r\n\r\n")
    };
    let mut answer = Vec::new();
    if from.starts_with('/') {
        let mut stream = UnixStream::connect(from)?;
        stream.set_read_timeout(Some(STATUS_TIMEOUT))?;
        stream.set_write_timeout(Some(STATUS_TIMEOUT))?;
        stream.write_all(request.as_bytes())?;
        stream.read_to_end(&mut answer)?;
    } else {
        let at: SocketAddr = from
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not an address"))?;
        let mut stream = TcpStream::connect_timeout(&at, STATUS_TIMEOUT)?;
        stream.set_read_timeout(Some(STATUS_TIMEOUT))?;
        stream.set_write_timeout(Some(STATUS_TIMEOUT))?;
        stream.write_all(request.as_bytes())?;
        stream.read_to_end(&mut answer)?;
    }
    Ok(answer)
}

/// An HTTP/1.x response as a CGI one: `Status:` from its status line, its headers but
/// those about the HTTP connection, its body.
fn to_cgi(answer: &[u8]) -> io::Result<(Vec<u8>, u16)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not an HTTP response");
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(bad)?;
    let head = std::str::from_utf8(&answer[..head_end]).map_err(|_| bad())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or_else(bad)?;
    let reason = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..))
        .ok_or_else(bad)?;
    let code: u16 = reason
        .get(..3)
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let mut out = format!("Status: {reason}\r\n");
    for line in lines {
        let name = line.split(':').next().unwrap_or_default();
        let hop = ["connection", "content-length", "date", "transfer-encoding"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h));
        if !hop {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(&answer[head_end + 4..]);
    Ok((out, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        let mut raw = Vec::new();
        for (name, value) in pairs {
            drover_fastcgi::encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
        }
        Params::decode(raw).unwrap()
    }

    fn both() -> Builtin {
        Builtin {
            status: Some(("/status".into(), "/run/drover/www-status.sock".into())),
            ping: Some(("/ping".into(), "pong".into())),
        }
    }

    #[test]
    fn the_paths_match_script_name_only() {
        let b = both();
        assert_eq!(
            b.asked(&params(&[("SCRIPT_NAME", "/status")])),
            Some(Asked::Status)
        );
        assert_eq!(
            b.asked(&params(&[("SCRIPT_NAME", "/ping")])),
            Some(Asked::Ping)
        );
        assert_eq!(b.asked(&params(&[("SCRIPT_NAME", "/status.php")])), None);
        assert_eq!(b.asked(&params(&[("REQUEST_URI", "/status")])), None);
        let ping_only = Builtin {
            status: None,
            ..both()
        };
        assert_eq!(
            ping_only.asked(&params(&[("SCRIPT_NAME", "/status")])),
            None
        );
    }

    #[test]
    fn the_ping_is_php_fpm_s() {
        let (out, status) = both().answer(Asked::Ping, &params(&[]));
        assert_eq!(status, 200);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("Content-Type: text/plain\r\n"), "{text}");
        assert!(text.ends_with("max-age=0\r\n\r\npong"), "{text}");
    }

    #[test]
    fn an_http_answer_becomes_a_cgi_one_without_its_connection_headers() {
        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\
                       connection: close\r\ncache-control: no-cache\r\n\r\n{}";
        let (out, status) = to_cgi(answer).unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Status: 200 OK\r\ncontent-type: application/json\r\ncache-control: no-cache\r\n\r\n{}"
        );
        let (refused, status) = to_cgi(b"HTTP/1.0 400 Bad Request\r\n\r\nno").unwrap();
        assert_eq!(status, 400);
        assert!(refused.starts_with(b"Status: 400 Bad Request\r\n\r\nno"));
        assert!(to_cgi(b"garbage").is_err());
    }

    #[test]
    fn a_query_that_would_break_the_request_line_is_refused() {
        let asked = params(&[("QUERY_STRING", "json HTTP/1.0\r\nX-Evil: 1")]);
        let (out, status) = both().answer(Asked::Status, &asked);
        assert_eq!(status, 400);
        assert!(out.starts_with(b"Status: 400 Bad Request\r\n"));
    }

    #[test]
    fn a_master_that_does_not_answer_is_a_503_that_says_where() {
        let (out, status) = both().answer(Asked::Status, &params(&[]));
        assert_eq!(status, 503);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("not available from /run/drover/www-status.sock"),
            "{text}"
        );
    }
}
