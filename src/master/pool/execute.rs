//! The executor: the one place where a pool's decisions ([`pm::Action`]: a tick's plan, a
//! kill's steps, an exit's meaning, a drain's start and ticks, the master's stop, a failed
//! pool's refusal, a program pool resized in place, the slowlog, the kills that waited,
//! sizing by memory) become spawns, signals, socket changes and log lines.
//! Every decision is made before, by pure code in [`crate::pm`] from facts the pool
//! gathered; here nothing is decided, only done, in the order given.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::{Lifecycle, PoolRun};
use crate::master::orphans::Orphans;
use crate::pm::{self, Action};

/// What an exit's actions need besides the pool: which process exited, how long it
/// lived, how its exit reads in a log line, and the master's children known not to be
/// workers (which a dead parent's adoption skips).
pub(super) struct Exited<'a> {
    pub pid: Pid,
    pub lived: Duration,
    /// "zygote 12 exited with code 1 after 2s": the reason a backoff names.
    pub exit: String,
    pub orphans: &'a Orphans,
}

impl PoolRun {
    /// Carries out `actions` in order. `exited`: the exit they answer, for the actions
    /// of [`pm::on_exit`].
    pub(super) fn execute(
        &mut self,
        actions: Vec<Action>,
        now: Instant,
        exited: Option<&Exited<'_>>,
    ) {
        for action in actions {
            match (action, exited) {
                (Action::Spawn(n), _) => self.spawn_workers(n, now),
                (Action::Retire { pid, reason }, _) => self.retire(pid, &reason, now),
                (Action::Kill { pid, reason }, _) => self.kill_worker(pid, &reason, now),
                (Action::KillStep(step), _) => self.kill_step(step, now),
                (Action::MaxChildrenReached { max_children }, _) => tracing::warn!(
                    "pool {}: reached max_children ({max_children}); consider raising it",
                    self.name()
                ),
                (Action::AdoptWorkers { retire }, Some(exited)) => {
                    self.adopt_workers_of(exited.pid, now, exited.orphans);
                    self.orphan_workers_of(exited.pid, retire);
                }
                (Action::AppFailed, _) => {
                    self.life.advance(Lifecycle::app_failed);
                    self.life.startup_mut().app_failed(now);
                }
                (Action::BackOff, Some(exited)) => {
                    self.life
                        .startup_mut()
                        .hold(&self.config.name, now, exited.lived, &exited.exit)
                }
                (Action::Replace, _) => self.replace_at_once(now),
                (Action::Drain, _) => {
                    self.life.advance(Lifecycle::drain);
                    self.watch.stop();
                }
                (Action::Stop, _) => {
                    self.life.advance(Lifecycle::stop);
                    self.watch.stop();
                }
                (Action::StopParents, _) => self.kill_parent(),
                (Action::RetireAll, _) => self.table.retire_all(now),
                (Action::CloseListener, _) => {
                    if let Err(err) = self.listener.shut_down() {
                        tracing::error!(
                            "pool {}: cannot shut down the listener: {err}",
                            self.name()
                        );
                    }
                }
                (Action::SignalRetiring, _) => self.signal_retiring(),
                (Action::KillLingeringParents, _) => self.kill_lingering_parents(),
                (Action::SlowLog { pid, elapsed }, _) => self.slow_log(pid, elapsed, now),
                (Action::KillAwaited { pid, awaited }, _) => self.kill_awaited(pid, awaited),
                (Action::Resize { size, changed }, _) => {
                    if changed {
                        tracing::info!("pool {}: {size}", self.name());
                    }
                    self.sizing.resize(size);
                }
                (Action::Overcommitted(warning), _) => {
                    self.sizing.memory_mut().warned();
                    tracing::warn!("pool {}: {warning}", self.name());
                }
                (Action::Refuse, _) => self.refused(),
                (Action::StopSurplus { pid, max_children }, _) => {
                    self.stop_surplus(pid, max_children, now)
                }
                // Only an exit's answer names these, and it is given with its exit.
                (action @ (Action::AdoptWorkers { .. } | Action::BackOff), None) => {
                    tracing::error!(
                        "pool {}: {action:?} without the exit it answers: not done",
                        self.name()
                    )
                }
            }
        }
    }

    /// A tick's plan ([`pm::plan`]) carried out, then SIGTERM to the retiring workers it
    /// may reach now.
    pub(super) fn execute_plan(&mut self, actions: Vec<Action>, now: Instant) {
        self.execute(actions, now, None);
        self.signal_retiring();
    }

    /// The start of this generation's drain ([`pm::drain`]) carried out.
    pub(super) fn execute_drain(&mut self, close_listener: bool, now: Instant) {
        let actions = pm::drain(self.launch.kind.has_parent(), close_listener);
        self.execute(actions, now, None);
        self.signal_retiring();
    }

    /// The master's stop for this generation ([`pm::stop`]) carried out.
    pub(super) fn execute_stop(&mut self, now: Instant) {
        let program = self.launch.kind == crate::runtime::kind::Kind::Program;
        let actions = pm::stop(self.launch.kind.has_parent(), program);
        self.execute(actions, now, None);
    }
}
