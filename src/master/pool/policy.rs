//! Running the pool's policy ([`pm::plan`]) on what was observed, and doing what it says:
//! spawn, retire gracefully, kill.
//!
//! How each action is carried out depends on who keeps the worker count ([`Sizing`]):
//! - the master (commands, dynamic and ondemand PHP): it spawns and signals each worker;
//! - the parent (a php-cgi parent, a static pool's zygote): it replaces workers itself, so
//!   spawns are its business;
//! - the parent told a count (a dynamic or ondemand pool's zygote): the master sends it a
//!   new one ([`kind::set_target`]).
//!
//! Retiring is graceful: a worker whose SIGTERM waits for the request (Python) gets it at
//! once; others (php-cgi, commands) only once seen idle (SIGTERM would cut php-cgi's
//! sleep() and I/O short), and are killed only after `process_control_timeout`.

use std::time::Instant;

use nix::unistd::Pid;

use super::PoolRun;
use crate::pm::{self, Reason, WorkerView};
use crate::runtime::kind::{self, Sizing};

impl PoolRun {
    /// One policy tick. `waiting`: an ondemand pool's listener has connections queued.
    pub fn apply_policy(&mut self, now: Instant, maintenance_due: bool, waiting: Option<u32>) {
        if !self.life.lifecycle().spawns() {
            return;
        }
        // Sizing by memory sets the live max_children the plan reads first.
        self.watch_memory(maintenance_due, now);
        let views: Vec<WorkerView> = self
            .table
            .workers()
            .filter(|(_, w)| !w.orphan)
            .map(|(pid, w)| WorkerView {
                pid,
                busy: w.state.busy,
                since: w.state.since,
                started: w.started,
                rss: w.state.rss,
                retiring: w.retiring,
                reading: w.state.reading.is_some(),
            })
            .collect();
        let actions = self.sizing.plan(&views, waiting, now, maintenance_due);
        self.execute_plan(actions, now);
    }

    /// Starts `n` more workers, in the way this pool's workers are started.
    pub(super) fn spawn_workers(&mut self, n: u32, now: Instant) {
        if self.life.startup_mut().holding(now) {
            return;
        }
        match self.sizing() {
            // The parent keeps its count itself; the master only keeps the parent alive
            // (see `maintain`).
            Sizing::Parent => {}
            Sizing::Target => {
                // The workers it is still forking are not among those reported: the
                // count is computed from the workers that stay ([`pm::target_for_spawn`]).
                let staying = self.table.serving();
                let staying = u32::try_from(staying).unwrap_or(u32::MAX);
                self.sizing.grow_target(staying, n);
                self.send_target();
            }
            Sizing::Master => {
                for _ in 0..n {
                    if !self.spawn_one(now) {
                        break;
                    }
                }
            }
        }
    }

    pub(super) fn retire(&mut self, pid: Pid, reason: &Reason, now: Instant) {
        let Some(worker) = self.table.worker_mut(pid) else {
            return;
        };
        worker.retiring = Some(now);
        tracing::info!("pool {}: retiring worker {pid}: {reason}", self.config.name);
        if self.sizing() == Sizing::Target && pm::retire_lowers_target(reason) {
            self.sizing.lower_target();
            self.send_target();
        }
        self.table.process_retiring(pid);
    }

    /// SIGTERM to retiring workers, when it cannot interrupt a request.
    pub(super) fn signal_retiring(&mut self) {
        let graceful_anytime = self.launch.kind.sigterm_waits_for_request();
        for (_, worker) in self.table.workers_mut() {
            if worker.retiring.is_some()
                && !worker.signalled
                && (graceful_anytime || !worker.state.busy)
            {
                worker.signalled = true;
                let _ = worker.signal(self.launch.stop_signal);
            }
        }
    }

    /// Who keeps this pool's worker count.
    fn sizing(&self) -> Sizing {
        self.launch.kind.sizing(self.config.pm.mode)
    }

    fn send_target(&self) {
        for (zygote, _) in self.table.processes() {
            let desired = self.sizing.desired();
            if let Err(err) = kind::set_target(zygote, desired) {
                tracing::error!(
                    "pool {}: cannot tell the zygote {zygote} to keep {desired} workers: {err}",
                    self.config.name,
                );
            }
        }
    }
}
