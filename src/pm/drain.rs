//! The start of a generation's drain (a reload's old generation, a removed pool): what the
//! executor does, in order, from the facts the master passes in.

use super::Action;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
