//! Background pools (`[program]`, docs/programs.md): a real PHP CLI queue consumer run as
//! `pm.max_children` copies without a socket, as `php artisan queue:work` runs under
//! supervisord. Each test waits on drover's log lines or its status, never on a sleep.
//!
//! - copies run with the pool's `[env]` and `chdir`, their output decorated;
//! - a copy that exits at once is restarted with the crash-loop backoff (1 s, 2 s, 4 s);
//! - `max_lifetime` and `max_memory` recycle a copy gracefully (its stop signal, exit 0);
//! - a reload renews the copies (new pids; the old ones exit on the signal);
//! - `drover ctl workers` scales in place (the running copies stay);
//! - `stop_signal` is what a copy gets, and one that ignores it is killed after
//!   `stop_timeout`.
//!
//! [`import`]: `drover import supervisord` on Laravel's documented queue worker and a Celery
//! worker, against golden files.

mod causes;
mod celery;
mod hurried;
mod import;
mod laravel;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::{
    Ctl, Drover, Log, PoolFile, Site, TIMEOUT, proc, root_user, start_with_control,
};

/// A queue consumer as `php artisan queue:work` is one: it takes a job, works on it, and
/// again; on TERM, QUIT or INT it finishes the job in hand and exits 0. `crash` exits 1 at
/// once (a broker that is down), `flaky` too while a file `broken` is in its folder, `leak`
/// grows by 1 MiB per job, `stubborn` ignores TERM.
const CONSUMER: &str = r#"<?php
$mode = $argv[1] ?? 'work';
$pid = getmypid();
$stop = false;
pcntl_async_signals(true);
foreach ([SIGTERM => 'TERM', SIGQUIT => 'QUIT', SIGINT => 'INT'] as $number => $name) {
    pcntl_signal($number, function () use (&$stop, $name, $pid) {
        echo "consumer $pid got $name\n";
        $stop = true;
    });
}
if ($mode === 'stubborn') {
    pcntl_signal(SIGTERM, SIG_IGN);
}
echo "consumer $pid started queue=", getenv('QUEUE'), " cwd=", getcwd(), "\n";
if ($mode === 'crash' || ($mode === 'flaky' && file_exists('broken'))) {
    echo "consumer $pid cannot reach the broker\n";
    exit(1);
}
$hog = [];
while (!$stop) {
    if ($mode === 'leak') {
        $hog[] = str_repeat(chr(65 + count($hog) % 26), 1 << 20);
    }
    usleep(20000);
}
echo "consumer $pid stopping\n";
exit(0);
"#;

/// A background pool running the consumer in `mode`, with `extra` lines in `[program]`
/// and `pm` lines in `[pm]`.
struct Consumer {
    name: &'static str,
    copies: u32,
    mode: &'static str,
    program: String,
    pm: String,
}

impl Consumer {
    fn new(copies: u32, mode: &'static str) -> Consumer {
        Consumer {
            name: "jobs",
            copies,
            mode,
            program: String::new(),
            pm: String::new(),
        }
    }

    fn program(mut self, lines: &str) -> Consumer {
        self.program += lines;
        self
    }

    fn pm(mut self, lines: &str) -> Consumer {
        self.pm += lines;
        self
    }
}

impl PoolFile for Consumer {
    fn name(&self) -> &str {
        self.name
    }

    fn toml(&self, site: &Site) -> String {
        let script = site.write("consumer.php", CONSUMER);
        let user = root_user();
        format!(
            "{user}chdir = \"{dir}\"\n\n[env]\nQUEUE = \"emails\"\n\n[pm]\nmode = \"static\"\n\
             max_children = {copies}\n{pm}\n[program]\ncommand = [\"php\", \"{script}\", \"{mode}\"]\n{program}",
            dir = site.path().display(),
            copies = self.copies,
            pm = self.pm,
            script = script.display(),
            mode = self.mode,
            program = self.program,
        )
    }
}

/// The pids of the consumers' `started` lines from line `from` on, waiting for `n`.
/// The entries of `dir` (none when it cannot be read).
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default()
}

fn started(log: &Log, from: usize, n: usize) -> Vec<i32> {
    log.wait_for_lines(
        from,
        "consumers started",
        |l| l.contains("started queue="),
        n,
        TIMEOUT,
    )
    .iter()
    .map(|line| pid_after(line, "consumer "))
    .collect()
}

/// The number right after `marker` in `line`.
fn pid_after(line: &str, marker: &str) -> i32 {
    let at = line
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in {line}"))
        + marker.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no pid after {marker:?} in {line}"))
}

