//! A WSGI pool on `protocol = "http"` facing hostile clients directly (issue 24): request
//! shapes a front end could read otherwise are refused with 400 and a log line, before or
//! while the body is read.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::http_pool::Server;
use crate::common::http1::{self, read_response};
use crate::common::{TIMEOUT, http};

/// Sends `request` on a new connection; the answer, read to the connection's end (a
/// refusal ends it).
fn refused(server: &Server, request: &[u8]) -> String {
    http1::until_close(&mut server.connect(), request)
}

/// The request shapes a front end could read otherwise, each with the log line of its
/// 400 (the TLS listener's twin, https.rs, sends the same).
pub(super) fn smuggling_cases() -> [(String, &'static str); 5] {
    let chunked = "POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    [
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
    ]
}

#[test]
fn smuggling_shapes_in_heads_and_chunked_bodies_get_400_and_a_log_line() {
    let server = Server::start("wsgi_app:application", 1, "");
    let cases = smuggling_cases();
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

/// As many clients as workers ask for a large response and read only its first bytes:
/// each worker's write stalls once the socket buffers are full. With `send_timeout`, a
/// write that makes no progress for that long ends the connection (logged), so a new
/// client is answered within about `send_timeout`; without it, never (gunicorn's
/// `timeout` kills such a worker; nginx's `send_timeout` closes such a connection).
#[test]
fn clients_that_never_read_their_responses_free_the_workers_after_send_timeout() {
    let server = Server::start("wsgi_app:application", 2, "send_timeout = \"2s\"");
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut stream = server.connect();
        stream
            .write_all(b"GET /big?size=67108864 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        // The head has come: a worker is writing this response.
        let mut first = [0u8; 16];
        stream.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200"), "{first:?}");
        stalled.push(stream);
    }
    let asked = Instant::now();
    let reply = http::try_get(&server.url("/pid"));
    let waited = asked.elapsed();
    assert!(
        reply.as_ref().is_ok_and(|r| r.status == 200),
        "{reply:?} after {waited:?}; the log:\n{}",
        server.drover.log.text()
    );
    assert!(
        waited < Duration::from_secs(2 + 4),
        "answered after {waited:?}"
    );
    server.drover.log.wait_for_line(
        "dropped a connection: the client read nothing of the response for 2s (send_timeout)",
        TIMEOUT,
    );
    drop(stalled);
}

/// Two clients send a head and a few bytes of a body, then nothing: the epoll loop that
/// holds idle connections reads bodies before the app runs, so they hold no worker, and
/// the one worker answers a third client at once (before: after a whole
/// `request_read_timeout` per slow body). The slow ones are dropped when
/// `request_read_timeout` has passed since their first byte, with a log line; a body
/// that does arrive in pieces, after `100 Continue`, is served whole.
#[test]
fn slow_request_bodies_hold_no_worker_while_they_trickle() {
    let server = Server::start("wsgi_app:application", 1, "request_read_timeout = \"4s\"");
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = server.connect();
        stream
            .write_all(
                b"POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789",
            )
            .unwrap();
        slow.push(stream);
    }
    // A body in two pieces, the client waiting for 100 Continue before the first.
    let mut continued = server.connect();
    continued
        .write_all(
            b"POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\nExpect: 100-continue\r\n\r\n",
        )
        .unwrap();
    http1::read_continue(&mut continued);
    continued.write_all(b"abc").unwrap();
    let asked = Instant::now();
    let reply = http::try_get(&server.url("/pid"));
    let waited = asked.elapsed();
    assert!(
        reply.as_ref().is_ok_and(|r| r.status == 200),
        "{reply:?} after {waited:?}"
    );
    assert!(waited < Duration::from_secs(2), "answered after {waited:?}");
    continued.write_all(b"def").unwrap();
    let mut pending = Vec::new();
    let response = read_response(&mut continued, &mut pending);
    assert_eq!(response.status, 200);
    // sha256("abcdef")
    assert!(
        response
            .text()
            .contains("bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721"),
        "{}",
        response.text()
    );
    for mut stream in slow {
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    }
    server.drover.log.wait_for_line(
        "dropped a connection: its request body did not arrive within 4s",
        TIMEOUT,
    );
}
