//! What the master tells others: ready once every pool is up (systemd's `READY=1`, the
//! pid file), the workers' activity for systemd's `STATUS=`, drained generations let go,
//! and an app's failure to load that stops drover (`exit_on_app_failure`).

use std::time::Instant;

use super::pool::PoolRun;
use super::{Master, Phase, release_freed_memory};
use crate::systemd;

impl Master {
    /// With `exit_on_app_failure`, a pool whose app failed to load (`failed`) stops drover,
    /// which then exits [`EXIT_APP_FAILURE`].
    pub(super) fn exit_on_app_failure(&mut self, failed: bool) {
        if !failed || !self.config.global.exit_on_app_failure || !self.phase.serves() {
            return;
        }
        self.app_failed = true;
        tracing::error!("stopping: a pool's app failed to load (exit_on_app_failure); exit 3");
        self.stop(self.config.global.process_control_timeout, "graceful");
    }

    pub(super) fn check_ready(&mut self) {
        let current = || self.pools.live();
        // Up, and the old generations it replaces retired ([`Master::retire_replaced`]):
        // the count then is of the pools as configured, not of two generations of one.
        let done = |p: &PoolRun| p.settled() && p.replaces.is_none();
        if (self.notify.ready && !self.notify.reloading) || !current().all(done) {
            return;
        }
        let workers: usize = current().map(PoolRun::workers).sum();
        let status = format!("ready: {} pools, {workers} workers", current().count());
        if self.notify.reloading {
            self.notify.reloading = false;
            tracing::info!("reload done: {status}");
            systemd::ready(&status);
            // The reload ran the configuration's parser again.
            crate::resident::release_code();
            // "ready: ..." replaced the activity line: send it again on the next tick,
            // even on an idle host where it has not changed.
            if let Some(line) = &mut self.notify.status_line {
                line.overwritten();
            }
            return;
        }
        self.notify.ready = true;
        tracing::info!("{status}");
        systemd::ready(&status);
        // What starting ran once need not stay mapped.
        crate::resident::release_code();
    }

    /// Under systemd, once ready and not reloading (`STATUS=` then says "ready" or
    /// nothing new): the workers' activity as the status pages count it, when it changed.
    pub(super) fn tell_activity(&mut self, now: Instant) {
        let Some(line) = &mut self.notify.status_line else {
            return;
        };
        if !self.notify.ready || self.notify.reloading || self.phase != Phase::Running {
            return;
        }
        let mut activity = systemd::Activity::default();
        for status in self
            .pools
            .serving()
            .map(|pool| self.pools.status_of(pool, now))
        {
            activity.active += status.active_processes;
            activity.idle += status.idle_processes;
            activity.slow += status.slow_requests;
            if let Some(accepted) = status.accepted_conn {
                *activity.requests.get_or_insert(0) += accepted;
            }
        }
        line.tick(now, activity);
    }

    /// Drops generations that finished draining (their listener closes with the last one),
    /// and removes the socket file of a unix listener no generation left uses.
    pub(super) fn forget_drained(&mut self) {
        let gone = self.pools.take_drained();
        if gone.is_empty() {
            return;
        }
        for pool in &gone {
            // A later generation may listen at the same address (the same listener, or a
            // new one bound there): its file stays.
            if !self.pools.listens_at(&pool.listener.addr) {
                pool.listener.unlink();
            }
        }
        drop(gone);
        release_freed_memory();
    }
}
