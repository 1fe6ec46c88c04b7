//! A zygote's reports (a worker started, exited, the zygote holding its forks back, the
//! runtime ready), believed only as far as the master can check them.

use std::time::Instant;

use nix::unistd::Pid;

use super::worker::Worker;
use super::{PoolRun, Reaped};
use crate::master::exit::ExitCause;
use crate::master::pidfd;
use drover_proto::zygote::{self, Report, WorkerExit};

impl PoolRun {
    /// A line from the zygote that reports a worker's start or exit (`Some`: it was a report,
    /// with the exit's nature). `None` for any other line, or one from another process:
    /// only the zygote's reports are trusted, and not blindly (see [`PoolRun::on_started`]
    /// and [`PoolRun::on_exited`]).
    pub fn on_report(&mut self, from: Pid, line: &str, now: Instant) -> Option<Reaped> {
        if !self.launch.kind.parent_reports() {
            return None;
        }
        // A Python worker that recycles itself for max_memory says why.
        if let (Some(worker), Some(reason)) =
            (self.table.worker_mut(from), zygote::parse_retiring(line))
        {
            worker.retiring.get_or_insert(now);
            self.sizing.count_retired_max_memory();
            tracing::info!(
                "pool {}: retiring worker {from}: {}",
                self.config.name,
                printable(reason, 200)
            );
            return Some(Reaped::NotOurs);
        }
        // A zygote's last lines may be read after it was reaped: they still count.
        let zygote = self.table.has_process(from) || self.table.recent().role(from).is_some();
        if !zygote {
            return None;
        }
        match Report::parse(line) {
            Some(Report::Ready) => self.life.startup_mut().runtime_started(),
            Some(Report::Started { pid }) => self.on_started(from, pid, now),
            Some(Report::Exited { pid, exit, lived }) => {
                self.life
                    .startup_mut()
                    .worker_exited(pid, ExitCause::from_exit(exit), lived);
                return Some(self.on_exited(from, pid, exit, now));
            }
            Some(Report::Holding {
                pid,
                delay,
                failures,
            }) => self.life.startup_mut().zygote_holding(
                &self.config.name,
                (from, pid),
                delay,
                failures,
                now,
            ),
            None => return None,
        }
        Some(Reaped::NotOurs)
    }

    /// The zygote `from` says it forked `pid`. Believed only if `pid` is its child now
    /// ([`pidfd::child_of`]): a zygote runs as the pool's user, and the app's code may have
    /// made it write the line (with ptrace, when `process_dumpable` allows it) to have the
    /// root master retire or kill a process of its choosing. The worker is then held by a
    /// handle on that very process.
    fn on_started(&mut self, from: Pid, pid: Pid, now: Instant) {
        if !self.table.has_process(from) {
            // Its zygote is gone: the worker was adopted when the zygote was reaped.
            return;
        }
        if self.table.has_worker(pid) {
            tracing::warn!(
                "pool {}: zygote {from} reported a worker started, pid {pid}: refused, \
                 already a worker",
                self.config.name
            );
            return;
        }
        match pidfd::child_of(pid, from) {
            Ok(handle) => {
                tracing::info!("pool {}: worker {pid} started", self.config.name);
                self.table
                    .add_worker(pid, Worker::new(now, Some(from), handle));
            }
            // A worker that died at once, reaped by its zygote before the master looked:
            // its exit report follows, and is counted then (`vanished`).
            Err(pidfd::Refused::Gone) => {
                tracing::info!(
                    "pool {}: zygote {from} reported a worker started, pid {pid}: gone before \
                     the master could check it",
                    self.config.name
                );
                self.table.recent_mut().vanished(pid, from, now);
            }
            Err(err) => tracing::error!(
                "pool {}: zygote {from} reported a worker started, pid {pid}: refused, not a \
                 child of the zygote ({err}); the pool's code may be forging reports",
                self.config.name
            ),
        }
    }

    /// The zygote `from` says its worker `pid` exited. Believed only for a worker of that
    /// zygote that the master verified and that is indeed gone: a zygote cannot make the
    /// master forget a running worker, nor count exits of processes that were never its.
    fn on_exited(&mut self, from: Pid, pid: Pid, exit: WorkerExit, now: Instant) -> Reaped {
        let cause = ExitCause::from_exit(exit);
        let known = self
            .table
            .worker(pid)
            .map(|w| (w.parent == Some(from), w.alive()));
        match known {
            Some((true, false)) => {}
            Some((true, true)) => {
                tracing::warn!(
                    "pool {}: zygote {from} reported worker {pid} exited {cause}, but it runs: \
                     ignored",
                    self.config.name
                );
                return Reaped::NotOurs;
            }
            _ => {
                if self.table.recent_mut().take_vanished(pid, from) {
                    return self.vanished_exit(pid, cause);
                }
                tracing::info!(
                    "pool {}: zygote {from} reported pid {pid} exited {cause}: ignored, not \
                     a worker of that zygote",
                    self.config.name
                );
                return Reaped::NotOurs;
            }
        }
        let Some(worker) = self.table.remove_worker(pid) else {
            return Reaped::NotOurs;
        };
        self.log_worker_exit(pid, &worker, cause, now);
        Reaped::Exit {
            crash: cause.is_crash(),
        }
    }

    /// The exit of a worker that was gone before the master saw it run: counted as any
    /// worker's exit, so that a worker crashing at its start is a crash in the status and
    /// for the emergency restart. The pool's code could forge such a pair of reports, but
    /// it can crash its own workers at will anyway: it gains nothing.
    fn vanished_exit(&mut self, pid: Pid, cause: ExitCause) -> Reaped {
        match cause {
            ExitCause::Code(0) => self.counters.clean_exits += 1,
            ExitCause::SeenByParent => {}
            _ => self.counters.crash_exits += 1,
        }
        tracing::warn!(
            "pool {}: worker {pid} exited {cause} at its start",
            self.name()
        );
        Reaped::Exit {
            crash: cause.is_crash(),
        }
    }
}

/// `text` from a pool process, for a log line: at most `max` characters, control
/// characters (a terminal's escapes) as `?`.
fn printable(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
