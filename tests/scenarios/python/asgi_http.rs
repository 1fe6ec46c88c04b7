//! An ASGI pool (`interface = "asgi"`) on `protocol = "http"`: the worker's event loop
//! answers HTTP/1.1 clients itself, no nginx. The FastAPI fixture and the bare `scope_app`
//! of `tests/apps/asgi_app.py`, a real client (ureq) or bytes written by hand for the edge
//! cases; WebSockets with the `websockets` client.

use std::fs;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::asgi::python_workers;
use super::http_pool::{Server, chunked_body_past_the_limit_gets_413};
use super::{noise, sha256};
use crate::common::http1::{self, read_response};
use crate::common::{TIMEOUT, http, proc};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn fastapi(workers: u32) -> Server {
    Server::start_asgi("asgi_app:app", workers, "")
}

#[test]
fn fastapi_json_path_and_query_params_over_http() {
    let server = fastapi(2);

    let hello = http::get(&server.url("/hello"));
    assert_eq!(
        hello.status,
        200,
        "{hello:?}; log:\n{}",
        server.drover.log.text()
    );
    assert_eq!(json(&hello.body), json(r#"{"hello":"world"}"#));
    assert_eq!(
        hello.header("content-length"),
        hello.bytes.len().to_string()
    );
    let got = json(&http::get(&server.url("/items/42?q=drover%20rs")).body);
    assert_eq!(got["item_id"], 42);
    assert_eq!(got["q"], "drover rs");
    assert_eq!(got["path"], "/items/42");
    assert_eq!(
        got["resource_open"], true,
        "the lifespan state reaches requests"
    );
    assert_eq!(http::get(&server.url("/items/nope")).status, 422);
}

#[test]
fn the_scope_carries_the_clients_request() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "");

    let reply = http::get_with(
        &server.url("/caf%C3%A9/x?a=1&b=%20"),
        &[("X-Request-Id", "r-17")],
    );

    assert_eq!(
        reply.status,
        200,
        "{reply:?}; log:\n{}",
        server.drover.log.text()
    );
    assert_eq!(reply.header_values("x-one"), ["1", "2"]);
    let scope = json(&reply.body);
    assert_eq!(scope["http_version"], "1.1");
    assert_eq!(scope["scheme"], "http");
    assert_eq!(scope["path"], "/caf\u{e9}/x");
    assert_eq!(scope["raw_path"], "/caf%C3%A9/x");
    assert_eq!(scope["query_string"], "a=1&b=%20");
    assert_eq!(scope["client"][0], "127.0.0.1");
    assert_eq!(scope["server"][1], server.port);
    let headers = scope["headers"].as_array().expect("headers");
    assert!(
        headers
            .iter()
            .any(|h| h[0] == "x-request-id" && h[1] == "r-17"),
        "{headers:?}"
    );
}

#[test]
fn a_streaming_response_is_chunked_and_its_first_chunk_comes_first() {
    let server = fastapi(1);
    let marker = server.site.path().join("stream.go");
    http1::streams_its_first_chunk_first(&mut server.connect(), &marker);
}

#[test]
fn a_five_megabyte_post_arrives_intact() {
    let server = fastapi(1);
    let payload = noise(5 << 20);

    let reply = http::post(&server.url("/sha256"), "application/octet-stream", &payload);

    assert_eq!(
        reply.status,
        200,
        "{reply:?}; log:\n{}",
        server.drover.log.text()
    );
    let expected = format!("{} {}", payload.len(), sha256(&server.site, &payload));
    assert_eq!(reply.body, expected);
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "");
    let mut stream = server.connect();
    let mut pending = Vec::new();

    stream
        .write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let first = read_response(&mut stream, &mut pending);
    stream
        .write_all(b"GET /two HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let second = read_response(&mut stream, &mut pending);
    assert_eq!((first.status, second.status), (200, 200), "{}", first.head);
    assert_eq!(json(&second.text())["path"], "/two");

    // Three in one write, a body in the middle one: answered in the order sent.
    stream
        .write_all(
            b"GET /p1 HTTP/1.1\r\nHost: t\r\n\r\n\
              POST /p2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\na=b&c\
              GET /p3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    for n in 1..=3 {
        let response = read_response(&mut stream, &mut pending);
        assert_eq!(response.status, 200, "{}", response.head);
        let scope = json(&response.text());
        assert_eq!(scope["path"], format!("/p{n}"));
        if n == 2 {
            assert_eq!(scope["body"], "a=b&c");
        }
    }
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed after Connection: close: {rest:?}");
}

