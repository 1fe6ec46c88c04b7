//! A request head off the wire, parsed by `httparse` and checked against the smuggling
//! corners httparse leaves to its caller, then turned into the CGI variables the runtimes
//! already read from FastCGI ([`Params`]). Pure: no socket here.
//!
//! Refused, with the status a client gets:
//! - 400: a malformed head (httparse's verdict, obs-fold included), Content-Length with
//!   Transfer-Encoding, a Content-Length that does not parse, is a list or is repeated,
//!   Transfer-Encoding on HTTP/1.0, no Host (or two) on HTTP/1.1, a second field of
//!   one that holds a single value ([`SINGLETONS`]), a method with other than `A-Z`, `-`
//!   and `_` (nginx's rule), `*` with a method other than OPTIONS (RFC 9112 §3.2.4);
//! - 414: a request line longer than [`MAX_REQUEST_LINE`];
//! - 431: a head larger than [`MAX_HEAD`], with more than [`MAX_HEADERS`] fields, or a
//!   field line longer than [`MAX_FIELD_LINE`];
//! - 413: a Content-Length above the pool's `max_request_body`;
//! - 501: a Transfer-Encoding other than `chunked`.

use std::net::{IpAddr, SocketAddr};

use drover_fastcgi::{Params, encode_pair};

/// The longest request line (method, target, version), as nginx's default 8 KiB buffer.
pub const MAX_REQUEST_LINE: usize = 8 * 1024;
/// The largest head, request line included (nginx: `large_client_header_buffers` 4 × 8k).
pub const MAX_HEAD: usize = 32 * 1024;
/// The most header fields (gunicorn's `limit_request_fields`).
pub const MAX_HEADERS: usize = 100;
/// The longest field line, its CRLF included (gunicorn's `limit_request_field_size`;
/// nginx's is its 8k buffer).
pub const MAX_FIELD_LINE: usize = 8190;

/// Fields whose value is one item (RFC 9110 §5.3): a second one cannot be merged, and
/// two parties that each take a different one would disagree on the request.
pub const SINGLETONS: &[&str] = &[
    "Host",
    "Content-Length",
    "Content-Type",
    "Authorization",
    "Proxy-Authorization",
];

/// Why a head was refused: the status the client gets and the reason the log gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: String,
}

impl Refusal {
    fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
        }
    }
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Content-Length (0 when there is no body).
    Length(u64),
    /// Transfer-Encoding: chunked.
    Chunked,
}

/// A parsed head: what the connection needs, and the CGI variables for the app.
#[derive(Debug, Clone)]
pub struct Head {
    /// The head's bytes in the buffer; the body (or the next request) follows.
    pub len: usize,
    pub framing: Framing,
    /// HTTP/1.x's x: 0 or 1.
    pub minor: u8,
    /// The client keeps the connection (HTTP/1.1 without `Connection: close`, or 1.0 with
    /// `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a 100 before it sends the body.
    pub expect_continue: bool,
    /// A HEAD request: its response has no body.
    pub head_method: bool,
    pub params: Params,
}

/// Who is on the other end, and which peers' X-Forwarded-* headers are believed.
#[derive(Debug, Clone)]
pub struct Peer<'a> {
    /// The TCP peer (None: a unix socket, whose peer is the proxy in front).
    pub remote: Option<SocketAddr>,
    /// The address the connection came in on, for SERVER_NAME/SERVER_PORT without Host.
    pub local: Option<SocketAddr>,
    /// `forwarded_allow_ips`.
    pub trusted: &'a Trusted,
    /// `max_request_body`; None: no bound.
    pub max_body: Option<u64>,
}

/// `forwarded_allow_ips`: the peers whose X-Forwarded-For and X-Forwarded-Proto count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trusted {
    /// `"*"`: every peer (behind a proxy that always sets them).
    Any,
    Ips(Vec<IpAddr>),
}

