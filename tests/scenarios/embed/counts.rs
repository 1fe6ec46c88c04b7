//! What the master counts of a drover-php pool, as php-fpm's master counts its children and
//! as drover counts a Python pool: every request in `accepted conn` and in its worker's
//! `requests`, the CPU share of each worker's last request, a worker replaced at
//! `max_requests`, and a worker that died of SIGSEGV counted as a crash, its signal in the
//! log. The zygote reports each exit; the workers write their own slots.

use std::collections::BTreeSet;

use super::Embed;
use crate::common::{Ctl, Site, Stack, TIMEOUT, http, proc};

/// The pool's status (`--full --json`) once `ready` holds for it, or a failure showing the
/// last one.
fn status_when(
    stack: &Stack,
    ctl: &Ctl,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let seen = proc::poll(TIMEOUT, || {
        let text = ctl.ok(
            &["status", "www", "--full", "--json"],
            &stack.drover.log.text(),
        );
        last = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}):\n{text}"));
        ready(&last)
    });
    assert!(
        seen,
        "the status never showed {what}; the last one:\n{last:#}\ndrover's log:\n{}",
        stack.drover.log.text()
    );
    last
}

/// GET through nginx: the status and the body.
fn get(stack: &Stack, path: &str) -> (u16, String) {
    let reply = http::get(&stack.url(path));
    (reply.status, reply.body)
}

#[test]
fn the_master_counts_requests_cpu_recycles_and_crashes_of_drover_php_workers() {
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    // About 150 ms of CPU: the last request cpu of its worker is a share well above 0.
    site.script(
        "burn.php",
        "<?php $end = hrtime(true) + 150e6; $x = 0; while (hrtime(true) < $end) { $x++; } echo getmypid();",
    );
    site.script(
        "crash.php",
        "<?php posix_kill(getmypid(), SIGSEGV); sleep(1); echo 'alive';",
    );
    let pool = Embed::new("www", 2).pm("mode = \"static\"\nmax_children = 2\nmax_requests = 5\n");
    let (stack, ctl) = Stack::with_control(site, pool);

    // 12 requests over 2 workers that each serve 5: some worker served at least 6, so it
    // was replaced at least once, and at least 3 pids answered.
    let mut pids = BTreeSet::new();
    for _ in 0..12 {
        let (status, body) = get(&stack, "/pid.php");
        assert_eq!(status, 200, "pid.php: {body}");
        pids.insert(body);
    }
    assert!(
        pids.len() >= 3,
        "max_requests = 5, yet only {pids:?} answered 12 requests"
    );
    let counted = status_when(&stack, &ctl, "12 accepted and a recycle", |s| {
        s["accepted conn"].as_u64() == Some(12)
            && s["recycled"]["max_requests"].as_u64() >= Some(1)
            && s["idle processes"].as_u64() == Some(2)
    });
    let served: u64 = counted["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|w| w["requests"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        (1..=10).contains(&served),
        "the live workers' requests add up to {served}: each counts its own, at most 5:\n{counted:#}"
    );

    let (status, burner) = get(&stack, "/burn.php");
    assert_eq!(status, 200, "burn.php: {burner}");
    let burner_pid: u64 = burner.parse().expect("burn.php prints its pid");
    let burned = status_when(&stack, &ctl, "the burn's CPU", |s| {
        s["processes"].as_array().is_some_and(|workers| {
            workers.iter().any(|w| {
                w["pid"].as_u64() == Some(burner_pid)
                    && w["state"] == "Idle"
                    && w["last request cpu"].as_f64().is_some_and(|cpu| cpu > 0.0)
            })
        })
    });
    let cpu = burned["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["pid"].as_u64() == Some(burner_pid))
        .and_then(|w| w["last request cpu"].as_f64())
        .expect("the burner's last request cpu");
    println!("burn.php: last request cpu {cpu}%");
    // A worker runs PHP on one thread: its share of one CPU is at most 100%.
    assert!(
        cpu <= 100.5,
        "last request cpu {cpu}% for one thread:\n{burned:#}"
    );

    let (status, body) = get(&stack, "/crash.php");
    assert_eq!(status, 502, "a worker that segfaults: {body}");
    stack.drover.log.wait_for_line("SIGSEGV", TIMEOUT);
    let crashed = status_when(&stack, &ctl, "one crash, and 2 workers again", |s| {
        s["recycled"]["crash"].as_u64() == Some(1)
            && s["idle processes"].as_u64() == Some(2)
            && s["accepted conn"].as_u64() == Some(14)
    });
    assert_eq!(
        crashed["total processes"], 2,
        "the crash cost one worker, replaced: {crashed:#}"
    );
    let (status, _) = get(&stack, "/pid.php");
    assert_eq!(status, 200, "the pool serves on after the crash");
}

/// Requests that crash their classic worker (SIGSEGV, each answered 502 by nginx) cost
/// those requests and a fork each, never a back-off: after six of them on a 2-worker pool
/// the next request is answered at once, and the log names no start-up failure.
#[test]
fn crashing_requests_never_hold_a_classic_pool_back() {
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    site.script(
        "crash.php",
        "<?php posix_kill(getmypid(), SIGSEGV); sleep(1); echo 'alive';",
    );
    let (stack, ctl) = Stack::with_control(site, Embed::new("www", 2));
    for _ in 0..6 {
        let (status, body) = get(&stack, "/crash.php");
        assert_eq!(status, 502, "a worker that segfaults: {body}");
    }
    let started = std::time::Instant::now();
    let (status, body) = get(&stack, "/pid.php");
    let took = started.elapsed();
    let log = stack.drover.log.text();
    assert_eq!(status, 200, "{body}");
    assert!(
        took < crate::worker::AFTER_FLOOD,
        "the request after the crashes took {took:?}\n{log}"
    );
    assert!(!log.contains("failed to start"), "{log}");
    let status = ctl.status_json("www", &log);
    assert_eq!(status["backoff"]["start-up failures"], 0, "{status:#}");
}
