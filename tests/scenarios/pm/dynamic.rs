//! A dynamic PHP pool under load follows php-fpm's algorithm: while no worker is idle it
//! spawns (here one a second: the batch is capped by min_spare_servers − idle), stops at
//! max_children and says so once, and once the load is gone retires one spare a second
//! down to max_spare_servers. The master spawns each of its workers, and looks up the
//! pool's user and groups once for the generation, never at a spawn. A dynamic Python pool's
//! zygote, running late, does not replace the spare the master retired.

use std::fs;
use std::thread;
use std::time::Duration;

use super::{Pool, Stack, acted_on, get, lines_with, pid_file, read_pid, served_by, started_since};
use crate::common::python::{started_pid, wait_started};
use crate::common::{Site, Strace, TIMEOUT, proc, wait_until};

/// Holds its worker until the test creates `<site>/release` (bounded: 30 s, so that a
/// failed test leaves nothing running), first recording its pid in `<site>/held-N`.
///
/// Not a fixed `usleep(4000000)`: the pool grows one worker a second, so the sixth
/// worker would start about when the first requests end, and whether a tick then sees six
/// busy workers (and logs max_children) would be a race. Holding the requests until the test
/// has seen that makes the episode certain.
const HOLD_PHP: &str = r#"<?php
$site = dirname(__DIR__);
$n = (int) $_GET['n'];
file_put_contents("$site/held-$n.tmp", getmypid());
rename("$site/held-$n.tmp", "$site/held-$n");
$deadline = microtime(true) + 30;
while (microtime(true) < $deadline) {
    clearstatcache();
    if (file_exists("$site/release")) break;
    usleep(50000);
}
echo getmypid();
"#;

const MAX_CHILDREN_LINE: &str = "pool www: reached max_children (6); consider raising it";

/// Longer than two maintenance ticks (1 s each): time for a repeated line to show.
const TWO_TICKS: Duration = Duration::from_millis(2500);

#[test]
fn a_dynamic_pool_grows_to_max_children_under_load_and_retires_its_spares_after() {
    let site = Site::new();
    site.script("hold.php", HOLD_PHP);
    let pm = "mode = \"dynamic\"\nmax_children = 6\nstart_servers = 2\n\
              min_spare_servers = 1\nmax_spare_servers = 3\n";
    let stack = Stack::start(site, Pool::php("www", "", pm));
    let log = &stack.drover.log;
    let line = log.wait_for_line("ready:", TIMEOUT);
    assert!(line.ends_with("ready: 1 pools, 2 workers"), "{line:?}");
    wait_until(TIMEOUT, "2 php-cgi workers", || {
        (stack.drover.workers().len() == 2).then_some(())
    });

    // Six requests at once: two workers take two, four wait in the listen queue.
    let clients: Vec<_> = (1..=6)
        .map(|n| {
            let url = stack.url(&format!("/hold.php?n={n}"));
            thread::spawn(move || crate::common::http::try_get(&url))
        })
        .collect();

    let mut most = 0;
    let held: Vec<i32> = wait_until(TIMEOUT, "6 requests held by 6 workers", || {
        most = most.max(stack.drover.workers().len());
        let pids: Option<Vec<i32>> = (1..=6)
            .map(|n| read_pid(&pid_file(&stack.site, "held", n)))
            .collect();
        pids
    });
    let mut distinct = held.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 6, "6 requests held by {held:?}");

    // The next maintenance tick sees 6 busy workers, no idle one, and no room.
    log.wait_for_line(MAX_CHILDREN_LINE, TIMEOUT);
    // Once per episode: not again while the load lasts.
    let repeated = proc::poll(TWO_TICKS, || {
        most = most.max(stack.drover.workers().len());
        lines_with(log, 0, "reached max_children").len() > 1
    });
    assert!(
        !repeated,
        "the max_children line repeated while the pool stayed full; the log:\n{}",
        log.text()
    );
    let started = started_since(log, 0, "www");
    assert_eq!(
        started.len(),
        6,
        "started workers: {started:?}; the log:\n{}",
        log.text()
    );
    assert!(
        held.iter().all(|pid| started.contains(pid)),
        "held by {held:?}, started {started:?}"
    );
    assert_eq!(most, 6, "at most {most} php-cgi workers seen in /proc");

    let released = log.len();
    fs::write(stack.site.path().join("release"), "").expect("create the release file");
    for client in clients {
        let reply = client.join().expect("client thread");
        let reply = reply.unwrap_or_else(|e| panic!("{e}; the log:\n{}", log.text()));
        assert_eq!(reply.status, 200, "{reply:?}; the log:\n{}", log.text());
    }

    // Six idle workers, max_spare_servers 3: one retired per tick, 6 → 3.
    let retired = log.wait_for_lines(
        released,
        "3 retiring lines",
        |l| acted_on(l, "www", "retiring").is_some(),
        3,
        TIMEOUT,
    );
    for (line, idle) in retired.iter().zip([6, 5, 4]) {
        let reason = format!("{idle} idle workers, above max_spare_servers (3)");
        assert!(line.ends_with(&reason), "{line:?}, expected {reason:?}");
    }
    let left = wait_until(TIMEOUT, "3 workers left", || {
        let workers = stack.drover.workers();
        (workers.len() <= 3).then_some(workers)
    });
    for line in &retired {
        let (pid, _) = acted_on(line, "www", "retiring").expect("a retiring line");
        assert!(!left.contains(&pid), "retired worker {pid} is still there");
    }
    // At max_spare_servers the pool stays.
    let shrunk_further = proc::poll(TWO_TICKS, || {
        lines_with(log, released, "retiring worker").len() > 3 || stack.drover.workers().len() < 3
    });
    assert!(
        !shrunk_further,
        "the pool shrank below max_spare_servers (3): {:?}; the log:\n{}",
        stack.drover.workers(),
        log.text()
    );
    assert_eq!(
        lines_with(log, 0, "reached max_children").len(),
        1,
        "the log:\n{}",
        log.text()
    );
    // The pool serves on (the release file still exists: the script answers at once).
    let reply = get(&stack, "/hold.php?n=7");
    assert_eq!(reply.status, 200, "{reply:?}");
}

