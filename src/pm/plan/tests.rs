//! One test per branch of the policy, with workers as plain values and time as arguments:
//! static and ondemand pools here, dynamic in [`dynamic`], the limits on single workers in
//! [`worker`].

mod dynamic;
mod worker;

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::*;
use crate::config::{Pm, PmMode};

const SEC: Duration = Duration::from_secs(1);

/// A fixed "now" far enough from the epoch of `Instant` that every `since` below exists.
fn now() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now) + 10_000 * SEC
}

fn limits(mode: PmMode, max_children: u32) -> PoolLimits {
    PoolLimits {
        pm: Pm {
            mode,
            max_children,
            start_servers: 2,
            min_spare_servers: 2,
            max_spare_servers: 4,
            max_spawn_rate: 8,
            process_idle_timeout: 10 * SEC,
            max_requests: 0,
            max_requests_jitter: 0,
            max_memory: None,
            memory: Default::default(),
        },
        request_terminate_timeout: None,
        request_read_timeout: None,
        retire_timeout: 10 * SEC,
        retire_timeout_key: "process_control_timeout",
        max_lifetime: None,
    }
}

fn dynamic(max_children: u32, min_spare: u32, max_spare: u32) -> PoolLimits {
    let mut l = limits(PmMode::Dynamic, max_children);
    (l.pm.min_spare_servers, l.pm.max_spare_servers) = (min_spare, max_spare);
    l
}

fn worker(pid: i32, busy: bool, for_: Duration) -> WorkerView {
    let now = now();
    WorkerView {
        pid: Pid::from_raw(pid),
        busy,
        since: now - for_,
        started: now - 1000 * SEC,
        rss: None,
        retiring: None,
        reading: false,
    }
}

fn idle(pid: i32, for_: Duration) -> WorkerView {
    worker(pid, false, for_)
}

fn busy(pid: i32, for_: Duration) -> WorkerView {
    worker(pid, true, for_)
}

fn retiring(mut w: WorkerView, asked_ago: Duration) -> WorkerView {
    w.retiring = Some(now() - asked_ago);
    w
}

fn tick(l: &PoolLimits, s: &mut PolicyState, workers: &[WorkerView]) -> Vec<Action> {
    plan(l, s, workers, None, now(), true)
}

fn pid(n: i32) -> Pid {
    Pid::from_raw(n)
}

#[test]
fn static_refills_to_max_children_on_every_tick() {
    let l = limits(PmMode::Static, 4);
    let mut s = PolicyState::default();
    let three = [idle(1, SEC), busy(2, SEC), idle(3, SEC)];
    assert_eq!(
        plan(&l, &mut s, &three, None, now(), false),
        [Action::Spawn(1)]
    );
    assert_eq!(tick(&l, &mut s, &[]), [Action::Spawn(4)]);
    let four = [idle(1, SEC), busy(2, SEC), idle(3, SEC), idle(4, SEC)];
    assert_eq!(tick(&l, &mut s, &four), []);
}

#[test]
fn retiring_workers_hold_their_place_under_max_children_until_they_exit() {
    let l = limits(PmMode::Static, 3);
    let mut s = PolicyState::default();
    let workers = [idle(1, SEC), idle(2, SEC), retiring(busy(3, SEC), SEC)];
    assert_eq!(
        tick(&l, &mut s, &workers),
        [],
        "a replacement would make 4 processes"
    );
    assert_eq!(
        tick(&l, &mut s, &workers[..2]),
        [Action::Spawn(1)],
        "replaced once reaped"
    );
}

#[test]
fn ondemand_spawns_for_waiting_connections_when_none_is_idle() {
    let l = limits(PmMode::Ondemand, 4);
    let mut s = PolicyState::default();
    assert_eq!(
        plan(&l, &mut s, &[], Some(1), now(), false),
        [Action::Spawn(1)]
    );
    assert_eq!(
        plan(&l, &mut s, &[busy(1, SEC)], Some(2), now(), false),
        [Action::Spawn(2)]
    );
    assert_eq!(
        plan(&l, &mut s, &[busy(1, SEC)], Some(9), now(), false),
        [Action::Spawn(3)],
        "within max_children"
    );
}

#[test]
fn ondemand_rests_at_zero_and_leaves_waiting_work_to_an_idle_worker() {
    let l = limits(PmMode::Ondemand, 4);
    let mut s = PolicyState::default();
    assert_eq!(tick(&l, &mut s, &[]), []);
    assert_eq!(plan(&l, &mut s, &[], Some(0), now(), true), []);
    let starting = idle(2, Duration::ZERO);
    assert_eq!(
        plan(&l, &mut s, &[busy(1, SEC), starting], Some(1), now(), false),
        []
    );
}

#[test]
fn ondemand_max_children_is_logged_once_per_episode() {
    let l = limits(PmMode::Ondemand, 2);
    let mut s = PolicyState::default();
    let full = [busy(1, SEC), busy(2, SEC)];
    let reached = Action::MaxChildrenReached { max_children: 2 };
    assert_eq!(plan(&l, &mut s, &full, Some(3), now(), false), [reached]);
    assert_eq!(plan(&l, &mut s, &full, Some(3), now(), false), []);
    assert_eq!(s.counters.max_children_reached, 1);
}

#[test]
fn ondemand_retires_workers_idle_past_the_timeout_on_maintenance() {
    let l = limits(PmMode::Ondemand, 4);
    let mut s = PolicyState::default();
    let workers = [
        idle(1, 11 * SEC),
        idle(2, 3 * SEC),
        busy(3, 60 * SEC),
        idle(4, 12 * SEC),
    ];
    assert_eq!(
        plan(&l, &mut s, &workers, None, now(), false),
        [],
        "not on the timeout tick"
    );
    let retired: Vec<_> = tick(&l, &mut s, &workers)
        .into_iter()
        .map(|a| match a {
            Action::Retire {
                pid,
                reason: Reason::IdleTimeout { idle, limit },
            } => (pid.as_raw(), idle.as_secs(), limit),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(retired, [(4, 12, 10 * SEC), (1, 11, 10 * SEC)]);
    assert_eq!(s.counters.retired_idle_timeout, 2);
}

#[test]
fn reasons_name_the_setting_in_the_log() {
    let cases = [
        (
            Reason::MaxSpare {
                idle: 5,
                max_spare: 4,
            },
            "5 idle workers, above max_spare_servers (4)",
        ),
        (
            Reason::MaxMemory {
                rss: 70 << 20,
                limit: 64 << 20,
            },
            "resident memory 70.0 MiB, above max_memory (64.0 MiB)",
        ),
        (
            Reason::Terminate {
                elapsed: 2100 * Duration::from_millis(1),
                limit: 2 * SEC,
            },
            "request running for 2.1s, past request_terminate_timeout (2s)",
        ),
        (
            Reason::IdleTimeout {
                idle: 12 * SEC,
                limit: 10 * SEC,
            },
            "idle for 12.0s, past process_idle_timeout (10s)",
        ),
    ];
    for (reason, text) in cases {
        assert_eq!(reason.to_string(), text);
    }
}