/// The running consumers below drover (php processes, not zombies).
fn consumers(drover: &Drover) -> Vec<i32> {
    let mut pids: Vec<i32> = drover
        .descendants()
        .into_iter()
        .filter(|&pid| proc::stat(pid).is_some_and(|s| s.comm == "php" && s.state != 'Z'))
        .collect();
    pids.sort();
    pids
}

/// Waits until exactly `n` consumers run, and returns them.
fn wait_consumers(drover: &Drover, n: usize) -> Vec<i32> {
    proc::wait_until(TIMEOUT, &format!("{n} consumers"), || {
        let pids = consumers(drover);
        (pids.len() == n).then_some(pids)
    })
}

#[test]
fn copies_run_with_the_pools_env_and_chdir_and_their_output_decorated() {
    let site = Site::new();
    let pool = Consumer::new(3, "work");
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let pids = started(&drover.log, 0, 3);
    let line = drover
        .log
        .wait_for_line(&format!("consumer {} started", pids[0]), TIMEOUT);
    assert!(
        line.contains(&format!("queue=emails cwd={}", site.path().display())),
        "{line}"
    );
    // Decorated as worker output is: the pool and the pid before the line.
    assert!(
        line.contains("jobs") && line.contains(&pids[0].to_string()),
        "{line}"
    );
    let mut running = wait_consumers(&drover, 3);
    let mut listed = pids.clone();
    listed.sort();
    running.sort();
    assert_eq!(running, listed);
    let status = ctl.status_json("jobs", &drover.log.text());
    assert_eq!(status["total processes"], 3, "{status}");
    assert_eq!(status["runtime"], "program", "{status}");
    // No socket: nothing to probe, and `drover -t` shows none.
    let config = ctl.ok(&["config", "jobs"], &drover.log.text());
    assert!(
        config.contains("# listen = (a [program] pool has no socket)"),
        "{config}"
    );
}

#[test]
fn a_copy_that_exits_at_once_is_restarted_with_the_crash_loop_backoff() {
    let site = Site::new();
    let drover = Drover::start(&site, &[&Consumer::new(1, "crash")]);
    // The first start and three restarts: 1 s, 2 s, then 4 s apart.
    let lines = drover.log.wait_for_lines(
        0,
        "four starts",
        |l| l.contains("started queue="),
        4,
        Duration::from_secs(30),
    );
    let holds: Vec<String> = drover
        .log
        .lines()
        .into_iter()
        .filter(|l| l.contains("failed to start"))
        .collect();
    assert!(holds.len() >= 3, "{holds:#?}");
    for (hold, delay) in holds.iter().zip([
        "retrying in 1s (1 failure",
        "retrying in 2s (2 failures",
        "retrying in 4s (3 failures",
    ]) {
        assert!(
            hold.contains(delay) && hold.contains("exited with code 1"),
            "{hold}"
        );
    }
    // Each wait runs from the line that says the copy failed to the next start: the time
    // the copy itself took to run and exit (PHP's start-up, slow on a loaded machine) is
    // not part of the backoff.
    let gaps: Vec<f64> = holds
        .iter()
        .zip(&lines[1..])
        .map(|(hold, start)| log_time(start) - log_time(hold))
        .collect();
    eprintln!("crash loop: waits before each restart {gaps:.2?} s");
    for (gap, want) in gaps.iter().zip([1.0, 2.0, 4.0]) {
        assert!(*gap >= want - 0.05 && *gap < want + 0.5, "gaps {gaps:?}");
    }
}

