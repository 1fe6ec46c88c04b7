//! A background pool (`[program]`) scaled in place: `drover ctl workers` and a live
//! `pm.max_children` change start or stop copies in the running generation, instead of
//! renewing every copy as a new generation would (a queue consumer's job in hand is not
//! cut for a scale-up). A reload from the files still renews them.

use std::time::Instant;

use nix::unistd::Pid;

use super::PoolRun;
use crate::config::Pool;
use crate::runtime::kind::Kind;

impl PoolRun {
    /// Takes `changed` as this generation's configuration when it is a program pool that
    /// differs from it only in `pm.max_children`: the policy starts the copies missing on
    /// its next tick, and the copies above the new count are asked to stop (the newest
    /// first, so the ones that have run longest are kept). False when a new generation is
    /// needed.
    pub fn resize_in_place(&mut self, changed: &Pool, now: Instant) -> bool {
        if self.launch.kind != Kind::Program || self.draining() {
            return false;
        }
        // A static pool's spare counts follow max_children (config::pm).
        let current = &self.config.pm;
        let mut same = changed.clone();
        same.pm.max_children = current.max_children;
        same.pm.start_servers = current.start_servers;
        same.pm.min_spare_servers = current.min_spare_servers;
        same.pm.max_spare_servers = current.max_spare_servers;
        if same != self.config {
            return false;
        }
        let max_children = changed.pm.max_children;
        self.config.pm = changed.pm.clone();
        self.sizing.set_pm(changed.pm.clone());
        let running: Vec<(Pid, Instant)> = self
            .table
            .workers()
            .filter(|(_, w)| w.retiring.is_none() && !w.orphan)
            .map(|(pid, w)| (pid, w.started))
            .collect();
        for pid in surplus(running, max_children) {
            if let Some(worker) = self.table.worker_mut(pid) {
                worker.retiring = Some(now);
                tracing::info!(
                    "pool {}: stopping worker {pid}: max_children is now {max_children}",
                    self.config.name
                );
            }
            self.table.process_retiring(pid);
        }
        self.signal_retiring();
        true
    }
}

/// The copies to stop for `max_children` to run: the newest started first.
fn surplus(mut running: Vec<(Pid, Instant)>, max_children: u32) -> Vec<Pid> {
    running.sort_by_key(|&(pid, started)| (started, pid));
    let keep = (max_children as usize).min(running.len());
    running[keep..].iter().map(|&(pid, _)| pid).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_scale_down_stops_the_newest_copies() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let running = vec![
            (Pid::from_raw(30), at(3)),
            (Pid::from_raw(10), at(1)),
            (Pid::from_raw(20), at(2)),
        ];
        assert_eq!(
            surplus(running.clone(), 1),
            [Pid::from_raw(20), Pid::from_raw(30)]
        );
        assert_eq!(surplus(running.clone(), 3), []);
        assert_eq!(surplus(running, 5), []);
    }
}