impl Trusted {
    /// A unix-socket peer is a local proxy: trusted as 127.0.0.1 is.
    fn trusts(&self, ip: Option<IpAddr>) -> bool {
        match (self, ip) {
            (Trusted::Any, _) => true,
            (Trusted::Ips(ips), Some(ip)) => ips.contains(&ip.to_canonical()),
            (Trusted::Ips(ips), None) => ips.iter().any(IpAddr::is_loopback),
        }
    }
}

/// Parses the head at the start of `buf`. Ok(None): incomplete, read more.
pub fn parse(buf: &[u8], peer: &Peer<'_>) -> Result<Option<Head>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let len = match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            let line = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
            return if line > MAX_REQUEST_LINE {
                Err(Refusal::new(414, "request line too long"))
            } else if buf.len() > MAX_HEAD {
                Err(Refusal::new(431, "request head too large"))
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refusal::new(
                431,
                format!("more than {MAX_HEADERS} header fields"),
            ));
        }
        Err(err) => return Err(Refusal::new(400, format!("malformed request head: {err}"))),
    };
    if len > MAX_HEAD {
        return Err(Refusal::new(431, "request head too large"));
    }
    let line = buf.iter().position(|&b| b == b'\n').unwrap_or(len);
    if line > MAX_REQUEST_LINE {
        return Err(Refusal::new(414, "request line too long"));
    }
    if buf[line.min(len)..len]
        .split(|&b| b == b'\n')
        .any(|field| field.len() + 1 > MAX_FIELD_LINE)
    {
        return Err(Refusal::new(
            431,
            format!("a header field longer than {MAX_FIELD_LINE} bytes"),
        ));
    }
    let (Some(method), Some(target), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Err(Refusal::new(400, "malformed request line"));
    };
    build(method, target, minor, request.headers, len, peer).map(Some)
}

/// The checks httparse leaves to us, and the CGI variables.
fn build(
    method: &str,
    target: &str,
    minor: u8,
    fields: &[httparse::Header<'_>],
    len: usize,
    peer: &Peer<'_>,
) -> Result<Head, Refusal> {
    if !method
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_')
    {
        return Err(Refusal::new(400, "invalid method (not A-Z, - or _)"));
    }
    if target == "*" && method != "OPTIONS" {
        return Err(Refusal::new(400, "request target * is for OPTIONS only"));
    }
    let count = |name: &str| {
        fields
            .iter()
            .filter(|f| f.name.eq_ignore_ascii_case(name))
            .count()
    };
    if let Some(name) = SINGLETONS.iter().find(|name| count(name) > 1) {
        return Err(Refusal::new(400, format!("more than one {name} header")));
    }
    if minor == 1 && count("host") == 0 {
        return Err(Refusal::new(400, "HTTP/1.1 needs exactly one Host header"));
    }
    let framing = framing(fields, minor, peer.max_body)?;
    // RFC 9112 §3.2.2: a server must accept the absolute-form (`http://host/path`), and
    // its authority then stands for Host. The authority-form (CONNECT) is for proxies.
    let (target, authority) = match absolute_form(target) {
        Some((authority, path)) => (path, Some(authority)),
        None if target.starts_with('/') || target == "*" => (target.into(), None),
        None => return Err(Refusal::new(400, "request target is not a path")),
    };
    let connection = joined(fields, "connection");
    let has = |token: &str| {
        connection
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    };
    let keep_alive = if minor == 1 {
        !has("close")
    } else {
        has("keep-alive")
    };
    let expect_continue =
        minor == 1 && joined(fields, "expect").eq_ignore_ascii_case(b"100-continue");
    let params = cgi(method, &target, authority, minor, fields, framing, peer);
    Ok(Head {
        len,
        framing,
        minor,
        keep_alive,
        expect_continue,
        head_method: method == "HEAD",
        params,
    })
}

/// The body's framing (RFC 9112 §6.3), refusing what a proxy in front could read
/// differently.
fn framing(
    fields: &[httparse::Header<'_>],
    minor: u8,
    max_body: Option<u64>,
) -> Result<Framing, Refusal> {
    let te = fields
        .iter()
        .any(|f| f.name.eq_ignore_ascii_case("transfer-encoding"));
    let mut length: Option<u64> = None;
    for field in fields
        .iter()
        .filter(|f| f.name.eq_ignore_ascii_case("content-length"))
    {
        // One field (a repeat is refused with the singletons), one value: RFC 9110 §8.6
        // lets a recipient take "5, 5" as 5 or refuse it; nginx and gunicorn refuse it,
        // and so does drover, lest a party in front read it otherwise.
        let value = std::str::from_utf8(field.value.trim_ascii())
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| Refusal::new(400, "invalid Content-Length"))?;
        length = Some(value);
    }
    if te {
        if length.is_some() {
            return Err(Refusal::new(
                400,
                "both Content-Length and Transfer-Encoding (request smuggling)",
            ));
        }
        if minor == 0 {
            return Err(Refusal::new(400, "Transfer-Encoding on HTTP/1.0"));
        }
        let value = joined(fields, "transfer-encoding");
        if !value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            return Err(Refusal::new(
                501,
                format!(
                    "Transfer-Encoding {:?} is not supported (only chunked)",
                    String::from_utf8_lossy(&value)
                ),
            ));
        }
        return Ok(Framing::Chunked);
    }
    let length = length.unwrap_or(0);
    if let Some(max) = max_body.filter(|&max| length > max) {
        return Err(Refusal::new(
            413,
            format!("Content-Length {length} above max_request_body ({max} bytes)"),
        ));
    }
    Ok(Framing::Length(length))
}

