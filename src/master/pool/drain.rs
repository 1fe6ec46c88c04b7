//! Retiring a whole generation of a pool (on reload, or when a pool is removed): it stops
//! being replaced, its workers finish their requests and exit, and it is dropped when none
//! is left. The listener stays open when the next generation shares it, so no connection
//! is refused or lost: connections queued meanwhile are accepted by whichever generation's
//! worker comes first. What to do is decided by [`crate::pm::drain`] (the start) and
//! [`crate::pm::drain_tick`] (each tick); here are the facts and the executor's calls.

use std::time::Instant;

use super::PoolRun;
use crate::pm::WorkerView;

impl PoolRun {
    pub fn draining(&self) -> bool {
        self.life.lifecycle().draining()
    }

    /// Starts retiring this generation. `close_listener`: no next generation shares the
    /// listener (the pool was removed, or its address changed), so it stops taking
    /// connections: queued ones are still served.
    pub fn retire_generation(&mut self, now: Instant, close_listener: bool) {
        self.execute_drain(close_listener, now);
    }

    /// A draining generation's tick ([`pm::drain_tick`]): SIGTERM to workers once idle,
    /// SIGKILL to those stuck past `process_control_timeout` (or in a request past
    /// `request_terminate_timeout`), and to a zygote that outlives its workers by as long.
    pub fn drain_tick(&mut self, now: Instant) {
        let views: Vec<WorkerView> = self
            .table
            .workers()
            .map(|(pid, w)| WorkerView {
                pid,
                busy: w.state.busy,
                since: w.state.since,
                started: w.started,
                rss: None,
                retiring: w.retiring,
                reading: w.state.reading.is_some(),
            })
            .collect();
        let actions = self.sizing.drain_tick(self.life.linger_mut(), &views, now);
        self.execute(actions, now, None);
    }
}
