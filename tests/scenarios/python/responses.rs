//! What reaches the client: a 10 MB body whole, a stream chunk by chunk, repeated headers,
//! the write() callable, HEAD without a body, and close() called on every response, also
//! when the client hangs up mid-stream.

use std::fs;

use super::{served_by, sha256, wsgi_stack};
use crate::common::TIMEOUT;
use crate::common::http::{self, Raw, Wire};

#[test]
fn ten_megabyte_response_arrives_whole() {
    let stack = wsgi_stack(2);
    let size = 10 << 20;

    let reply = http::get(&stack.url(&format!("/big?size={size}")));

    assert_eq!(reply.status, 200, "status; headers {:?}", reply.headers);
    assert_eq!(reply.bytes.len(), size, "body length");
    assert_eq!(sha256(&stack.site, &reply.bytes), reply.header("X-Sha256"));
}

#[test]
fn a_streamed_chunk_reaches_the_client_before_the_app_produces_the_last() {
    let stack = wsgi_stack(2);
    let marker = stack.site.path().join("stream.go");

    let mut raw = Raw::send(
        stack.nginx.port,
        &format!("GET /stream?marker={} HTTP/1.0\r\n", marker.display()),
    );
    // The app holds "last" back until the marker exists, so "first" can only arrive here
    // if drover passed it on while the app was still running.
    raw.read_until(b"first\n");
    fs::write(&marker, "").expect("create the marker");
    let wire = Wire::parse(&raw.read_to_end());

    assert_eq!(wire.status, 200, "head: {}", wire.head);
    assert_eq!(String::from_utf8_lossy(&wire.body), "first\nlast\n");
}

#[test]
fn repeated_set_cookie_headers_both_arrive() {
    let stack = wsgi_stack(2);

    let reply = http::get(&stack.url("/cookies"));

    assert_eq!(reply.status, 200, "reply: {reply:?}");
    assert_eq!(
        reply.header_values("Set-Cookie"),
        ["a=1; Path=/", "b=2; Path=/"],
        "headers: {:?}",
        reply.headers
    );
    assert_eq!(reply.body, "two cookies");
}

#[test]
fn the_write_callable_sends_its_bytes_before_the_returned_body() {
    let stack = wsgi_stack(2);

    let reply = http::get(&stack.url("/write"));

    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "written through write(), then returned")
    );
}

#[test]
fn a_head_request_gets_the_head_and_no_body() {
    let stack = wsgi_stack(2);

    let wire = Wire::parse(&Raw::send(stack.nginx.port, "HEAD /echo HTTP/1.0\r\n").read_to_end());

    assert_eq!(wire.status, 200, "head: {}", wire.head);
    assert!(wire.has_header("X-App", "wsgi"), "head: {}", wire.head);
    assert_eq!(
        String::from_utf8_lossy(&wire.body),
        "",
        "a body came with HEAD"
    );
}

#[test]
fn close_is_called_once_on_every_response() {
    let stack = wsgi_stack(2);
    let ids: Vec<String> = (0..5).map(|i| format!("every-{i}")).collect();

    for id in &ids {
        let reply = http::get(&stack.url(&format!("/closing?id={id}")));
        assert_eq!((reply.status, reply.body.as_str()), (200, "closing body"));
    }

    let log = &stack.drover.log;
    log.wait_for_lines(
        0,
        "marker-closed every-",
        |l| l.contains("marker-closed every-"),
        ids.len(),
        TIMEOUT,
    );
    for id in &ids {
        let closes = log
            .lines()
            .iter()
            .filter(|l| l.ends_with(&format!("marker-closed {id}")))
            .count();
        assert_eq!(closes, 1, "close() calls for {id}; log:\n{}", log.text());
    }
}

#[test]
fn close_is_called_when_the_client_hangs_up_mid_stream() {
    let stack = wsgi_stack(1);
    let worker = served_by(&stack);

    let mut raw = Raw::send(stack.nginx.port, "GET /endless?id=abort HTTP/1.0\r\n");
    raw.read_until(b"xxxx\n");
    drop(raw);

    stack
        .drover
        .log
        .wait_for_line("marker-closed abort", TIMEOUT);
    assert_eq!(served_by(&stack), worker, "the worker did not live on");
}
