//! Table of request shapes, valid and invalid under RFC 9110/9112, after the kinds in
//! gunicorn's request corpus (tests/requests/{valid,invalid}), in drover's own bytes: each
//! goes through a connection as the listener reads it (heads, bodies, pipelined requests
//! to the end of the input) and must be served whole or refused.

use super::*;
use crate::http::head::{MAX_FIELD_LINE, MAX_HEADERS};

#[derive(Debug, PartialEq)]
enum Verdict {
    Served,
    Refused(String),
}

/// Reads every request in `input` as the listener would; the first refusal ends it.
fn verdict(input: &[u8]) -> Verdict {
    let (socket, mut client) = pair();
    client.write_all(input).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut conn = HttpConn::new(socket);
    conn.get_mut().set_wait(false);
    let trusted = Trusted::Any;
    let peer = Peer {
        remote: None,
        local: None,
        trusted: &trusted,
        max_body: None,
    };
    loop {
        match conn.next_head(&peer) {
            Ok(Some(_)) => {}
            Ok(None) => match conn.fill() {
                Ok(0) | Err(_) if conn.has_input() => {
                    return Verdict::Refused("a head cut short".into());
                }
                Ok(0) | Err(_) => return Verdict::Served,
                Ok(_) => continue,
            },
            Err(refusal) => return Verdict::Refused(refusal.reason),
        }
        conn.get_mut().set_wait(true);
        let mut buf = [0u8; 512];
        loop {
            match conn.read_stdin(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(err) => return Verdict::Refused(err.to_string()),
            }
        }
        conn.end_request();
        conn.get_mut().set_wait(false);
    }
}

