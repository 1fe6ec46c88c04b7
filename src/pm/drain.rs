//! The two ends of a generation, as the executor's steps in order, from the facts the
//! master passes in: a drain's start ([`drain`]: a reload's old generation, a removed
//! pool) and its ticks ([`drain_tick`]), the master's stop ([`stop`]), and a failed
//! generation's refusal of connections ([`refuse`]). [`Linger`] decides when a parent asked
//! to stop that outlives its workers is killed.

use std::time::{Duration, Instant};

use super::plan::check_worker;
use super::{Action, PolicyState, PoolLimits, WorkerView};

/// The actions that start a drain. `has_parent`: the pool's workers are forked by a parent
/// (php-cgi, drover-php, a Python zygote), which goes first, as it serves nothing and would
/// replace the workers that exit. `close_listener`: no next generation shares the listener
/// (the pool was removed, or its address changed).
pub fn drain(has_parent: bool, close_listener: bool) -> Vec<Action> {
    let mut actions = vec![Action::Drain];
    if has_parent {
        actions.push(Action::StopParents);
    }
    actions.push(Action::RetireAll);
    if close_listener {
        actions.push(Action::CloseListener);
    }
    actions
}

/// The actions that start the master's graceful stop for one generation: it replaces
/// nothing more, its parent goes first (as in a drain), and its listener is shut down for
/// reading (queued connections are still served, new ones refused, and a worker whose
/// accept() then fails exits on its own, as php-fpm's children do on SIGQUIT).
/// `retire_workers`: the workers have no listener to see closed (a program's copies), so
/// they are asked to stop.
pub fn stop(has_parent: bool, retire_workers: bool) -> Vec<Action> {
    let mut actions = vec![Action::Stop];
    if has_parent {
        actions.push(Action::StopParents);
    }
    actions.push(Action::CloseListener);
    if retire_workers {
        actions.extend([Action::RetireAll, Action::SignalRetiring]);
    }
    actions
}

/// A generation as [`refuse`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Its app cannot load: it runs nothing until a reload.
    pub failed: bool,
    /// Its listener was shut down for that already.
    pub refusing: bool,
    /// A reload replaced or removed it.
    pub draining: bool,
    /// No other generation of the pool serves its socket.
    pub alone: bool,
}

/// A generation whose app failed, that nothing else serves the socket of, refuses
/// connections ([`Action::Refuse`]) rather than let them wait for a worker that never
/// comes; once. A draining one goes anyway, and a reload's new generation (not `alone`)
/// takes the connections.
pub fn refuse(generation: Standing) -> Vec<Action> {
    let Standing {
        failed,
        refusing,
        draining,
        alone,
    } = generation;
    if failed && !refusing && !draining && alone {
        vec![Action::Refuse]
    } else {
        Vec::new()
    }
}

/// A draining generation's tick: SIGTERM to the workers it may reach now, SIGKILL to a
/// parent that outlived its workers by the retire timeout (`linger`), and to the workers
/// stuck past a limit: retiring past the retire timeout, in a request past
/// `request_terminate_timeout` or reading one past `request_read_timeout`. Every worker of
/// a draining generation is retiring, from `now` if not asked before; none is spawned.
pub fn drain_tick(
    limits: &PoolLimits,
    state: &mut PolicyState,
    linger: &mut Linger,
    workers: &[WorkerView],
    now: Instant,
) -> Vec<Action> {
    let mut actions = vec![Action::SignalRetiring];
    if linger.due(workers.is_empty(), now, limits.retire_timeout) {
        actions.push(Action::KillLingeringParents);
    }
    state.forget_reaped(workers);
    for worker in workers {
        let retiring = WorkerView {
            retiring: worker.retiring.or(Some(now)),
            ..worker.clone()
        };
        check_worker(limits, state, &retiring, now, &mut actions);
    }
    actions
}

/// Draining or stopping: since when a parent asked to stop with TERM has had no worker
/// left.
#[derive(Debug, Default)]
pub struct Linger {
    alone_since: Option<Instant>,
}

impl Linger {
    /// Whether the parent, `alone` (no worker left) or not at `now`, has been alone for
    /// `timeout`: then it is killed.
    pub fn due(&mut self, alone: bool, now: Instant, timeout: Duration) -> bool {
        if !alone {
            self.alone_since = None;
            return false;
        }
        let since = *self.alone_since.get_or_insert(now);
        now.duration_since(since) >= timeout
    }
}

#[cfg(test)]
mod tests {
    use nix::unistd::Pid;

    use super::*;
    use crate::config::{Pm, PmMode};
    use crate::pm::Reason;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_parent_goes_before_its_workers_are_retired() {
        assert_eq!(
            drain(true, false),
            [Action::Drain, Action::StopParents, Action::RetireAll]
        );
    }

    #[test]
    fn the_listener_closes_only_when_no_next_generation_shares_it() {
        assert_eq!(
            drain(false, true),
            [Action::Drain, Action::RetireAll, Action::CloseListener]
        );
        assert!(!drain(false, false).contains(&Action::CloseListener));
    }

    #[test]
    fn a_stop_sends_the_parent_away_and_closes_the_listener_without_retiring_workers() {
        assert_eq!(
            stop(true, false),
            [Action::Stop, Action::StopParents, Action::CloseListener]
        );
    }

