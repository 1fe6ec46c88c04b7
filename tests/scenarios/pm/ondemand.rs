//! An ondemand PHP pool keeps no worker at rest: it is ready with none, spawns one when a
//! connection waits, and retires it after process_idle_timeout.

use std::time::{Duration, Instant};

use super::{Pool, acted_on, lines_with, seconds, served_by, started_since};
use crate::common::{Site, Stack, TIMEOUT, proc, wait_until};

const PM: &str = "mode = \"ondemand\"\nmax_children = 2\nprocess_idle_timeout = \"2s\"\n";
const IDLE_TIMEOUT: Duration = Duration::from_secs(2);

fn stack() -> Stack {
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    Stack::start(site, Pool::php("www", "", PM))
}

/// php-cgi processes anywhere below drover.
fn php_cgi_below(stack: &Stack) -> Vec<i32> {
    stack
        .drover
        .descendants()
        .into_iter()
        .filter(|&pid| proc::stat(pid).is_some_and(|s| s.comm == "php-cgi" && s.state != 'Z'))
        .collect()
}

/// GET /pid.php on a pool with no worker: (the pid that served it, the latency).
fn cold_request(stack: &Stack) -> (i32, Duration) {
    let start = Instant::now();
    let pid = served_by(stack, "/pid.php");
    (pid, start.elapsed())
}

#[test]
fn an_ondemand_pool_starts_empty_serves_on_demand_and_empties_after_the_idle_timeout() {
    let stack = stack();
    let log = &stack.drover.log;
    let ready = log.wait_for_line("ready:", TIMEOUT);
    assert!(ready.ends_with("ready: 1 pools, 0 workers"), "{ready:?}");
    assert_eq!(php_cgi_below(&stack), Vec::<i32>::new(), "php-cgi at rest");

    let sent = Instant::now();
    let (worker, latency) = cold_request(&stack);
    println!("ondemand cold start: the first request was served in {latency:.1?}");
    assert_eq!(
        started_since(log, 0, "www"),
        vec![worker],
        "the log:\n{}",
        log.text()
    );

    let retiring = log.wait_for(
        0,
        "the worker retired for idleness",
        |l| acted_on(l, "www", "retiring").is_some(),
        TIMEOUT,
    );
    let seen_after = sent.elapsed();
    let (pid, reason) = acted_on(&retiring, "www", "retiring").expect("a retiring line");
    assert_eq!(pid, worker, "{retiring:?}");
    let idle = reason
        .strip_prefix("idle for ")
        .and_then(|r| r.strip_suffix(", past process_idle_timeout (2s)"))
        .and_then(seconds)
        .unwrap_or_else(|| panic!("not an idle timeout: {retiring:?}"));
    // The figure is rounded to 0.1 s: 2.04 s shows as "2.0s".
    assert!(idle >= 2.0, "{retiring:?}");
    // Not before the timeout. Counted from the request's start, not its end: the master
    // may count idleness from the worker's start when it never sampled it busy, which the
    // next test shows is wrong but here is only milliseconds early.
    assert!(
        seen_after >= IDLE_TIMEOUT,
        "retired {seen_after:?} after the request was sent: {retiring:?}"
    );
    log.wait_for_line(&format!("pool www: worker {worker} exited"), TIMEOUT);
    wait_until(TIMEOUT, "no php-cgi below drover", || {
        php_cgi_below(&stack).is_empty().then_some(())
    });

    // Empty again, and it serves again.
    let (again, latency) = cold_request(&stack);
    println!("ondemand cold start: a request after the pool emptied was served in {latency:.1?}");
    assert_ne!(again, worker);
    assert_eq!(lines_with(log, 0, "killing worker"), Vec::<String>::new());
}

/// A worker that keeps serving short requests is not idle, though the master, sampling
/// every 100 ms, may never catch it inside one: it must not be retired for idleness while
/// requests keep coming more often than process_idle_timeout.
#[test]
fn an_ondemand_worker_serving_short_requests_is_not_retired_as_idle() {
    let stack = stack();
    let log = &stack.drover.log;
    let worker = served_by(&stack, "/pid.php");

    // One short request every 300 ms for twice the idle timeout.
    let until = Instant::now() + 2 * IDLE_TIMEOUT;
    let mut served = vec![worker];
    while Instant::now() < until {
        let next = Instant::now() + Duration::from_millis(300);
        served.push(served_by(&stack, "/pid.php"));
        while Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    let retired = lines_with(log, 0, "retiring worker");
    assert!(
        retired.is_empty(),
        "retired while serving a request every 300 ms (served by {served:?}): {retired:?}; \
         the log:\n{}",
        log.text()
    );
    assert!(
        served.iter().all(|&pid| pid == worker),
        "served by {served:?}"
    );
}
