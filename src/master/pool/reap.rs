//! The executor's side of a process's exit: one reaped pid of the pool, what its exit
//! means ([`pm::on_exit`], pure) carried out, with its log lines; a dead parent's workers
//! taken over (the master is their subreaper).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::execute::Exited;
use super::worker::Worker;
use super::{Lifecycle, PoolRun, Reaped};
use crate::master::exit::{ExitCause, lifetime};
use crate::master::orphans::Orphans;
use crate::master::pidfd;
use crate::pm;
use crate::runtime::{self, kind};

impl PoolRun {
    /// Handles one reaped pid if it belongs to this pool; `orphans`: the master's children
    /// known not to be workers, which a dead parent's adoption skips.
    pub fn on_reaped(
        &mut self,
        pid: Pid,
        cause: ExitCause,
        now: Instant,
        orphans: &Orphans,
    ) -> Reaped {
        if let Some((process, worker)) = self.table.remove_process(pid) {
            let lived = now.duration_since(process.started);
            let mut fell_back = false;
            let role = match &worker {
                // An exec'd worker.
                Some(worker) => {
                    self.log_worker_exit(pid, worker, cause, now);
                    pm::Role::Worker
                }
                None => {
                    // A zygote on the copy of libphp bound directly that died before any
                    // request: the next one runs the linked libphp (the launch says so, once,
                    // with this exit in its warning).
                    let what = self.launch.kind.process_role();
                    let exit = format!("{what} {pid} exited {cause} after {}", lifetime(lived));
                    let served = self.table.workers().any(|(_, worker)| worker.served);
                    fell_back = !process.retiring
                        && self.launch.fall_back(&self.config.name, served, &exit);
                    if !fell_back {
                        self.log_parent_exit(pid, process.retiring, cause, lived);
                    }
                    pm::Role::Parent
                }
            };
            let what = match role {
                pm::Role::Worker => "worker",
                pm::Role::Parent => self.launch.kind.process_role(),
            };
            let exit = pm::Exit {
                role,
                retiring: process.retiring,
                served: worker.as_ref().is_some_and(|w| w.served),
                clean: cause == ExitCause::Code(0),
                program: self.launch.kind == kind::Kind::Program,
                app_failed: matches!(cause, ExitCause::Code(code) if self.launch.kind.app_failed(code)),
                fell_back,
            };
            if role == pm::Role::Parent {
                self.table.recent_mut().exited(pid, what, now);
            }
            let exited = Exited {
                pid,
                lived,
                exit: format!("{what} {pid} exited {cause} after {}", lifetime(lived)),
                orphans,
            };
            self.execute(pm::on_exit(exit), now, Some(&exited));
            return Reaped::Exit {
                crash: cause.is_crash(),
            };
        }
        if let Some(worker) = self.table.remove_worker(pid) {
            // Reaped by the master: its zygote is gone and cannot free its slot.
            self.handed.release_slot(pid);
            self.log_worker_exit(pid, &worker, cause, now);
            return Reaped::Exit {
                crash: cause.is_crash(),
            };
        }
        Reaped::NotOurs
    }

    /// The log line of a parent's exit: a warning unless it was asked to exit.
    fn log_parent_exit(&self, pid: Pid, retiring: bool, cause: ExitCause, lived: Duration) {
        let what = self.launch.kind.process_role();
        if retiring {
            tracing::info!(
                "pool {}: {what} {pid} exited {cause} after {}",
                self.name(),
                lifetime(lived)
            );
        } else {
            tracing::warn!(
                "pool {}: {what} {pid} exited {cause} after {}",
                self.name(),
                lifetime(lived)
            );
        }
    }

    /// The parent died: its workers are the master's now. After a crash a new parent
    /// brings a full set, so they are retired (`retire`); on a stop the closed listener
    /// ends them after their last request.
    pub(super) fn orphan_workers_of(&mut self, parent: Pid, retire: bool) {
        let draining = self.life.lifecycle().draining();
        for (_, worker) in self
            .table
            .workers_mut()
            .filter(|(_, w)| w.parent == Some(parent))
        {
            worker.orphan = true;
            if retire {
                let _ = worker.signal(Signal::SIGTERM);
            } else if draining {
                // Retired with its generation: SIGTERM once it is seen idle.
                worker.retiring.get_or_insert(Instant::now());
            }
        }
    }

