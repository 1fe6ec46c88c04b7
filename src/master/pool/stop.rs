//! Stopping a pool: refusing connections, the graceful stop, the parent sent away first,
//! and the kills at the end. [`Linger`] decides, purely, when a parent asked to stop that
//! outlives its workers is killed.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::PoolRun;
use crate::runtime::kind;

/// Draining or stopping: since when a parent asked to stop with TERM has had no worker
/// left ([`PoolRun::kill_lingering_parent`]).
#[derive(Debug, Default)]
pub struct Linger {
    alone_since: Option<Instant>,
}

impl Linger {
    /// Whether the parent, `alone` (no worker left) or not at `now`, has been alone for
    /// `timeout`: then it is killed.
    pub fn due(&mut self, alone: bool, now: Instant, timeout: Duration) -> bool {
        if !alone {
            self.alone_since = None;
            return false;
        }
        let since = *self.alone_since.get_or_insert(now);
        now.duration_since(since) >= timeout
    }
}

impl PoolRun {
    /// The pool is stopped and nothing else serves its socket: shuts the listener down, so
    /// that connections are refused at once (nginx answers 502) until a reload binds a new
    /// one.
    pub fn refuse(&mut self) {
        if self.life.lifecycle.refusing() {
            return;
        }
        self.life.lifecycle = self.life.lifecycle.refused();
        self.watch.stop();
        match self.listener.shut_down() {
            Ok(()) if self.listener.inherited => tracing::warn!(
                "pool {}: stopped; connections wait on systemd's socket {} until a reload",
                self.name(),
                self.listener.addr
            ),
            Ok(()) => tracing::warn!(
                "pool {}: refusing connections on {} until a reload",
                self.name(),
                self.listener.addr
            ),
            Err(err) => {
                tracing::error!("pool {}: cannot shut down the listener: {err}", self.name())
            }
        }
    }

    /// Graceful stop: no new connection reaches the pool, every worker finishes what it
    /// has. A php-cgi parent is killed first (it serves nothing, and would replace the
    /// workers that exit); then the listener is shut down for reading: connections already
    /// queued on a unix socket are still accepted and served, new ones are refused, and a
    /// worker whose accept() then fails exits on its own, as php-fpm's children do when
    /// they close the listener on SIGQUIT. No signal interrupts a running request (a
    /// SIGTERM would cut php-cgi's sleep() and I/O short).
    pub fn stop_accepting(&mut self) {
        self.life.lifecycle = self.life.lifecycle.stop();
        self.watch.stop();
        self.kill_parent();
        if let Err(err) = self.listener.shut_down() {
            tracing::error!("pool {}: cannot shut down the listener: {err}", self.name());
        }
        // A program's copies have no listener to see closed: they are asked to stop.
        if self.launch.kind == kind::Kind::Program {
            let now = Instant::now();
            for (_, worker) in self.table.workers_mut() {
                worker.retiring.get_or_insert(now);
            }
            self.signal_retiring();
        }
    }

    /// A tick while drover stops: a program's copies that outlive their `stop_timeout`
    /// are killed (other pools' workers finish their requests within the stop's deadline).
    pub fn stop_tick(&mut self, now: Instant) {
        if self.launch.kind == kind::Kind::Program {
            self.drain_tick(now);
        }
    }

    /// A php-cgi parent or zygote goes at once, before its workers are retired: it serves
    /// nothing itself and would replace the workers that exit. SIGKILL makes its end quick;
    /// the master loop reaps it (never waiting), and then adopts every worker it had forked,
    /// seen or not ([`PoolRun::on_reaped`]).
    ///
    /// A Python zygote with hooks gets TERM instead: it asks its workers to finish, reaps
    /// each (`child_exit`), then runs `on_exit` and exits; the workers drain as they would
    /// without it. [`PoolRun::drain_tick`] kills it if it is still there
    /// `process_control_timeout` after its last worker (an `on_exit` that hangs).
    pub(super) fn kill_parent(&mut self) {
        if !self.launch.kind.has_parent() {
            return;
        }
        let signal = self.launch.parent_stop;
        for pid in self.table.retire_processes() {
            let _ = kill(pid, signal);
        }
    }

    /// A parent asked to stop with TERM ([`PoolRun::kill_parent`]) that outlives its
    /// workers by `process_control_timeout` is killed.
    pub(super) fn kill_lingering_parent(&mut self, now: Instant) {
        let alone = !self.table.has_workers();
        if !self
            .life
            .linger
            .due(alone, now, self.sizing.limits.retire_timeout)
        {
            return;
        }
        for (pid, process) in self.table.processes() {
            if process.retiring {
                tracing::warn!(
                    "pool {}: zygote {pid} still there {:?} after its last worker; killing it",
                    self.config.name,
                    self.sizing.limits.retire_timeout
                );
                let _ = kill(pid, Signal::SIGKILL);
            }
        }
    }

    /// Asks every process to finish (SIGTERM: php-cgi passes it to its workers). Their
    /// exits are expected, and replaced.
    pub fn retire_all(&mut self) {
        for pid in self.table.retire_processes() {
            let _ = kill(pid, Signal::SIGTERM);
        }
        for (_, worker) in self.table.workers() {
            let _ = worker.signal(Signal::SIGTERM);
        }
    }

    /// SIGKILL to every process group and worker of the pool.
    pub fn kill_all(&mut self) {
        for pid in self.table.retire_processes() {
            let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        }
        for (_, worker) in self.table.workers() {
            let _ = worker.signal(Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_is_killed_once_alone_for_the_timeout() {
        let mut linger = Linger::default();
        let now = Instant::now();
        let timeout = Duration::from_secs(3);
        assert!(!linger.due(false, now, timeout));
        assert!(!linger.due(true, now, timeout));
        assert!(!linger.due(true, now + Duration::from_secs(2), timeout));
        assert!(linger.due(true, now + timeout, timeout));
    }

    #[test]
    fn a_worker_seen_again_restarts_the_wait() {
        let mut linger = Linger::default();
        let now = Instant::now();
        let timeout = Duration::from_secs(3);
        assert!(!linger.due(true, now, timeout));
        assert!(!linger.due(false, now + Duration::from_secs(2), timeout));
        assert!(!linger.due(true, now + Duration::from_secs(4), timeout));
        assert!(linger.due(true, now + Duration::from_secs(7), timeout));
    }
}
