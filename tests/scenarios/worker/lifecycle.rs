//! php-fpm's lifecycle keeps its meaning in worker mode: every handled request counts
//! (`max_requests`, the status page, the access log), `max_memory` is checked after each,
//! the slowlog shows the handler's stack, SIGTERM and reload end the script cleanly.

use nix::sys::signal::Signal;

use super::{lines, logs_env, pool};
use crate::common::{Site, Stack, TIMEOUT, http, proc};
use crate::embed::Embed;

/// The pid in a `handled=N pid=P` answer.
fn pid_of(body: &str) -> String {
    body.split("pid=").nth(1).unwrap_or_default().to_owned()
}

/// `max_requests = 3`: each worker script handles three requests, then its
/// `frankenphp_handle_request()` returns false and the script runs to its end; a fresh
/// worker boots for the next ones.
#[test]
fn max_requests_counts_handled_requests_and_ends_the_script_cleanly() {
    let site = Site::new();
    let env = logs_env(&site);
    let stack = Stack::start(
        site,
        pool(1)
            .pm("mode = \"static\"\nmax_children = 1\nmax_requests = 3\n")
            .env(&env),
    );
    let bodies: Vec<String> = (0..7)
        .map(|_| http::get(&stack.url("/index.php")).body)
        .collect();

    let handled: Vec<&str> = bodies.iter().map(|b| &b[..9]).collect();
    assert_eq!(
        handled,
        [
            "handled=1",
            "handled=2",
            "handled=3",
            "handled=1",
            "handled=2",
            "handled=3",
            "handled=1"
        ],
        "{bodies:?}"
    );
    assert_eq!(pid_of(&bodies[0]), pid_of(&bodies[2]));
    assert_ne!(pid_of(&bodies[2]), pid_of(&bodies[3]));
    assert_ne!(pid_of(&bodies[5]), pid_of(&bodies[6]));
    proc::wait_until(TIMEOUT, "two scripts ended", || {
        (lines(&stack.site, "ends.log").len() == 2).then_some(())
    });
    let ends = lines(&stack.site, "ends.log");
    assert!(ends.iter().all(|l| l.ends_with(" handled 3")), "{ends:?}");
}

/// SIGTERM to drover: each worker's waiting `frankenphp_handle_request()` returns false,
/// and the script's code after its loop runs before the worker exits.
#[test]
fn sigterm_makes_handle_request_return_false() {
    let site = Site::new();
    let env = logs_env(&site);
    let mut stack = Stack::start(site, pool(2).env(&env));
    for _ in 0..4 {
        assert_eq!(http::get(&stack.url("/index.php")).status, 200);
    }
    stack.drover.signal(Signal::SIGTERM);
    let status = stack.drover.wait_exit(TIMEOUT);
    assert!(status.success(), "{status:?}\n{}", stack.drover.log.text());
    let ends = lines(&stack.site, "ends.log");
    assert_eq!(ends.len(), 2, "both scripts ran to their end: {ends:?}");
}

/// The status page and the access log show every request, not one endless one, and the
/// last request's memory is the handler's.
#[test]
fn the_status_page_and_the_access_log_show_each_request() {
    let site = Site::new();
    let access = site.path().join("access.log");
    let (stack, ctl) = Stack::with_control(
        site,
        pool(1).top(&format!(
            "access_log = {access:?}\naccess_format = \"%m %r %s\"\n"
        )),
    );
    for path in ["/index.php", "/state.php?x=1", "/dirty.php", "/index.php"] {
        http::get(&stack.url(path));
    }
    let mut status = serde_json::Value::Null;
    let counted = proc::poll(TIMEOUT, || {
        status = ctl.status_json("www", &stack.drover.log.text());
        status["accepted conn"].as_u64() == Some(4)
    });
    assert!(counted, "{status:#}");
    assert_eq!(status["active processes"], 0, "{status}");
    let logged = proc::wait_until(TIMEOUT, "4 access lines", || {
        let text = std::fs::read_to_string(&access).unwrap_or_default();
        (text.lines().count() == 4).then_some(text)
    });
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(
        lines,
        [
            "GET /index.php 200",
            "GET /state.php 200",
            "GET /dirty.php 418",
            "GET /index.php 200"
        ],
        "{logged}"
    );
}

