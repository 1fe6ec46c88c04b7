//! One test per branch of the policy, with workers as plain values and time as arguments:
//! static and ondemand pools and the limits on single workers here, dynamic in [`dynamic`].

mod dynamic;

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
fn max_memory_retires_a_worker_once_and_gracefully() {
    let mut l = limits(PmMode::Static, 3);
    l.pm.max_memory = Some(64 << 20);
    let mut s = PolicyState::default();
    let mut fat = busy(1, SEC);
    fat.rss = Some(65 << 20);
    let mut lean = idle(2, SEC);
    lean.rss = Some(10 << 20);
    let workers = [fat.clone(), lean, idle(3, SEC)];
    let reason = Reason::MaxMemory {
        rss: 65 << 20,
        limit: 64 << 20,
    };
    assert_eq!(
        tick(&l, &mut s, &workers),
        [Action::Retire {
            pid: pid(1),
            reason
        }],
        "busy: after its request"
    );
    let workers = [
        retiring(fat, Duration::ZERO),
        workers[1].clone(),
        workers[2].clone(),
    ];
    assert_eq!(
        tick(&l, &mut s, &workers),
        [],
        "never again for a retiring worker"
    );
    assert_eq!(s.counters.retired_max_memory, 1);
}

#[test]
fn a_program_copy_past_its_lifetime_is_retired_once_then_killed_past_stop_timeout() {
    let mut l = limits(PmMode::Static, 2);
    l.max_lifetime = Some((600 * SEC, Duration::ZERO));
    l.retire_timeout_key = "stop_timeout";
    let mut s = PolicyState::default();
    let mut young = idle(2, SEC);
    young.started = now() - 599 * SEC;
    // A copy is never busy: idle since it started.
    let old = idle(1, 1000 * SEC);
    let workers = [old.clone(), young.clone()];
    let actions = tick(&l, &mut s, &workers);
    assert_eq!(
        actions,
        [Action::Retire {
            pid: pid(1),
            reason: Reason::MaxLifetime {
                lived: 1000 * SEC,
                limit: 600 * SEC
            }
        }],
        "only the one past 600 s"
    );
    assert_eq!(s.counters.retired_max_lifetime, 1);
    // Retiring, it holds its place (no spawn) and is not retired again; past the stop
    // timeout (retire_timeout) it is killed.
    let workers = [retiring(old.clone(), 5 * SEC), young.clone()];
    assert_eq!(tick(&l, &mut s, &workers), []);
    let workers = [retiring(old, 11 * SEC), young];
    let actions = tick(&l, &mut s, &workers);
    let [Action::Kill { reason, .. }] = &actions[..] else {
        panic!("one kill, got {actions:?}");
    };
    assert_eq!(
        reason.to_string(),
        "still there 11.0s after retiring, past stop_timeout (10s)",
        "the log line names the key that set the limit"
    );
    assert_eq!(s.counters.retired_max_lifetime, 1);
}

#[test]
fn request_terminate_timeout_kills_a_stuck_worker_once_on_any_tick() {
    let mut l = limits(PmMode::Static, 2);
    l.request_terminate_timeout = Some(2 * SEC);
    let mut s = PolicyState::default();
    let workers = [busy(1, 3 * SEC), busy(2, SEC), idle(3, 60 * SEC)];
    let reason = Reason::Terminate {
        elapsed: 3 * SEC,
        limit: 2 * SEC,
    };
    assert_eq!(
        plan(&l, &mut s, &workers, None, now(), false),
        [Action::Kill {
            pid: pid(1),
            reason
        }]
    );
    assert_eq!(
        plan(&l, &mut s, &workers, None, now(), false),
        [],
        "killed, not yet reaped"
    );
    assert_eq!(s.counters.killed_request_timeout, 1);
    assert_eq!(
        tick(&l, &mut s, &workers[1..2]),
        [Action::Spawn(1)],
        "reaped: replaced"
    );
}

fn reading(pid: i32, for_: Duration) -> WorkerView {
    WorkerView {
        reading: true,
        ..busy(pid, for_)
    }
}

#[test]
fn a_worker_reading_past_request_read_timeout_is_killed_once() {
    let mut l = limits(PmMode::Static, 3);
    l.request_read_timeout = Some(3 * SEC);
    let mut s = PolicyState::default();
    // A busy worker as long is running its script: only the reading one is the client's fault.
    let workers = [reading(1, 4 * SEC), reading(2, 2 * SEC), busy(3, 60 * SEC)];
    let reason = Reason::ReadTimeout {
        waited: 4 * SEC,
        limit: 3 * SEC,
    };
    assert_eq!(
        reason.to_string(),
        "waited 4.0s for its client to send the request, past request_read_timeout (3s)"
    );
    assert_eq!(
        plan(&l, &mut s, &workers, None, now(), false),
        [Action::Kill {
            pid: pid(1),
            reason
        }]
    );
    assert_eq!(plan(&l, &mut s, &workers, None, now(), false), []);
    assert_eq!(s.counters.killed_read_timeout, 1);
}

#[test]
fn reading_counts_as_busy_so_a_dynamic_pool_grows() {
    let mut l = dynamic(4, 1, 2);
    l.request_read_timeout = Some(30 * SEC);
    let mut s = PolicyState::default();
    assert_eq!(
        plan(
            &l,
            &mut s,
            &[reading(1, SEC), reading(2, SEC)],
            None,
            now(),
            true
        ),
        [Action::Spawn(1)]
    );
}

#[test]
fn the_wait_for_the_request_counts_toward_request_terminate_timeout() {
    let mut l = limits(PmMode::Static, 1);
    (l.request_read_timeout, l.request_terminate_timeout) = (Some(30 * SEC), Some(5 * SEC));
    let reason = Reason::Terminate {
        elapsed: 6 * SEC,
        limit: 5 * SEC,
    };
    assert_eq!(
        tick(&l, &mut PolicyState::default(), &[reading(1, 6 * SEC)]),
        [Action::Kill {
            pid: pid(1),
            reason
        }]
    );
    // Without request_read_timeout ("0s"), a slow client is bounded by the other limit only.
    l.request_read_timeout = None;
    assert_eq!(
        tick(&l, &mut PolicyState::default(), &[reading(1, 4 * SEC)]),
        []
    );
}

#[test]
fn no_request_timeout_without_the_setting() {
    let l = limits(PmMode::Static, 1);
    assert_eq!(
        tick(&l, &mut PolicyState::default(), &[busy(1, 3600 * SEC)]),
        []
    );
}

#[test]
fn a_retiring_worker_that_does_not_exit_is_killed_after_process_control_timeout() {
    let l = limits(PmMode::Static, 3);
    let mut s = PolicyState::default();
    let stuck = retiring(idle(1, 60 * SEC), 11 * SEC);
    let finishing = retiring(busy(2, 60 * SEC), 11 * SEC);
    let just_done = retiring(idle(3, SEC), 11 * SEC);
    let reason = Reason::RetireTimeout {
        waited: 11 * SEC,
        limit: 10 * SEC,
        key: "process_control_timeout",
    };
    assert_eq!(
        tick(&l, &mut s, &[stuck, finishing, just_done]),
        [Action::Kill {
            pid: pid(1),
            reason
        }]
    );
    assert_eq!(s.counters.killed_retire_timeout, 1);
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
