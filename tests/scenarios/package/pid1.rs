//! drover as PID 1 (`unshare --pid --fork --mount-proc`, as in a container) and as a child
//! subreaper: an app's orphan is reaped (no zombie stays), never taken for a worker (a
//! reload, which adopts the old zygote's process group, leaves it alone), and TERM stops
//! drover cleanly, the orphans left getting SIGTERM once the pools are empty.

use std::process::{Child, Command};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::proc::{self, running_as_root};
use crate::common::{Location, Log, Nginx, PoolFile, PythonPool, Site, bin, http, wait_until};

const TIMEOUT: Duration = Duration::from_secs(20);

/// drover, directly or as the PID 1 of a new PID namespace; `pid` is its pid as this test
/// sees it.
struct Run {
    child: Child,
    pid: i32,
    log: Log,
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            proc::kill_tree(self.child.id() as i32);
            let _ = self.child.wait();
        }
    }
}

fn start(site: &Site, pid1: bool) -> Run {
    crate::common::python_runtime();
    let conf = site.path().join("drover.toml");
    let mut command = if pid1 {
        let mut command = Command::new("unshare");
        command.args(["--pid", "--fork", "--mount-proc"]).arg(bin());
        command
    } else {
        Command::new(bin())
    };
    let (child, log) = Log::spawn(command.arg("-c").arg(&conf));
    let outer = child.id() as i32;
    let pid = if pid1 {
        // unshare forks drover, which is PID 1 inside.
        wait_until(TIMEOUT, "drover below unshare", || {
            proc::descendants(outer)
                .into_iter()
                .find(|&pid| proc::stat(pid).is_some_and(|s| s.ppid == outer))
        })
    } else {
        outer
    };
    log.wait_for_line("ready:", TIMEOUT);
    Run { child, pid, log }
}

/// The `sleep SECONDS` processes, by their pid as this test sees them.
fn sleeps(seconds: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline == format!("sleep\0{seconds}\0").as_bytes() {
            found.push(pid);
        }
    }
    found
}

/// `pid`'s pid in its own (innermost) PID namespace, from /proc/PID/status's NSpid.
fn ns_pid(pid: i32) -> i32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .and_then(|pids| pids.split_whitespace().last()?.parse().ok())
        .unwrap_or(pid)
}

fn orphans_are_reaped_and_never_taken_for_workers(pid1: bool) {
    if !running_as_root() {
        eprintln!("skipped: needs root (unshare, pools as root)");
        return;
    }
    let site = Site::new();
    site.write("apps/orphan_app.py", include_str!("orphan_app.py"));
    let pool = PythonPool::new("app", "orphan_app:application").max_children(1);
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"debug\"\nprocess_control_timeout = \"30s\"\n",
    );
    site.write("pools.d/app.toml", &pool.toml(&site));
    let mut run = start(&site, pid1);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("app"))]);

    // A short-lived orphan: drover reaps it, and no zombie stays below drover.
    let short = if pid1 { "0.31" } else { "0.32" };
    assert_eq!(
        http::get(&nginx.url(&format!("/spawn?{short}"))).status,
        200
    );
    run.log.wait_for(
        0,
        "an orphan reaped",
        |line| line.contains("reaped orphan"),
        TIMEOUT,
    );
    let zombies: Vec<i32> = proc::descendants(run.pid)
        .into_iter()
        .filter(|&pid| proc::stat(pid).is_some_and(|s| s.state == 'Z'))
        .collect();
    assert!(
        zombies.is_empty(),
        "zombies below drover: {zombies:?}\n{}",
        run.log.text()
    );

    // A long-lived orphan in the zygote's process group, seen by the master as one.
    let long = if pid1 { "3600.31" } else { "3600.32" };
    assert_eq!(http::get(&nginx.url(&format!("/spawn?{long}"))).status, 200);
    let orphan = wait_until(TIMEOUT, "the long orphan", || sleeps(long).first().copied());
    // Its pid as drover names it (inside the namespace, when drover is PID 1).
    let orphan_ns = ns_pid(orphan);
    let seen = |line: &str| line.contains(&format!("process {orphan_ns} is an orphan"));
    run.log.wait_for(0, "the orphan seen", seen, TIMEOUT);
    assert!(proc::descendants(run.pid).contains(&orphan));

    // A reload kills the old zygote and adopts what is left of its group: not the orphan.
    proc::signal(run.pid, Signal::SIGHUP);
    run.log.wait_for_line("reload done", TIMEOUT);
    assert!(
        proc::is_running(orphan),
        "the orphan was stopped by the reload\n{}",
        run.log.text()
    );
    assert!(
        !run.log.text().contains("adopted"),
        "an orphan was taken for a worker:\n{}",
        run.log.text()
    );
    assert_eq!(http::get(&nginx.url("/spawn?0.2")).status, 200);

    // TERM: the pool stops, then the orphan gets SIGTERM, and drover exits 0 long before
    // process_control_timeout.
    proc::signal(run.pid, Signal::SIGTERM);
    let status = wait_until(TIMEOUT, "drover to exit", || run.child.try_wait().unwrap());
    let log = run.log.text();
    assert!(status.success(), "{status}\n{log}");
    assert!(log.contains("SIGTERM to orphaned process"), "{log}");
    assert!(!log.contains("timeout reached"), "{log}");
    assert!(sleeps(long).is_empty(), "the orphan outlived drover\n{log}");
}

#[test]
fn as_pid_1_orphans_are_reaped_never_workers_and_term_stops() {
    orphans_are_reaped_and_never_taken_for_workers(true);
}

#[test]
fn as_subreaper_orphans_are_reaped_never_workers_and_term_stops() {
    orphans_are_reaped_and_never_taken_for_workers(false);
}