/// Seconds since midnight of a drover log line's time (`2026-12-02T03:10:00.123456Z ...`).
fn log_time(line: &str) -> f64 {
    let at = line
        .find('T')
        .unwrap_or_else(|| panic!("no time in {line}"));
    let clock: String = line[at + 1..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ':' || *c == '.')
        .collect();
    let parts: Vec<f64> = clock.split(':').map(|p| p.parse().unwrap_or(0.0)).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

#[test]
fn max_lifetime_recycles_each_copy_gracefully_within_its_jitter() {
    let site = Site::new();
    let pool =
        Consumer::new(2, "work").program("max_lifetime = \"2s\"\nmax_lifetime_jitter = \"1s\"\n");
    let drover = Drover::start(&site, &[&pool]);
    let first = started(&drover.log, 0, 2);
    let t0 = Instant::now();
    for pid in &first {
        let retired = drover
            .log
            .wait_for_line(&format!("retiring worker {pid}: running for"), TIMEOUT);
        assert!(retired.contains("past its lifetime"), "{retired}");
        drover
            .log
            .wait_for_line(&format!("consumer {pid} got TERM"), TIMEOUT);
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let lived = t0.elapsed();
    assert!(lived < Duration::from_secs(5), "recycled after {lived:?}");
    // Replaced: two new copies, none of the first.
    let lines = drover.log.lines().len();
    let _ = lines;
    let now = wait_consumers(&drover, 2);
    assert!(now.iter().all(|p| !first.contains(p)), "{now:?} {first:?}");
    let recycles: Vec<String> = drover
        .log
        .lines()
        .into_iter()
        .filter(|l| l.contains("past its lifetime"))
        .collect();
    eprintln!("max_lifetime 2s + jitter 1s: {recycles:#?}");
}

#[test]
fn max_memory_recycles_a_copy_that_grows() {
    let site = Site::new();
    let pool = Consumer::new(1, "leak").pm("max_memory = \"48MiB\"\n");
    let drover = Drover::start(&site, &[&pool]);
    let first = started(&drover.log, 0, 1)[0];
    let retired = drover
        .log
        .wait_for_line(&format!("retiring worker {first}:"), TIMEOUT);
    assert!(retired.contains("above max_memory (48.0 MiB)"), "{retired}");
    drover
        .log
        .wait_for_line(&format!("consumer {first} got TERM"), TIMEOUT);
    let exited = drover
        .log
        .wait_for_line(&format!("worker {first} exited"), TIMEOUT);
    assert!(exited.contains("with code 0"), "{exited}");
    let next = started(&drover.log, 0, 2)[1];
    assert_ne!(next, first);
}

#[test]
fn a_reload_renews_the_copies_and_the_old_ones_exit_on_the_stop_signal() {
    let site = Site::new();
    let pool = Consumer::new(2, "work").program("stop_signal = \"QUIT\"\nstop_timeout = \"5s\"\n");
    let drover = Drover::start(&site, &[&pool]);
    let old = started(&drover.log, 0, 2);
    let from = drover.log.lines().len();
    drover.signal(Signal::SIGHUP);
    let new = started(&drover.log, from, 2);
    assert!(new.iter().all(|p| !old.contains(p)), "{new:?} {old:?}");
    for pid in &old {
        drover
            .log
            .wait_for_line(&format!("consumer {pid} got QUIT"), TIMEOUT);
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let mut now = wait_consumers(&drover, 2);
    let mut new = new;
    now.sort();
    new.sort();
    assert_eq!(now, new);
}

#[test]
fn a_copy_that_ignores_the_stop_signal_is_killed_after_stop_timeout() {
    let site = Site::new();
    let pool = Consumer::new(1, "stubborn").program("stop_timeout = \"1s\"\n");
    let mut drover = Drover::start(&site, &[&pool]);
    let pid = started(&drover.log, 0, 1)[0];
    let t0 = Instant::now();
    drover.signal(Signal::SIGTERM);
    let killed = drover
        .log
        .wait_for_line(&format!("killing worker {pid}"), TIMEOUT);
    let waited = t0.elapsed();
    assert!(
        killed.contains("after retiring, past stop_timeout (1s)"),
        "{killed}"
    );
    let exited = drover
        .log
        .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
    assert!(exited.contains("on SIGKILL"), "{exited}");
    assert!(drover.wait_exit(TIMEOUT).success());
    // After the 1 s stop_timeout, well before the 10 s process_control_timeout.
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    eprintln!("stop_timeout 1s: killed after {waited:?}");
}

#[test]
fn drover_ctl_workers_scales_the_copies_in_place() {
    let site = Site::new();
    let pool = Consumer::new(2, "work");
    let (drover, ctl): (Drover, Ctl) = start_with_control(&site, &[&pool]);
    let first = wait_consumers(&drover, 2);
    let out = ctl.ok(&["workers", "jobs", "+2"], &drover.log.text());
    assert!(out.contains("in place"), "{out}");
    let four = wait_consumers(&drover, 4);
    assert!(
        first.iter().all(|p| four.contains(p)),
        "{first:?} kept in {four:?}"
    );
    ctl.ok(&["workers", "jobs", "-3"], &drover.log.text());
    let one = wait_consumers(&drover, 1);
    // The copy that has run longest stays.
    assert!(first.contains(&one[0]), "{one:?} of {first:?}");
    // /proc shows the stopped copies gone before the master has reaped them; the status
    // counts a copy until it is reaped, so it comes to 1 a moment later.
    proc::wait_until(TIMEOUT, "the status to count one process", || {
        let status = ctl.status_json("jobs", &drover.log.text());
        (status["total processes"] == 1).then_some(())
    });
}
