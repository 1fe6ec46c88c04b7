//! How many processes a pool keeps outside the tick's plan: the processes the master
//! starts itself (a parent, or the first workers), and the count a zygote is told to keep
//! when it forks the workers and the master decides how many (`Sizing::Target`).

use super::Reason;

/// How many processes the master keeps started itself, or `None` when that is the plan's
/// business: a pool with a parent keeps its one parent; one without starts its `initial`
/// workers once, while `first` (nothing started yet), and [`super::plan`] does the rest.
pub fn processes_kept(has_parent: bool, first: bool, initial: u32) -> Option<usize> {
    if has_parent {
        Some(1)
    } else if first {
        Some(initial as usize)
    } else {
        None
    }
}

/// The count to tell a zygote when the plan asks for `n` more workers and `staying`
/// reported workers stay: those it is still forking are room already on its way (the
/// count less the workers that stay), so `n` is counted from the workers that stay, not
/// added to the count; two wakes in a row before the first fork's report ask for the same
/// room once. Never below the count already told, but never past `max_children` (which
/// sizing by memory may lower).
pub fn target_for_spawn(desired: u32, staying: u32, n: u32, max_children: u32) -> u32 {
    desired.max(staying.saturating_add(n)).min(max_children)
}

/// Whether retiring a worker for `reason` lowers the zygote's count: a spare worker is not
/// replaced, nor one retired for the pool's memory; one retired for its own memory, its
/// lifetime or a timeout is.
pub fn retire_lowers_target(reason: &Reason) -> bool {
    matches!(
        reason,
        Reason::MaxSpare { .. } | Reason::IdleTimeout { .. } | Reason::PoolMemory(_)
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_parent_is_kept_alone_exec_d_workers_are_started_once() {
        assert_eq!(processes_kept(true, true, 4), Some(1));
        assert_eq!(processes_kept(true, false, 4), Some(1));
        assert_eq!(processes_kept(false, true, 4), Some(4));
        assert_eq!(processes_kept(false, false, 4), None);
    }

    #[test]
    fn a_zygote_s_count_grows_from_the_workers_that_stay_up_to_max_children() {
        assert_eq!(target_for_spawn(2, 2, 1, 8), 3);
        // A second wake before the first fork's report asks for the same room once.
        assert_eq!(target_for_spawn(3, 2, 1, 8), 3);
        assert_eq!(target_for_spawn(2, 6, 4, 8), 8);
        assert_eq!(
            target_for_spawn(5, 1, 1, 8),
            5,
            "never below the count told"
        );
    }

    #[test]
    fn only_spare_and_pool_memory_retirements_lower_the_count() {
        let spare = Reason::MaxSpare {
            idle: 4,
            max_spare: 3,
        };
        let idle = Reason::IdleTimeout {
            idle: Duration::from_secs(11),
            limit: Duration::from_secs(10),
        };
        let own_memory = Reason::MaxMemory { rss: 2, limit: 1 };
        assert!(retire_lowers_target(&spare));
        assert!(retire_lowers_target(&idle));
        assert!(!retire_lowers_target(&own_memory));
    }
}
