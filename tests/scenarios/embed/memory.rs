//! php-fpm's "last request memory" from drover-php: the status (`drover ctl status --full`,
//! JSON and text) shows the peak memory of each worker's last request, in bytes, as the
//! script's own `memory_get_peak_usage()` sees it; it drops again after a small request,
//! and is unknown after a request drover answered without PHP.

use super::Embed;
use crate::common::{Ctl, Site, Stack, TIMEOUT, http, proc};

const MIB: u64 = 1 << 20;

/// The one worker's process entry, once the status shows it has served `requests` (the
/// worker writes its slot just after the response, so the status may lag the reply).
fn worker_after(stack: &Stack, ctl: &Ctl, requests: u64) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let served = proc::poll(TIMEOUT, || {
        let text = ctl.ok(
            &["status", "www", "--full", "--json"],
            &stack.drover.log.text(),
        );
        let status: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}):\n{text}"));
        last = status["processes"][0].clone();
        last["requests"].as_u64() == Some(requests) && last["state"] == "Idle"
    });
    assert!(
        served,
        "the worker never showed {requests} requests served; the last status:\n{last:#}\ndrover's log:\n{}",
        stack.drover.log.text()
    );
    last
}

/// GET through nginx, asserting a 200; the body.
fn get_ok(stack: &Stack, path: &str) -> String {
    let reply = http::get(&stack.url(path));
    assert_eq!(
        reply.status,
        200,
        "GET {path}: {reply:?}\ndrover's log:\n{}",
        stack.drover.log.text()
    );
    reply.body
}

#[test]
fn status_shows_the_peak_memory_of_each_workers_last_request() {
    let site = Site::new();
    site.script(
        "big.php",
        "<?php $s = str_repeat('x', 20 << 20); echo strlen($s), ' ', memory_get_peak_usage();",
    );
    site.script("hello.php", "<?php echo 'hello ', memory_get_peak_usage();");
    let pool = Embed::new("www", 1);
    let (stack, ctl) = Stack::with_control(site, pool);
    let peak_in = |body: &str| -> u64 {
        body.rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no memory_get_peak_usage() in {body:?}"))
    };
    let memory = |worker: &serde_json::Value| {
        worker["last request memory"]
            .as_u64()
            .unwrap_or_else(|| panic!("no number \"last request memory\" in {worker:#}"))
    };

    let before = worker_after(&stack, &ctl, 0);
    assert!(
        before["last request memory"].is_null(),
        "unknown before the first request: {before:#}"
    );

    let big = get_ok(&stack, "/big.php");
    let big_seen_by_php = peak_in(&big);
    let after_big = memory(&worker_after(&stack, &ctl, 1));
    println!("big.php: status {after_big} bytes, the script's own peak {big_seen_by_php}");
    assert!(
        after_big >= 20 * MIB && after_big >= big_seen_by_php,
        "a 20 MiB string, yet the last request memory is {after_big} (the script saw {big_seen_by_php})"
    );

    let hello = get_ok(&stack, "/hello.php");
    let hello_seen_by_php = peak_in(&hello);
    let worker = worker_after(&stack, &ctl, 2);
    let after_hello = memory(&worker);
    println!("hello.php: status {after_hello} bytes, the script's own peak {hello_seen_by_php}");
    assert!(
        after_hello < 2 * MIB && after_hello >= hello_seen_by_php,
        "the last request memory did not drop to hello.php's ({after_hello}; the script saw {hello_seen_by_php})"
    );
    let pid = worker["pid"].to_string();
    let text = ctl.ok(&["status", "www", "--full"], &stack.drover.log.text());
    assert!(
        text.contains(&format!("pid:                  {pid}\n"))
            && text.contains(&format!("last request memory:  {after_hello}\n")),
        "php-fpm's text line, in bytes:\n{text}"
    );

    let missing = http::get(&stack.url("/missing.php"));
    assert_eq!(missing.status, 404, "{missing:?}");
    let worker = worker_after(&stack, &ctl, 3);
    assert!(
        worker["last request memory"].is_null(),
        "drover answered 404 without PHP: unknown, not hello.php's: {worker:#}"
    );
}
