//! Stopping a pool: refusing connections ([`crate::pm::refuse`] decides when), the graceful
//! stop ([`crate::pm::stop`] decides its steps), the parent sent away first, and the kills
//! at the end ([`crate::pm::Linger`] decides when a parent asked to stop that outlives its
//! workers is killed).

use std::time::Instant;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{Lifecycle, PoolRun};
use crate::pm;
use crate::runtime::kind;

impl PoolRun {
    /// A failed generation refuses connections when nothing else serves its socket
    /// (`alone`), rather than let them wait for a worker that never comes: [`pm::refuse`]
    /// decides, once.
    pub fn refuse(&mut self, alone: bool) {
        let lifecycle = self.life.lifecycle();
        let actions = pm::refuse(pm::Standing {
            failed: lifecycle.failed(),
            refusing: lifecycle.refusing(),
            draining: lifecycle.draining(),
            alone,
        });
        self.execute(actions, Instant::now(), None);
    }

    /// [`pm::Action::Refuse`]: shuts the listener down, so that connections are refused at
    /// once (nginx answers 502) until a reload binds a new one.
    pub(super) fn refused(&mut self) {
        self.life.advance(Lifecycle::refused);
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
        self.execute_stop(Instant::now());
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

    /// [`crate::pm::Action::KillLingeringParents`]: the parents asked to stop with TERM
    /// ([`PoolRun::kill_parent`]) that outlived their workers by `process_control_timeout`
    /// are killed.
    pub(super) fn kill_lingering_parents(&self) {
        let timeout = self.sizing.limits().retire_timeout;
        for (pid, process) in self.table.processes() {
            if process.retiring {
                tracing::warn!(
                    "pool {}: zygote {pid} still there {timeout:?} after its last worker; killing it",
                    self.config.name,
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