/// What the name service reads or asks when drover looks up a user or a group: the files,
/// or nscd's, sssd's and systemd's sockets.
const NSS: [&str; 5] = ["/etc/passwd", "/etc/group", "nscd", "sss", "userdb"];

#[test]
fn a_dynamic_pool_spawns_its_workers_without_looking_up_their_user_again() {
    if !proc::running_as_root() {
        println!("not root: the pool has no user to look up, so there is nothing to see");
        return;
    }
    let site = Site::new();
    site.script("pid.php", "<?php echo getmypid();");
    // Every worker exits after one request, and the master spawns its replacement.
    let pm = "mode = \"dynamic\"\nmax_children = 2\nstart_servers = 1\n\
              min_spare_servers = 1\nmax_spare_servers = 2\nmax_requests = 1\n";
    let stack = Stack::start(site, Pool::php("www", "", pm));
    let log = &stack.drover.log;
    log.wait_for_line("ready:", TIMEOUT);

    let strace = Strace::attach(stack.drover.pid(), "open,openat,connect");
    let from = log.len();
    for _ in 0..5 {
        served_by(&stack, "/pid.php");
    }
    // A worker may serve its one request and exit before the master checks the zygote's
    // report of it: the master logs that it was gone instead of "worker PID started". It
    // was spawned all the same, so it counts.
    let spawned = log.wait_for_lines(
        from,
        "pool www: worker PID started, or gone before the master could check it",
        |l| {
            started_pid(l, "www", "worker").is_some()
                || (l.contains("pool www: zygote ")
                    && l.contains("reported a worker started, pid ")
                    && l.contains(": gone before the master could check it"))
        },
        5,
        TIMEOUT,
    );
    let calls = strace.finish();
    let lookups: Vec<&String> = calls
        .iter()
        .filter(|call| NSS.iter().any(|n| call.contains(n)))
        .collect();
    println!(
        "{} workers spawned, {} system calls traced, {} of them looking up users",
        spawned.len(),
        calls.len(),
        lookups.len()
    );
    assert!(
        lookups.is_empty(),
        "spawning {spawned:?}, the master looked up users:\n{lookups:#?}"
    );
}