/// `request_slowlog_timeout`: the entry's stack is the handler's, down to the worker
/// script's loop; `request_terminate_timeout` ends that request and a fresh worker boots.
#[test]
fn the_slowlog_shows_the_handlers_stack_and_terminate_kills_one_request() {
    let site = Site::new();
    let slowlog = site.path().join("slow.log");
    let stack = Stack::start(
        site,
        pool(1).top(&format!(
            "slowlog = {slowlog:?}\nrequest_slowlog_timeout = \"1s\"\nrequest_terminate_timeout = \"4s\"\n"
        )),
    );
    let slow = http::get(&stack.url("/slow.php?ms=2000"));
    assert_eq!((slow.status, slow.body.as_str()), (200, "slept"));
    let entry = proc::wait_until(TIMEOUT, "a slowlog entry", || {
        let text = std::fs::read_to_string(&slowlog).unwrap_or_default();
        text.contains("frankenphp_handle_request").then_some(text)
    });
    let script = super::worker_script().display().to_string();
    for needle in [
        "slow_part()",
        "{closure}()",
        "frankenphp_handle_request()",
        "{main}()",
        &script,
    ] {
        assert!(entry.contains(needle), "{needle} is not in:\n{entry}");
    }
    let before = http::get(&stack.url("/index.php")).body;

    let killed = http::get(&stack.url("/slow.php?ms=30000"));
    assert!(killed.status >= 500, "{killed:?}");
    stack
        .drover
        .log
        .wait_for_line("request_terminate_timeout", TIMEOUT);
    let after = http::get(&stack.url("/index.php"));
    assert!(after.body.starts_with("handled=1 "), "{after:?}");
    assert_ne!(pid_of(&before), pid_of(&after.body));
}

/// `max_memory`: checked after each request; the worker that passed it finishes that
/// request, then retires, and a fresh worker boots.
#[test]
fn max_memory_retires_the_worker_after_its_request() {
    let stack = Stack::start(
        Site::new(),
        pool(1).pm("mode = \"static\"\nmax_children = 1\nmax_memory = \"60MiB\"\n"),
    );
    let first = http::get(&stack.url("/index.php"));
    let mut grew = Vec::new();
    for _ in 0..5 {
        let reply = http::get(&stack.url("/leak.php?mb=16"));
        assert_eq!(reply.status, 200, "{reply:?}");
        grew.push(reply.body);
    }
    stack.drover.log.wait_for_line("above max_memory", TIMEOUT);
    // The worker that passed 60 MiB with a 16 MiB chunk answered that request whole, then
    // retired: the next chunk went to a fresh worker, which kept only it.
    let fresh = grew.iter().skip(1).position(|b| b == "kept 1 chunks");
    assert!(
        fresh.is_some_and(|at| grew[at] != "kept 1 chunks"),
        "{grew:?}"
    );
    let after = http::get(&stack.url("/index.php"));
    assert_ne!(pid_of(&first.body), pid_of(&after.body), "{grew:?}");
}

/// A reload renews the code: the new generation's workers boot the changed script, the
/// old ones end their scripts once out of their requests.
#[test]
fn reload_boots_the_new_code() {
    let site = Site::new();
    let script = site.path().join("app.php");
    let write = |version: &str| {
        std::fs::write(
            &script,
            format!(
                "<?php $h = static function () {{ echo '{version}'; }}; \
                 while (frankenphp_handle_request($h)) {{}}"
            ),
        )
        .unwrap();
    };
    write("v1");
    let (stack, ctl) = Stack::with_control(
        site,
        Embed::new("www", 2).php(&format!("worker = {script:?}\n")),
    );
    assert_eq!(http::get(&stack.url("/index.php")).body, "v1");
    write("v2");
    ctl.ok(&["reload"], &stack.drover.log.text());
    proc::wait_until(TIMEOUT, "v2", || {
        (http::get(&stack.url("/index.php")).body == "v2").then_some(())
    });
    // Once the old generation has retired, every answer is the new code's.
    proc::wait_until(TIMEOUT, "only v2", || {
        (0..6)
            .all(|_| http::get(&stack.url("/index.php")).body == "v2")
            .then_some(())
    });
}
