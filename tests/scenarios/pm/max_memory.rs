//! max_memory: a Python worker that leaks 2 MiB per request is retired after the request
//! that takes it past the limit, and replaced, without a failed request.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Pool, acted_on, get, lines_with, python_stack};
use crate::common::python::{started_pid, wait_started};
use crate::common::{Site, TIMEOUT};

const MIB: u64 = 1024 * 1024;
const LIMIT: u64 = 64 * MIB;
/// What one /leak request keeps (tests/apps/pm_app.py).
const LEAK: u64 = 2 * MIB;
/// The margin for sampling, on top of the request that crosses the limit: one more
/// request's growth. Whoever reads the worker's RSS (the master every 100 ms, or the worker
/// itself), a request may already be accepted when the worker learns it must retire, and it
/// is served, not cut. More would let a fast client push a worker far past the limit: at
/// ~1.6 ms a /leak request here, 100 ms of sampling alone is 60 requests, 120 MiB. The
/// app's figure is read after its own allocation, so it needs no room of its own.
const SAMPLING_MARGIN: u64 = LEAK;
const REQUESTS: u32 = 60;

/// One /leak answer: `pid=PID rss=BYTES leaked=N`.
#[derive(Debug)]
struct Leak {
    pid: i32,
    rss: u64,
    leaked: u32,
}

fn parse(body: &str) -> Option<Leak> {
    let fields: BTreeMap<&str, &str> = body
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect();
    Some(Leak {
        pid: fields.get("pid")?.parse().ok()?,
        rss: fields.get("rss")?.parse().ok()?,
        leaked: fields.get("leaked")?.parse().ok()?,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

#[test]
fn a_leaking_python_worker_is_recycled_at_max_memory_without_a_failed_request() {
    let pm = "mode = \"static\"\nmax_children = 1\nmax_memory = \"64MiB\"\n";
    let stack = python_stack(Site::new(), Pool::python("py", "", pm));
    let log = &stack.drover.log;
    let first = wait_started(log, 0, "py", "worker", 1, TIMEOUT)[0];

    let mut leaks = Vec::new();
    // When each answer arrived, to show how long a worker served above the limit.
    let mut answered = Vec::new();
    for n in 1..=REQUESTS {
        let reply = get(&stack, "/leak");
        answered.push(Instant::now());
        assert_eq!(
            reply.status,
            200,
            "request {n}: {reply:?}; earlier answers: {leaks:#?}; the log:\n{}",
            log.text()
        );
        let leak = parse(&reply.body).unwrap_or_else(|| panic!("request {n}: {reply:?}"));
        leaks.push(leak);
    }

    // Per worker, in the order they served: (pid, requests, peak RSS).
    let mut workers: Vec<(i32, u32, u64)> = Vec::new();
    for leak in &leaks {
        match workers.last_mut() {
            Some((pid, served, peak)) if *pid == leak.pid => {
                *served += 1;
                *peak = (*peak).max(leak.rss);
            }
            _ => workers.push((leak.pid, 1, leak.rss)),
        }
    }
    for (pid, served, peak) in &workers {
        let over: Vec<usize> = (0..leaks.len())
            .filter(|&at| leaks[at].pid == *pid && leaks[at].rss > LIMIT)
            .collect();
        let span = match (over.first(), over.last()) {
            (Some(&first), Some(&last)) => answered[last] - answered[first],
            _ => Duration::ZERO,
        };
        println!(
            "max_memory: worker {pid} served {served} /leak requests, peak RSS {:.1} MiB; \
             {} answers above 64 MiB, over {span:.1?}",
            mib(*peak),
            over.len(),
        );
    }
    assert_eq!(workers[0].0, first, "{workers:?}");
    assert!(
        workers.len() >= 2,
        "never recycled: {workers:?}; the log:\n{}",
        log.text()
    );
    // A new worker is a new process: its leak starts over.
    for (at, leak) in leaks.iter().enumerate() {
        let fresh = at == 0 || leaks[at - 1].pid != leak.pid;
        if fresh {
            assert_eq!(leak.leaked, 1, "request {}: {leak:?}", at + 1);
        }
    }
    let allowed = LIMIT + LEAK + SAMPLING_MARGIN;
    let over: Vec<(usize, &Leak)> = leaks
        .iter()
        .enumerate()
        .filter(|(_, l)| l.rss > allowed)
        .map(|(at, l)| (at + 1, l))
        .collect();
    assert!(
        over.is_empty(),
        "requests answered with RSS above {:.1} MiB (max_memory 64 MiB + one request's 2 MiB \
         + 2 MiB for sampling): {over:?}; per worker (pid, requests, peak): {workers:?}; \
         retiring lines: {:#?}",
        mib(allowed),
        lines_with(log, 0, "retiring worker"),
    );

    // Every worker that was replaced was retired for its memory, and the log says so (the
    // line may still be on its way when the last answer is in).
    for (pid, _, _) in &workers[..workers.len() - 1] {
        let line = log.wait_for(
            0,
            &format!("pool py: retiring worker {pid}: ..."),
            |l| acted_on(l, "py", "retiring").is_some_and(|(p, _)| p == *pid),
            TIMEOUT,
        );
        let (_, reason) = acted_on(&line, "py", "retiring").expect("a retiring line");
        assert!(
            reason.starts_with("resident memory ")
                && reason.ends_with(" MiB, above max_memory (64.0 MiB)"),
            "{line:?}"
        );
        log.wait_for_line(&format!("pool py: worker {pid} exited"), TIMEOUT);
    }
    // Each worker that served was started by the pool (its line can follow its answer).
    for (pid, _, _) in &workers {
        log.wait_for(
            0,
            &format!("pool py: worker {pid} started"),
            |l| started_pid(l, "py", "worker") == Some(*pid),
            TIMEOUT,
        );
    }
}
