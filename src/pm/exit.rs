//! What a process's exit means for its pool: back off, replace it, say the app failed,
//! take over a dead parent's workers. Pure: the master states the facts of one reaped
//! process ([`Exit`]) and its executor applies the [`Action`]s in order, with its log lines.
//!
//! A reaction to one kind of exit (a parent that died before its first request, on a
//! given binary, say) is a fact added to [`Exit`] and an action here, unit-tested below,
//! and its effect in the master's executor (`master::pool::reap`).

use super::Action;

/// What the master's own child was to the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A worker the master exec'd (a php-cgi without a parent, a command, a program).
    Worker,
    /// A parent that forks the workers (php-cgi, drover-php or a Python zygote).
    Parent,
}

/// The facts of one reaped process of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub role: Role,
    /// The master asked it to exit (retired, drained, stopped).
    pub retiring: bool,
    /// A worker seen in a request: then its death is that request's fault, not a start-up
    /// failure.
    pub served: bool,
    /// Exited with code 0.
    pub clean: bool,
    /// A `[program]` copy: meant to keep running, so one that exits at once, whatever its
    /// code, is in a crash loop.
    pub program: bool,
    /// A parent's exit code says the app failed to load (the runtime's own code).
    pub app_failed: bool,
    /// A parent on the copy of libphp bound directly that died before the pool served a
    /// request, whose launch now runs the linked libphp (the runtime decided and said so:
    /// `runtime::Launch::fall_back`): the next parent starts at once, without backoff.
    pub fell_back: bool,
}

/// What the exit `exit` asks of its pool.
pub fn on_exit(exit: Exit) -> Vec<Action> {
    let mut actions = Vec::new();
    match exit.role {
        Role::Worker => {
            // A clean exit (max_requests reached) is no start-up failure, however short, nor
            // a death after the worker was seen past its start.
            if !exit.retiring && !exit.served && (!exit.clean || exit.program) {
                actions.push(Action::BackOff);
            }
            if !exit.retiring {
                actions.push(Action::Replace);
            }
        }
        Role::Parent => {
            actions.push(Action::AdoptWorkers {
                retire: !exit.retiring,
            });
            if exit.fell_back {
                // Not the app's failure nor a crash loop yet: the copy's.
            } else if exit.app_failed {
                actions.push(Action::AppFailed);
            } else if !exit.retiring {
                actions.push(Action::BackOff);
            }
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(role: Role) -> Exit {
        Exit {
            role,
            retiring: false,
            served: false,
            clean: false,
            program: false,
            app_failed: false,
            fell_back: false,
        }
    }

    #[test]
    fn a_parent_that_fell_back_from_the_bound_libphp_is_replaced_without_backoff() {
        let fell_back = Exit {
            fell_back: true,
            ..exit(Role::Parent)
        };
        assert_eq!(on_exit(fell_back), [Action::AdoptWorkers { retire: true }]);
        let crashed = exit(Role::Parent);
        assert_eq!(
            on_exit(crashed),
            [Action::AdoptWorkers { retire: true }, Action::BackOff]
        );
    }

    #[test]
    fn a_worker_that_crashes_before_serving_backs_off_and_is_replaced() {
        let crash = exit(Role::Worker);
        assert_eq!(on_exit(crash), [Action::BackOff, Action::Replace]);
    }

    #[test]
    fn a_worker_that_served_or_ended_cleanly_is_replaced_without_backoff() {
        let served = Exit {
            served: true,
            ..exit(Role::Worker)
        };
        assert_eq!(on_exit(served), [Action::Replace]);
        let recycled = Exit {
            clean: true,
            ..exit(Role::Worker)
        };
        assert_eq!(on_exit(recycled), [Action::Replace]);
    }

    #[test]
    fn a_program_copy_that_exits_at_once_backs_off_whatever_its_code() {
        let copy = Exit {
            clean: true,
            program: true,
            ..exit(Role::Worker)
        };
        assert_eq!(on_exit(copy), [Action::BackOff, Action::Replace]);
    }

    #[test]
    fn a_retired_worker_is_neither_replaced_nor_a_failure() {
        let retired = Exit {
            retiring: true,
            ..exit(Role::Worker)
        };
        assert_eq!(on_exit(retired), []);
    }

    #[test]
    fn a_parent_that_dies_hands_over_its_workers_and_backs_off() {
        assert_eq!(
            on_exit(exit(Role::Parent)),
            [Action::AdoptWorkers { retire: true }, Action::BackOff]
        );
    }

    #[test]
    fn a_stopped_parent_leaves_its_workers_to_finish() {
        let stopped = Exit {
            retiring: true,
            ..exit(Role::Parent)
        };
        assert_eq!(on_exit(stopped), [Action::AdoptWorkers { retire: false }]);
    }

    #[test]
    fn a_parent_whose_app_failed_stops_the_pool_without_backoff() {
        let failed = Exit {
            app_failed: true,
            ..exit(Role::Parent)
        };
        assert_eq!(
            on_exit(failed),
            [Action::AdoptWorkers { retire: true }, Action::AppFailed]
        );
    }
}
