//! How a kill is carried out, as the executor's steps: a worker the policy decided to kill
//! ([`Action::Kill`]) gets one log line naming it and its request, then SIGKILL; a
//! `request_terminate_timeout` kill first gets what its runtime gives of the request. A
//! Python worker is asked to abort the request (SIGUSR1, as gunicorn's timeout does: its
//! `except` and `finally` blocks, the `worker_abort` hook and error trackers run), killed
//! `terminate_grace` later only if still in it ([`super::kills::PendingKills`]); a php-cgi
//! worker's PHP stack is read from its memory and logged before the SIGKILL; a drover-php
//! worker is asked for its stack (SIGUSR1), killed at its end line or
//! [`super::kills::STACK_WAIT`] later. The master gathers the facts and signals
//! (`master::pool::kill`); here is only which steps, in which order.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::{Action, KillStep, Reason};

/// How a worker's runtime gives the stack of a request it is killed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillStack {
    /// Not at all (a command, a program), or not to a kill (a Python worker's
    /// faulthandler dump is the slowlog's).
    None,
    /// Read by the master from the worker's memory, at once (php-cgi).
    Read,
    /// Asked of the worker with SIGUSR1, which answers with frame lines and waits for its
    /// SIGKILL (drover-php).
    Asked,
}

/// What a kill of one worker depends on, gathered by the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillFacts {
    /// The start of the worker's request (or of its idle wait); None: it is no worker of
    /// the pool (gone already).
    pub since: Option<Instant>,
    /// A kill of it already waits for its stack or its abort: the policy's next decision
    /// on a worker killed and not yet reaped is not a second kill.
    pub pending: bool,
    /// Its runtime can abort a request (SIGUSR1 makes a Python worker raise in it).
    pub aborts_request: bool,
    /// How its runtime gives a request's stack.
    pub stack: KillStack,
    /// `terminate_grace`: how long an aborted request may take to end; zero: no abort.
    pub terminate_grace: Duration,
}

