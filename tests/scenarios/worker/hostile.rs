//! What a careless or hostile client does to a worker-mode pool: a body the handler never
//! reads, a client that vanishes in the middle of its body or of the answer. Each costs at
//! most its own request; the one booted script serves on (its count goes on rising).

use std::io::Write;
use std::net::TcpStream;

use super::pool;
use crate::common::{Site, Stack, TIMEOUT, http};

/// The handled count in a `handled=N pid=P` answer.
fn handled(body: &str) -> u64 {
    body.strip_prefix("handled=")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a count: {body:?}"))
}

#[test]
fn unread_bodies_and_vanishing_clients_cost_one_request_and_the_script_serves_on() {
    let stack = Stack::start(Site::new(), pool(1));
    let port = stack.nginx.port;
    let before = http::get(&stack.url("/index.php"));

    // A 2 MiB body the handler never reads: answered, and the next request is answered.
    let body = vec![b'x'; 2 << 20];
    let unread = http::post(&stack.url("/index.php"), "application/octet-stream", &body);
    assert_eq!(unread.status, 200, "{unread:?}");

    // A client that announces 1 MiB, sends 1 KiB, and vanishes.
    let mut gone = TcpStream::connect(("127.0.0.1", port)).unwrap();
    gone.write_all(
        b"POST /state.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1048576\r\n\r\n",
    )
    .unwrap();
    gone.write_all(&[b'a'; 1024]).unwrap();
    drop(gone);

    // A client that leaves in the middle of a 4 MiB answer.
    let mut left = TcpStream::connect(("127.0.0.1", port)).unwrap();
    left.set_read_timeout(Some(TIMEOUT)).unwrap();
    left.write_all(b"GET /big.php HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 4096];
    let n = std::io::Read::read(&mut left, &mut first).unwrap();
    assert!(n > 0, "no answer began");
    drop(left);

    // The same booted script answers next, with the whole of its state.
    let after = http::get(&stack.url("/index.php"));
    assert_eq!(after.status, 200, "{after:?}");
    let pid = |b: &str| b.split("pid=").nth(1).unwrap_or_default().to_owned();
    assert_eq!(
        pid(&before.body),
        pid(&after.body),
        "the worker was replaced: {after:?}"
    );
    assert!(
        handled(&after.body) >= handled(&before.body) + 2,
        "{before:?} {after:?}"
    );
    let whole = http::get(&stack.url("/big.php"));
    assert_eq!((whole.status, whole.body.len()), (200, 64 * 65536));
    let state = super::state(&stack, "?after=1", &[]);
    assert_eq!(
        state["post"],
        serde_json::json!([]),
        "a vanished client's body stayed: {state}"
    );
    assert_eq!(state["input"], "");
}
