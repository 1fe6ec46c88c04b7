//! A pool tick's decisions: which workers to spawn, retire (gracefully) or kill, given the
//! pool's limits, a snapshot of its workers, the policy's memory and `now`.
//!
//! The master calls [`plan`] for every pool on each tick (about every 100 ms, with
//! `maintenance_due` once a second, php-fpm's rhythm) and when an ondemand pool's listener
//! becomes readable, then applies the actions in order. Every branch follows php-fpm's
//! `fpm_pctl_perform_idle_server_maintenance` unless a comment says why not.
//! `Spawn` says how many workers are missing; whether to start them now (a [`super::Backoff`]
//! delay after start-up failures, a pool stopping) stays the master's call.
//!
//! Two rules hold throughout:
//! - A worker that is retiring (or was killed and not yet reaped) no longer serves: it is
//!   neither idle capacity nor part of a static pool's count; but it is still a process, so it
//!   holds its place under `max_children` (and its scoreboard slot) until it exits. This is
//!   php-fpm's `running_children`, and it keeps the operator's memory budget a hard cap.
//! - A worker in a request is never retired mid-request: retiring is graceful, and only
//!   `request_terminate_timeout` (or, for one still reading its request from a slow client,
//!   `request_read_timeout`) kills a busy worker.

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::{Action, Reason};
use crate::config::{Pm, PmMode};

/// One live worker process of the pool, as the master sees it this tick. The master lists
/// every process it has started and not yet reaped, including those too new to appear in the
/// scoreboard (not busy), or the policy would spawn their capacity twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerView {
    pub pid: Pid,
    /// In a request. A worker still starting is not busy: it is capacity on its way.
    pub busy: bool,
    /// Start of the current request when busy; otherwise idle since (its start, before any).
    pub since: Instant,
    /// When the process started; breaks ties between workers idle for as long.
    pub started: Instant,
    /// Resident memory in bytes, when sampled for this tick.
    pub rss: Option<u64>,
    /// When the master asked it to retire; None while it serves.
    pub retiring: Option<Instant>,
    /// Busy waiting for its client to send the request (headers and body), since `since`;
    /// set where the master sees it from outside (php-cgi workers).
    pub reading: bool,
}

/// The limits of one pool that the policy reads.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolLimits {
    pub pm: Pm,
    pub request_terminate_timeout: Option<Duration>,
    /// A worker `reading` for longer is killed: its client is too slow (slowloris).
    pub request_read_timeout: Option<Duration>,
    /// How long a retiring worker out of any request may take to exit before SIGKILL: the
    /// global `process_control_timeout` (a program's `stop_timeout`).
    pub retire_timeout: Duration,
    /// The key [`PoolLimits::retire_timeout`] comes from, named in the kill's log line.
    pub retire_timeout_key: &'static str,
    /// A program's `max_lifetime` and `max_lifetime_jitter`: a copy older than its drawn
    /// lifetime ([`super::lifetime`]) is retired.
    pub max_lifetime: Option<(Duration, Duration)>,
}

/// What the policy remembers between ticks, per pool.
#[derive(Debug, Clone)]
pub struct PolicyState {
    /// dynamic: the next spawn batch; doubles each tick that spawns, up to max_spawn_rate.
    spawn_rate: u32,
    /// max_children has stopped a spawn, and no spawn has gone through since: the episode
    /// that is logged once.
    at_max_children: bool,
    /// Killed, not yet reaped: not killed twice, not counted as serving.
    killed: Vec<Pid>,
    pub counters: Counters,
}

/// Totals since the pool started, for the status page and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Episodes in which max_children stopped a spawn (php-fpm's `max children reached`).
    pub max_children_reached: u64,
    pub retired_max_spare: u64,
    pub retired_idle_timeout: u64,
    pub retired_max_memory: u64,
    /// A program's copies retired past their `max_lifetime`.
    pub retired_max_lifetime: u64,
    pub killed_request_timeout: u64,
    pub killed_read_timeout: u64,
    pub killed_retire_timeout: u64,
    /// Idle workers retired for the pool's memory (`max_pool_memory`, `"auto"`'s cap).
    pub retired_pool_memory: u64,
}

impl Default for PolicyState {
    fn default() -> Self {
        PolicyState {
            spawn_rate: 1,
            at_max_children: false,
            killed: Vec::new(),
            counters: Counters::default(),
        }
    }
}

