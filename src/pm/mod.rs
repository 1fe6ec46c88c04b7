//! Process-management policy, as pure functions of (configuration, state, now).
//!
//! Nothing here starts, signals, waits on a process or reads /proc: the master gathers a
//! snapshot of each pool, asks, and applies the answer, and the answers are unit-tested
//! without processes.
//!
//! - [`plan`]: a pool tick's decisions: spawn, retire, kill (static, dynamic and ondemand
//!   pools, `max_memory`, `request_terminate_timeout`, retiring workers that do not exit).
//! - [`Backoff`], [`EmergencyRestart`], [`max_requests`]: what a worker's exit means for the
//!   next spawn, and each worker's request limit; the Python zygote applies them too, so
//!   they live in the `drover-proto` crate.
//! - here: how many workers a pool starts with, and how many replace at once workers that
//!   exited on their own.

pub mod memory;
mod plan;
pub mod queue;

pub use drover_proto::{Backoff, EmergencyRestart, Respawn, STARTUP_WINDOW, max_requests};
pub use plan::{Action, Counters, PolicyState, PoolLimits, Reason, WorkerView, plan};

use crate::config::{Pm, PmMode};

/// How many workers a pool starts with; from then on [`plan`] keeps the count.
pub fn initial_workers(pm: &Pm) -> u32 {
    match pm.mode {
        PmMode::Static => pm.max_children,
        // Validation keeps start_servers within max_children; min() guards a hand-built Pm.
        PmMode::Dynamic => pm.start_servers.min(pm.max_children),
        PmMode::Ondemand => 0,
    }
}

/// How many workers to start at once when `exited` workers of the pool ended on their own
/// (`max_requests`, a crash: not retired by the policy), with `total` workers still running
/// or retiring. php-fpm replaces such a child at once; waiting for the next maintenance
/// tick would leave a dynamic pool short for up to a second at every recycle. Static pools
/// are refilled by [`plan`] on every tick, ondemand pools when a connection waits: 0 here.
pub fn replacements(pm: &Pm, exited: u32, total: u32) -> u32 {
    match pm.mode {
        PmMode::Dynamic => exited.min(pm.max_children.saturating_sub(total)),
        PmMode::Static | PmMode::Ondemand => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pm(mode: PmMode) -> Pm {
        Pm {
            mode,
            max_children: 4,
            start_servers: 2,
            min_spare_servers: 1,
            max_spare_servers: 3,
            max_spawn_rate: 32,
            process_idle_timeout: Duration::from_secs(10),
            max_requests: 0,
            max_requests_jitter: 0,
            max_memory: None,
            memory: Default::default(),
        }
    }

    #[test]
    fn static_starts_max_children_dynamic_start_servers_ondemand_none() {
        assert_eq!(initial_workers(&pm(PmMode::Static)), 4);
        assert_eq!(initial_workers(&pm(PmMode::Dynamic)), 2);
        assert_eq!(initial_workers(&pm(PmMode::Ondemand)), 0);
    }

    #[test]
    fn a_dynamic_pool_replaces_exited_workers_at_once_within_max_children() {
        let dynamic = pm(PmMode::Dynamic);
        assert_eq!(replacements(&dynamic, 1, 1), 1);
        assert_eq!(replacements(&dynamic, 3, 2), 2, "max_children is 4");
        assert_eq!(replacements(&dynamic, 1, 4), 0);
        assert_eq!(replacements(&dynamic, 0, 0), 0);
    }

    #[test]
    fn static_and_ondemand_pools_are_refilled_elsewhere() {
        assert_eq!(replacements(&pm(PmMode::Static), 1, 0), 0);
        assert_eq!(replacements(&pm(PmMode::Ondemand), 1, 0), 0);
    }
}
