//! A background pool (`[program]`) scaled in place: `drover ctl workers` and a live
//! `pm.max_children` change start or stop copies in the running generation, instead of
//! renewing every copy as a new generation would. Whether a change can be done so, and
//! which copies stop, is [`pm::resize_in_place`]'s decision; here are its facts and its
//! steps.

use std::time::Instant;

use nix::unistd::Pid;

use super::PoolRun;
use crate::config::Pool;
use crate::pm;
use crate::runtime::kind::Kind;

impl PoolRun {
    /// Takes `changed` as this generation's configuration when [`pm::resize_in_place`]
    /// says it can be done in place: the policy starts the copies missing on its next
    /// tick, and the copies above the new count are asked to stop. False when a new
    /// generation is needed.
    pub fn resize_in_place(&mut self, changed: &Pool, now: Instant) -> bool {
        let generation = pm::InPlace {
            program: self.launch.kind == Kind::Program,
            draining: self.draining(),
        };
        let running: Vec<(Pid, Instant)> = self
            .table
            .workers()
            .filter(|(_, w)| w.retiring.is_none() && !w.orphan)
            .map(|(pid, w)| (pid, w.started))
            .collect();
        let Some(actions) = pm::resize_in_place(&self.config, changed, generation, running) else {
            return false;
        };
        self.config.pm = changed.pm.clone();
        self.sizing.set_pm(changed.pm.clone());
        self.execute(actions, now, None);
        true
    }

    /// [`pm::Action::StopSurplus`]: the copy `pid`, above the new `max_children`, retires.
    pub(super) fn stop_surplus(&mut self, pid: Pid, max_children: u32, now: Instant) {
        if let Some(worker) = self.table.worker_mut(pid) {
            worker.retiring = Some(now);
            tracing::info!(
                "pool {}: stopping worker {pid}: max_children is now {max_children}",
                self.config.name
            );
        }
        self.table.process_retiring(pid);
    }
}
