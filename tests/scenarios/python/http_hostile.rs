//! A WSGI pool on `protocol = "http"` facing hostile clients directly (issue 24): request
//! shapes a front end could read otherwise are refused with 400 and a log line, before or
//! while the body is read.

use std::io::{Read, Write};

use super::http_pool::Server;
use crate::common::{TIMEOUT, http};

/// Sends `request` on a new connection; the answer, read to the connection's end (a
/// refusal ends it).
fn refused(server: &Server, request: &[u8]) -> String {
    let mut stream = server.connect();
    stream.write_all(request).unwrap();
    let mut received = Vec::new();
    stream
        .read_to_end(&mut received)
        .expect("the refusal ends the connection");
    String::from_utf8_lossy(&received).into_owned()
}

#[test]
fn smuggling_shapes_in_heads_and_chunked_bodies_get_400_and_a_log_line() {
    let server = Server::start("wsgi_app:application", 1, "");
    let chunked = "POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let cases: [(String, &str); 5] = [
        // A front end ending the size line at the LF reads "abc" then "DEF" as data.
        (
            format!("{chunked}3;x\nabc\r\nDEF\r\n0\r\n\r\n"),
            "chunk-size line not ended by CRLF (bare LF)",
        ),
        (
            format!("{chunked}5\r\nhello\r\n0\r\nContent-Length: 99\r\n\r\n"),
            "Content-Length in the chunked trailers",
        ),
        (
            format!("{chunked}5\r\nhello\r\n0\r\nHost: evil.example\r\n\r\n"),
            "Host in the chunked trailers",
        ),
        (
            "GET * HTTP/1.1\r\nHost: t\r\n\r\n".to_string(),
            "request target * is for OPTIONS only (400)",
        ),
        (
            "POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Type: a/b\r\n\
             Content-Type: c/d\r\nContent-Length: 1\r\n\r\nx"
                .to_string(),
            "more than one Content-Type header (400)",
        ),
    ];
    for (request, line) in &cases {
        let answer = refused(&server, request.as_bytes());
        assert!(
            answer.starts_with("HTTP/1.1 400 "),
            "{request:?}: expected 400, got {answer:?}"
        );
        server.drover.log.wait_for_line(line, TIMEOUT);
    }
    // The worker serves on.
    assert_eq!(http::get(&server.url("/pid")).status, 200);
}
