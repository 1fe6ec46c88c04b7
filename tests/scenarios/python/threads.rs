//! `[python] threads = N`: one WSGI worker serves N requests at once, as gunicorn's gthread
//! worker does; the worker's guarantees hold (max_requests, TERM, request_terminate_timeout,
//! the access log, the status); a bad value is refused at load with its file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::fields;
use crate::common::{
    Drover, Location, Nginx, PoolFile, PythonPool, Site, Stack, TIMEOUT, check_config, http, proc,
    python, start_with_control, wait_until,
};

/// Sends `n` requests to `path` at once; returns each reply's fields and how long all took.
fn at_once(
    stack: &Stack,
    n: usize,
    path: impl Fn(usize) -> String,
) -> (Vec<BTreeMap<String, String>>, Duration) {
    let started = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|i| {
            let url = stack.url(&path(i));
            thread::spawn(move || http::get(&url))
        })
        .collect();
    let replies: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = started.elapsed();
    (replies.iter().map(fields).collect(), took)
}

/// `pool` with one worker, which has answered once (both apps have /doze).
fn one_worker(pool: PythonPool) -> Stack {
    let stack = Stack::python(Site::new(), pool.max_children(1));
    let (replies, _) = at_once(&stack, 1, |_| "/doze?s=0".into());
    assert_eq!(replies.len(), 1);
    stack
}

fn pids(replies: &[BTreeMap<String, String>]) -> BTreeSet<String> {
    replies.iter().map(|r| r["pid"].clone()).collect()
}

#[test]
fn four_threads_overlap_four_sleeping_requests_on_one_worker() {
    let stack = one_worker(PythonPool::wsgi("py").threads(4));

    let (replies, took) = at_once(&stack, 4, |_| "/doze?s=1".into());

    assert_eq!(pids(&replies).len(), 1, "one worker: {replies:?}");
    let threads: BTreeSet<_> = replies.iter().map(|r| r["thread"].clone()).collect();
    assert_eq!(threads.len(), 4, "four threads: {replies:?}");
    assert!(
        replies.iter().all(|r| r["multithread"] == "True"),
        "{replies:?}"
    );
    assert!(
        took < Duration::from_millis(1800),
        "4 requests sleeping 1 s took {took:?} on one worker with 4 threads"
    );
}

/// The counterpart: without threads the same requests queue on the worker.
#[test]
fn one_thread_serves_the_four_sleeping_requests_one_after_another() {
    let stack = one_worker(PythonPool::wsgi("py"));

    let (replies, took) = at_once(&stack, 4, |_| "/doze?s=1".into());

    assert_eq!(pids(&replies).len(), 1, "one worker: {replies:?}");
    assert!(
        replies.iter().all(|r| r["multithread"] == "False"),
        "{replies:?}"
    );
    assert!(
        took >= Duration::from_millis(3800),
        "4 requests sleeping 1 s took only {took:?} on one single-threaded worker"
    );
}

/// Flask keeps each request's context on its own thread: overlapping requests on one
/// worker each see their own arguments.
#[test]
fn a_flask_app_serves_overlapping_requests_each_with_its_own_context() {
    let stack = one_worker(PythonPool::flask("py").threads(4));

    let (replies, took) = at_once(&stack, 4, |i| format!("/doze?s=1&id=r{i}"));

    let ids: Vec<_> = replies.iter().map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["r0", "r1", "r2", "r3"], "{replies:?}");
    assert_eq!(pids(&replies).len(), 1, "one worker: {replies:?}");
    assert!(took < Duration::from_millis(1800), "took {took:?}");

    // Flask's request contexts are cycles, freed by the collector on whichever thread it
    // runs: the request's objects must not complain there (nor leak).
    for _ in 0..30 {
        at_once(&stack, 4, |i| format!("/doze?s=0&id=q{i}"));
    }
    let log = stack.drover.log.text();
    assert!(
        !log.contains("RuntimeError"),
        "an object freed on another thread:\n{log}"
    );
}

/// max_requests counts the worker's requests, all threads together: workers are replaced
/// and no request fails, under requests four at a time.
#[test]
fn max_requests_recycles_a_threaded_worker_without_a_failed_request() {
    let max_requests = 6;
    let pool = PythonPool::wsgi("py")
        .max_children(1)
        .threads(4)
        .max_requests(max_requests, 0);
    let stack = Stack::python(Site::new(), pool);

    let mut served: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..10 {
        // fields() asserts every reply is a 200.
        let (replies, _) = at_once(&stack, 4, |_| "/doze?s=0.05".into());
        for reply in replies {
            *served.entry(reply["pid"].clone()).or_default() += 1;
        }
    }

    // One worker serving at most 6 + 3 requests cannot serve 40.
    assert!(
        served.len() >= 40 / (max_requests as usize + 3),
        "{served:?}"
    );
    assert!(
        served.values().all(|&n| n <= max_requests + 3),
        "a worker served more than max_requests + threads - 1: {served:?}"
    );
    let log = stack.drover.log.text();
    assert!(
        !log.contains("exited on SIG"),
        "a worker was killed:\n{log}"
    );
}

