//! Hurried operators and hostile surroundings on background pools:
//!
//! - two reloads 10 ms apart while copies run end with exactly the configured copies,
//!   all listed in the status, and no copy left behind (below drover or orphaned to init);
//! - `drover ctl workers` up and down while the pool waits out a crash-loop backoff: the
//!   count asked for runs once the program starts again;
//! - a program whose command does not exist is refused at load with the file, line and
//!   key, and a reload to such a file keeps the running copies;
//! - a command removed from under a running pool (a deploy that deleted it) is a failed
//!   start retried with the backoff, and the pool recovers once it is back.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{Consumer, consumers, started, wait_consumers};
use crate::common::{PoolFile, Site, TIMEOUT, check_config, proc, root_user, start_with_control};

/// The consumers on the machine running `site`'s script, wherever their parent is.
fn consumers_anywhere(site: &Site) -> Vec<i32> {
    let script = site.path().join("consumer.php");
    let script = script.to_string_lossy();
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid: &i32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(script.as_ref()))
                && proc::stat(pid).is_some_and(|s| s.state != 'Z')
        })
        .collect();
    pids.sort();
    pids
}

#[test]
fn two_reloads_10ms_apart_end_with_the_configured_copies_and_no_orphan() {
    let site = Site::new();
    let pool = Consumer::new(3, "work");
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let first = started(&drover.log, 0, 3);
    drover.signal(Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(10));
    drover.signal(Signal::SIGHUP);
    // Every first copy ends on its stop signal.
    for pid in &first {
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let settled = proc::wait_until(TIMEOUT, "three copies, all listed", || {
        let running = consumers(&drover);
        let mut listed = ctl.listed_workers(&drover.log.text());
        listed.sort();
        (running.len() == 3 && listed == running && consumers_anywhere(&site) == running)
            .then_some(running)
    });
    assert!(
        settled.iter().all(|p| !first.contains(p)),
        "{settled:?} {first:?}"
    );
    ctl.wait_all_tracked(drover.pid(), &drover.log);
    let status = ctl.status_json("jobs", &drover.log.text());
    assert_eq!(status["total processes"], 3, "{status:#}");
    // Still three a while later: the second reload left no extra generation starting. The
    // copies' own "started" lines can come after they are seen running.
    drover.log.wait_for_lines(
        0,
        "the renewed copies' started lines",
        |l| l.contains("started queue="),
        6,
        TIMEOUT,
    );
    let started_since = drover
        .log
        .lines()
        .iter()
        .filter(|l| l.contains("started queue="))
        .count();
    assert!(
        (6..=9).contains(&started_since),
        "3 first copies and one or two renewals: {started_since}"
    );
    assert_eq!(wait_consumers(&drover, 3), settled);
}

#[test]
fn scaling_during_a_crash_loop_backoff_runs_the_count_asked_for_once_it_recovers() {
    let site = Site::new();
    std::fs::write(site.path().join("broken"), "").unwrap();
    let pool = Consumer::new(1, "flaky");
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    drover
        .log
        .wait_for_line("retrying in 2s (2 failures", TIMEOUT);
    // Held for 2 s: scale up, then down, in it.
    let out = ctl.ok(&["workers", "jobs", "+2"], &drover.log.text());
    assert!(out.contains("in place"), "{out}");
    ctl.ok(&["workers", "jobs", "-1"], &drover.log.text());
    let status = ctl.status_json("jobs", &drover.log.text());
    assert_eq!(status["limits"]["max_children"], 2, "{status:#}");
    std::fs::remove_file(site.path().join("broken")).unwrap();
    let running = wait_consumers(&drover, 2);
    let listed = proc::wait_until(TIMEOUT, "two listed", || {
        let mut listed = ctl.listed_workers(&drover.log.text());
        listed.sort();
        (listed == running).then_some(listed)
    });
    assert_eq!(listed.len(), 2);
}

/// A pool file whose `[program] command` is `command`.
struct Missing {
    command: String,
}

impl PoolFile for Missing {
    fn name(&self) -> &str {
        "jobs"
    }

    fn toml(&self, _site: &Site) -> String {
        format!(
            "[pm]\nmode = \"static\"\nmax_children = 1\n\n[program]\ncommand = [{:?}, \"work\"]\n",
            self.command
        )
    }
}

#[test]
fn a_command_that_does_not_exist_is_refused_and_a_reload_to_it_keeps_the_copies() {
    let site = Site::new();
    site.write("drover.toml", "error_log = \"stderr\"\n");
    let missing = Missing {
        command: "drover-test-no-such-program".into(),
    };
    site.write("pools.d/jobs.toml", &missing.toml(&site));
    let out = check_config(&site);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drover -t accepted it:\n{stderr}");
    assert!(
        stderr.contains("jobs.toml:6")
            && stderr.contains("command")
            && stderr.contains("command not found")
            && stderr.contains("drover-test-no-such-program"),
        "the file, line, key and program:\n{stderr}"
    );

    // A running pool reloaded to that file keeps its copies.
    let pool = Consumer::new(2, "work");
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let before = wait_consumers(&drover, 2);
    let from = drover.log.len();
    site.write("pools.d/jobs.toml", &missing.toml(&site));
    drover.signal(Signal::SIGHUP);
    let refused = drover.log.wait_for(
        from,
        "the reload refused",
        |l| l.contains("command not found"),
        TIMEOUT,
    );
    assert!(refused.contains("jobs.toml"), "{refused}");
    let status = ctl.status_json("jobs", &drover.log.text());
    assert_eq!(status["total processes"], 2, "{status:#}");
    assert_eq!(consumers(&drover), before);
}

/// The consumer run through a script of the site (`bin/consume`), which the test removes.
struct Wrapped;

impl PoolFile for Wrapped {
    fn name(&self) -> &str {
        "jobs"
    }

    fn toml(&self, site: &Site) -> String {
        let script = site.write("consumer.php", super::CONSUMER);
        let wrapper = site.write(
            "bin/consume",
            &format!("#!/bin/sh\nexec php {} work\n", script.display()),
        );
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let user = root_user();
        format!(
            "{user}chdir = \"{}\"\n\n[pm]\nmode = \"static\"\nmax_children = 1\n\n[program]\n\
             command = [\"{}\"]\n",
            site.path().display(),
            wrapper.display()
        )
    }
}

#[test]
fn a_command_removed_under_a_running_pool_is_retried_with_the_backoff() {
    let site = Site::new();
    let (drover, _ctl) = start_with_control(&site, &[&Wrapped]);
    let first = started(&drover.log, 0, 1)[0];
    let wrapper = site.path().join("bin/consume");
    let kept = site.path().join("consume.kept");
    std::fs::rename(&wrapper, &kept).unwrap();
    let from = drover.log.len();
    proc::signal(first, Signal::SIGKILL);
    let held = drover.log.wait_for_lines(
        from,
        "failed starts",
        |l| l.contains("failed to start"),
        2,
        TIMEOUT,
    );
    eprintln!("command removed: {held:#?}");
    assert!(held[1].contains("retrying in"), "{held:?}");
    let text = drover.log.text();
    assert!(
        text.contains(&wrapper.display().to_string()),
        "the log names the missing command:\n{text}"
    );
    std::fs::rename(&kept, &wrapper).unwrap();
    let next = started(&drover.log, from, 1)[0];
    assert_ne!(next, first);
}

/// A `[program]` pool whose command runs `script` with sh.
struct Shell {
    script: &'static str,
}

impl PoolFile for Shell {
    fn name(&self) -> &str {
        "daemon"
    }

    fn toml(&self, site: &Site) -> String {
        format!(
            "{}chdir = \"{}\"\n\n[pm]\nmode = \"static\"\nmax_children = 1\n\n[program]\n\
             command = [\"/bin/sh\", \"-c\", {:?}]\n",
            root_user(),
            site.path().display(),
            self.script
        )
    }
}

/// The processes running `sleep <seconds>` whose parent is `parent`.
fn sleeps_below(parent: i32, seconds: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid: &i32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c == format!("sleep\0{seconds}\0").as_bytes())
                && proc::stat(pid).is_some_and(|s| s.state != 'Z' && s.ppid == parent)
        })
        .collect()
}

