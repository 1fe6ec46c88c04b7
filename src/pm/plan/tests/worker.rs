//! The limits on single workers, checked on every tick: `max_memory`, a program's
//! lifetime, `request_terminate_timeout`, `request_read_timeout` and the retire timeout.

use super::*;

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
fn a_request_exactly_at_request_terminate_timeout_is_not_killed_yet() {
    let mut l = limits(PmMode::Static, 1);
    l.request_terminate_timeout = Some(2 * SEC);
    let mut s = PolicyState::default();
    assert_eq!(tick(&l, &mut s, &[busy(1, 2 * SEC)]), []);
    let past = busy(1, 2 * SEC + Duration::from_millis(1));
    assert!(matches!(
        &tick(&l, &mut s, &[past])[..],
        [Action::Kill {
            reason: Reason::Terminate { .. },
            ..
        }]
    ));
}

#[test]
fn max_memory_retires_an_idle_worker_as_a_busy_one_and_neither_at_the_limit() {
    let mut l = limits(PmMode::Static, 3);
    l.pm.max_memory = Some(64 << 20);
    let mut s = PolicyState::default();
    let with_rss = |mut w: WorkerView, rss: u64| {
        w.rss = Some(rss);
        w
    };
    let workers = [
        with_rss(idle(1, SEC), 65 << 20),
        with_rss(busy(2, SEC), 65 << 20),
        with_rss(idle(3, SEC), 64 << 20),
    ];
    let retire = |n| Action::Retire {
        pid: pid(n),
        reason: Reason::MaxMemory {
            rss: 65 << 20,
            limit: 64 << 20,
        },
    };
    // Retiring is graceful either way: the busy one finishes its request first (its
    // SIGTERM waits for the request, or for it to be seen idle).
    assert_eq!(tick(&l, &mut s, &workers), [retire(1), retire(2)]);
    assert_eq!(s.counters.retired_max_memory, 2);
}