/// An absolute-form target's authority and its origin-form (`/path?query`); None for any
/// other form.
fn absolute_form(target: &str) -> Option<(&str, std::borrow::Cow<'_, str>)> {
    let (scheme, rest) = target.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    // userinfo ("user@host") is deprecated and a classic confusion: refused.
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let path = if path.starts_with('/') {
        path.into()
    } else {
        format!("/{path}").into()
    };
    Some((authority, path))
}

/// The values of every field called `name`, joined with ", " (RFC 9110 §5.3).
fn joined(fields: &[httparse::Header<'_>], name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for field in fields.iter().filter(|f| f.name.eq_ignore_ascii_case(name)) {
        if !out.is_empty() {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(field.value);
    }
    out
}

/// The CGI variables nginx's `fastcgi.conf` would send for this request, with the
/// X-Forwarded-* rewrite of a trusted peer.
fn cgi(
    method: &str,
    target: &str,
    authority: Option<&str>,
    minor: u8,
    fields: &[httparse::Header<'_>],
    framing: Framing,
    peer: &Peer<'_>,
) -> Params {
    let mut raw = Vec::with_capacity(512 + fields.len() * 48);
    let mut put = |name: &[u8], value: &[u8]| encode_pair(&mut raw, name, value);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    put(b"REQUEST_METHOD", method.as_bytes());
    put(b"REQUEST_URI", target.as_bytes());
    // nginx's $document_uri is decoded; so is gunicorn's PATH_INFO.
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    put(b"DOCUMENT_URI", &decoded);
    put(b"QUERY_STRING", query.as_bytes());
    put(
        b"SERVER_PROTOCOL",
        if minor == 1 { b"HTTP/1.1" } else { b"HTTP/1.0" },
    );
    put(b"GATEWAY_INTERFACE", b"CGI/1.1");
    let content_type = joined(fields, "content-type");
    if !content_type.is_empty() {
        put(b"CONTENT_TYPE", &content_type);
    }
    if let Framing::Length(n) = framing
        && fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case("content-length"))
    {
        put(b"CONTENT_LENGTH", n.to_string().as_bytes());
    }
    let trusted = peer.trusted.trusts(peer.remote.map(|a| a.ip()));
    let remote = forwarded_for(fields, peer, trusted);
    match remote {
        Some((ip, port)) => {
            put(b"REMOTE_ADDR", ip.to_string().as_bytes());
            if let Some(port) = port {
                put(b"REMOTE_PORT", port.to_string().as_bytes());
            }
        }
        None => put(b"REMOTE_ADDR", b""),
    }
    let proto = joined(fields, "x-forwarded-proto");
    let https = trusted && proto.trim_ascii().eq_ignore_ascii_case(b"https");
    put(b"REQUEST_SCHEME", if https { b"https" } else { b"http" });
    if https {
        put(b"HTTPS", b"on");
    }
    let host = authority.map_or_else(|| joined(fields, "host"), |a| a.as_bytes().to_vec());
    let (name, port) = server_name(&host, peer.local, https);
    put(b"SERVER_NAME", name.as_bytes());
    put(b"SERVER_PORT", port.as_bytes());
    put_headers(&mut put, fields);
    Params::decode(raw).unwrap_or_default()
}

/// Every header as HTTP_NAME, repeats joined. A name with `_` is dropped, as nginx
/// (`underscores_in_headers off`) and gunicorn drop it: `X_Forwarded_For` would otherwise
/// pass for `X-Forwarded-For` in the environ.
fn put_headers(put: &mut impl FnMut(&[u8], &[u8]), fields: &[httparse::Header<'_>]) {
    let mut names: Vec<Vec<u8>> = Vec::with_capacity(fields.len());
    for field in fields {
        if field.name.contains('_') {
            continue;
        }
        let mut name = b"HTTP_".to_vec();
        name.extend(field.name.bytes().map(|b| {
            if b == b'-' {
                b'_'
            } else {
                b.to_ascii_uppercase()
            }
        }));
        if names.contains(&name) {
            continue;
        }
        let separator: &[u8] = if name == b"HTTP_COOKIE" { b"; " } else { b", " };
        let mut value = Vec::new();
        for same in fields
            .iter()
            .filter(|f| f.name.eq_ignore_ascii_case(field.name))
        {
            if !value.is_empty() {
                value.extend_from_slice(separator);
            }
            value.extend_from_slice(same.value);
        }
        put(&name, &value);
        names.push(name);
    }
}

/// REMOTE_ADDR and REMOTE_PORT: the peer's, or, from a trusted peer, the client
/// X-Forwarded-For names: the rightmost address that is not itself trusted (each proxy
/// appends its peer; only the part trusted proxies wrote can be believed), uvicorn's rule.
fn forwarded_for(
    fields: &[httparse::Header<'_>],
    peer: &Peer<'_>,
    trusted: bool,
) -> Option<(IpAddr, Option<u16>)> {
    let own = peer.remote.map(|a| (a.ip().to_canonical(), Some(a.port())));
    if !trusted {
        return own;
    }
    let chain = joined(fields, "x-forwarded-for");
    let chain = String::from_utf8_lossy(&chain);
    let hops: Vec<IpAddr> = chain
        .split(',')
        .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
        .collect();
    let client = hops
        .iter()
        .rev()
        .find(|ip| !peer.trusted.trusts(Some(**ip)))
        .or(hops.first());
    match client {
        Some(ip) => Some((*ip, None)),
        None => own,
    }
}

/// SERVER_NAME and SERVER_PORT from Host, else from the local address.
fn server_name(host: &[u8], local: Option<SocketAddr>, https: bool) -> (String, String) {
    let host = String::from_utf8_lossy(host);
    let default_port = if https { "443" } else { "80" };
    if !host.is_empty() {
        // "[::1]:8080", "example.org:8080", "example.org"
        let (name, port) = match host.rfind(':') {
            Some(i) if !host[i..].contains(']') => (&host[..i], &host[i + 1..]),
            _ => (&host[..], ""),
        };
        // No port in Host: the scheme's (gunicorn's rule), not the socket's, which
        // may be behind a port mapping.
        let port = if port.is_empty() { default_port } else { port };
        return (name.to_string(), port.to_string());
    }
    match local {
        Some(addr) => (addr.ip().to_string(), addr.port().to_string()),
        None => ("localhost".to_string(), default_port.to_string()),
    }
}

#[cfg(test)]
mod tests;