/// Issue 34: a `[program]` that daemonizes left one orphan per restart, forever, and said
/// so at no level an operator sees. What an exited copy leaves is stopped, whether it
/// stayed in the copy's process group (`cmd &`) or left it (`setsid cmd &`), each with a
/// warning that names the pool; after several restarts nothing of theirs runs on.
#[test]
fn what_a_daemonizing_program_leaves_behind_is_stopped_and_logged() {
    let site = Site::new();
    let pool = Shell {
        script: "sleep 301 & setsid sleep 302 & sleep 0.2; exit 0",
    };
    let drover = crate::common::Drover::start(&site, &[&pool]);
    let master = drover.pid();
    // Three copies have come and gone (the crash-loop backoff spaces them).
    drover.log.wait_for_lines(
        0,
        "three copies that left a process of another session",
        |l| l.contains("pool daemon: copy") && l.contains("the program daemonized"),
        3,
        TIMEOUT,
    );
    let text = drover.log.text();
    assert!(
        text.contains("left processes in its process group"),
        "the group's process was not stopped: {text}"
    );
    // Nothing the copies left runs on below drover (the last copy's may still be stopping).
    let left = proc::wait_until(TIMEOUT, "the leftovers of every exited copy gone", || {
        let left: Vec<i32> = ["301", "302"]
            .iter()
            .flat_map(|s| sleeps_below(master, s))
            .collect();
        (left.len() <= 2).then_some(left)
    });
    assert!(left.len() <= 2, "{left:?} left running: {text}");
}
