//! Hostile: the process that forks a pool's workers dies under them. A php-cgi pool parent
//! killed with SIGKILL leaves its workers to the master, which retires them once a new
//! parent brings a full set; requests are answered throughout, and no process is left
//! running that the status does not list.

use std::collections::BTreeSet;

use nix::sys::signal::Signal;

use crate::common::{Nginx, PhpPool, Site, TIMEOUT, http, proc, start_with_control, wait_until};

/// The master's direct children (a static php pool: its php-cgi parent).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[test]
fn a_killed_php_cgi_parents_workers_are_replaced_and_none_is_left_untracked() {
    killed_parent("cgi", "php-cgi parent");
}

#[test]
fn a_killed_php_zygotes_workers_are_replaced_and_none_is_left_untracked() {
    killed_parent("embed", "php zygote");
}

/// SIGKILL to a static PHP pool's parent (`role`, on `runtime`): requests keep being
/// answered, its workers go and a new parent's replace them, all tracked.
fn killed_parent(runtime: &'static str, role: &str) {
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    let pool = PhpPool::new("www").max_children(3).runtime(runtime);
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let url = format!("http://127.0.0.1:{}/pid.php", nginx.port);
    let old: BTreeSet<i32> = wait_until(TIMEOUT, "3 workers", || {
        let workers = drover.workers();
        (workers.len() == 3).then(|| workers.into_iter().collect())
    });
    let parent = match children(drover.pid()).as_slice() {
        [parent] => *parent,
        other => panic!("expected one {role} under drover, saw {other:?}"),
    };

    proc::signal(parent, Signal::SIGKILL);
    drover.log.wait_for_line(
        &format!("pool www: {role} {parent} exited on SIGKILL"),
        TIMEOUT,
    );

    // Requests are answered while the old workers go and a new parent brings its own.
    for _ in 0..20 {
        let reply = http::get(&url);
        assert_eq!(reply.status, 200, "reply: {reply:?}\n{}", drover.log.text());
    }
    let new: BTreeSet<i32> = wait_until(TIMEOUT, "3 new workers, none of the old", || {
        let workers: BTreeSet<i32> = drover.workers().into_iter().collect();
        (workers.len() == 3 && workers.is_disjoint(&old)).then_some(workers)
    });
    ctl.wait_all_tracked(drover.pid(), &drover.log);
    for _ in 0..10 {
        let reply = http::get(&url);
        assert_eq!(reply.status, 200, "reply: {reply:?}");
        let pid: i32 = reply.body.trim().parse().expect("a pid");
        assert!(
            new.contains(&pid),
            "served by {pid}, not a new worker {new:?}"
        );
    }
    for pid in old {
        assert!(!proc::is_running(pid), "old worker {pid} still runs");
    }
}