const CHUNKED: &str = "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Refused: (what it is, the bytes).
fn invalid() -> Vec<(&'static str, Vec<u8>)> {
    let chunked = |body: &str| format!("{CHUNKED}{body}").into_bytes();
    let head = |text: &str| text.as_bytes().to_vec();
    let long_field = format!(
        "GET / HTTP/1.1\r\nHost: h\r\nX-Long: {}\r\n\r\n",
        "v".repeat(MAX_FIELD_LINE_VALUE)
    );
    vec![
        // request line
        ("no target", head("GET HTTP/1.1\r\nHost: h\r\n\r\n")),
        ("bare LF between parts", head("GET\n/\nHTTP/1.1\r\n\r\n")),
        (
            "colon in the method",
            head("GE:T /a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "lowercase method",
            head("-get /a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "NUL in the method",
            head("GET\0X /a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "non-ASCII method",
            head("GET\u{e9} /a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        ("not HTTP", head("GET /a XTTP/1.1\r\nHost: h\r\n\r\n")),
        (
            "version without a dot",
            head("GET /a HTTP/111\r\nHost: h\r\n\r\n"),
        ),
        ("version 0.9x", head("GET /a HTTP/0.99\r\n\r\n")),
        ("version 2.0", head("GET /a HTTP/2.0\r\n\r\n")),
        (
            "endless major version",
            head("GET /a HTTP/1111111111.1\r\n\r\n"),
        ),
        (
            "not a target",
            head("PUT q://]x/: HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "relative target",
            head("GET a/b HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "authority-form without CONNECT",
            head("GET h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"),
        ),
        ("* for GET", head("GET * HTTP/1.1\r\nHost: h\r\n\r\n")),
        ("head cut short", head("GET /a HTTP/1.0\r\nX: y")),
        // field lines
        (
            "NUL in a name",
            head("GET / HTTP/1.1\r\nHost: h\r\nX\0y: 1\r\n\r\n"),
        ),
        (
            "space before the colon",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 1\r\n\r\nx"),
        ),
        (
            "non-ASCII name",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length\u{df}: 1\r\n\r\nx"),
        ),
        (
            "obs-fold",
            head("GET / HTTP/1.1\r\nX-A: 1\r\n 2\r\nHost: h\r\n\r\n"),
        ),
        (
            "BEL in a value",
            head("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x07b\r\n\r\n"),
        ),
        (
            "DEL in a value",
            head("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7fb\r\n\r\n"),
        ),
        (
            "bare LF ending a value",
            head("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\nContent-Length: 9\r\n\r\n"),
        ),
        ("field line too long", long_field.into_bytes()),
        ("too many fields", {
            let mut text = "GET / HTTP/1.1\r\nHost: h\r\n".to_string();
            for i in 0..MAX_HEADERS {
                text.push_str(&format!("F{i}: {i}\r\n"));
            }
            text.push_str("\r\n");
            text.into_bytes()
        }),
        ("no Host on 1.1", head("GET / HTTP/1.1\r\n\r\n")),
        (
            "two Hosts",
            head("GET / HTTP/1.1\r\nHost: h\r\nHost: evil\r\n\r\n"),
        ),
        (
            "two Content-Types",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\n"),
        ),
        (
            "two Authorizations",
            head("GET / HTTP/1.1\r\nHost: h\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n"),
        ),
        // Content-Length
        (
            "negative length",
            head("PUT / HTTP/1.0\r\nContent-Length: -1\r\n\r\n"),
        ),
        (
            "word length",
            head("PUT / HTTP/1.0\r\nContent-Length: abc\r\n\r\n"),
        ),
        ("-0", head("GET / HTTP/1.0\r\nContent-Length: -0\r\n\r\n")),
        ("+1", head("GET / HTTP/1.0\r\nContent-Length: +1\r\n\r\nx")),
        ("0_1", head("GET / HTTP/1.0\r\nContent-Length: 0_1\r\n\r\n")),
        (
            "two numbers",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3 1\r\n\r\nxyz"),
        ),
        (
            "two lengths",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 2\r\n\r\nxyz"),
        ),
        (
            "the same length twice",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nxyz"),
        ),
        (
            "a list of lengths",
            head("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 2\r\n\r\nxy"),
        ),
        (
            "length and chunked",
            head(
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            ),
        ),
        // Transfer-Encoding
        (
            "chunked twice",
            head(
                "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            ),
        ),
        (
            "chunked not last",
            head(
                "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
            ),
        ),
        (
            "chunked on 1.0",
            head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ),
        // chunk sizes and extensions
        (
            "underscore in a size",
            chunked("5\r\nhello\r\n6_0\r\n world\r\n0\r\n\r\n"),
        ),
        ("space after a size", chunked("5\r\nhello\r\n0 \r\n\r\n")),
        ("space before a size", chunked("5\r\nhello\r\n 0\r\n\r\n")),
        (
            "bare LF after a size",
            chunked("5\n;\r\nhello\r\n0\r\n\r\n"),
        ),
        (
            "extension without a size",
            chunked(" ;a=b\r\nhello\r\n0\r\n\r\n"),
        ),
        ("no size", chunked("\r\nhello\r\n0\r\n\r\n")),
        (
            "bare CR in an extension",
            chunked("5;a=b\rc\r\nhello\r\n0\r\n\r\n"),
        ),
        (
            "bare LF in an extension (issue 24)",
            chunked("3;x\nabc\r\nDEF\r\n0\r\n\r\n"),
        ),
        ("-5", chunked("-5\r\nhello\r\n0\r\n\r\n")),
        ("+5", chunked("+5\r\nhello\r\n0\r\n\r\n")),
        (
            "no CRLF after the data",
            chunked("5\r\nhelloX\r\n0\r\n\r\n"),
        ),
        ("no final CRLF", chunked("0\r\n")),
        // trailers (RFC 9110 §6.5.1)
        (
            "Content-Length trailer",
            chunked("5\r\nhello\r\n0\r\nContent-Length: 99\r\n\r\n"),
        ),
        (
            "Host trailer",
            chunked("5\r\nhello\r\n0\r\nHost: evil\r\n\r\n"),
        ),
        (
            "Transfer-Encoding trailer",
            chunked("5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ),
        ("TE trailer", chunked("0\r\nTE: trailers\r\n\r\n")),
        (
            "Authorization trailer",
            chunked("0\r\nAuthorization: Basic eA==\r\n\r\n"),
        ),
        (
            "Content-Type trailer",
            chunked("0\r\nContent-Type: text/html\r\n\r\n"),
        ),
    ]
}

/// Value bytes that make a field line one byte over [`MAX_FIELD_LINE`] (`X-Long: ` and CRLF).
const MAX_FIELD_LINE_VALUE: usize = MAX_FIELD_LINE - "X-Long: \r\n".len() + 1;

/// Served: (what it is, the bytes).
fn valid() -> Vec<(&'static str, Vec<u8>)> {
    let head = |text: &str| text.as_bytes().to_vec();
    let chunked = |body: &str| format!("{CHUNKED}{body}").into_bytes();
    let long_field = format!(
        "GET / HTTP/1.1\r\nHost: h\r\nX-Long: {}\r\n\r\n",
        "v".repeat(MAX_FIELD_LINE_VALUE - 1)
    );
    vec![
        ("a GET", head("GET /a?b=c HTTP/1.1\r\nHost: h\r\n\r\n")),
        ("HTTP/1.0 without Host", head("GET / HTTP/1.0\r\n\r\n")),
        (
            "a GET with a body",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"),
        ),
        (
            "a length of 0",
            head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"),
        ),
        (
            "a 1.0 body",
            head("POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\nab"),
        ),
        (
            "pipelined",
            head("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        ("M-SEARCH", head("M-SEARCH /x HTTP/1.1\r\nHost: h\r\n\r\n")),
        ("OPTIONS *", head("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n")),
        (
            "absolute-form",
            head("GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "absolute-form, https",
            head("GET https://h:8443/a HTTP/1.1\r\nHost: h\r\n\r\n"),
        ),
        (
            "absolute-form, IPv6",
            head("GET http://[::1]:8080/a HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
        ),
        (
            "special characters in a name",
            head("GET / HTTP/1.1\r\nHost: h\r\nX!#$%&'*+.^`|~-A: 1\r\n\r\n"),
        ),
        (
            "tabs around a value",
            head("GET / HTTP/1.1\r\nHost: h\r\nX-A:\t1\t\r\n\r\n"),
        ),
        (
            "obs-text in a value",
            head("GET / HTTP/1.1\r\nHost: h\r\nX-A: caf\u{e9}\r\n\r\n"),
        ),
        ("a field line at the limit", long_field.into_bytes()),
        (
            "two Accepts",
            head("GET / HTTP/1.1\r\nHost: h\r\nAccept: a\r\nAccept: b\r\n\r\n"),
        ),
        ("chunked", chunked("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")),
        (
            "a quoted extension",
            chunked("5;name=\"a b; c\"\r\nhello\r\n0\r\n\r\n"),
        ),
        (
            "an extension after space",
            chunked("5 ;a\r\nhello\r\n0\r\n\r\n"),
        ),
        ("leading zeros", chunked("0005\r\nhello\r\n000\r\n\r\n")),
        ("uppercase hex", chunked("A\r\n0123456789\r\n0\r\n\r\n")),
        (
            "a harmless trailer",
            chunked("5\r\nhello\r\n0\r\nX-Checksum: 1\r\nVary: *\r\n\r\n"),
        ),
    ]
}

#[test]
fn every_invalid_shape_is_refused() {
    let served: Vec<&str> = invalid()
        .into_iter()
        .filter(|(_, bytes)| verdict(bytes) == Verdict::Served)
        .map(|(name, _)| name)
        .collect();
    assert!(served.is_empty(), "served: {served:?}");
}

#[test]
fn every_valid_shape_is_served() {
    let refused: Vec<(&str, Verdict)> = valid()
        .into_iter()
        .map(|(name, bytes)| (name, verdict(&bytes)))
        .filter(|(_, verdict)| *verdict != Verdict::Served)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
}
