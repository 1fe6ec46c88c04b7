//! Retiring a whole generation of a pool (on reload, or when a pool is removed): it stops
//! being replaced, its workers finish their requests and exit, and it is dropped when none
//! is left. The listener stays open when the next generation shares it, so no connection
//! is refused or lost: connections queued meanwhile are accepted by whichever generation's
//! worker comes first.

use std::time::Instant;

use super::PoolRun;
use crate::pm::{self, Action, WorkerView};

impl PoolRun {
    pub fn draining(&self) -> bool {
        self.life.lifecycle.draining()
    }

    /// Starts retiring this generation. `close_listener`: no next generation shares the
    /// listener (the pool was removed, or its address changed), so it stops taking
    /// connections: queued ones are still served.
    pub fn retire_generation(&mut self, now: Instant, close_listener: bool) {
        self.execute_drain(close_listener, now);
    }

    /// A draining generation's tick: SIGTERM to workers once idle, SIGKILL to those stuck
    /// past `process_control_timeout` (or in a request past `request_terminate_timeout`),
    /// and to a zygote that outlives its workers by as long.
    pub fn drain_tick(&mut self, now: Instant) {
        self.signal_retiring();
        self.kill_lingering_parent(now);
        let views: Vec<WorkerView> = self
            .table
            .workers()
            .map(|(pid, w)| WorkerView {
                pid,
                busy: w.state.busy,
                since: w.state.since,
                started: w.started,
                rss: None,
                retiring: w.retiring.or(Some(now)),
                reading: w.state.reading.is_some(),
            })
            .collect();
        for action in pm::plan(
            &self.sizing.limits,
            &mut self.sizing.policy,
            &views,
            None,
            now,
            false,
        ) {
            if let Action::Kill { pid, reason } = action {
                self.kill_worker(pid, &reason, now);
            }
        }
    }
}
