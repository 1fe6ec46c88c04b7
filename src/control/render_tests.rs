//! Text and JSON status: php-fpm's layout and keys, drover's extra fields, unknown values,
//! and URIs that try to break out of their field.

use serde_json::Value;

use super::super::fixture::{START, blind, www};
use super::*;

fn value_of<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    let prefix = format!("{label}:");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l[prefix.len()..].trim_start())
        .collect()
}

#[test]
fn text_has_php_fpm_layout_first_then_drovers_fields() {
    let out = text(&[www()], false);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "pool:                 www");
    assert_eq!(lines[1], "process manager:      dynamic");
    assert_eq!(
        lines[2],
        format!("start time:           {}", local_time(www().start_time))
    );
    assert_eq!(lines[3], "start since:          3600");
    assert_eq!(lines[4], "accepted conn:        1234");
    assert_eq!(lines[7], "listen queue len:     511");
    assert_eq!(lines[12], "max children reached: 3");
    assert_eq!(lines[13], "slow requests:        5");
    assert_eq!(lines[14], "runtime:              php");
    assert_eq!(value_of(&out, "pm.max_children"), ["10"]);
    assert_eq!(value_of(&out, "pm.max_memory"), ["268435456"]);
    assert_eq!(value_of(&out, "request_terminate_timeout"), ["1m"]);
    assert_eq!(value_of(&out, "request_slowlog_timeout"), ["2s 500ms"]);
    assert_eq!(value_of(&out, "recycled max_requests"), ["8"]);
    assert_eq!(value_of(&out, "recycled idle"), ["4"]);
    assert!(!out.contains("pid:"), "workers only with full");
}

#[test]
fn text_full_adds_a_block_per_worker() {
    let out = text(&[www()], true);
    assert_eq!(out.matches("\n************************\n").count(), 2);
    assert_eq!(value_of(&out, "pid"), ["4242", "4243"]);
    assert_eq!(value_of(&out, "state"), ["Running", "Idle"]);
    assert_eq!(value_of(&out, "request duration"), ["1500000", "12345"]);
    assert_eq!(value_of(&out, "last request cpu"), ["25.00", "-"]);
    assert_eq!(value_of(&out, "last request memory"), ["2097152", "-"]);
    let cpu = out.find("last request cpu:").unwrap();
    assert!(
        out[cpu..].starts_with("last request cpu:     25.00\nlast request memory:  2097152\n"),
        "php-fpm's order and column:\n{out}"
    );
    assert_eq!(value_of(&out, "rss"), ["31457280", "20971520"]);
    assert_eq!(value_of(&out, "request id"), ["4f1c9e0a", "-"]);
    assert_eq!(value_of(&out, "last request duration"), ["200000", "12345"]);
}

