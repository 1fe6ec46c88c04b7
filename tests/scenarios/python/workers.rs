//! Python workers are kept: a SIGKILLed worker or zygote is replaced and requests keep
//! succeeding, `max_requests` with jitter recycles workers without a failed request, and
//! TERM lets a request in flight finish before drover exits leaving no process behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{served_by, wsgi_stack};
use crate::common::python::wait_started;
use crate::common::{
    PythonPool, Site, Stack, TIMEOUT, proc, term_lets_the_request_finish, wait_until,
};

#[test]
fn a_worker_killed_with_sigkill_is_replaced() {
    let stack = wsgi_stack(2);
    let log = &stack.drover.log;
    let workers = wait_started(log, 0, "py", "worker", 2, TIMEOUT);
    let victim = served_by(&stack);
    assert!(
        workers.contains(&victim),
        "pid {victim} is not one of {workers:?}"
    );

    let from = log.len();
    proc::signal(victim, Signal::SIGKILL);

    log.wait_for_line(
        &format!("pool py: worker {victim} exited on SIGKILL"),
        TIMEOUT,
    );
    let new = wait_started(log, from, "py", "worker", 1, TIMEOUT)[0];
    let mut live: Vec<i32> = workers.into_iter().filter(|&p| p != victim).collect();
    live.push(new);
    for _ in 0..6 {
        let pid = served_by(&stack);
        assert!(live.contains(&pid), "served by {pid}, not one of {live:?}");
    }
}

#[test]
fn a_zygote_killed_with_sigkill_is_replaced_with_its_workers() {
    let stack = wsgi_stack(2);
    let log = &stack.drover.log;
    let zygote = wait_started(log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    let old = wait_started(log, 0, "py", "worker", 2, TIMEOUT);
    served_by(&stack);

    let from = log.len();
    proc::signal(zygote, Signal::SIGKILL);

    log.wait_for_line(
        &format!("pool py: python zygote {zygote} exited on SIGKILL"),
        TIMEOUT,
    );
    let new_zygote = wait_started(log, from, "py", "python zygote", 1, TIMEOUT)[0];
    assert_ne!(new_zygote, zygote);
    let new = wait_started(log, from, "py", "worker", 2, TIMEOUT);
    // The old workers finish what they serve and exit (SIGTERM).
    for &pid in &old {
        wait_until(TIMEOUT, &format!("old worker {pid} to exit"), || {
            (!proc::is_running(pid)).then_some(())
        });
    }
    for _ in 0..6 {
        let pid = served_by(&stack);
        assert!(
            new.contains(&pid),
            "served by {pid}, not one of the new workers {new:?}"
        );
    }
}

/// A request to an app that answers in milliseconds that takes this long is stuck waiting
/// for a worker: a hang bound, not a performance figure.
const STALLED: Duration = Duration::from_secs(5);

#[test]
fn max_requests_with_jitter_recycles_workers_without_a_failed_request() {
    let (max_requests, jitter) = (5, 3);
    let pool = PythonPool::wsgi("py")
        .max_children(2)
        .max_requests(max_requests, jitter);
    let stack = Stack::python(Site::new(), pool);

    let mut served: BTreeMap<i32, u32> = BTreeMap::new();
    for i in 0..40 {
        let start = Instant::now();
        let pid = served_by(&stack);
        let took = start.elapsed();
        assert!(
            took < STALLED,
            "request {i} (served by {pid}) waited {took:.1?} for a worker; served so far \
             {served:?}; log:\n{}",
            stack.drover.log.text()
        );
        *served.entry(pid).or_default() += 1;
    }

    // 2 workers × at most 8 requests each cannot serve 40 requests.
    assert!(served.len() > 2, "40 requests served by only {served:?}");
    let limit = max_requests + jitter;
    assert!(
        served.values().all(|&n| n <= limit),
        "a worker served more than max_requests + jitter = {limit}: {served:?}"
    );
}

#[test]
fn term_during_a_two_second_request_lets_it_finish() {
    let stack = wsgi_stack(2);
    let started = stack.site.path().join("sleep.started");
    let path = format!("/sleep?marker={}", started.display());
    // The zygote and its workers are all named drover.
    term_lets_the_request_finish(stack, &path, &started, "drover");
}

/// `warmup` requests go through the app once, in the zygote, before it forks: every worker
/// starts with what they built, and the log gives each one's status. A failing warm-up
/// request does not stop the pool.
#[test]
fn warmup_requests_run_once_in_the_zygote_and_every_worker_inherits_them() {
    let pool = PythonPool::wsgi("py")
        .max_children(2)
        .warmup(&["/warm?n=1", "/fail"]);
    let stack = Stack::python(Site::new(), pool);
    let log = &stack.drover.log;
    let zygote = wait_started(log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    let workers = wait_started(log, 0, "py", "worker", 2, TIMEOUT);

    let warmed = log.wait_for_line("warm-up GET /warm?n=1: ", TIMEOUT);
    assert!(
        warmed.contains(&format!(
            "pool py: python zygote {zygote}: warm-up GET /warm?n=1: 200 OK in "
        )),
        "{warmed:?}"
    );
    let failed = log.wait_for_line("warm-up GET /fail: ", TIMEOUT);
    assert!(
        failed.contains(": 500 Internal Server Error in "),
        "{failed:?}"
    );

    // Both workers answer with the zygote's one warm-up record: the state was built once,
    // before the fork, and no client request counts as a warm-up.
    let mut seen = BTreeMap::new();
    wait_until(TIMEOUT, "both workers to answer", || {
        let reply = crate::common::http::get(&stack.url("/warm?n=2"));
        assert_eq!(reply.status, 200, "{reply:?}");
        let (pid, warmed) = reply.body.split_once(' ').expect("pid=... warmed=...");
        seen.insert(pid.to_string(), warmed.to_string());
        (seen.len() == 2).then_some(())
    });
    for (pid, warmed) in &seen {
        let pid: i32 = pid.trim_start_matches("pid=").parse().unwrap();
        assert!(workers.contains(&pid), "{pid} is not one of {workers:?}");
        assert_eq!(warmed, &format!("warmed={zygote}:n=1"), "worker {pid}");
    }
}

/// An app that keeps each request's environ (whose `wsgi.input` reads from the connection)
/// must not keep each connection's socket open: nginx ends a response only when the
/// connection closes, so each request would hang until Python collected the environ.
/// 20 kept environs: every response arrives, and the worker holds no more sockets after
/// them than before.
#[test]
fn an_app_keeping_environs_does_not_keep_their_sockets_open() {
    let stack = wsgi_stack(1);
    let worker = served_by(&stack);
    let sockets = || {
        std::fs::read_dir(format!("/proc/{worker}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    };
    let before = sockets();

    for n in 1..=20 {
        let reply = crate::common::http::get(&stack.url("/keep"));
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, format!("kept {n}").as_str())
        );
    }

    wait_until(
        TIMEOUT,
        "the kept connections' sockets to be closed",
        || (sockets() <= before).then_some(()),
    );
    assert_eq!(served_by(&stack), worker, "the worker did not serve on");
}
