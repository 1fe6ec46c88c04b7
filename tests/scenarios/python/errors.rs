//! When the app misbehaves: exc_info before and after the head went out, wsgi.errors, an
//! exception, a bad status or header, and an app that cannot even be imported. The worker
//! (and drover, and the other pools) serve on; the log says what happened, tagged with the
//! pool and the pid.

use std::time::Duration;

use super::{served_by, wsgi_stack};
use crate::common::http::{self, Raw, Wire};
use crate::common::python::{self, PythonPool};
use crate::common::{Drover, Location, Nginx, PhpPool, Site, TIMEOUT, proc};

/// The head and "partial-" are out when the app re-raises: the client gets the response cut
/// after "partial-". With nginx's default `fastcgi_keep_conn off`, nginx takes the end of
/// the FastCGI connection for the end of the response whatever drover does, so a
/// truncated body is all a client can be shown here.
#[test]
fn exc_info_after_the_body_started_re_raises_and_cuts_the_response() {
    let stack = wsgi_stack(1);
    let worker = served_by(&stack);

    let received = Raw::send(stack.nginx.port, "GET /exc-after-body HTTP/1.0\r\n").read_to_end();
    let wire = Wire::parse(&received);

    let log = &stack.drover.log;
    let raised = log.wait_for_line("RuntimeError: marker-exc-after-body", TIMEOUT);
    assert!(
        raised.contains(&format!("pool py: worker {worker}: ")),
        "not tagged with the worker: {raised:?}"
    );
    let traceback = format!("pool py: worker {worker}: Traceback (most recent call last)");
    assert!(
        log.lines().iter().any(|l| l.contains(&traceback)),
        "no {traceback:?} in the log:\n{}",
        log.text()
    );
    assert_eq!(wire.status, 200, "head: {}", wire.head);
    assert_eq!(String::from_utf8_lossy(&wire.body), "partial-");
    assert_eq!(served_by(&stack), worker, "the worker did not live on");
}

#[test]
fn exc_info_before_the_body_replaces_the_head() {
    let stack = wsgi_stack(2);

    let reply = http::get(&stack.url("/exc-before-body"));

    assert_eq!(
        (reply.status, reply.body.as_str()),
        (503, "the app's own error page"),
        "headers: {:?}",
        reply.headers
    );
    assert_eq!(reply.header("X-Error"), "replaced");
}

#[test]
fn wsgi_errors_lines_are_logged_with_pool_and_worker_pid() {
    let stack = wsgi_stack(2);

    let reply = http::get(&stack.url("/errors"));
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    let worker: i32 = reply.body.trim().parse().expect("a pid");

    for marker in ["marker-wsgi-errors one", "marker-wsgi-errors two"] {
        let line = stack.drover.log.wait_for_line(marker, TIMEOUT);
        let tagged = format!("pool py: worker {worker}: {marker}");
        assert!(line.contains(&tagged), "line {line:?}, expected {tagged:?}");
    }
}

#[test]
fn an_app_exception_is_a_500_with_a_traceback_and_the_worker_serves_on() {
    let stack = wsgi_stack(1);
    let worker = served_by(&stack);

    let reply = http::get(&stack.url("/fail"));

    assert_eq!(reply.status, 500, "reply: {reply:?}");
    let log = &stack.drover.log;
    let line = log.wait_for_line("RuntimeError: marker-app-exception", TIMEOUT);
    assert!(
        line.contains(&format!("pool py: worker {worker}: ")),
        "not tagged with the worker: {line:?}"
    );
    let traceback = format!("pool py: worker {worker}: Traceback (most recent call last)");
    assert!(
        log.lines().iter().any(|l| l.contains(&traceback)),
        "no {traceback:?} in the log:\n{}",
        log.text()
    );
    assert_eq!(served_by(&stack), worker, "the worker did not live on");
}

/// GET `path` answers 500, a line of the worker in the log contains `needle`, and the same
/// worker serves the next request.
fn refused_with_500(path: &str, needle: &str) {
    let stack = wsgi_stack(1);
    let worker = served_by(&stack);

    let reply = http::get(&stack.url(path));

    assert_eq!(reply.status, 500, "reply: {reply:?}");
    let tag = format!("pool py: worker {worker}: ");
    stack.drover.log.wait_for(
        0,
        &format!("{tag}...{needle}..."),
        |l| l.contains(&tag) && l.contains(needle),
        TIMEOUT,
    );
    assert_eq!(served_by(&stack), worker, "the worker did not live on");
}

#[test]
fn a_status_without_a_code_is_a_500_and_a_log_line() {
    refused_with_500("/bad-status", "\"OK\"");
}

#[test]
fn a_header_value_with_a_line_break_is_a_500_and_a_log_line() {
    refused_with_500("/bad-header", "X-Marker-Bad-Header");
}

#[test]
fn an_app_that_cannot_be_imported_stops_its_pool_only() {
    let site = Site::new();
    python::install_apps(&site);
    site.script("hello.php", "<?php echo 'php still serves';");
    let broken = PythonPool::new("broken", "broken_app:application");
    let (py, www) = (PythonPool::wsgi("py"), PhpPool::new("www"));
    let drover = Drover::start(&site, &[&broken, &py, &www]);
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location::php(&site.socket("www")),
            Location::prefix("/", &site.socket("py")),
        ],
    );

    let log = &drover.log;
    let stopped = log.wait_for_line(
        "pool broken: the app failed to load (traceback above); the pool is stopped until a reload",
        TIMEOUT,
    );
    let zygote = python::started_so_far(log, "broken", "python zygote")[0];
    let tag = format!("pool broken: python zygote {zygote}: ");
    for needle in ["broken_app", "RuntimeError: marker-import-failure"] {
        let line = log.wait_for(
            0,
            &format!("{tag}...{needle}..."),
            |l| l.contains(&tag) && l.contains(needle),
            TIMEOUT,
        );
        let (at, stop_at) = (position(log, &line), position(log, &stopped));
        assert!(at < stop_at, "{line:?} is not above {stopped:?}");
    }

    // Drover and the other pools serve on.
    let reply = http::get(&nginx.url("/echo?still=1"));
    assert_eq!(reply.status, 200, "python pool py: {reply:?}");
    let reply = http::get(&nginx.url("/hello.php"));
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "php still serves")
    );
    assert!(
        proc::is_running(drover.pid()),
        "drover exited:\n{}",
        log.text()
    );

    // The one bounded wait for something that must not happen: a second zygote.
    let respawned = proc::poll(Duration::from_secs(3), || {
        python::started_so_far(log, "broken", "python zygote").len() > 1
    });
    assert!(
        !respawned,
        "the broken pool's zygote was started again:\n{}",
        log.text()
    );
    assert!(
        proc::is_running(drover.pid()),
        "drover exited:\n{}",
        log.text()
    );
}

/// The index of `line` in the log.
fn position(log: &crate::common::Log, line: &str) -> usize {
    log.lines()
        .iter()
        .position(|l| l == line)
        .expect("a line the log had")
}