#[test]
fn text_escapes_control_characters_so_a_uri_cannot_forge_lines() {
    let out = text(&[www()], true);
    assert_eq!(value_of(&out, "request URI"), [r#"/a"b\c\nd?q="x""#, "/"]);
    assert_eq!(value_of(&out, "pool").len(), 1);
}

#[test]
fn text_shows_unknown_as_dash_and_separates_pools() {
    let out = text(&[www(), blind()], true);
    let second = &out[out.find("\npool:").unwrap() + 1..];
    assert!(out.contains("\n\npool:                 leg\"acy\n"));
    assert_eq!(value_of(second, "accepted conn"), ["-"]);
    assert_eq!(value_of(second, "listen queue"), ["-"]);
    assert_eq!(value_of(second, "pm.max_memory"), ["-"]);
    assert_eq!(value_of(second, "requests"), ["-"]);
    assert_eq!(value_of(second, "request URI"), ["-"]);
    assert_eq!(text(&[], true), "");
}

#[test]
fn start_time_is_php_fpms_format_at_any_offset() {
    assert_eq!(clf_time(START as i64, 0), "23/Mar/2024:10:00:00 +0000");
    assert_eq!(
        clf_time(START as i64, 5 * 3600 + 1800),
        "23/Mar/2024:15:30:00 +0530"
    );
    assert_eq!(
        clf_time(START as i64, -11 * 3600),
        "22/Mar/2024:23:00:00 -1100"
    );
    assert_eq!(clf_time(0, 0), "01/Jan/1970:00:00:00 +0000");
    assert_eq!(clf_time(951_782_400, 0), "29/Feb/2000:00:00:00 +0000");
    assert_eq!(clf_time(4_102_444_799, 0), "31/Dec/2099:23:59:59 +0000");
}

#[test]
fn json_has_php_fpms_keys_in_php_fpms_order_then_drovers() {
    let out = json_pool(&www(), false);
    let expected_start = concat!(
        r#"{"pool":"www","process manager":"dynamic","start time":1711188000,"start since":3600,"#,
        r#""accepted conn":1234,"listen queue":2,"max listen queue":7,"listen queue len":511,"#,
        r#""idle processes":1,"active processes":1,"total processes":2,"max active processes":4,"#,
        r#""max children reached":3,"slow requests":5,"runtime":"php","limits":{"#
    );
    assert!(out.starts_with(expected_start), "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["limits"]["max_children"], 10);
    assert_eq!(v["limits"]["max_memory"], 268_435_456);
    assert_eq!(v["limits"]["request_slowlog_timeout"], 2.5);
    assert_eq!(v["recycled"]["terminate"], 2);
    assert_eq!(v["request durations"]["count"], 10);
    assert_eq!(v["request durations"]["sum"], 12.25);
    let buckets = v["request durations"]["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 12);
    assert_eq!(buckets[0], serde_json::json!({"le": "0.005", "count": 6}));
    assert_eq!(buckets[11], serde_json::json!({"le": "+Inf", "count": 10}));
    assert_eq!(
        v["responses"],
        serde_json::json!({"1xx": 0, "2xx": 7, "3xx": 0, "4xx": 1, "5xx": 2})
    );
    assert!(v.get("processes").is_none(), "processes only with full");
    assert_eq!(v["recycled"]["max_lifetime"], 5);
    let wait = &v["queue"]["wait"];
    assert_eq!(
        (wait["count"].as_u64(), wait["sum"].as_f64()),
        (Some(10), Some(5.0))
    );
    let buckets = wait["buckets"].as_array().unwrap();
    assert_eq!(buckets[0], serde_json::json!({"le": "0.1", "count": 6}));
    assert_eq!(buckets[3], serde_json::json!({"le": "1.0", "count": 9}));
    assert_eq!(buckets[9], serde_json::json!({"le": "+Inf", "count": 10}));
}

#[test]
fn json_full_lists_processes_with_escaped_uris() {
    let v: Value = serde_json::from_str(&json_pool(&www(), true)).unwrap();
    let busy = &v["processes"][0];
    assert_eq!(busy["pid"], 4242);
    assert_eq!(busy["state"], "Running");
    assert_eq!(busy["start time"], START + 60);
    assert_eq!(busy["request duration"], 1_500_000);
    assert_eq!(busy["request method"], "POST");
    assert_eq!(busy["request uri"], "/a\"b\\c\nd?q=\"x\"");
    assert_eq!(busy["last request cpu"], 25.0);
    assert_eq!(busy["last request memory"], 2_097_152);
    assert!(v["processes"][1]["last request memory"].is_null());
    assert_eq!(busy["rss"], 31_457_280);
    assert_eq!(busy["last request duration"], 200_000);
    assert_eq!(busy["request id"], "4f1c9e0a");
    assert!(
        v["processes"][1]["request id"].is_null(),
        "an idle worker's"
    );
    // The raw escapes, as a strict parser sees them.
    assert!(json_pool(&www(), true).contains(r#""request uri":"/a\"b\\c\nd?q=\"x\"""#));
}

#[test]
fn json_of_every_pool_is_an_array_with_nulls_for_unknowns() {
    let v: Value = serde_json::from_str(&json(&[www(), blind()], true)).unwrap();
    let pools = v.as_array().unwrap();
    assert_eq!(pools.len(), 2);
    let blind = &pools[1];
    assert_eq!(blind["pool"], "leg\"acy");
    assert!(blind["accepted conn"].is_null());
    assert!(blind["listen queue"].is_null());
    assert!(blind["limits"]["max_memory"].is_null());
    assert!(blind["limits"]["request_terminate_timeout"].is_null());
    assert!(blind["request durations"].is_null() && blind["responses"].is_null());
    let worker = &blind["processes"][0];
    for key in [
        "requests",
        "request duration",
        "request method",
        "request uri",
        "script",
        "request id",
        "rss",
        "last request cpu",
        "last request memory",
    ] {
        assert!(worker[key].is_null(), "{key}");
    }
    assert_eq!(json(&[], false), "[]");
}

/// A memory-sized pool: the cap's inputs in every format; a pool sized by count has none.
#[test]
fn a_memory_sized_pool_shows_its_cap_and_inputs() {
    let mib = 1024 * 1024;
    let mut pool = www();
    pool.memory = Some(MemoryStatus {
        auto: true,
        limit: Some(512 * mib),
        limit_source: Some("cgroup v1 /x memory.limit_in_bytes".into()),
        reserve: Some(51 * mib),
        budget: Some(440 * mib),
        worker_memory: Some(44 * mib),
        worker_memory_source: Some("measured"),
        measured_workers: 3,
        pool_pss: Some(300 * mib),
        max_pool_memory: None,
        retired: 2,
    });
    let out = text(std::slice::from_ref(&pool), false);
    assert_eq!(value_of(&out, "memory limit"), [(512 * mib).to_string()]);
    assert_eq!(value_of(&out, "memory per worker source"), ["measured"]);
    assert_eq!(value_of(&out, "pm.max_pool_memory"), ["-"]);
    assert_eq!(value_of(&out, "recycled pool memory"), ["2"]);
    let json: Value = serde_json::from_str(&json_pool(&pool, false)).unwrap();
    assert_eq!(json["memory"]["budget"], 440 * mib);
    assert_eq!(json["memory"]["max_pool_memory"], Value::Null);
    let metrics = openmetrics(std::slice::from_ref(&pool), false);
    assert!(
        metrics.contains(&format!(
            "drover_memory_worker_bytes{{pool=\"www\"}} {}",
            44 * mib
        )),
        "{metrics}"
    );
    assert!(
        !metrics.contains("drover_limit_max_pool_memory_bytes{"),
        "{metrics}"
    );
    let plain = text(&[www()], false);
    assert!(value_of(&plain, "memory limit").is_empty(), "{plain}");
    assert!(!json_pool(&www(), false).contains("\"memory\""));
}
