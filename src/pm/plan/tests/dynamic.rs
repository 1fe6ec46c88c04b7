//! The dynamic mode: php-fpm's spawn ramp, spare limits and the max_children episode.

use super::*;

#[test]
fn dynamic_spawn_batches_double_up_to_max_spawn_rate() {
    let l = dynamic(1000, 100, 200);
    let mut s = PolicyState::default();
    let mut workers = Vec::new();
    let mut batches = Vec::new();
    for _ in 0..6 {
        let [Action::Spawn(n)] = tick(&l, &mut s, &workers)[..] else {
            panic!("one spawn")
        };
        batches.push(n);
        // The new workers are all taken by requests at once: still no spare.
        let next = workers.len() as i32 + 1;
        workers.extend((next..next + n as i32).map(|p| busy(p, SEC)));
    }
    assert_eq!(batches, [1, 2, 4, 8, 8, 8], "max_spawn_rate is 8");
}

#[test]
fn dynamic_spawns_only_the_missing_spares() {
    let l = dynamic(100, 5, 8);
    let mut s = PolicyState::default();
    for _ in 0..3 {
        tick(&l, &mut s, &[busy(1, SEC)]);
    }
    assert_eq!(s.spawn_rate(), 8);
    let three_idle = [idle(1, SEC), idle(2, SEC), idle(3, SEC)];
    assert_eq!(
        tick(&l, &mut s, &three_idle),
        [Action::Spawn(2)],
        "min_spare 5 - 3 idle"
    );
}

#[test]
fn dynamic_resizes_only_on_maintenance_ticks() {
    let l = dynamic(10, 2, 4);
    let mut s = PolicyState::default();
    assert_eq!(plan(&l, &mut s, &[], None, now(), false), []);
    let spares: Vec<_> = (1..=6).map(|p| idle(p, SEC)).collect();
    assert_eq!(plan(&l, &mut s, &spares, None, now(), false), []);
    assert_eq!(s.spawn_rate(), 1);
}

#[test]
fn dynamic_retires_the_longest_idle_above_max_spare_and_resets_the_rate() {
    let l = dynamic(100, 2, 3);
    let mut s = PolicyState::default();
    tick(&l, &mut s, &[]);
    tick(&l, &mut s, &[busy(9, SEC)]);
    assert_eq!(s.spawn_rate(), 4);
    let workers = [
        idle(1, 5 * SEC),
        idle(2, 30 * SEC),
        busy(3, 60 * SEC),
        idle(4, SEC),
        idle(5, 20 * SEC),
    ];
    let reason = Reason::MaxSpare {
        idle: 4,
        max_spare: 3,
    };
    assert_eq!(
        tick(&l, &mut s, &workers),
        [Action::Retire {
            pid: pid(2),
            reason
        }],
        "only one per tick"
    );
    assert_eq!(s.spawn_rate(), 1);
    assert_eq!(s.counters.retired_max_spare, 1);
}

#[test]
fn dynamic_breaks_an_idle_tie_with_the_oldest_worker() {
    let l = dynamic(100, 1, 1);
    let mut s = PolicyState::default();
    let (mut young, old) = (idle(1, 5 * SEC), idle(2, 5 * SEC));
    young.started = now() - 10 * SEC;
    assert!(
        matches!(tick(&l, &mut s, &[young, old])[..], [Action::Retire { pid: p, .. }] if p == pid(2))
    );
}

#[test]
fn dynamic_keeps_spares_in_range_and_restarts_the_ramp() {
    let l = dynamic(100, 2, 4);
    let mut s = PolicyState::default();
    tick(&l, &mut s, &[]);
    assert_eq!(s.spawn_rate(), 2);
    assert_eq!(
        tick(&l, &mut s, &[idle(1, SEC), idle(2, SEC), idle(3, SEC)]),
        []
    );
    assert_eq!(s.spawn_rate(), 1);
}

#[test]
fn dynamic_max_children_is_logged_once_per_episode_and_counted() {
    let l = dynamic(4, 2, 3);
    let mut s = PolicyState::default();
    let full: Vec<_> = (1..=4).map(|p| busy(p, SEC)).collect();
    let reached = Action::MaxChildrenReached { max_children: 4 };
    assert_eq!(tick(&l, &mut s, &full), std::slice::from_ref(&reached));
    assert_eq!(tick(&l, &mut s, &full), [], "same episode");
    assert_eq!(s.counters.max_children_reached, 1);
    assert_eq!(
        tick(&l, &mut s, &full[..3]),
        [Action::Spawn(1)],
        "room again: the episode ends"
    );
    assert_eq!(tick(&l, &mut s, &full), [reached]);
    assert_eq!(s.counters.max_children_reached, 2);
}

#[test]
fn dynamic_spawns_what_fits_under_max_children_and_restarts_the_ramp_when_full() {
    let l = dynamic(5, 4, 4);
    let mut s = PolicyState::default();
    for _ in 0..3 {
        tick(&l, &mut s, &[]);
    }
    assert_eq!(s.spawn_rate(), 8);
    let three: Vec<_> = (1..=3).map(|p| busy(p, SEC)).collect();
    assert_eq!(
        tick(&l, &mut s, &three),
        [Action::Spawn(2)],
        "5 - 3 processes"
    );
    let five: Vec<_> = (1..=5).map(|p| busy(p, SEC)).collect();
    tick(&l, &mut s, &five);
    assert_eq!(s.spawn_rate(), 1);
}

#[test]
fn dynamic_does_not_count_retiring_workers_as_spare() {
    let l = dynamic(10, 2, 2);
    let mut s = PolicyState::default();
    let workers = [
        idle(1, SEC),
        retiring(idle(2, 9 * SEC), SEC),
        retiring(idle(3, 9 * SEC), SEC),
    ];
    assert_eq!(
        tick(&l, &mut s, &workers),
        [Action::Spawn(1)],
        "one spare, not three"
    );
    let spares = [idle(1, SEC), idle(4, SEC), retiring(idle(2, 90 * SEC), SEC)];
    assert_eq!(
        tick(&l, &mut s, &spares),
        [],
        "at max_spare, the retiring one aside"
    );
}
