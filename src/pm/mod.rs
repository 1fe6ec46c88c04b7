//! Process-management policy, as pure functions of (configuration, state, now).
//!
//! Nothing here starts, signals, waits on a process or reads /proc: the master gathers a
//! snapshot of each pool, asks, and applies the answer, and the answers are unit-tested
//! without processes.
//!
//! - [`Action`]: what every decision below comes to, and the master's executor
//!   (`master::pool::execute`) carries out in order; [`Reason`]: why a worker goes.
//! - [`plan`]: a pool tick's decisions: spawn, retire, kill (static, dynamic and ondemand
//!   pools, `max_memory`, `request_terminate_timeout`, `request_read_timeout`, a program's
//!   lifetime, retiring workers that do not exit).
//! - [`kill()`]: how a kill is carried out for the worker's runtime: its line, then an
//!   abort, a stack read or asked for, SIGKILL.
//! - [`slow`]: which requests get a slowlog entry (`request_slowlog_timeout`).
//! - [`kills`]: when a kill that waits for a worker's stack or its abort is due.
//! - [`memory`]: sizing by memory: the live `max_children` of an `"auto"` pool, the
//!   warning for a fixed one that does not fit, the idle worker retired for
//!   `max_pool_memory` ([`memory::tick()`]).
//! - [`drain()`], [`drain_tick`], [`stop`], [`refuse`]: a generation's end: a drain's start
//!   and ticks (with [`Linger`]: a parent that outlives its workers), the master's stop, a
//!   failed generation's refusal of connections.
//! - [`resize_in_place`]: a program pool's live `max_children` change, without a new
//!   generation.
//! - [`Backoff`], [`EmergencyRestart`], [`max_requests`]: what a worker's exit means for the
//!   next spawn, and each worker's request limit; the Python zygote applies them too, so
//!   they live in the `drover-proto` crate.
//! - [`on_exit`]: what a process's exit means for its pool: back off, replace it, say the
//!   app failed, take over a dead parent's workers.
//! - [`forgotten_orphans`], [`adopted_busy`]: the workers of a dead parent, forgotten once
//!   gone, and counted busy when adopted until seen in accept().
//! - [`processes_kept`], [`target_for_spawn`], [`retire_lowers_target`]: the processes the
//!   master starts itself, and the count a zygote is told to keep.
//! - [`queue`]: `queue_timeout`'s estimate of a connection's wait.
//! - here: how many workers a pool starts with, how many replace at once workers that
//!   exited on their own, and how long a program's copy lives ([`lifetime`]).

mod action;
mod adopted;
mod drain;
mod exit;
mod kill;
pub mod kills;
pub mod memory;
mod plan;
pub mod queue;
mod resize;
pub mod slow;
mod target;

pub use action::{Action, Awaited, KillStep, Reason};
pub use adopted::{Orphan, adopted_busy, forgotten_orphans};
pub use drain::{Linger, Standing, drain, drain_tick, refuse, stop};
pub use drover_proto::{Backoff, EmergencyRestart, Respawn, STARTUP_WINDOW, max_requests};
pub use exit::{Exit, Role, on_exit};
pub use kill::{KillFacts, KillStack, kill};
pub use plan::{Counters, PolicyState, PoolLimits, WorkerView, plan};
pub use resize::{InPlace, resize_in_place};
pub use target::{processes_kept, retire_lowers_target, target_for_spawn};

use std::time::Duration;

use nix::unistd::Pid;

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

/// How long the copy `pid` lives: `max_lifetime` plus a part of `jitter` drawn from its
/// pid, so that it is the same on every tick (nothing to remember per copy) and spread
/// between copies started together, as `max_requests_jitter` spreads workers' recycling.
pub fn lifetime(pid: Pid, (max_lifetime, jitter): (Duration, Duration)) -> Duration {
    if jitter.is_zero() {
        return max_lifetime;
    }
    // splitmix64 of the pid: consecutive pids land far apart.
    let mut x = (pid.as_raw() as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let jitter_ms = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    max_lifetime + Duration::from_millis(x % jitter_ms.saturating_add(1))
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_lifetime_is_the_limit_plus_a_jitter_fixed_per_copy() {
        let limit = Duration::from_secs(60);
        assert_eq!(lifetime(Pid::from_raw(42), (limit, Duration::ZERO)), limit);
        let jitter = Duration::from_secs(10);
        let drawn: Vec<Duration> = (1000..1100)
            .map(|pid| lifetime(Pid::from_raw(pid), (limit, jitter)))
            .collect();
        assert!(drawn.iter().all(|d| *d >= limit && *d <= limit + jitter));
        // The same copy draws the same lifetime on every tick.
        assert_eq!(drawn[7], lifetime(Pid::from_raw(1007), (limit, jitter)));
        // Copies started together (consecutive pids) are spread over the jitter.
        let early = drawn.iter().filter(|d| **d < limit + jitter / 2).count();
        assert!(
            (30..=70).contains(&early),
            "{early} of 100 in the first half"
        );
    }
}