    #[test]
    fn a_stop_asks_a_program_s_copies_to_stop_as_they_have_no_listener() {
        assert_eq!(
            stop(false, true),
            [
                Action::Stop,
                Action::CloseListener,
                Action::RetireAll,
                Action::SignalRetiring
            ]
        );
    }

    #[test]
    fn a_failed_generation_alone_on_its_socket_refuses_once() {
        let failed = Standing {
            failed: true,
            refusing: false,
            draining: false,
            alone: true,
        };
        assert_eq!(refuse(failed), [Action::Refuse]);
        let refusing = Standing {
            refusing: true,
            ..failed
        };
        assert_eq!(refuse(refusing), [], "refused already");
    }

    #[test]
    fn a_generation_serving_draining_or_not_alone_does_not_refuse() {
        let failed = Standing {
            failed: true,
            refusing: false,
            draining: false,
            alone: true,
        };
        let serving = Standing {
            failed: false,
            ..failed
        };
        let draining = Standing {
            failed: false,
            draining: true,
            ..failed
        };
        let replaced = Standing {
            alone: false,
            ..failed
        };
        for generation in [serving, draining, replaced] {
            assert_eq!(refuse(generation), [], "{generation:?}");
        }
    }

    fn limits() -> PoolLimits {
        PoolLimits {
            pm: Pm {
                mode: PmMode::Static,
                max_children: 4,
                start_servers: 4,
                min_spare_servers: 1,
                max_spare_servers: 3,
                max_spawn_rate: 32,
                process_idle_timeout: 10 * SEC,
                max_requests: 0,
                max_requests_jitter: 0,
                max_memory: Some(1),
                memory: Default::default(),
            },
            request_terminate_timeout: Some(5 * SEC),
            request_read_timeout: None,
            retire_timeout: 3 * SEC,
            retire_timeout_key: "process_control_timeout",
            max_lifetime: None,
        }
    }

    fn worker(pid: i32, busy: bool, since: Instant, retiring: Option<Instant>) -> WorkerView {
        WorkerView {
            pid: Pid::from_raw(pid),
            busy,
            since,
            started: since,
            rss: Some(u64::MAX),
            retiring,
            reading: false,
        }
    }

    #[test]
    fn a_drain_tick_kills_only_the_stuck_and_spawns_nothing() {
        let (l, mut state, mut linger) = (limits(), PolicyState::default(), Linger::default());
        let t0 = Instant::now();
        let now = t0 + 10 * SEC;
        let workers = [
            // In a request past request_terminate_timeout.
            worker(1, true, t0, Some(t0)),
            // Retiring, idle past the retire timeout.
            worker(2, false, t0, Some(t0)),
            // Over max_memory and idle, not asked to retire before: retiring from now, so
            // neither retired again nor killed yet.
            worker(3, false, t0, None),
            // In a request within its limit.
            worker(4, true, now - SEC, Some(t0)),
        ];
        let actions = drain_tick(&l, &mut state, &mut linger, &workers, now);
        assert_eq!(
            actions,
            [
                Action::SignalRetiring,
                Action::Kill {
                    pid: Pid::from_raw(1),
                    reason: Reason::Terminate {
                        elapsed: 10 * SEC,
                        limit: 5 * SEC
                    }
                },
                Action::Kill {
                    pid: Pid::from_raw(2),
                    reason: Reason::RetireTimeout {
                        waited: 10 * SEC,
                        limit: 3 * SEC,
                        key: "process_control_timeout"
                    }
                },
            ],
            "max_children is 4 and one worker is missing: a static pool draining spawns none"
        );
        // Killed once, until reaped.
        let again = drain_tick(&l, &mut state, &mut linger, &workers, now + SEC);
        assert_eq!(again, [Action::SignalRetiring]);
        assert_eq!(state.counters.killed_request_timeout, 1);
        assert_eq!(state.counters.killed_retire_timeout, 1);
    }

    #[test]
    fn a_parent_alone_past_the_retire_timeout_is_killed() {
        let (l, mut state, mut linger) = (limits(), PolicyState::default(), Linger::default());
        let t0 = Instant::now();
        assert_eq!(
            drain_tick(&l, &mut state, &mut linger, &[], t0),
            [Action::SignalRetiring]
        );
        assert_eq!(
            drain_tick(&l, &mut state, &mut linger, &[], t0 + 3 * SEC),
            [Action::SignalRetiring, Action::KillLingeringParents]
        );
    }

    #[test]
    fn a_parent_is_killed_once_alone_for_the_timeout() {
        let mut linger = Linger::default();
        let now = Instant::now();
        let timeout = Duration::from_secs(3);
        assert!(!linger.due(false, now, timeout));
        assert!(!linger.due(true, now, timeout));
        assert!(!linger.due(true, now + Duration::from_secs(2), timeout));
        assert!(linger.due(true, now + timeout, timeout));
    }

    #[test]
    fn a_worker_seen_again_restarts_the_wait() {
        let mut linger = Linger::default();
        let now = Instant::now();
        let timeout = Duration::from_secs(3);
        assert!(!linger.due(true, now, timeout));
        assert!(!linger.due(false, now + Duration::from_secs(2), timeout));
        assert!(!linger.due(true, now + Duration::from_secs(4), timeout));
        assert!(linger.due(true, now + Duration::from_secs(7), timeout));
    }
}