/// The steps of `pid`'s kill for `reason` at `now`, in order: nothing when it is gone or
/// its kill waits already; else [`KillStep::Killing`] (the line, the worker marked), then
/// for a `request_terminate_timeout` kill the abort or the stack its runtime gives, and
/// [`KillStep::KillNow`] unless the SIGKILL waits for the worker ([`KillStep::AskAbort`],
/// [`KillStep::AskStack`]). Only a request is aborted or has its stack logged: a kill for
/// `request_read_timeout` or a retirement past its timeout is SIGKILL at once.
pub fn kill(pid: Pid, reason: &Reason, facts: &KillFacts, now: Instant) -> Vec<Action> {
    let Some(since) = facts.since.filter(|_| !facts.pending) else {
        return Vec::new();
    };
    let mut steps = vec![KillStep::Killing {
        pid,
        reason: reason.clone(),
    }];
    let request = matches!(reason, Reason::Terminate { .. });
    if request && facts.aborts_request && !facts.terminate_grace.is_zero() {
        steps.push(KillStep::AskAbort {
            pid,
            since,
            deadline: now + facts.terminate_grace,
        });
    } else {
        match facts.stack {
            KillStack::Read if request => {
                steps.extend([KillStep::LogStack(pid), KillStep::KillNow(pid)])
            }
            KillStack::Asked if request => steps.push(KillStep::AskStack(pid)),
            KillStack::Read | KillStack::Asked | KillStack::None => {
                steps.push(KillStep::KillNow(pid))
            }
        }
    }
    steps.into_iter().map(Action::KillStep).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: Pid = Pid::from_raw(42);
    const SEC: Duration = Duration::from_secs(1);

    fn terminate() -> Reason {
        Reason::Terminate {
            elapsed: 3 * SEC,
            limit: 2 * SEC,
        }
    }

    fn read_timeout() -> Reason {
        Reason::ReadTimeout {
            waited: 3 * SEC,
            limit: 2 * SEC,
        }
    }

    /// A worker in a request since `since`, of a runtime that gives `stack`.
    fn facts(since: Instant, stack: KillStack) -> KillFacts {
        KillFacts {
            since: Some(since),
            pending: false,
            aborts_request: false,
            stack,
            terminate_grace: Duration::ZERO,
        }
    }

    /// A Python worker: it aborts a request when given a grace; its faulthandler dump is
    /// not a kill's.
    fn python(since: Instant, grace: Duration) -> KillFacts {
        KillFacts {
            aborts_request: true,
            terminate_grace: grace,
            ..facts(since, KillStack::None)
        }
    }

    fn killing(reason: Reason) -> Action {
        Action::KillStep(KillStep::Killing { pid: PID, reason })
    }

    fn step(step: KillStep) -> Action {
        Action::KillStep(step)
    }

    #[test]
    fn a_worker_without_a_stack_to_give_is_killed_at_once_after_its_line() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let reason = terminate();
        assert_eq!(
            kill(PID, &reason, &facts(since, KillStack::None), now),
            [killing(reason), step(KillStep::KillNow(PID))]
        );
    }

    #[test]
    fn a_php_cgi_worker_has_its_stack_read_and_logged_before_its_sigkill() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let reason = terminate();
        assert_eq!(
            kill(PID, &reason, &facts(since, KillStack::Read), now),
            [
                killing(reason),
                step(KillStep::LogStack(PID)),
                step(KillStep::KillNow(PID))
            ]
        );
    }

    #[test]
    fn a_drover_php_worker_is_asked_for_its_stack_and_its_sigkill_waits() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let reason = terminate();
        assert_eq!(
            kill(PID, &reason, &facts(since, KillStack::Asked), now),
            [killing(reason), step(KillStep::AskStack(PID))]
        );
    }

    #[test]
    fn a_python_worker_is_asked_to_abort_its_request_by_the_grace() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let reason = terminate();
        assert_eq!(
            kill(PID, &reason, &python(since, SEC), now),
            [
                killing(reason.clone()),
                step(KillStep::AskAbort {
                    pid: PID,
                    since,
                    deadline: now + SEC
                })
            ]
        );
        // terminate_grace = 0: no abort, SIGKILL at once.
        assert_eq!(
            kill(PID, &reason, &python(since, Duration::ZERO), now),
            [killing(reason), step(KillStep::KillNow(PID))]
        );
    }

    #[test]
    fn only_a_request_past_its_timeout_is_aborted_or_has_its_stack_taken() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let retire = Reason::RetireTimeout {
            waited: 3 * SEC,
            limit: 2 * SEC,
            key: "process_control_timeout",
        };
        for reason in [read_timeout(), retire] {
            for facts in [
                facts(since, KillStack::Read),
                facts(since, KillStack::Asked),
                python(since, SEC),
            ] {
                assert_eq!(
                    kill(PID, &reason, &facts, now),
                    [killing(reason.clone()), step(KillStep::KillNow(PID))],
                    "{facts:?}"
                );
            }
        }
    }

    #[test]
    fn a_worker_gone_or_whose_kill_waits_is_not_killed_again() {
        let (since, now) = (Instant::now(), Instant::now() + 3 * SEC);
        let reason = terminate();
        let gone = KillFacts {
            since: None,
            ..facts(since, KillStack::None)
        };
        assert_eq!(kill(PID, &reason, &gone, now), []);
        for stack in [KillStack::None, KillStack::Read, KillStack::Asked] {
            let waiting = KillFacts {
                pending: true,
                ..facts(since, stack)
            };
            assert_eq!(kill(PID, &reason, &waiting, now), []);
        }
        let aborting = KillFacts {
            pending: true,
            ..python(since, SEC)
        };
        assert_eq!(kill(PID, &reason, &aborting, now), []);
    }
}
