//! `[python] hooks`: a gunicorn.conf.py (`tests/apps/gunicorn_hooks.py`, with `bind`,
//! `workers`, ... beside its hooks) used unchanged as the hooks file. Each hook logs a
//! marker line through `server.log` / `worker.log`, which drover's log tags with the pool
//! and the pid of the process that ran it: that is how the tests see who ran what, when.

use std::collections::BTreeSet;

use super::lifecycle::{LifecyclePool, lifecycle_stack};
use crate::common::{Log, Site, TIMEOUT, http};

/// The pid the log tagged `line` with (`pool py: ROLE PID: ...`).
fn tagged_pid(line: &str) -> i32 {
    let head = line
        .split(": ")
        .nth(1)
        .unwrap_or_else(|| panic!("{line:?}"));
    let pid = head.rsplit(' ').next().unwrap_or_default();
    pid.parse()
        .unwrap_or_else(|_| panic!("no pid tag in {line:?}"))
}

/// `name=N` in a marker line.
fn value(line: &str, name: &str) -> i32 {
    let field = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"));
    field
        .parse()
        .unwrap_or_else(|_| panic!("{name}= in {line:?}"))
}

fn marker_lines(log: &Log, marker: &str, n: usize) -> Vec<String> {
    log.wait_for_lines(0, marker, |l| l.contains(marker), n, TIMEOUT)
}

fn position(log: &Log, needle: &str) -> usize {
    log.lines()
        .iter()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in:\n{}", log.text()))
}

#[test]
fn a_gunicorn_conf_py_runs_each_hook_at_its_moment_with_gunicorns_arguments() {
    let stack = lifecycle_stack(Site::new(), &LifecyclePool::hooked().workers(2));
    let log = &stack.drover.log;

    // The zygote: on_starting before the app is imported, when_ready once both workers are
    // forked.
    let ready = marker_lines(log, "marker-when_ready", 1).remove(0);
    let zygote = tagged_pid(&ready);
    assert_eq!(value(&ready, "pid"), zygote, "server.pid is the zygote's");
    let starting = marker_lines(log, "marker-on_starting", 1).remove(0);
    assert_eq!(tagged_pid(&starting), zygote);
    assert!(
        position(log, "marker-on_starting") < position(log, "marker-app-imported"),
        "on_starting must run before the app loads:\n{}",
        log.text()
    );
    // pre_fork in the zygote before each fork, with gunicorn's pid-less worker.
    for line in marker_lines(log, "marker-pre_fork", 2) {
        assert_eq!(tagged_pid(&line), zygote, "{line}");
        assert!(line.ends_with(" pid=None"), "{line}");
    }
    // A hook drover has no moment for is named when the file loads, not skipped silently.
    let uncalled = marker_lines(
        log,
        "the hooks file defines worker_int, which drover does not call",
        1,
    );
    assert_eq!(tagged_pid(&uncalled[0]), zygote);

    // Each worker: post_fork once, with its own pid, the zygote as ppid and server.pid,
    // and gunicorn's age (1, 2: the count of workers forked); then post_worker_init.
    let forks = marker_lines(log, "marker-post_fork", 2);
    let mut workers = BTreeSet::new();
    let mut ages = BTreeSet::new();
    for line in &forks {
        let pid = tagged_pid(line);
        assert_eq!(value(line, "pid"), pid, "{line}");
        assert_eq!(value(line, "ppid"), zygote, "{line}");
        assert_eq!(value(line, "server"), zygote, "{line}");
        workers.insert(pid);
        ages.insert(value(line, "age"));
    }
    assert_eq!(workers.len(), 2, "post_fork ran in two workers: {forks:#?}");
    assert_eq!(ages, BTreeSet::from([1, 2]), "{forks:#?}");
    for line in marker_lines(log, "marker-post_worker_init", 2) {
        assert!(workers.contains(&tagged_pid(&line)), "{line}");
    }

    // The resource post_fork opened is each worker's own: the file has each pid once, and
    // a worker's app sees the resource opened for its pid.
    let recorded = std::fs::read_to_string(stack.site.path().join("post_fork.log")).unwrap();
    let recorded: Vec<i32> = recorded.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(
        recorded.iter().copied().collect::<BTreeSet<_>>(),
        workers,
        "post_fork.log: {recorded:?}"
    );
    assert_eq!(
        recorded.len(),
        2,
        "post_fork ran once per worker: {recorded:?}"
    );
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        let reply = http::get(&stack.url("/resource?x=1"));
        assert_eq!(reply.status, 200, "{reply:?}");
        let pid = value(&reply.body, "pid");
        assert!(
            reply.body.contains(&format!("resource=resource-of-{pid}")),
            "{:?}",
            reply.body
        );
        seen.insert(pid);
        if seen.len() == 2 {
            break;
        }
    }

    // post_request: gunicorn's req and resp.
    let line = marker_lines(
        log,
        "marker-post_request GET /resource query=x=1 status=200 OK",
        1,
    )
    .remove(0);
    assert!(workers.contains(&tagged_pid(&line)), "{line}");
}