impl PolicyState {
    /// dynamic: the size of the next spawn batch.
    pub fn spawn_rate(&self) -> u32 {
        self.spawn_rate
    }

    /// Forgets the kills of workers no longer among `workers` (reaped).
    pub(super) fn forget_reaped(&mut self, workers: &[WorkerView]) {
        self.killed
            .retain(|pid| workers.iter().any(|w| w.pid == *pid));
    }

    /// Counts a retire or kill by its cause.
    fn count(&mut self, reason: &Reason) {
        let c = &mut self.counters;
        *match reason {
            Reason::MaxSpare { .. } => &mut c.retired_max_spare,
            Reason::IdleTimeout { .. } => &mut c.retired_idle_timeout,
            Reason::MaxMemory { .. } => &mut c.retired_max_memory,
            Reason::MaxLifetime { .. } => &mut c.retired_max_lifetime,
            Reason::Terminate { .. } => &mut c.killed_request_timeout,
            Reason::ReadTimeout { .. } => &mut c.killed_read_timeout,
            Reason::RetireTimeout { .. } => &mut c.killed_retire_timeout,
            Reason::PoolMemory(_) => &mut c.retired_pool_memory,
        } += 1;
    }

    pub(super) fn retire(&mut self, actions: &mut Vec<Action>, pid: Pid, reason: Reason) {
        self.count(&reason);
        actions.push(Action::Retire { pid, reason });
    }

    /// Spawns up to `wanted` within the room max_children leaves; true when something spawned.
    fn spawn(
        &mut self,
        actions: &mut Vec<Action>,
        pm: &Pm,
        census: &Census<'_>,
        wanted: u32,
    ) -> bool {
        let n = wanted.min(pm.max_children.saturating_sub(census.total));
        if n == 0 {
            if !self.at_max_children {
                self.at_max_children = true;
                self.counters.max_children_reached += 1;
                actions.push(Action::MaxChildrenReached {
                    max_children: pm.max_children,
                });
            }
            return false;
        }
        self.at_max_children = false;
        actions.push(Action::Spawn(n));
        true
    }
}

/// The pool's workers, counted for the mode rules.
struct Census<'a> {
    /// Every live process, serving or not: what max_children caps.
    total: u32,
    /// Serving workers out of any request, longest idle first.
    idle: Vec<&'a WorkerView>,
}

/// A pool tick. `waiting`: ondemand only, connections queued on the listener (Some(1) when
/// only its readability is known). `maintenance_due`: the once-a-second tick, when dynamic and
/// ondemand pools are resized; limits on single workers are checked on every call.
pub fn plan(
    limits: &PoolLimits,
    state: &mut PolicyState,
    workers: &[WorkerView],
    waiting: Option<u32>,
    now: Instant,
    maintenance_due: bool,
) -> Vec<Action> {
    let mut actions = Vec::new();
    state.forget_reaped(workers);
    let mut serving = Vec::with_capacity(workers.len());
    for worker in workers {
        serving.push(check_worker(limits, state, worker, now, &mut actions));
    }
    let mut idle: Vec<&WorkerView> = workers
        .iter()
        .zip(&serving)
        .filter(|(w, serving)| **serving && !w.busy)
        .map(|(w, _)| w)
        .collect();
    idle.sort_by_key(|w| (w.since, w.started));
    let census = Census {
        total: u32::try_from(workers.len()).unwrap_or(u32::MAX),
        idle,
    };
    let pm = &limits.pm;
    match pm.mode {
        PmMode::Static => {
            // Every call, not only on maintenance: an exited worker is replaced at once.
            let missing = pm.max_children.saturating_sub(census.total);
            if missing > 0 {
                actions.push(Action::Spawn(missing));
            }
        }
        PmMode::Dynamic if maintenance_due => dynamic(pm, state, &census, &mut actions),
        PmMode::Dynamic => {}
        PmMode::Ondemand => ondemand(
            pm,
            state,
            census,
            waiting,
            now,
            maintenance_due,
            &mut actions,
        ),
    }
    actions
}