/// TERM: every thread finishes the request in hand, then drover exits 0.
#[test]
fn term_lets_every_thread_finish_its_request() {
    let mut stack = one_worker(PythonPool::wsgi("py").threads(3));
    let markers: Vec<_> = (0..3)
        .map(|i| stack.site.path().join(format!("sleep{i}.started")))
        .collect();
    let requests: Vec<_> = markers
        .iter()
        .map(|marker| {
            let url = stack.url(&format!("/sleep?marker={}", marker.display()));
            thread::spawn(move || http::get(&url))
        })
        .collect();
    wait_until(TIMEOUT, "the three requests to start", || {
        markers.iter().all(|m| m.exists()).then_some(())
    });

    stack.drover.signal(Signal::SIGTERM);

    for request in requests {
        let reply = request.join().expect("request thread");
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, "done"),
            "log:\n{}",
            stack.drover.log.text()
        );
    }
    let status = stack.drover.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "log:\n{}", stack.drover.log.text());
}

#[test]
fn a_bad_threads_value_is_refused_at_load_with_file_and_line() {
    let site = Site::new();
    python::install_apps(&site);
    let pool = PythonPool::wsgi("app").threads(0);
    site.write("drover.toml", "error_log = \"stderr\"\n");
    site.write("pools.d/app.toml", &pool.toml(&site));

    let out = check_config(&site);

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let text = std::fs::read_to_string(site.path().join("pools.d/app.toml")).unwrap();
    let line = 1 + text.lines().position(|l| l == "threads = 0").unwrap();
    let place = format!("pools.d/app.toml:{line}:");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(&place) && l.contains("python.threads")),
        "no error naming {place} and python.threads in:\n{stderr}"
    );
}

/// Past request_terminate_timeout a threaded worker is killed at once (nothing can abort
/// a request from inside it): the client gets nginx's 502 soon after the timeout, and a
/// new worker serves.
#[test]
fn a_stuck_request_gets_its_threaded_worker_killed_and_replaced() {
    let pool = PythonPool::wsgi("py")
        .threads(2)
        .key("request_terminate_timeout", "\"1s\"");
    let stack = one_worker(pool);
    let log = &stack.drover.log;
    let marker = stack.site.path().join("stuck.started");

    let started = Instant::now();
    let reply = http::get(&stack.url(&format!("/sleep?marker={}", marker.display())));
    let waited = started.elapsed();

    assert_eq!(reply.status, 502, "{reply:?}; log:\n{}", log.text());
    assert!(waited < Duration::from_millis(1900), "cut after {waited:?}");
    log.wait_for_line("exited on SIGKILL", TIMEOUT);
    let (replies, _) = at_once(&stack, 2, |_| "/doze?s=0".into());
    assert_eq!(replies.len(), 2);
}

/// The threads write the access log one at a time: one whole line per request.
#[test]
fn the_access_log_has_one_whole_line_per_request_of_every_thread() {
    let site = Site::new();
    python::install_apps(&site);
    let log_path = site.path().join("access.log");
    let pool = PythonPool::wsgi("py").max_children(1).threads(8).key(
        "access_log",
        &format!("{:?}", log_path.display().to_string()),
    );
    let _drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("py"))]);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let url = nginx.url("/doze?s=0.01");
            thread::spawn(move || (0..8).map(|_| http::get(&url).status).collect::<Vec<_>>())
        })
        .collect();
    for client in clients {
        assert!(client.join().unwrap().iter().all(|&s| s == 200));
    }

    let text = wait_until(TIMEOUT, "64 access log lines", || {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        (text.lines().count() >= 64).then_some(text)
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 64, "{text}");
    assert!(
        lines.iter().all(|l| l.contains("\"GET /doze\" 200")),
        "{text}"
    );
}

/// The status shows one process per worker: busy with its oldest request while any thread
/// runs one, every request counted, idle when none runs.
#[test]
fn the_status_shows_the_worker_busy_with_its_oldest_request_and_counts_each() {
    let site = Site::new();
    python::install_apps(&site);
    let pool = PythonPool::wsgi("py").max_children(1).threads(4);
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("py"))]);
    let worker = || {
        let text = ctl.ok(&["status", "py", "--full", "--json"], &drover.log.text());
        let status: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        status["processes"][0].clone()
    };
    assert_eq!(http::get(&nginx.url("/doze?s=0")).status, 200);

    let slow = {
        let url = nginx.url("/doze?s=3");
        thread::spawn(move || http::get(&url))
    };
    // The slow one starts first, so it is the oldest.
    assert!(
        proc::poll(Duration::from_secs(2), || worker()["request uri"]
            == "/doze?s=3"),
        "{}",
        worker()
    );
    let quick: Vec<_> = (0..3)
        .map(|_| {
            let url = nginx.url("/doze?s=0.5");
            thread::spawn(move || http::get(&url))
        })
        .collect();
    for reply in quick {
        assert_eq!(reply.join().unwrap().status, 200);
    }
    // The short ones are done, the long one still runs: the worker is busy with it.
    assert_eq!(worker()["requests"], 4, "{}", worker());
    let shown = worker();
    assert_eq!(
        (&shown["state"], &shown["request uri"]),
        (&"Running".into(), &"/doze?s=3".into()),
        "{shown}"
    );
    assert_eq!(slow.join().unwrap().status, 200);

    assert!(
        proc::poll(Duration::from_secs(2), || {
            let w = worker();
            w["state"] == "Idle" && w["requests"] == 5
        }),
        "{}",
        worker()
    );
}