#[test]
fn child_exit_and_worker_exit_see_each_recycled_worker() {
    let pool = LifecyclePool::hooked().max_requests(2);
    let stack = lifecycle_stack(Site::new(), &pool);
    let log = &stack.drover.log;

    // One worker, two requests each: three workers serve six requests.
    let mut served = Vec::new();
    for _ in 0..6 {
        let reply = http::get(&stack.url("/"));
        assert_eq!(reply.status, 200, "{reply:?}");
        let pid = value(&reply.body, "pid");
        if served.last() != Some(&pid) {
            served.push(pid);
        }
    }
    assert_eq!(served.len(), 3, "recycled every 2 requests: {served:?}");

    let zygote = tagged_pid(&marker_lines(log, "marker-when_ready", 1)[0]);
    for (age, &pid) in served[..2].iter().enumerate() {
        // In the zygote, as it reaps the worker, with the worker's pid and age.
        let line = marker_lines(log, &format!("marker-child_exit pid={pid} "), 1).remove(0);
        assert_eq!(tagged_pid(&line), zygote, "{line}");
        assert_eq!(value(&line, "age"), age as i32 + 1, "{line}");
        // In the worker itself, as it exits.
        let line = marker_lines(log, &format!("marker-worker_exit pid={pid}"), 1).remove(0);
        assert_eq!(tagged_pid(&line), pid, "{line}");
    }
}

#[test]
fn a_raising_hook_is_logged_with_its_traceback_and_the_pool_serves() {
    let site = Site::new();
    site.write("raise-when_ready", "");
    let stack = lifecycle_stack(site, &LifecyclePool::hooked());
    let log = &stack.drover.log;

    for needle in [
        "the when_ready hook raised; drover carries on",
        "RuntimeError: marker-when_ready-raised",
    ] {
        marker_lines(log, needle, 1);
    }
    let reply = http::get(&stack.url("/raise-pre"));
    assert_eq!(
        reply.status, 200,
        "pre_request raising must not fail the request: {reply:?}"
    );
    let worker = value(&reply.body, "pid");
    let raised = marker_lines(log, "RuntimeError: marker-pre_request-raised", 1).remove(0);
    assert_eq!(tagged_pid(&raised), worker, "{raised}");
    let traceback = format!("worker {worker}: Traceback (most recent call last)");
    marker_lines(log, &traceback, 1);

    // Served on by the same worker.
    let reply = http::get(&stack.url("/"));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(value(&reply.body, "pid"), worker);
}

/// drover's own reload and stop end a zygote with hooks by TERM, not SIGKILL: it reaps its
/// workers as they finish (`child_exit` for each), then runs `on_exit`.
#[test]
fn a_reload_and_a_stop_run_child_exit_for_each_worker_then_on_exit() {
    let mut stack = lifecycle_stack(Site::new(), &LifecyclePool::hooked().workers(2));
    let zygote = tagged_pid(&marker_lines(&stack.drover.log, "marker-when_ready", 1)[0]);
    let forks = marker_lines(&stack.drover.log, "marker-post_fork", 2);
    let old: BTreeSet<i32> = forks.iter().map(|l| tagged_pid(l)).collect();
    assert_eq!(http::get(&stack.url("/")).status, 200);

    let from = stack.drover.log.len();
    stack.drover.signal(nix::sys::signal::Signal::SIGHUP);
    let log = &stack.drover.log;
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    exits(&stack.drover.log, zygote, &old);
    assert_eq!(http::get(&stack.url("/")).status, 200);

    let new_ready = marker_lines(&stack.drover.log, "marker-when_ready", 2).remove(1);
    let new_zygote = tagged_pid(&new_ready);
    let forks = marker_lines(&stack.drover.log, "marker-post_fork", 4);
    let new: BTreeSet<i32> = forks
        .iter()
        .map(|l| tagged_pid(l))
        .filter(|pid| !old.contains(pid))
        .collect();
    assert_eq!(new.len(), 2, "{forks:#?}");
    stack.drover.signal(nix::sys::signal::Signal::SIGTERM);
    let status = stack.drover.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", stack.drover.log.text());
    exits(&stack.drover.log, new_zygote, &new);
}

/// `child_exit` in `zygote` for each of `workers`, then its `on_exit`.
fn exits(log: &Log, zygote: i32, workers: &BTreeSet<i32>) {
    for &pid in workers {
        let line = marker_lines(log, &format!("marker-child_exit pid={pid} "), 1).remove(0);
        assert_eq!(tagged_pid(&line), zygote, "{line}");
    }
    let on_exit = format!("marker-on_exit pid={zygote}");
    marker_lines(log, &on_exit, 1);
    for &pid in workers {
        assert!(
            position(log, &format!("marker-child_exit pid={pid} ")) < position(log, &on_exit),
            "on_exit after every child_exit:\n{}",
            log.text()
        );
    }
}
