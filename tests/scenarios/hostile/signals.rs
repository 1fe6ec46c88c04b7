//! Hostile: signal storms. Every TTIN and TTOU the kernel delivers counts (30 TTIN then 40
//! TTOU end at 1 worker), and a TTIN superseded by a TTOU 30 ms later leaves no php-cgi
//! worker of the superseded generation running untracked.

use std::thread;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{Ctl, Drover, PhpPool, Site, TIMEOUT, proc, start_with_control};

/// Waits until the pool runs `n` php-cgi workers and `ctl config` says `max_children = n`.
fn wait_for_workers(drover: &Drover, ctl: &Ctl, n: usize) {
    let mut last = (0, String::new());
    let settled = proc::poll(TIMEOUT, || {
        let config = ctl.ok(&["config", "www"], &drover.log.text());
        let said = config
            .lines()
            .find(|l| l.trim().starts_with("max_children"))
            .unwrap_or("")
            .trim()
            .to_string();
        last = (drover.workers().len(), said);
        last.0 == n && last.1 == format!("max_children = {n}")
    });
    assert!(
        settled,
        "expected {n} workers and max_children = {n}; saw {} workers and {:?}\ndrover's log:\n{}",
        last.0,
        last.1,
        drover.log.text()
    );
}

#[test]
fn thirty_ttin_then_forty_ttou_end_at_one_worker() {
    let site = Site::new();
    let (drover, ctl) = start_with_control(&site, &[&PhpPool::new("www").max_children(1)]);
    // Each sent once the kernel delivered the one before (a signal sent again while the
    // first is still pending is merged by the kernel itself), faster than the master rolls
    // a generation.
    for _ in 0..30 {
        proc::signal_delivered(drover.pid(), Signal::SIGTTIN);
    }
    // Every TTIN counts (the floor of 1 below would hide lost TTOUs).
    wait_for_workers(&drover, &ctl, 31);
    for _ in 0..40 {
        proc::signal_delivered(drover.pid(), Signal::SIGTTOU);
    }
    wait_for_workers(&drover, &ctl, 1);
    ctl.wait_all_tracked(drover.pid(), &drover.log);
}

#[test]
fn ttin_then_ttou_30ms_later_leaves_no_worker_untracked() {
    let site = Site::new();
    let (drover, ctl) = start_with_control(&site, &[&PhpPool::new("www").max_children(3)]);
    for round in 0..3 {
        drover.signal(Signal::SIGTTIN);
        // Pacing: the TTOU must come while the TTIN's php-cgi parent is forking its workers.
        thread::sleep(Duration::from_millis(30 + 10 * round));
        drover.signal(Signal::SIGTTOU);
        wait_for_workers(&drover, &ctl, 3);
        ctl.wait_all_tracked(drover.pid(), &drover.log);
    }
}