/// The limits on one worker: request timeout, retire timeout, memory. True if it still serves.
pub(super) fn check_worker(
    limits: &PoolLimits,
    state: &mut PolicyState,
    worker: &WorkerView,
    now: Instant,
    actions: &mut Vec<Action>,
) -> bool {
    if state.killed.contains(&worker.pid) {
        return false;
    }
    if let Some(reason) = kill_reason(limits, worker, now) {
        state.count(&reason);
        state.killed.push(worker.pid);
        actions.push(Action::Kill {
            pid: worker.pid,
            reason,
        });
        return false;
    }
    if worker.retiring.is_some() {
        return false;
    }
    if let (Some(rss), Some(limit)) = (worker.rss, limits.pm.max_memory)
        && rss > limit
    {
        state.retire(actions, worker.pid, Reason::MaxMemory { rss, limit });
        return false;
    }
    if let Some(max_lifetime) = limits.max_lifetime {
        let limit = super::lifetime(worker.pid, max_lifetime);
        let lived = now.saturating_duration_since(worker.started);
        if lived > limit {
            state.retire(actions, worker.pid, Reason::MaxLifetime { lived, limit });
            return false;
        }
    }
    true
}

fn kill_reason(limits: &PoolLimits, worker: &WorkerView, now: Instant) -> Option<Reason> {
    if worker.busy {
        let elapsed = now.saturating_duration_since(worker.since);
        if worker.reading
            && let Some(limit) = limits.request_read_timeout
            && elapsed > limit
        {
            return Some(Reason::ReadTimeout {
                waited: elapsed,
                limit,
            });
        }
        // The wait for the request counts toward its time: `since` is the wait's start.
        let limit = limits.request_terminate_timeout?;
        // A retiring worker in a request is left to finish it, unless that request is stuck.
        return (elapsed > limit).then_some(Reason::Terminate { elapsed, limit });
    }
    let asked = worker.retiring?;
    // From the later of the request to retire and the end of the last request: a worker that
    // has just finished the request it was asked to finish is on its way out, not stuck.
    let waited = now.saturating_duration_since(asked.max(worker.since));
    let limit = limits.retire_timeout;
    (waited > limit).then_some(Reason::RetireTimeout {
        waited,
        limit,
        key: limits.retire_timeout_key,
    })
}

/// php-fpm's dynamic algorithm: retire one spare above max_spare, or spawn a doubling batch
/// below min_spare.
fn dynamic(pm: &Pm, state: &mut PolicyState, census: &Census<'_>, actions: &mut Vec<Action>) {
    let idle = u32::try_from(census.idle.len()).unwrap_or(u32::MAX);
    if idle > pm.max_spare_servers {
        // One per tick: the excess drains over a few seconds, in case the load comes back.
        // Longest idle rather than php-fpm's oldest started: it is the least needed one.
        let reason = Reason::MaxSpare {
            idle,
            max_spare: pm.max_spare_servers,
        };
        state.retire(actions, census.idle[0].pid, reason);
        state.spawn_rate = 1;
        return;
    }
    if idle >= pm.min_spare_servers {
        // The pressure is over: the next ramp starts small again.
        state.spawn_rate = 1;
        return;
    }
    let wanted = state.spawn_rate.min(pm.min_spare_servers - idle);
    if state.spawn(actions, pm, census, wanted) {
        state.spawn_rate = state
            .spawn_rate
            .saturating_mul(2)
            .min(pm.max_spawn_rate.max(1));
    } else {
        // As php-fpm: once room opens, restart the ramp rather than burst.
        state.spawn_rate = 1;
    }
}

/// ondemand: retire workers idle past process_idle_timeout; spawn when connections wait and
/// no worker is idle to take them.
fn ondemand(
    pm: &Pm,
    state: &mut PolicyState,
    mut census: Census<'_>,
    waiting: Option<u32>,
    now: Instant,
    maintenance_due: bool,
    actions: &mut Vec<Action>,
) {
    if maintenance_due {
        let limit = pm.process_idle_timeout;
        census.idle.retain(|worker| {
            let idle = now.saturating_duration_since(worker.since);
            if idle <= limit {
                return true;
            }
            state.retire(actions, worker.pid, Reason::IdleTimeout { idle, limit });
            false
        });
    }
    let waiting = waiting.unwrap_or(0);
    if waiting > 0 && census.idle.is_empty() {
        // One worker per waiting connection: each of them is a request with no one to serve it.
        state.spawn(actions, pm, &census, waiting);
    }
}
