//! OpenMetrics output: names, types, labels, escaping, omitted unknowns, and a check with
//! the reference parser (Python's prometheus_client) that the whole page is valid.

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
    let out = openmetrics(&[www()]);
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
    let out = openmetrics(&[www()]);
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
    let out = openmetrics(&[www(), blind()]);
    assert_eq!(samples(&out, "drover_accepted_connections_total").len(), 1);
    assert_eq!(samples(&out, "drover_listen_queue").len(), 1);
    assert_eq!(samples(&out, "drover_limit_max_memory_bytes").len(), 1);
    assert_eq!(samples(&out, "drover_worker_rss_bytes").len(), 2);
    assert_eq!(samples(&out, "drover_idle_processes").len(), 2);
    // Each family's TYPE appears once, so both pools' samples sit under it.
    assert_eq!(out.matches("# TYPE drover_idle_processes ").count(), 1);
    let all = openmetrics(&[]);
    assert_eq!(all, "# EOF\n");
}

#[test]
fn label_values_are_escaped() {
    let mut odd = blind();
    odd.pool = "a\\b\"c\nd".into();
    let out = openmetrics(&[odd]);
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
    let page = openmetrics(&[www(), odd]);
    let script = r#"
import sys
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    print("SKIP prometheus_client is not installed (pip install prometheus_client)")
    sys.exit(0)
families = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
def value(family, sample, **labels):
    for s in families[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise SystemExit(f"no {sample} {labels}")
assert families["drover_accepted_connections"].type == "counter"
assert families["drover_idle_processes"].type == "gauge"
assert families["drover_limit_max_memory_bytes"].unit == "bytes"
assert value("drover_accepted_connections", "drover_accepted_connections_total", pool="www") == 1234
assert value("drover_idle_processes", "drover_idle_processes", pool='a\\b"c\nd') == 0
assert value("drover_worker_rss_bytes", "drover_worker_rss_bytes", pool="www", pid="4242") == 31457280
assert families["drover_worker_last_request_memory_bytes"].unit == "bytes"
assert value("drover_worker_last_request_memory_bytes", "drover_worker_last_request_memory_bytes", pool="www", pid="4242") == 2097152
assert value("drover_workers_recycled", "drover_workers_recycled_total", pool="www", cause="idle") == 4
print("OK", len(families))
"#;
    let child = Command::new("python3")
        .args(["-c", script])
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
        "{page}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with("OK") || stdout.starts_with("SKIP"),
        "{stdout}"
    );
}
