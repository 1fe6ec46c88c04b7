//! Starting the pool's processes: the parent kept running, exec'd workers started at first
//! and replaced at once when they exit on their own, each spawn held back while a start-up
//! failure's backoff lasts ([`super::startup::Startup`]).

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::worker::Worker;
use super::{Lifecycle, PoolRun};
use crate::master::pidfd;
use crate::master::spawn::spawn;
use crate::pm;
use crate::runtime::kind;

impl PoolRun {
    /// Keeps the parent (php-cgi or zygote) running; starts exec'd workers the first time.
    /// Later spawns of exec'd workers are the policy's ([`policy`]).
    pub fn maintain(&mut self, now: Instant) {
        if !self.life.may_spawn(now) {
            return;
        }
        let Some(wanted) = pm::processes_kept(
            self.launch.kind.has_parent(),
            self.life.lifecycle() == Lifecycle::Starting,
            pm::initial_workers(&self.config.pm),
        ) else {
            return;
        };
        self.life.advance(Lifecycle::spawned);
        let running = self.table.running_processes();
        for _ in running..wanted {
            if !self.spawn_one(now) {
                break;
            }
        }
    }

    pub(super) fn spawn_one(&mut self, now: Instant) -> bool {
        let limit = pm::max_requests(
            self.config.pm.max_requests,
            self.config.pm.max_requests_jitter,
            |jitter| rand::random_range(0..=jitter),
        );
        let inherited = self.handed.inherited();
        let spec = self.launch.spec(limit);
        let result = self
            .listener
            .dup()
            .map_err(|e| e.to_string())
            .and_then(|fd0| {
                // Every zygote takes the target signal (a static one never gets it).
                let zygote = self.launch.kind.parent_reports();
                spawn(&spec, fd0, self.handed.output(), inherited, zygote)
                    .map_err(|e| format!("cannot start {}: {e}", spec.program.display()))
            });
        match result {
            Ok(pid) => {
                self.table.add_process(pid, now);
                let role = self.launch.kind.process_role();
                let workers = starting_workers(&self.config.pm);
                if !self.launch.kind.has_parent() {
                    // Its own child, not reaped: the handle cannot miss.
                    match pidfd::child_of(pid, Pid::this()) {
                        Ok(handle) => {
                            self.table.add_worker(pid, Worker::new(now, None, handle));
                            tracing::info!("pool {}: worker {pid} started", self.name());
                        }
                        Err(err) => tracing::error!(
                            "pool {}: worker {pid} started, but no handle on it ({err}); \
                             it is reaped and not signalled",
                            self.name()
                        ),
                    }
                } else if self.launch.kind.limit_per_parent() {
                    tracing::info!(
                        "pool {}: {role} {pid} started ({workers}, max_requests {limit})",
                        self.name()
                    );
                } else {
                    // The parent draws each worker's limit itself.
                    tracing::info!("pool {}: {role} {pid} started ({workers})", self.name());
                }
                if self.launch.kind.sizing(self.config.pm.mode) == kind::Sizing::Target {
                    // A new parent starts with the initial count.
                    self.sizing
                        .reset_target(pm::initial_workers(&self.config.pm));
                }
                true
            }
            Err(reason) => {
                self.life
                    .startup_mut()
                    .hold(&self.config.name, now, Duration::ZERO, &reason);
                false
            }
        }
    }

    /// A worker exec'd by the master exited on its own: a dynamic pool replaces it now
    /// ([`pm::replacements`]), unless a start-up failure holds spawning back, or the pool is
    /// stopping or draining.
    pub(super) fn replace_at_once(&mut self, now: Instant) {
        if !self.life.may_spawn(now) {
            return;
        }
        let total = u32::try_from(self.table.process_count()).unwrap_or(u32::MAX);
        for _ in 0..pm::replacements(&self.sizing.limits().pm, 1, total) {
            if !self.spawn_one(now) {
                break;
            }
        }
    }
}

/// What a new parent (php-cgi, a zygote) starts with, for its start line: what the pm mode
/// starts, not `max_children` (a dynamic pool starts `start_servers`, an ondemand one none).
fn starting_workers(pm: &crate::config::Pm) -> String {
    match (pm::initial_workers(pm), pm.mode) {
        (0, crate::config::PmMode::Ondemand) => "no workers until a connection waits".into(),
        (1, _) => "1 worker".into(),
        (n, _) => format!("{n} workers"),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Pm, PmMode};

    #[test]
    fn a_start_line_counts_what_the_mode_starts() {
        let pm = |mode, max_children, start_servers| Pm {
            mode,
            max_children,
            start_servers,
            min_spare_servers: 1,
            max_spare_servers: 3,
            max_spawn_rate: 32,
            process_idle_timeout: std::time::Duration::from_secs(10),
            max_requests: 0,
            max_requests_jitter: 0,
            max_memory: None,
            memory: Default::default(),
        };
        let line = |pm: &Pm| super::starting_workers(pm);
        assert_eq!(line(&pm(PmMode::Static, 4, 0)), "4 workers");
        assert_eq!(line(&pm(PmMode::Dynamic, 4, 2)), "2 workers");
        assert_eq!(line(&pm(PmMode::Dynamic, 4, 1)), "1 worker");
        assert_eq!(
            line(&pm(PmMode::Ondemand, 4, 0)),
            "no workers until a connection waits"
        );
    }
}
