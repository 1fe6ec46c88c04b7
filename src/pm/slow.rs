//! Which requests get a slowlog entry: a request running past `request_slowlog_timeout`
//! gets one, once (php-fpm's `slow_logged`), on the tick that first sees it past the
//! limit. The master gathers each worker's request start (its scoreboard slot, php-cgi's
//! memory) and carries out the [`Action::SlowLog`]s: it asks the worker for its stack and
//! writes the entry (`master::pool::slow`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::Action;

/// One worker of the pool as the slowlog sees it this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestView {
    pub pid: Pid,
    /// In a request.
    pub busy: bool,
    /// The request's start when busy (the wait for it included, as
    /// `request_terminate_timeout` counts it).
    pub since: Instant,
    /// The master killed it, or its kill waits for its stack or its abort: the request has
    /// its `request_terminate_timeout` line (with the stack), and a second signal asking
    /// for a stack would only race the kill.
    pub killed: bool,
}

/// The request already logged for each worker, by its start: one entry per request.
#[derive(Debug, Default)]
pub struct SlowLogged {
    logged: HashMap<Pid, Instant>,
}

impl SlowLogged {
    /// The slowlog entries due at `now` among `workers` (every worker of the pool, so that
    /// the gone ones are forgotten): a request running for longer than `limit` that has no
    /// entry yet. `limit`: None when the pool keeps no slowlog (no `slowlog` file or no
    /// `request_slowlog_timeout`).
    pub fn due(
        &mut self,
        limit: Option<Duration>,
        workers: &[RequestView],
        now: Instant,
    ) -> Vec<Action> {
        self.logged
            .retain(|pid, _| workers.iter().any(|w| w.pid == *pid));
        let Some(limit) = limit else {
            return Vec::new();
        };
        let mut actions = Vec::new();
        for worker in workers {
            let elapsed = now.saturating_duration_since(worker.since);
            if !worker.busy
                || worker.killed
                || elapsed <= limit
                || self.logged.get(&worker.pid) == Some(&worker.since)
            {
                continue;
            }
            self.logged.insert(worker.pid, worker.since);
            actions.push(Action::SlowLog {
                pid: worker.pid,
                elapsed,
            });
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);
    const LIMIT: Option<Duration> = Some(SEC);

    fn now() -> Instant {
        Instant::now() + 100 * SEC
    }

    fn busy(pid: i32, since: Instant) -> RequestView {
        RequestView {
            pid: Pid::from_raw(pid),
            busy: true,
            since,
            killed: false,
        }
    }

    fn slow_log(pid: i32, elapsed: Duration) -> Action {
        Action::SlowLog {
            pid: Pid::from_raw(pid),
            elapsed,
        }
    }

    #[test]
    fn a_request_exactly_at_the_timeout_is_not_slow_yet() {
        let (mut logged, now) = (SlowLogged::default(), now());
        let at = busy(1, now - SEC);
        assert_eq!(logged.due(LIMIT, &[at], now), []);
        let past = now + Duration::from_millis(1);
        assert_eq!(
            logged.due(LIMIT, &[at], past),
            [slow_log(1, SEC + Duration::from_millis(1))]
        );
    }

    #[test]
    fn a_request_gets_one_entry_and_the_next_slow_one_its_own() {
        let (mut logged, now) = (SlowLogged::default(), now());
        let first = busy(1, now - 2 * SEC);
        assert_eq!(logged.due(LIMIT, &[first], now), [slow_log(1, 2 * SEC)]);
        // Already written for this request: not again, however long it runs.
        assert_eq!(logged.due(LIMIT, &[first], now + 10 * SEC), []);
        // The worker's next request is another one.
        let next = busy(1, now + 5 * SEC);
        assert_eq!(
            logged.due(LIMIT, &[next], now + 7 * SEC),
            [slow_log(1, 2 * SEC)]
        );
    }

    #[test]
    fn idle_workers_and_pools_without_a_slowlog_log_nothing() {
        let (mut logged, now) = (SlowLogged::default(), now());
        let idle = RequestView {
            busy: false,
            ..busy(1, now - 5 * SEC)
        };
        assert_eq!(logged.due(LIMIT, &[idle], now), []);
        assert_eq!(logged.due(None, &[busy(2, now - 5 * SEC)], now), []);
    }

    #[test]
    fn a_worker_killed_by_request_terminate_timeout_first_gets_no_entry() {
        // request_terminate_timeout (1 s) below request_slowlog_timeout (2 s): the kill's
        // line names the request; its worker, awaiting its SIGKILL, gets no entry.
        let (mut logged, now) = (SlowLogged::default(), now());
        let killed = RequestView {
            killed: true,
            ..busy(1, now - 3 * SEC)
        };
        assert_eq!(logged.due(Some(2 * SEC), &[killed], now), []);
        // The other way round, both on one tick: the entry is due, the kill is the plan's.
        assert_eq!(
            logged.due(Some(2 * SEC), &[busy(2, now - 3 * SEC)], now),
            [slow_log(2, 3 * SEC)]
        );
    }

    #[test]
    fn a_worker_gone_is_forgotten_and_its_pid_taken_again_is_a_new_worker() {
        let (mut logged, now) = (SlowLogged::default(), now());
        let since = now - 2 * SEC;
        assert_eq!(
            logged.due(LIMIT, &[busy(1, since)], now),
            [slow_log(1, 2 * SEC)]
        );
        assert_eq!(logged.due(LIMIT, &[], now), []);
        // Not remembered: a new worker with the same pid and (by chance) the same start.
        assert_eq!(
            logged.due(LIMIT, &[busy(1, since)], now),
            [slow_log(1, 2 * SEC)]
        );
    }

    #[test]
    fn several_slow_workers_each_get_an_entry_on_the_same_tick() {
        let (mut logged, now) = (SlowLogged::default(), now());
        let workers = [busy(1, now - 2 * SEC), busy(2, now), busy(3, now - 3 * SEC)];
        assert_eq!(
            logged.due(LIMIT, &workers, now),
            [slow_log(1, 2 * SEC), slow_log(3, 3 * SEC)]
        );
    }
}
