//! OpenMetrics and Prometheus text output: names, types, labels, escaping, omitted unknowns,
//! per-worker series only when full, the histogram and status classes, the choice by
//! `Accept`, and a check with the reference parsers (Python's prometheus_client) that the
//! whole page is valid in both formats.

use std::io::Write as _;
use std::process::{Command, Stdio};

use super::super::fixture::{blind, www};
use super::*;

/// The sample lines of one metric (not HELP/TYPE).
fn samples<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .collect()
}

#[test]
fn pool_metrics_are_php_fpms_with_a_pool_label() {
    let out = openmetrics(&[www()], true);
    assert!(out.contains("# HELP drover_accepted_connections Requests accepted by the pool.\n"));
    assert!(out.contains("# TYPE drover_accepted_connections counter\n"));
    assert_eq!(
        samples(&out, "drover_accepted_connections_total"),
        [r#"drover_accepted_connections_total{pool="www"} 1234"#]
    );
    assert_eq!(
        samples(&out, "drover_listen_queue"),
        [r#"drover_listen_queue{pool="www"} 2"#]
    );
    assert!(
        out.contains("# TYPE drover_idle_processes gauge\ndrover_idle_processes{pool=\"www\"} 1\n")
    );
    assert!(out.contains(r#"drover_up{pool="www",process_manager="dynamic",runtime="php"} 1"#));
    assert!(out.contains(r#"drover_slow_requests_total{pool="www"} 5"#));
    assert!(out.contains(r#"drover_max_children_reached_total{pool="www"} 3"#));
    assert!(out.ends_with("\n# EOF\n") || out == "# EOF\n");
}

#[test]
fn drovers_own_metrics_limits_recycling_and_workers() {
    let out = openmetrics(&[www()], true);
    assert!(out.contains(r#"drover_limit_max_children{pool="www"} 10"#));
    assert!(out.contains("# UNIT drover_limit_max_memory_bytes bytes\n"));
    assert!(out.contains(r#"drover_limit_request_slowlog_timeout_seconds{pool="www"} 2.5"#));
    assert!(out.contains(r#"drover_workers_recycled_total{pool="www",cause="max_memory"} 1"#));
    assert!(out.contains(r#"drover_worker_rss_bytes{pool="www",pid="4242"} 31457280"#));
    assert!(out.contains(r#"drover_worker_requests_total{pool="www",pid="4243"} 3"#));
    assert!(out.contains("# UNIT drover_worker_last_request_memory_bytes bytes\n"));
    assert_eq!(
        samples(&out, "drover_worker_last_request_memory_bytes"),
        [r#"drover_worker_last_request_memory_bytes{pool="www",pid="4242"} 2097152"#],
        "only where known"
    );
    // Current request duration only for the busy worker.
    let current = samples(&out, "drover_worker_request_duration_seconds");
    assert_eq!(
        current,
        [r#"drover_worker_request_duration_seconds{pool="www",pid="4242"} 1.5"#]
    );
    assert!(out.contains(
        r#"drover_worker_last_request_duration_seconds{pool="www",pid="4243"} 0.012345"#
    ));
}

#[test]
fn unknown_values_are_left_out_and_families_stay_contiguous() {
    let out = openmetrics(&[www(), blind()], true);
    assert_eq!(samples(&out, "drover_accepted_connections_total").len(), 1);
    assert_eq!(samples(&out, "drover_listen_queue").len(), 1);
    assert_eq!(samples(&out, "drover_limit_max_memory_bytes").len(), 1);
    assert_eq!(samples(&out, "drover_worker_rss_bytes").len(), 2);
    assert_eq!(samples(&out, "drover_idle_processes").len(), 2);
    // Each family's TYPE appears once, so both pools' samples sit under it.
    assert_eq!(out.matches("# TYPE drover_idle_processes ").count(), 1);
    let all = openmetrics(&[], true);
    assert_eq!(all, "# EOF\n");
}

#[test]
fn label_values_are_escaped() {
    let mut odd = blind();
    odd.pool = "a\\b\"c\nd".into();
    let out = openmetrics(&[odd], true);
    assert!(
        out.contains(r#"drover_idle_processes{pool="a\\b\"c\nd"} 0"#),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("d\"")).count(),
        0,
        "a raw newline split a line"
    );
}

/// The page as the reference parser reads it: every family parses, the escaped pool name
/// comes back intact, and a few values are where they should be.
#[test]
fn output_parses_with_prometheus_client() {
    let mut odd = blind();
    odd.pool = "a\\b\"c\nd".into();
    for exposition in [Exposition::OpenMetrics, Exposition::Prometheus] {
        let page = metrics(&[www(), odd.clone()], true, exposition);
        let parser = match exposition {
            Exposition::OpenMetrics => "prometheus_client.openmetrics.parser",
            Exposition::Prometheus => "prometheus_client.parser",
        };
        parse_with_prometheus_client(&page, parser, PARSED_CHECKS);
    }
}

/// What the parsed page of `www()` and an odd-named pool must hold, in either format.
const PARSED_CHECKS: &str = r#"
assert families["drover_accepted_connections"].type == "counter"
assert families["drover_idle_processes"].type == "gauge"
assert not OPENMETRICS or families["drover_limit_max_memory_bytes"].unit == "bytes"
assert value("drover_accepted_connections", "drover_accepted_connections_total", pool="www") == 1234
assert value("drover_idle_processes", "drover_idle_processes", pool='a\\b"c\nd') == 0
assert value("drover_worker_rss_bytes", "drover_worker_rss_bytes", pool="www", pid="4242") == 31457280
assert not OPENMETRICS or families["drover_worker_last_request_memory_bytes"].unit == "bytes"
assert value("drover_worker_last_request_memory_bytes", "drover_worker_last_request_memory_bytes", pool="www", pid="4242") == 2097152
assert value("drover_workers_recycled", "drover_workers_recycled_total", pool="www", cause="idle") == 4
h = families["drover_request_duration_seconds"]
assert h.type == "histogram"
assert value("drover_request_duration_seconds", "drover_request_duration_seconds_bucket", pool="www", le="0.005") == 6
assert value("drover_request_duration_seconds", "drover_request_duration_seconds_bucket", pool="www", le="10.0") == 9
assert value("drover_request_duration_seconds", "drover_request_duration_seconds_bucket", pool="www", le="+Inf") == 10
assert value("drover_request_duration_seconds", "drover_request_duration_seconds_count", pool="www") == 10
assert value("drover_request_duration_seconds", "drover_request_duration_seconds_sum", pool="www") == 12.25
assert value("drover_responses", "drover_responses_total", pool="www", **{"class": "5xx"}) == 2
assert not [s for s in h.samples if s.labels["pool"] != "www"], "no histogram for a command pool"
assert value("drover_workers_recycled", "drover_workers_recycled_total", pool="www", cause="max_lifetime") == 5
q = families["drover_queue_wait_seconds"]
assert q.type == "histogram"
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_bucket", pool="www", le="0.1") == 6
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_bucket", pool="www", le="1.0") == 9
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_bucket", pool="www", le="2.5") == 10
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_bucket", pool="www", le="+Inf") == 10
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_count", pool="www") == 10
assert value("drover_queue_wait_seconds", "drover_queue_wait_seconds_sum", pool="www") == 5
"#;

/// Runs `checks` in Python on `page` as `parser` (a prometheus_client module with
/// `text_string_to_metric_families`) reads it; `families` and `value` are defined for them.
fn parse_with_prometheus_client(page: &str, parser: &str, checks: &str) {
    let script = format!(
        r#"
import sys
try:
    from {parser} import text_string_to_metric_families
except ImportError:
    print("SKIP prometheus_client is not installed (pip install prometheus_client)")
    sys.exit(0)
# No UNIT lines in the Prometheus text.
OPENMETRICS = "openmetrics" in "{parser}"
families = {{}}
for f in text_string_to_metric_families(sys.stdin.read()):
    # The Prometheus text parser names a counter's family with its _total.
    name = f.name[:-6] if f.type == "counter" and f.name.endswith("_total") else f.name
    families[name] = f
def value(family, sample, **labels):
    for s in families[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise SystemExit(f"no {{sample}} {{labels}}")
{checks}
print("OK", len(families))
"#
    );
    let child = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            println!("SKIP python3 is not available: {err}");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{parser}\n{page}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with("OK") || stdout.starts_with("SKIP"),
        "{stdout}"
    );
}

#[test]
fn workers_only_when_full() {
    let out = openmetrics(&[www()], false);
    assert!(!out.contains("pid="), "{out}");
    assert!(!out.contains("drover_worker_"), "{out}");
    assert!(out.contains(r#"drover_idle_processes{pool="www"} 1"#));
    let full = openmetrics(&[www()], true);
    assert!(full.contains(r#"drover_worker_rss_bytes{pool="www",pid="4242"}"#));
}

#[test]
fn the_histogram_is_cumulative_and_its_count_is_the_inf_bucket() {
    let out = openmetrics(&[www(), blind()], false);
    assert!(out.contains("# TYPE drover_request_duration_seconds histogram\n"));
    assert!(out.contains("# UNIT drover_request_duration_seconds seconds\n"));
    let buckets = samples(&out, "drover_request_duration_seconds_bucket");
    assert_eq!(
        buckets.len(),
        BUCKETS,
        "www only: the command pool has none"
    );
    assert_eq!(
        buckets[0],
        r#"drover_request_duration_seconds_bucket{pool="www",le="0.005"} 6"#
    );
    assert_eq!(
        buckets[4],
        r#"drover_request_duration_seconds_bucket{pool="www",le="0.1"} 9"#
    );
    assert_eq!(
        buckets[BUCKETS - 1],
        r#"drover_request_duration_seconds_bucket{pool="www",le="+Inf"} 10"#
    );
    assert_eq!(
        samples(&out, "drover_request_duration_seconds_count"),
        [r#"drover_request_duration_seconds_count{pool="www"} 10"#]
    );
    assert_eq!(
        samples(&out, "drover_request_duration_seconds_sum"),
        [r#"drover_request_duration_seconds_sum{pool="www"} 12.25"#]
    );
    assert_eq!(
        samples(&out, "drover_responses_total"),
        [
            r#"drover_responses_total{pool="www",class="1xx"} 0"#,
            r#"drover_responses_total{pool="www",class="2xx"} 7"#,
            r#"drover_responses_total{pool="www",class="3xx"} 0"#,
            r#"drover_responses_total{pool="www",class="4xx"} 1"#,
            r#"drover_responses_total{pool="www",class="5xx"} 2"#,
        ]
    );
    let blind_only = openmetrics(&[blind()], false);
    assert!(!blind_only.contains("drover_request_duration_seconds"));
    assert!(
        !blind_only.contains("drover_responses"),
        "never zeros as if measured"
    );
}

#[test]
fn prometheus_text_names_counters_with_total_and_has_no_unit_or_eof() {
    let out = metrics(&[www()], false, Exposition::Prometheus);
    assert!(out.contains("# HELP drover_accepted_connections_total Requests accepted"));
    assert!(out.contains("# TYPE drover_accepted_connections_total counter\n"));
    assert!(out.contains(r#"drover_accepted_connections_total{pool="www"} 1234"#));
    assert!(out.contains("# TYPE drover_responses_total counter\n"));
    assert!(out.contains("# TYPE drover_request_duration_seconds histogram\n"));
    assert!(out.contains("# TYPE drover_idle_processes gauge\n"));
    assert!(!out.contains("# UNIT") && !out.contains("# EOF"), "{out}");
    assert_eq!(metrics(&[], false, Exposition::Prometheus), "");
}

#[test]
fn openmetrics_only_when_the_accept_header_lists_it() {
    use Exposition::{OpenMetrics, Prometheus};
    for (accept, expected) in [
        (None, Prometheus),
        (Some("*/*"), Prometheus),
        (Some("text/plain"), Prometheus),
        (Some("application/openmetrics-text"), OpenMetrics),
        (
            Some("Application/OpenMetrics-Text; version=1.0.0"),
            OpenMetrics,
        ),
        (
            Some("text/plain;version=0.0.4;q=0.5, application/openmetrics-text;version=1.0.0"),
            OpenMetrics,
        ),
        (Some("application/openmetrics-text; q=0"), Prometheus),
        (Some("application/json"), Prometheus),
    ] {
        assert_eq!(Exposition::from_accept(accept), expected, "{accept:?}");
    }
    assert_eq!(
        Prometheus.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
}

#[test]
fn an_autoscalers_metrics_queue_busy_ratio_and_reload_recycles() {
    let out = openmetrics(&[www(), blind()], false);
    assert_eq!(
        samples(&out, "drover_queue_timeouts_total"),
        [r#"drover_queue_timeouts_total{pool="www"} 5"#]
    );
    assert_eq!(
        samples(&out, "drover_queue_oldest_wait_seconds"),
        [r#"drover_queue_oldest_wait_seconds{pool="www"} 1.5"#]
    );
    assert_eq!(
        samples(&out, "drover_limit_queue_timeout_seconds"),
        [r#"drover_limit_queue_timeout_seconds{pool="www"} 2"#]
    );
    assert!(out.contains("# UNIT drover_queue_oldest_wait_seconds seconds\n"));
    assert!(out.contains(r#"drover_workers_recycled_total{pool="www",cause="reload"} 3"#));
    // Every pool with a max_children has a busy ratio; the command pool's 1 of 1 is 1.
    let ratios = samples(&out, "drover_busy_ratio");
    assert_eq!(ratios.len(), 2, "{out}");
    assert_eq!(ratios[1], r#"drover_busy_ratio{pool="leg\"acy"} 1"#);
}

#[test]
fn the_queue_wait_labels_are_its_bounds_in_seconds() {
    let bounds = crate::pm::queue::WAIT_BOUNDS_MS;
    for (le, ms) in WAIT_LE.iter().zip(bounds) {
        assert_eq!(le.parse::<f64>().unwrap(), ms as f64 / 1000.0, "{le}");
    }
    assert_eq!(WAIT_LE[bounds.len()], "+Inf");
}