    pub(super) fn log_worker_exit(
        &mut self,
        pid: Pid,
        worker: &Worker,
        cause: ExitCause,
        now: Instant,
    ) {
        // A worker the master killed was counted by the policy, under the kill's cause
        // (`request_terminate_timeout`: terminate): its SIGKILL, or the exit of a Python
        // worker that ended its aborted request, is neither a crash nor a recycle.
        if worker.retiring.is_none() && !worker.orphan && !worker.killed {
            match cause {
                ExitCause::Code(0) => self.counters.clean_exits += 1,
                ExitCause::SeenByParent => {}
                _ => self.counters.crash_exits += 1,
            }
        }
        if worker.retiring.is_some()
            && self.life.lifecycle() == Lifecycle::Draining
            && !worker.killed
        {
            self.counters.reload_exits += 1;
        }
        let lived = lifetime(now.duration_since(worker.started));
        let level_warn = !matches!(cause, ExitCause::Code(0) | ExitCause::SeenByParent)
            && !worker.orphan
            && !worker.killed
            && worker.retiring.is_none();
        if level_warn {
            tracing::warn!(
                "pool {}: worker {pid} exited {cause} after {lived}",
                self.name()
            );
        } else {
            tracing::info!(
                "pool {}: worker {pid} exited {cause} after {lived}",
                self.name()
            );
        }
    }

    /// The parent `parent` is gone: every worker it forked is the master's child now (the
    /// master is a child subreaper), including those it forked since the last look, which
    /// the pool has not seen. They are found by their process group (the parent leads its
    /// own, and its workers stay in it) and tracked as orphans: retired like the rest of the
    /// generation when it is draining or stopping, so that none keeps serving unseen. The
    /// app's own orphans in the group, seen while the parent ran, are not taken.
    pub(super) fn adopt_workers_of(&mut self, parent: Pid, now: Instant, orphans: &Orphans) {
        for pid in own_children_in_group(parent) {
            if self.table.has_worker(pid) || orphans.is_stranger(pid) {
                continue;
            }
            // The master's own child, not reaped: the handle cannot miss.
            let Ok(handle) = pidfd::child_of(pid, Pid::this()) else {
                continue;
            };
            tracing::info!(
                "pool {}: worker {pid} of {} {parent} adopted",
                self.name(),
                self.launch.kind.process_role()
            );
            let mut worker = Worker::new(now, Some(parent), handle);
            // Until the next tick samples it: a worker in accept() is idle, one doing
            // anything else may be serving, and must not get a SIGTERM mid-request.
            worker.state.busy = pm::adopted_busy(runtime::php::sample::idle_by_syscall(pid));
            self.table.add_worker(pid, worker);
        }
    }

    /// Housekeeping after the processes' last output had time to arrive: forgets the roles
    /// of processes gone a while, and says that the app failed to load once its traceback
    /// is in the log. True when it said so now.
    pub fn after_output(&mut self, now: Instant) -> bool {
        self.table.recent_mut().forget_old(now);
        if self.life.startup_mut().app_failure_due(now) {
            tracing::error!(
                "pool {}: the app failed to load (traceback above); the pool is stopped until a reload",
                self.name()
            );
            return true;
        }
        false
    }
}

/// The master's own children, forked from any of its threads (workers handed over by a
/// dead php-cgi parent or zygote included).
pub(in crate::master) fn own_children() -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|s| s.parse().ok())
                .map(Pid::from_raw)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The master's children in process group `group`.
fn own_children_in_group(group: Pid) -> Vec<Pid> {
    own_children()
        .into_iter()
        .filter(|&pid| nix::unistd::getpgid(Some(pid)) == Ok(group))
        .collect()
}
