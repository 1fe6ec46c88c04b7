//! A background pool's restarts by cause, in `drover ctl status` (JSON) and in its metrics
//! (`drover_workers_recycled_total{cause=...}`): past `max_lifetime`, above `max_memory`,
//! killed from outside (a crash: restarted at once after a long run, with the crash-loop
//! backoff right after a start), and renewed by a reload.

use nix::sys::signal::Signal;

use super::{Consumer, started};
use crate::common::{Ctl, Drover, TIMEOUT, proc, start_with_control};

/// `drover ctl status POOL --json`'s `recycled` counts, once `done` holds for them.
fn wait_recycled(
    ctl: &Ctl,
    drover: &Drover,
    pool: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    proc::wait_until(TIMEOUT, what, || {
        let status = ctl.status_json(pool, &drover.log.text());
        done(&status["recycled"]).then_some(status["recycled"].clone())
    })
}

/// The value of `drover_workers_recycled_total{pool, cause}` in `drover ctl status
/// --openmetrics`.
fn recycled_metric(ctl: &Ctl, drover: &Drover, pool: &str, cause: &str) -> u64 {
    let page = ctl.ok(&["status", "--openmetrics"], &drover.log.text());
    let needle = format!("drover_workers_recycled_total{{pool=\"{pool}\",cause=\"{cause}\"}} ");
    let line = page
        .lines()
        .find(|l| l.starts_with(&needle))
        .unwrap_or_else(|| panic!("no {needle} in:\n{page}"));
    line[needle.len()..].trim().parse().unwrap()
}

#[test]
fn a_programs_restarts_show_by_cause_in_status_and_metrics() {
    let site = crate::common::Site::new();
    let mut aging = Consumer::new(1, "work").program("max_lifetime = \"2s\"\n");
    aging.name = "aging";
    let mut hog = Consumer::new(1, "leak").pm("max_memory = \"48MiB\"\n");
    hog.name = "hog";
    let jobs = Consumer::new(1, "work");
    let (drover, ctl) = start_with_control(&site, &[&aging, &hog, &jobs]);
    started(&drover.log, 0, 3);
    let jobs_copy = proc::wait_until(TIMEOUT, "the jobs copy listed", || {
        let text = ctl.ok(&["status", "jobs", "--full", "--json"], &drover.log.text());
        let status: serde_json::Value = serde_json::from_str(&text).unwrap();
        status["processes"]
            .as_array()
            .and_then(|p| p.first())
            .and_then(|w| w["pid"].as_i64())
            .map(|pid| pid as i32)
    });

    let r = wait_recycled(&ctl, &drover, "aging", "a lifetime restart", |r| {
        r["max_lifetime"].as_u64() >= Some(1)
    });
    assert_eq!(
        (r["crash"].as_u64(), r["max_requests"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    assert!(recycled_metric(&ctl, &drover, "aging", "max_lifetime") >= 1);

    let r = wait_recycled(&ctl, &drover, "hog", "a memory restart", |r| {
        r["max_memory"].as_u64() >= Some(1)
    });
    assert_eq!(r["crash"], 0, "{r}");
    assert!(recycled_metric(&ctl, &drover, "hog", "max_memory") >= 1);

    // The jobs copy has run past 2 s (the aging copy's lifetime went by): SIGKILL from
    // outside is a crash, restarted at once.
    let from = drover.log.len();
    proc::signal(jobs_copy, Signal::SIGKILL);
    let exited = drover
        .log
        .wait_for_line(&format!("worker {jobs_copy} exited"), TIMEOUT);
    assert!(exited.contains("on SIGKILL"), "{exited}");
    let next = drover.log.wait_for(
        from,
        "the jobs copy restarted",
        |l| l.contains("pool jobs:") && l.contains("started queue="),
        TIMEOUT,
    );
    let next = super::pid_after(&next, "consumer ");
    let r = wait_recycled(&ctl, &drover, "jobs", "a crash", |r| r["crash"] == 1);
    assert_eq!(r["max_requests"], 0, "{r}");
    assert_eq!(recycled_metric(&ctl, &drover, "jobs", "crash"), 1);
    let held: Vec<String> = drover
        .log
        .lines()
        .into_iter()
        .skip(from)
        .filter(|l| l.contains("pool jobs: failed to start"))
        .collect();
    assert!(
        held.is_empty(),
        "a long-running copy's crash is no failed start: {held:?}"
    );

    // Killed again right after its start: a failed start, retried after the backoff.
    let from = drover.log.len();
    proc::signal(next, Signal::SIGKILL);
    let hold = drover.log.wait_for(
        from,
        "the backoff",
        |l| l.contains("pool jobs: failed to start"),
        TIMEOUT,
    );
    assert!(
        hold.contains(&format!("worker {next} exited on SIGKILL"))
            && hold.contains("retrying in 1s (1 failure in a row)"),
        "{hold}"
    );
    drover.log.wait_for(
        from,
        "the jobs copy started again",
        |l| l.contains("pool jobs:") && l.contains("started queue="),
        TIMEOUT,
    );
    wait_recycled(&ctl, &drover, "jobs", "a second crash", |r| r["crash"] == 2);

    // A reload renews every copy: counted under reload.
    drover.signal(Signal::SIGHUP);
    let r = wait_recycled(&ctl, &drover, "jobs", "a reload", |r| r["reload"] == 1);
    assert_eq!(r["crash"], 2, "{r}");
    assert_eq!(recycled_metric(&ctl, &drover, "jobs", "reload"), 1);
    let text = ctl.ok(&["status", "jobs"], &drover.log.text());
    assert!(text.contains("recycled max_lifetime:"), "{text}");
}