#[test]
fn a_chunked_upload_with_expect_continue_arrives_whole() {
    let server = fastapi(1);
    let payload = noise(1 << 20);
    let response = http1::upload_chunked(&mut server.connect(), "/sha256", &payload);
    assert_eq!(response.status, 200, "{}", response.head);
    let expected = format!("{} {}", payload.len(), sha256(&server.site, &payload));
    assert_eq!(response.text(), expected);
}

#[test]
fn hostile_heads_get_the_same_answers_as_on_a_wsgi_pool() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "max_request_body = \"1MiB\"");
    let cases: [(&str, String); 4] = [
        (
            "431",
            format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "b".repeat(40 * 1024)),
        ),
        (
            "400",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_string(),
        ),
        (
            "400",
            "GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n".to_string(),
        ),
        (
            "413",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n".to_string(),
        ),
    ];
    for (status, request) in &cases {
        let text = http1::until_close(&mut server.connect(), request.as_bytes());
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} ")),
            "expected {status}, got {text}"
        );
    }
    let log = &server.drover.log;
    log.wait_for_line("request head too large", TIMEOUT);
    log.wait_for_line("both Content-Length and Transfer-Encoding", TIMEOUT);
    assert_eq!(
        http::get(&server.url("/")).status,
        200,
        "the worker serves on"
    );
}

/// As on a WSGI pool: a chunked body past `max_request_body` gets 413, not the app's
/// failure to read it, and the app's request sees the client gone.
#[test]
fn a_chunked_body_past_max_request_body_is_answered_413() {
    let server = Server::start_asgi("asgi_app:app", 1, "max_request_body = \"64KiB\"");
    chunked_body_past_the_limit_gets_413(&server, "/sha256");
}

#[test]
fn lifespan_runs_once_per_worker_as_over_fastcgi() {
    let mut server = fastapi(2);
    for _ in 0..4 {
        assert_eq!(http::get(&server.url("/hello")).status, 200);
    }
    let events = |event: &str| -> Vec<i32> {
        let text =
            fs::read_to_string(server.site.path().join("apps/lifespan.log")).unwrap_or_default();
        let mut pids: Vec<i32> = text
            .lines()
            .filter_map(|l| l.strip_prefix(event)?.trim().parse().ok())
            .collect();
        pids.sort();
        pids
    };
    // Both workers start; the second may still be in its startup when the first answers.
    let started = proc::wait_until(TIMEOUT, "a lifespan startup in each worker", || {
        Some(events("startup")).filter(|s| s.len() >= 2)
    });
    assert_eq!(started.len(), 2, "one startup per worker: {started:?}");
    assert_ne!(started[0], started[1], "in two workers: {started:?}");

    server.drover.signal(Signal::SIGTERM);
    let status = server.drover.wait_exit(TIMEOUT);

    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        server.drover.log.text()
    );
    assert_eq!(events("shutdown"), started, "one shutdown per worker");
}

#[test]
fn an_idle_kept_connection_closes_after_keepalive_timeout() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "keepalive_timeout = \"1s\"");
    let mut stream = server.connect();
    let mut pending = Vec::new();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut stream, &mut pending).status, 200);

    let idle = Instant::now();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();

    assert!(rest.is_empty(), "{rest:?}");
    let waited = idle.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < TIMEOUT,
        "closed after {waited:?}"
    );
}

#[test]
fn x_forwarded_for_and_proto_make_the_scope_only_from_an_allowed_peer() {
    let server = Server::start_asgi(
        "asgi_app:scope_app",
        1,
        "forwarded_allow_ips = [\"127.0.0.2\"]",
    );
    let ask = |source: &str| {
        let mut stream = http1::connect_from(source, server.port);
        stream
            .write_all(
                b"GET / HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 203.0.113.7\r\n\
                  X-Forwarded-Proto: https\r\n\r\n",
            )
            .unwrap();
        json(&read_response(&mut stream, &mut Vec::new()).text())
    };
    let proxied = ask("127.0.0.2");
    assert_eq!(proxied["client"][0], "203.0.113.7", "{proxied}");
    assert_eq!(
        proxied["client"][1], 0,
        "no port for a forwarded client: {proxied}"
    );
    assert_eq!(proxied["scheme"], "https", "{proxied}");
    let direct = ask("127.0.0.1");
    assert_eq!(direct["client"][0], "127.0.0.1", "{direct}");
    assert_eq!(direct["scheme"], "http", "{direct}");
}

