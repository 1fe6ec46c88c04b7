//! A Python request past `request_terminate_timeout` is aborted from inside first, as
//! gunicorn's timeout does: SIGUSR1 raises in the request, so its `finally:` block and the
//! `worker_abort` hook run, the client gets a 500 (or nginx's 502), the worker exits and a
//! new one serves. SIGKILL follows `terminate_grace` later only for a worker still in the
//! request (an app that swallows the exception).

use std::time::{Duration, Instant};

use super::lifecycle::{LifecyclePool, lifecycle_stack};
use crate::common::{Site, Stack, TIMEOUT, http};

/// The pid a `pid=N` body names.
fn pid_of(reply: &http::Reply) -> i32 {
    assert_eq!(reply.status, 200, "{reply:?}");
    let pid = reply.body.trim().strip_prefix("pid=").expect("pid=N");
    pid.parse().expect("a pid")
}

/// GET `path`, which the abort cuts: the reply and how long the client waited.
fn stuck(stack: &Stack, path: &str) -> (http::Reply, Duration) {
    let start = Instant::now();
    let reply = http::try_get(&stack.url(path))
        .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", stack.drover.log.text()));
    (reply, start.elapsed())
}

#[test]
fn a_stuck_request_runs_its_finally_and_worker_abort_and_the_client_gets_a_500_within_4s() {
    let pool = LifecyclePool::hooked().top("request_terminate_timeout = \"2s\"");
    let stack = lifecycle_stack(Site::new(), &pool);
    let log = &stack.drover.log;
    let victim = pid_of(&http::get(&stack.url("/")));

    let (reply, waited) = stuck(&stack, "/sleep");

    println!("abort: the client got {} after {waited:.1?}", reply.status);
    assert!(
        matches!(reply.status, 500 | 502) && waited < Duration::from_secs(4),
        "got {reply:?} after {waited:.1?}; log:\n{}",
        log.text()
    );
    assert!(waited >= Duration::from_secs(2), "cut after {waited:.1?}");
    // worker_abort ran in the worker, then the exception unwound the request through its
    // finally block; both wrote before the response went out.
    let site = stack.site.path();
    assert!(
        site.join(format!("abort-{victim}")).exists(),
        "no worker_abort file; log:\n{}",
        log.text()
    );
    assert!(
        site.join(format!("finally-{victim}")).exists(),
        "no finally file; log:\n{}",
        log.text()
    );
    let abort = log.wait_for_line(&format!("marker-worker_abort pid={victim}"), TIMEOUT);
    let traceback = log.wait_for_line(
        "RequestTerminated: drover: the request ran past request_terminate_timeout",
        TIMEOUT,
    );
    let (at, raised_at) = (index(log, &abort), index(log, &traceback));
    assert!(
        at < raised_at,
        "worker_abort must run before the exception unwinds"
    );

    // The worker goes by itself, without SIGKILL, and a new one serves.
    let exited = log.wait_for_line(&format!("pool py: worker {victim} exited"), TIMEOUT);
    assert!(!exited.contains("SIGKILL"), "{exited}");
    let next = pid_of(&http::get(&stack.url("/")));
    assert_ne!(next, victim);
    log.wait_for_line(&format!("marker-worker_exit pid={victim}"), TIMEOUT);
}

#[test]
fn a_request_that_swallows_the_abort_is_killed_after_terminate_grace() {
    let pool = LifecyclePool::hooked()
        .top("request_terminate_timeout = \"2s\"")
        .top("terminate_grace = \"1s\"");
    let stack = lifecycle_stack(Site::new(), &pool);
    let log = &stack.drover.log;
    let victim = pid_of(&http::get(&stack.url("/")));

    let (reply, waited) = stuck(&stack, "/swallow");

    println!(
        "swallowed abort: the client got {} after {waited:.1?}",
        reply.status
    );
    assert!(
        matches!(reply.status, 502 | 504)
            && waited >= Duration::from_secs(3)
            && waited < Duration::from_secs(6),
        "got {reply:?} after {waited:.1?}; log:\n{}",
        log.text()
    );
    log.wait_for_line(&format!("marker-worker_abort pid={victim}"), TIMEOUT);
    log.wait_for_line(
        &format!("pool py: worker {victim}: still in the request 1s after it was asked to abort it (terminate_grace); SIGKILL"),
        TIMEOUT,
    );
    log.wait_for_line(
        &format!("pool py: worker {victim} exited on SIGKILL"),
        TIMEOUT,
    );
    assert_ne!(pid_of(&http::get(&stack.url("/"))), victim);
}

fn index(log: &crate::common::Log, line: &str) -> usize {
    log.lines()
        .iter()
        .position(|l| l == line)
        .expect("a line the log had")
}
