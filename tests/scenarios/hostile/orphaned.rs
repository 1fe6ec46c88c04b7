//! Hostile: the master is killed with SIGKILL (the OOM killer, an operator's `kill -9`), so
//! it stops nothing itself. Every process of its pools must still go, within a second, and
//! not serve on an orphaned socket or run a queue consumer no one supervises: each process
//! the master execs asks for a death signal (`PR_SET_PDEATHSIG`) after it dropped to the
//! pool's user, since the kernel clears one asked for before (issue 34). Pools of every
//! process kind, each run as a user other than root: a php-cgi parent and its workers, a
//! drover-php zygote and its workers, a drover-python zygote and its workers, and a
//! `[program]`'s copies, which get their `stop_signal`.
//!
//! Without systemd: the tests' PID 1 here is not systemd, so the same case under a
//! transient `systemd-run` unit is not run (systemd would also kill the unit's cgroup).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::python::install_apps;
use crate::common::{
    AsUser, Drover, PhpPool, PoolFile, PythonPool, Site, TIMEOUT, proc, python_runtime, root_user,
    wait_until,
};

/// The pools' user: not root, so that each process changed its credentials after the fork.
const POOL_USER: &str = "www-data";

/// How long the processes of a killed master's pools may take to go.
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// A copy that ignores SIGTERM and stops on SIGINT, its `stop_signal`: it goes only if the
/// death signal is the program's own.
const PROGRAM: &str = "[pm]\nmode = \"static\"\nmax_children = 2\n\n[program]\n\
    command = [\"/usr/bin/python3\", \"-c\", \"import signal, time; \
    signal.signal(signal.SIGTERM, signal.SIG_IGN); print('copy up', flush=True); \
    time.sleep(600)\"]\nstop_signal = \"INT\"\n";

/// Processes below drover by the end of the start: three parents with two workers each,
/// and two program copies.
const PROCESSES: usize = 3 * 3 + 2;

#[test]
fn every_process_of_a_sigkilled_masters_pools_is_gone_within_a_second() {
    if !proc::running_as_root() {
        println!("skipped: the pools must run as {POOL_USER}, which needs root");
        return;
    }
    let site = Site::new();
    site.script("index.php", "<?php echo 'ok';");
    install_apps(&site);
    let bin = site.path().join("bin");
    std::fs::create_dir_all(&bin).expect("create <site>/bin");
    std::fs::copy(python_runtime(), bin.join("drover-python")).expect("copy drover-python");
    let cgi = as_user(PhpPool::new("cgi").runtime("cgi"));
    let embed = as_user(PhpPool::new("embed").runtime("embed"));
    let python = as_user(PythonPool::wsgi("py").max_children(2));
    let program = as_user(Program);
    let mut drover = Drover::start_reachable(&site, &[&cgi, &embed, &python, &program]);
    let below = wait_until(TIMEOUT, "every pool's processes", || {
        let below = drover.descendants();
        (below.len() == PROCESSES).then_some(below)
    });
    for _ in 0..2 {
        drover.log.wait_for_line("copy up", TIMEOUT);
    }
    let _cleanup = Survivors(below.clone());

    drover.signal(Signal::SIGKILL);
    drover.wait_exit(TIMEOUT);
    let killed = Instant::now();
    let running = || -> Vec<i32> {
        below
            .iter()
            .copied()
            .filter(|&pid| proc::is_running(pid))
            .collect()
    };
    let gone = proc::poll(GONE_WITHIN, || running().is_empty());
    let left: Vec<String> = running()
        .into_iter()
        .map(|pid| {
            let comm = proc::stat(pid).map(|s| s.comm).unwrap_or_default();
            format!("{pid} ({comm})")
        })
        .collect();
    eprintln!(
        "{} processes below the master; all gone {:.0} ms after its SIGKILL: {gone}",
        below.len(),
        killed.elapsed().as_secs_f64() * 1000.0
    );
    assert!(
        gone,
        "{} s after the master's SIGKILL these still run: {}\n{}",
        killed.elapsed().as_secs_f64(),
        left.join(", "),
        drover.log.text()
    );
}

/// `pool` run as [`POOL_USER`].
fn as_user<P: PoolFile>(pool: P) -> AsUser<P> {
    AsUser {
        pool,
        user: POOL_USER,
        group: POOL_USER,
    }
}

/// The background pool `jobs`, [`PROGRAM`].
struct Program;

impl PoolFile for Program {
    fn name(&self) -> &str {
        "jobs"
    }

    fn toml(&self, _: &Site) -> String {
        format!("{}{PROGRAM}", root_user())
    }
}

/// Whatever of the pools' processes is left when the test ends, killed.
struct Survivors(Vec<i32>);

impl Drop for Survivors {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if proc::is_running(pid) {
                proc::signal(pid, Signal::SIGKILL);
            }
        }
    }
}
