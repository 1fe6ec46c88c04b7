//! `/metrics` on `status_listen`, as Prometheus scrapes it. A Python pool and a PHP pool
//! (embedded: drover-php) each answer a known mix of 200, 404 and 500 through nginx; then
//! each pool's `/metrics`, parsed by prometheus_client in both formats, counts exactly
//! those requests in `drover_request_duration_seconds_count` and in
//! `drover_responses_total` by class, and carries no `pid` label unless `?full` asks; the
//! JSON status carries the same counts.
//! On php-cgi (`DROVER_TEST_PHP_RUNTIME=cgi`) the PHP pool has no such series at all.

use super::status::{Sample, get_status, parsed_samples, status_addr};
use super::{Pool, Setup, site, start};
use crate::common::{TIMEOUT, default_php_runtime, http, proc};

/// `status_listen` on a port the kernel picks (the log says which), one address per pool:
/// drover refuses two pools on the same `127.0.0.1:0`.
const PYTHON_STATUS: &str = "status_listen = \"127.0.0.1:0\"";
const PHP_STATUS: &str = "status_listen = \"127.0.0.2:0\"";

/// Sends each `(path, status, times)` through nginx, asserting each answer's status; the
/// number of requests sent.
fn send(setup: &Setup, requests: &[(&str, u16, usize)]) -> u64 {
    let mut sent = 0;
    for &(path, status, times) in requests {
        for _ in 0..times {
            let reply = http::try_get(&setup.stack.url(path))
                .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", setup.log()));
            assert_eq!(reply.status, status, "GET {path}: {reply:?}");
            sent += 1;
        }
    }
    sent
}

/// The value of the sample `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).and_then(|l| l.as_str()) == Some(*v))
        })
        .map(|s| s.value)
}

