//! Workers are kept: a killed worker is replaced, `max_requests` recycles workers without a
//! failed request, and what a worker writes to stderr lands in drover's log.

use std::collections::BTreeSet;

use nix::sys::signal::Signal;

use crate::common::{PhpPool, Site, Stack, TIMEOUT, http, proc, wait_until};

/// A site whose `/pid.php` answers with the pid of the worker that served it.
fn site() -> Site {
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    site
}

/// GET /pid.php: asserts a 200 and returns the worker's pid.
fn served_by(stack: &Stack) -> i32 {
    let reply = http::get(&stack.url("/pid.php"));
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    reply
        .body
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {reply:?}"))
}

/// Waits until drover has exactly `n` workers satisfying `also`, and returns them.
fn wait_for_workers(stack: &Stack, n: usize, also: impl Fn(&[i32]) -> bool) -> Vec<i32> {
    wait_until(TIMEOUT, &format!("{n} workers"), || {
        let workers = stack.drover.workers();
        (workers.len() == n && also(&workers)).then_some(workers)
    })
}

#[test]
fn a_worker_killed_with_sigkill_is_replaced() {
    let stack = Stack::start(site(), PhpPool::new("www").max_children(2));
    let before = wait_for_workers(&stack, 2, |_| true);
    let victim = served_by(&stack);
    assert!(
        before.contains(&victim),
        "pid {victim} is not one of the workers {before:?}"
    );

    proc::signal(victim, Signal::SIGKILL);

    stack
        .drover
        .log
        .wait_for_line(&format!("worker {victim} exited"), TIMEOUT);
    let after = wait_for_workers(&stack, 2, |w| !w.contains(&victim));
    for _ in 0..6 {
        let pid = served_by(&stack);
        assert!(
            after.contains(&pid),
            "served by {pid}, not one of the workers {after:?}"
        );
    }
}

#[test]
fn max_requests_recycles_workers_without_a_failed_request() {
    let stack = Stack::start(site(), PhpPool::new("www").max_children(2).max_requests(5));

    let pids: BTreeSet<i32> = (0..30).map(|_| served_by(&stack)).collect();

    // 2 workers × 5 requests each cannot serve 30 requests: at least 4 more must appear.
    assert!(pids.len() > 2, "30 requests served by only {pids:?}");
    wait_for_workers(&stack, 2, |_| true);
}

#[test]
fn worker_stderr_lands_in_the_log_tagged_with_pool_and_pid() {
    let site = site();
    site.script(
        "stderr.php",
        "<?php file_put_contents('php://stderr', \"marker-7d1e stderr line\\n\"); echo getmypid();",
    );
    let stack = Stack::start(site, PhpPool::new("www"));

    let reply = http::get(&stack.url("/stderr.php"));
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    let worker: i32 = reply.body.trim().parse().expect("a pid");

    let line = stack
        .drover
        .log
        .wait_for_line("marker-7d1e stderr line", TIMEOUT);
    let tagged = format!("pool www: worker {worker}: marker-7d1e stderr line");
    assert!(line.contains(&tagged), "line {line:?}, expected {tagged:?}");
}