#[test]
fn a_client_trickling_its_head_is_dropped_after_request_read_timeout() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "request_read_timeout = \"1s\"");
    let mut slow = server.connect();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();

    // The worker serves others meanwhile: the slow head holds a descriptor, not the loop.
    assert_eq!(http::get(&server.url("/")).status, 200);
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);

    server
        .drover
        .log
        .wait_for_line("the request head did not arrive within 1s", TIMEOUT);
}

/// The `websockets` client against `/echo` and `/reject` of `asgi_ws_app.py`: what it saw,
/// one line per check.
const WS_CLIENT: &str = r#"
import sys
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

port = int(sys.argv[1])
with connect(f"ws://127.0.0.1:{port}/echo") as ws:
    for i in range(1000):
        ws.send(f"m{i}")
    got = [ws.recv() for _ in range(1000)]
    print("in order", got == [f"m{i}" for i in range(1000)])
    ws.send(b"\x00\x01" * 40000)
    print("binary", ws.recv() == b"\x00\x01" * 40000)
    ws.send("close-4001")
    try:
        ws.recv()
    except ConnectionClosed as closed:
        print("closed", closed.rcvd.code, closed.rcvd.reason)
with connect(f"ws://127.0.0.1:{port}/echo", subprotocols=["chat.v2"]) as ws:
    print("subprotocol", ws.subprotocol)
    ws.send("bye")
    ws.recv()
try:
    connect(f"ws://127.0.0.1:{port}/reject")
except InvalidStatus as refused:
    print("rejected", refused.response.status_code)
"#;

#[test]
fn a_websocket_echoes_a_thousand_messages_in_order_and_passes_close_codes() {
    let server = Server::start_asgi("asgi_ws_app:app", 1, "");

    let run = std::process::Command::new("python3")
        .args(["-c", WS_CLIENT, &server.port.to_string()])
        .output()
        .expect("run python3");

    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{out}\n{}\nlog:\n{}",
        String::from_utf8_lossy(&run.stderr),
        server.drover.log.text()
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "in order True",
            "binary True",
            "closed 4001 asked",
            "subprotocol chat.v2",
            "rejected 403"
        ],
        "log:\n{}",
        server.drover.log.text()
    );
    // The client's own close (1000) reaches the app as websocket.disconnect.
    server
        .drover
        .log
        .wait_for_line("ws disconnect 1000", TIMEOUT);
    assert_eq!(
        http::get(&server.url("/")).status,
        404,
        "HTTP served beside"
    );
}