/// A zygote that runs late must not replace a spare the master retired. The master lowers
/// the zygote's target before it sends the spare SIGTERM; a zygote that was not scheduled
/// in between finds the spare's SIGCHLD and the new target pending together, and SIGCHLD
/// is delivered first. It used to reap and fork a replacement at once (the old target),
/// which the master then had to retire in turn. Here the zygote is held with SIGSTOP while
/// the master retires a spare, so that both signals are certainly pending when it goes on.
#[test]
fn a_late_python_zygote_does_not_replace_the_spare_the_master_retired() {
    let pm = "mode = \"dynamic\"\nmax_children = 4\nstart_servers = 1\nmin_spare_servers = 1\n\
              max_spare_servers = 1\n";
    let stack = super::python_stack(Site::new(), Pool::python("py", "", pm));
    let log = &stack.drover.log;
    let zygote = wait_started(log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    wait_started(log, 0, "py", "worker", 1, TIMEOUT);

    // Three requests held for a while: the pool grows (no idle worker) to 4 workers.
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let url = stack.url("/sleep?seconds=5");
            thread::spawn(move || crate::common::http::try_get(&url))
        })
        .collect();
    wait_started(log, 0, "py", "worker", 4, TIMEOUT);

    proc::signal(zygote, nix::sys::signal::Signal::SIGSTOP);
    let stopped_at = log.len();
    for client in clients {
        let reply = client.join().expect("client thread");
        let reply = reply.unwrap_or_else(|e| panic!("{e}; the log:\n{}", log.text()));
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    // Four idle workers, max_spare_servers 1: the master retires one; it exits, unreaped.
    let line = log.wait_for(
        stopped_at,
        "a retiring line",
        |l| acted_on(l, "py", "retiring").is_some(),
        TIMEOUT,
    );
    let (retired, _) = acted_on(&line, "py", "retiring").expect("matched");
    wait_until(TIMEOUT, "the retired spare to exit", || {
        proc::stat(retired)
            .is_none_or(|s| s.state == 'Z')
            .then_some(())
    });
    let resumed_at = log.len();
    proc::signal(zygote, nix::sys::signal::Signal::SIGCONT);

    // The zygote reaps the spare and reports it; by then it has forked whatever it forks.
    log.wait_for(
        resumed_at,
        "the spare's exit",
        |l| l.contains(&format!("pool py: worker {retired} exited")),
        TIMEOUT,
    );
    let replaced = started_since(log, resumed_at, "py");
    assert!(
        replaced.is_empty(),
        "the zygote replaced the spare the master retired ({retired}) with {replaced:?}; the log:\n{}",
        log.text()
    );
}

/// A zygote's start line counts what it starts: `start_servers` for a dynamic pool (here 2
/// of max_children 4, where it said "4 workers"), none for an ondemand pool.
#[test]
fn a_zygotes_start_line_counts_the_workers_its_mode_starts() {
    let site = Site::new();
    let dynamic = "mode = \"dynamic\"\nmax_children = 4\nstart_servers = 2\n\
                   min_spare_servers = 1\nmax_spare_servers = 3\n";
    let ondemand = "mode = \"ondemand\"\nmax_children = 4\n";
    let pools = [
        Pool::php("dyn", "", dynamic).php_runtime("embed"),
        Pool::php("ond", "", ondemand).php_runtime("embed"),
    ];
    let drover = crate::common::Drover::start(&site, &[&pools[0], &pools[1]]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let started = |pool: &str| {
        let needle = format!("pool {pool}: php zygote ");
        let lines = lines_with(&drover.log, 0, &needle);
        assert_eq!(lines.len(), 1, "one start line of {pool}: {lines:?}");
        lines[0].clone()
    };
    let line = started("dyn");
    assert!(line.ends_with(" started (2 workers)"), "{line}");
    let line = started("ond");
    assert!(
        line.ends_with(" started (no workers until a connection waits)"),
        "{line}"
    );
}
