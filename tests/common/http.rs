//! HTTP through nginx. A 4xx/5xx is a reply like any other, so a 502 shows up as a failed
//! request in the test's assertion, with its body; only a transport failure panics.
//!
//! [`Raw`] is a hand-driven HTTP/1.x connection, for what a client library hides: when the
//! first bytes of a body arrive, a client that hangs up mid-response, a HEAD's bytes on the
//! wire, a chunked body that never ends properly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ureq::Agent;

use super::TIMEOUT;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// In the order received; a repeated header appears once per value.
    pub headers: Vec<(String, String)>,
    /// The body as UTF-8 (invalid bytes replaced); [`Reply::bytes`] holds it exactly.
    pub body: String,
    pub bytes: Vec<u8>,
}

impl Reply {
    /// Every value of header `name` (any case), in order.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The single value of header `name`; panics when absent.
    pub fn header(&self, name: &str) -> &str {
        self.header_values(name)
            .first()
            .copied()
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }
}

/// The tests' HTTP client: a status is an answer, not an error; no proxy; 30 s at most.
pub fn agent() -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        // Loopback only: an HTTP_PROXY in the environment must not apply.
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

pub fn get(url: &str) -> Reply {
    try_get(url).unwrap_or_else(|e| panic!("{e}"))
}

/// GET, with a transport failure (timeout, connection closed) as an `Err` naming the URL,
/// for tests that add drover's log to the panic.
pub fn try_get(url: &str) -> Result<Reply, String> {
    try_reply(url, agent().get(url).call())
}

/// GET with request headers.
pub fn get_with(url: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = agent().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    reply(url, request.call())
}

pub fn post(url: &str, content_type: &str, body: &[u8]) -> Reply {
    reply(
        url,
        agent()
            .post(url)
            .header("Content-Type", content_type)
            .send(body),
    )
}

/// POST with request headers (a `Cookie`, say).
pub fn post_with(url: &str, headers: &[(&str, &str)], content_type: &str, body: &[u8]) -> Reply {
    let mut request = agent().post(url).header("Content-Type", content_type);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    reply(url, request.send(body))
}

fn reply(url: &str, result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    try_reply(url, result).unwrap_or_else(|e| panic!("{e}"))
}

fn try_reply(
    url: &str,
    result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Reply, String> {
    let mut response = result.map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_string(), value)
        })
        .collect();
    let bytes = response
        .body_mut()
        .with_config()
        // ureq stops at 10 MB by default; the large-response test needs more.
        .limit(64 << 20)
        .read_to_vec()
        .map_err(|e| format!("{url}: body: {e}"))?;
    let body = String::from_utf8_lossy(&bytes).into_owned();
    Ok(Reply {
        status,
        headers,
        body,
        bytes,
    })
}

/// Percent-encodes every byte of `path_and_query` outside printable ASCII, as a browser
/// does with `/héllo?q=ü`.
pub fn percent_encode(path_and_query: &str) -> String {
    let mut out = String::new();
    for &b in path_and_query.as_bytes() {
        if b.is_ascii_graphic() {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

/// One HTTP request written by hand on a TCP connection to nginx; reads are bounded by
/// [`TIMEOUT`].
pub struct Raw {
    stream: TcpStream,
    /// Everything read so far.
    pub received: Vec<u8>,
}

impl Raw {
    /// Connects to `127.0.0.1:port` and sends `request` (the request line and headers,
    /// each ending in CRLF, without the final empty line).
    pub fn send(port: u16, request: &str) -> Raw {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to nginx");
        stream
            .set_read_timeout(Some(TIMEOUT))
            .expect("set read timeout");
        stream
            .write_all(format!("{request}Host: localhost\r\n\r\n").as_bytes())
            .expect("send the request");
        Raw {
            stream,
            received: Vec::new(),
        }
    }

    /// Reads until `received` contains `needle`; panics at end of stream or on timeout.
    pub fn read_until(&mut self, needle: &[u8]) {
        let mut buf = [0u8; 16384];
        while !contains(&self.received, needle) {
            match self.stream.read(&mut buf) {
                Ok(0) => panic!(
                    "the connection ended before {:?}; received:\n{}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.received)
                ),
                Ok(n) => self.received.extend_from_slice(&buf[..n]),
                Err(e) => panic!(
                    "reading until {:?}: {e}; received:\n{}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.received)
                ),
            }
        }
    }

    /// Reads until nginx closes the connection; returns everything received.
    pub fn read_to_end(mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        if let Err(e) = self.stream.read_to_end(&mut rest) {
            self.received.extend_from_slice(&rest);
            panic!(
                "reading to the end: {e}; received:\n{}",
                String::from_utf8_lossy(&self.received)
            );
        }
        self.received.extend_from_slice(&rest);
        self.received
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A response as received on the wire: head (status line and headers) and body bytes.
#[derive(Debug)]
pub struct Wire {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Wire {
    pub fn parse(received: &[u8]) -> Wire {
        let at = received
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no end of head in:\n{}", String::from_utf8_lossy(received)));
        let head = String::from_utf8_lossy(&received[..at]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        Wire {
            status,
            head,
            body: received[at + 4..].to_vec(),
        }
    }

    /// Whether the head has header `name` (any case) with exactly `value`.
    pub fn has_header(&self, name: &str, value: &str) -> bool {
        self.head.lines().skip(1).any(|l| {
            l.split_once(':')
                .is_some_and(|(n, v)| n.eq_ignore_ascii_case(name) && v.trim() == value)
        })
    }
}