#[test]
fn a_graceful_stop_closes_open_websockets_with_1001() {
    let mut server = Server::start_asgi("asgi_ws_app:app", 1, "");
    let script = r#"
import sys
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed
with connect(f"ws://127.0.0.1:{sys.argv[1]}/echo") as ws:
    ws.send("hi")
    print(ws.recv(), flush=True)
    try:
        ws.recv(timeout=30)
    except ConnectionClosed as closed:
        print("closed", closed.rcvd.code, flush=True)
"#;
    let mut client = std::process::Command::new("python3")
        .args(["-c", script, &server.port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut stdout = std::io::BufReader::new(client.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert_eq!(first, "hi\n", "log:\n{}", server.drover.log.text());

    server.drover.signal(Signal::SIGTERM);
    let status = server.drover.wait_exit(TIMEOUT);

    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let _ = client.wait();
    assert_eq!(rest, "closed 1001\n", "log:\n{}", server.drover.log.text());
    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        server.drover.log.text()
    );
    server
        .drover
        .log
        .wait_for_line("ws disconnect 1001", TIMEOUT);
}

/// Issue 24's smuggling shapes in a chunked body reach an ASGI pool too: its body reader
/// uses the WSGI path's strict chunk-size line and trailer rules, so a bare LF in a chunk
/// extension or a Host in the trailers ends the connection with a log line, and the app
/// never answers a body read otherwise than a front end would.
#[test]
fn smuggling_shapes_in_chunked_bodies_end_an_asgi_connection_with_a_log_line() {
    let server = Server::start_asgi("asgi_app:app", 1, "");
    let chunked = "POST /sha256 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let cases = [
        (
            format!("{chunked}3;x\nabc\r\nDEF\r\n0\r\n\r\n"),
            "chunk-size line not ended by CRLF (bare LF)",
        ),
        (
            format!("{chunked}5\r\nhello\r\n0\r\nHost: evil.example\r\n\r\n"),
            "Host in the chunked trailers",
        ),
    ];
    for (request, line) in &cases {
        let mut stream = server.connect();
        stream.write_all(request.as_bytes()).unwrap();
        let mut received = Vec::new();
        let _ = stream.read_to_end(&mut received);
        let text = String::from_utf8_lossy(&received);
        assert!(!text.contains(" 200 "), "{request:?} was served: {text}");
        server.drover.log.wait_for_line(line, TIMEOUT);
    }
    assert_eq!(http::get(&server.url("/hello")).status, 200);
}

/// Backpressure through the app's `send()`: a client that reads nothing past the head of a
/// 32 MiB response fills the socket and the hub's buffer, so a `send()` must wait (the app
/// logs the first that gives the loop a turn); once the client reads, the drained buffer
/// lets it go on, and the response arrives whole.
#[test]
fn a_send_that_waits_for_a_slow_client_goes_on_once_it_reads_and_the_response_is_whole() {
    const SIZE: usize = 32 << 20;
    let server = Server::start_asgi("asgi_app:big_app", 1, "");
    let mut client = server.connect();
    client
        .write_all(
            format!("GET /?size={SIZE} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let mut first = [0u8; 16];
    client.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"), "{first:?}");
    server
        .drover
        .log
        .wait_for_line("big response waits for the client after", TIMEOUT);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    let mut whole = first.to_vec();
    whole.extend_from_slice(&rest);
    let at = whole
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("the head ends")
        + 4;
    let body = &whole[at..];
    assert_eq!(body.len(), SIZE);
    assert!(body.iter().all(|&b| b == b'x'));
    server
        .drover
        .log
        .wait_for_line(&format!("big response ended after {SIZE} bytes"), TIMEOUT);
}

/// A client that asks for 64 MiB and stops reading after the head: the hub keeps what
/// the socket does not take and the app's `send()` waits, so nothing blocks, but the
/// connection would be held for good. With `send_timeout`, once the client has taken
/// nothing for that long the worker drops it (logged as the WSGI loop logs it), the app's
/// `send()` ends, and the same worker serves on; meanwhile it answered others at once.
#[test]
fn a_client_that_stops_reading_is_dropped_after_send_timeout_and_the_worker_serves_on() {
    const SIZE: usize = 64 << 20;
    let server = Server::start_asgi("asgi_app:big_app", 1, "send_timeout = \"2s\"");
    let workers = python_workers(&server.drover);
    assert_eq!(workers.len(), 1, "{workers:?}");
    let mut stalled = server.connect();
    // The clock cannot start before the request is sent.
    let asked = Instant::now();
    stalled
        .write_all(format!("GET /?size={SIZE} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    let mut first = [0u8; 16];
    stalled.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"), "{first:?}");
    let small = http::get(&server.url("/?size=5"));
    assert_eq!((small.status, small.body.as_str()), (200, "xxxxx"));
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "another client waited until {:?}",
        asked.elapsed()
    );
    server.drover.log.wait_for_line(
        "dropped a connection: the client read nothing of the response for 2s (send_timeout)",
        TIMEOUT,
    );
    let dropped = asked.elapsed();
    assert!(
        dropped >= Duration::from_secs(2) && dropped < Duration::from_secs(2 + 6),
        "dropped after {dropped:?}"
    );
    let ended = server
        .drover
        .log
        .wait_for_line("big response ended after", TIMEOUT);
    assert!(!ended.contains(&format!("after {SIZE} bytes")), "{ended}");
    // What the sockets held reaches the client, then the end: never the whole response.
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    assert!(16 + rest.len() < SIZE, "{} bytes came", 16 + rest.len());
    let after = http::get(&server.url("/?size=3"));
    assert_eq!((after.status, after.body.as_str()), (200, "xxx"));
    assert_eq!(
        python_workers(&server.drover),
        workers,
        "the worker was replaced"
    );
}