/// Checks one pool's `/metrics`: the histogram counted `count` requests (waiting for the
/// workers' last additions, made just after the responses went out), the classes are
/// `classes` (2xx, 4xx, 5xx), no pid label without `?full`, and both formats parse.
fn check_pool(setup: &Setup, pool: &str, count: u64, classes: [u64; 3]) {
    let addr = status_addr(setup, pool);
    let mut page = String::new();
    let counted = proc::poll(TIMEOUT, || {
        page = get_status(setup, &addr, "/metrics").body;
        page.contains(&format!(
            "drover_request_duration_seconds_count{{pool=\"{pool}\"}} {count}\n"
        ))
    });
    assert!(
        counted,
        "{pool}: /metrics never counted {count} requests:\n{page}"
    );
    assert!(
        !page.contains("pid="),
        "{pool}: a pid label without ?full:\n{page}"
    );
    let reply = get_status(setup, &addr, "/metrics");
    assert_eq!(
        reply.header("Content-Type"),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    {
        let samples = parsed_samples(&setup.stack.site, &page, "prometheus");
        let p = [("pool", pool)];
        let got = |name: &str, labels: &[(&str, &str)]| {
            value(&samples, name, labels)
                .unwrap_or_else(|| panic!("{pool}: no {name} {labels:?} in:\n{page}"))
        };
        assert_eq!(
            got("drover_request_duration_seconds_count", &p),
            count as f64
        );
        let inf = [("pool", pool), ("le", "+Inf")];
        assert_eq!(
            got("drover_request_duration_seconds_bucket", &inf),
            count as f64
        );
        assert!(
            got("drover_request_duration_seconds_sum", &p) > 0.0,
            "{page}"
        );
        for (class, expected) in ["2xx", "4xx", "5xx"].into_iter().zip(classes) {
            let labels = [("pool", pool), ("class", class)];
            assert_eq!(
                got("drover_responses_total", &labels),
                expected as f64,
                "{pool} {class}:\n{page}"
            );
        }
        assert_eq!(
            got(
                "drover_responses_total",
                &[("pool", pool), ("class", "1xx")]
            ),
            0.0
        );
    }
    let json = get_status(setup, &addr, "/status?json").body;
    let json: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(json["request durations"]["count"], count, "{json:#}");
    assert_eq!(json["responses"]["5xx"], classes[2], "{json:#}");
    let open = http::get_with(
        &format!("http://{addr}/metrics?full"),
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert_eq!(open.status, 200, "{open:?}");
    assert!(
        open.header("Content-Type")
            .starts_with("application/openmetrics-text"),
        "{open:?}"
    );
    assert!(
        open.body.contains("pid=\""),
        "?full shows the workers:\n{}",
        open.body
    );
    {
        let samples = parsed_samples(&setup.stack.site, &open.body, "openmetrics");
        let p = [("pool", pool)];
        let count_now = value(&samples, "drover_request_duration_seconds_count", &p);
        // /metrics and the polls above are no requests of the pool: still `count`.
        assert_eq!(count_now, Some(count as f64), "{}", open.body);
    }
}

#[test]
fn metrics_count_every_request_of_python_and_embedded_php_pools_by_class() {
    let site = site();
    site.script("fail.php", "<?php http_response_code(500); echo 'failed';");
    let python = Pool::python("app").mount("/py").top(PYTHON_STATUS);
    let php = Pool::php("www").max_children(2).top(PHP_STATUS);
    let setup = start(site, &[&python, &php]);

    let python_sent = send(
        &setup,
        &[
            ("/py/greeting", 200, 6),
            ("/py/fail", 500, 3),
            ("/py/nothing-here", 404, 2),
        ],
    );
    let php_sent = send(
        &setup,
        &[
            ("/greeting.php", 200, 5),
            // drover's own 404, as php-fpm's "Primary script unknown".
            ("/missing.php", 404, 2),
            ("/fail.php", 500, 3),
        ],
    );
    check_pool(&setup, "app", python_sent, [6, 2, 3]);
    if default_php_runtime() == "embed" {
        check_pool(&setup, "www", php_sent, [5, 2, 3]);
    } else {
        let addr = status_addr(&setup, "www");
        let page = get_status(&setup, &addr, "/metrics").body;
        assert!(
            !page.contains("drover_request_duration_seconds")
                && !page.contains("drover_responses_total"),
            "php-cgi cannot count requests; no zeros as if measured:\n{page}"
        );
    }
}

/// The pool's `/metrics` parsed (Prometheus text), once the histogram counts `count`.
fn counted(setup: &Setup, addr: &str, pool: &str, count: u64, when: &str) -> Vec<Sample> {
    let mut page = String::new();
    let reached = proc::poll(TIMEOUT, || {
        page = get_status(setup, addr, "/metrics").body;
        page.contains(&format!(
            "drover_request_duration_seconds_count{{pool=\"{pool}\"}} {count}\n"
        ))
    });
    assert!(
        reached,
        "{when}: /metrics never counted {count} requests:\n{page}\ndrover's log:\n{}",
        setup.log()
    );
    parsed_samples(&setup.stack.site, &page, "prometheus")
}

/// Every deploy is a HUP, which gives every pool a new generation with a new scoreboard:
/// the pool's counters must still only grow, and count what the old generation finishes
/// while it drains.
#[test]
fn counters_go_on_across_a_reload_and_count_what_the_old_generation_finishes() {
    let site = site();
    let python = Pool::python("app")
        .mount("/py")
        .max_children(2)
        .top(PYTHON_STATUS);
    let setup = start(site, &[&python]);
    let addr = status_addr(&setup, "app");
    let log = &setup.stack.drover.log;
    let before = send(&setup, &[("/py/greeting", 200, 4), ("/py/fail", 500, 1)]);
    counted(&setup, &addr, "app", before, "before the reload");

    // A request the old generation is running when the reload starts: it finishes there
    // (3 s), after the new generation took over.
    let url = setup.stack.url("/py/slow");
    let slow = std::thread::spawn(move || http::try_get(&url).map(|r| r.status));
    let busy = proc::poll(TIMEOUT, || {
        get_status(&setup, &addr, "/metrics")
            .body
            .contains("drover_active_processes{pool=\"app\"} 1\n")
    });
    assert!(busy, "the slow request never ran; log:\n{}", setup.log());
    let from = log.len();
    setup.stack.drover.signal(nix::sys::signal::Signal::SIGHUP);
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    // Renewed, the old generation still draining: nothing went back to 0.
    let samples = counted(&setup, &addr, "app", before, "right after the reload");
    assert_eq!(
        value(
            &samples,
            "drover_responses_total",
            &[("pool", "app"), ("class", "5xx")]
        ),
        Some(1.0)
    );

    assert_eq!(slow.join().expect("the slow request's thread"), Ok(200));
    let after = send(&setup, &[("/py/greeting", 200, 3), ("/py/nothing", 404, 2)]);
    let total = before + 1 + after;
    let samples = counted(&setup, &addr, "app", total, "after the reload");
    let p = [("pool", "app")];
    let got = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels);
    assert_eq!(
        got("drover_accepted_connections_total", &p),
        Some(total as f64)
    );
    assert_eq!(
        got(
            "drover_request_duration_seconds_bucket",
            &[("pool", "app"), ("le", "+Inf")]
        ),
        Some(total as f64)
    );
    for (class, expected) in [("2xx", 4 + 1 + 3), ("4xx", 2), ("5xx", 1)] {
        let labels = [("pool", "app"), ("class", class)];
        assert_eq!(
            got("drover_responses_total", &labels),
            Some(expected as f64),
            "{class}"
        );
    }
    // The slow request took 3 s: the histogram's sum has it.
    assert!(got("drover_request_duration_seconds_sum", &p).is_some_and(|s| s >= 3.0));
    let json = get_status(&setup, &addr, "/status?json").body;
    let json: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(json["accepted conn"], total, "{json:#}");
    assert_eq!(json["request durations"]["count"], total, "{json:#}");
}
