//! What a careless or hostile client does to a worker-mode pool: a body the handler never
//! reads, a client that vanishes in the middle of its body or of the answer. Each costs at
//! most its own request; the one booted script serves on (its count goes on rising).

use std::io::Write;
use std::net::TcpStream;

use super::{for_each_boot, pool};
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

/// `/form.php`'s answer, parsed.
fn form(reply: &http::Reply) -> serde_json::Value {
    assert_eq!(reply.status, 200, "{reply:?}");
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}

/// The warnings PHP raises while it starts a request (more fields than `max_input_vars`, a
/// body over `post_max_size`, a multipart body without its boundary) never end a worker,
/// even when the boot installed an error handler that throws (Laravel's, Symfony's in
/// debug): each POST is served as php-fpm serves it (200, the fields PHP kept, the warning
/// in the log and in `error_get_last()`), and the one worker answers them all.
#[test]
fn request_start_up_warnings_never_end_a_worker() {
    for_each_boot(|pool| {
        let pool = pool
            .env("BOOT_STRICT = \"1\"\n")
            .ini("post_max_size = \"64K\"\n");
        let stack = Stack::start(Site::new(), pool);
        let url = stack.url("/form.php");
        let pid = form(&http::get(&url))["pid"].clone();
        let urlencoded = "application/x-www-form-urlencoded";

        let fields: Vec<String> = (0..1001).map(|i| format!("v{i}=1")).collect();
        let many = form(&http::post(&url, urlencoded, fields.join("&").as_bytes()));
        // PHP registers the variable that passes the limit, then warns (php_variables.c,
        // add_post_vars), under php-fpm too.
        assert_eq!(many["post"], 1001, "{many}");
        assert!(
            many["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("Input variables exceeded 1000")),
            "{many}"
        );

        let big = format!("a={}", "x".repeat(100 << 10));
        let over = form(&http::post(&url, urlencoded, big.as_bytes()));
        assert_eq!(over["post"], 0, "{over}");
        assert!(
            over["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("exceeds the limit of 65536 bytes")),
            "{over}"
        );

        let unbounded = form(&http::post(&url, "multipart/form-data", b"--x\r\n"));
        assert_eq!(
            (&unbounded["post"], &unbounded["files"]),
            (&0.into(), &0.into())
        );
        assert!(
            unbounded["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("Missing boundary in multipart/form-data POST data")),
            "{unbounded}"
        );

        for answer in [&many, &over, &unbounded] {
            assert_eq!(answer["pid"], pid, "the same worker answered: {answer}");
        }
        let log = &stack.drover.log;
        log.wait_for_line("Input variables exceeded 1000", TIMEOUT);
        log.wait_for_line("exceeds the limit of 65536 bytes", TIMEOUT);
        assert!(!log.text().contains("exited with code"), "{}", log.text());
    });
}

/// A body over `post_max_size` is read and dropped at the speed it arrives, and answered
/// as php-fpm answers it (200, the handler runs): 16 MiB sent at once on loopback, to a
/// handler that never reads them, hold the worker well under a second, never
/// `request_read_timeout` (30 s), and the worker serves the next request at once.
#[test]
fn a_body_over_post_max_size_costs_the_time_it_takes_to_arrive() {
    let pool = pool(1).ini("post_max_size = \"1M\"\n");
    let stack = Stack::start(Site::new(), pool);
    let url = stack.url("/index.php");
    let first = handled(&http::get(&url).body);
    let body = format!("a={}", "x".repeat(16 << 20));
    let started = std::time::Instant::now();
    let over = http::post(&url, "application/x-www-form-urlencoded", body.as_bytes());
    let took = started.elapsed();
    let next = http::get(&url);
    let all = started.elapsed();
    println!("16 MiB over post_max_size: answered in {took:?}, the next request by {all:?}");
    assert_eq!(over.status, 200, "{over:?}");
    assert_eq!(handled(&over.body), first + 1, "{over:?}");
    assert_eq!(handled(&next.body), first + 2, "the same script: {next:?}");
    assert!(
        all < std::time::Duration::from_secs(5),
        "answered in {took:?}, the next request by {all:?}\n{}",
        stack.drover.log.text()
    );
    stack
        .drover
        .log
        .wait_for_line("exceeds the limit of 1048576 bytes", TIMEOUT);
}
