//! A maintenance tick of sizing by memory, from what the master measured: the live
//! `max_children` of a `max_children = "auto"` pool ([`Action::Resize`]), the warning for a
//! fixed `max_children` whose measured workers would not fit ([`Action::Overcommitted`]),
//! and the idle worker retired when the pool holds too much ([`Reason::PoolMemory`]).

use super::{
    AutoKeys, Held, MemoryLimit, WorkerEstimate, WorkerMemory, auto_max_children, over_ceiling,
    overcommitted,
};
use crate::config::{Pm, PmMemory};
use crate::pm::{Action, PolicyState, Reason};

/// Whether a pool is sized by memory (`max_children = "auto"` or `max_pool_memory`):
/// measured on every maintenance tick.
pub fn sizes(memory: &PmMemory) -> bool {
    memory.auto.is_some() || memory.max_pool_memory.is_some()
}

/// What the master measured of one pool on a maintenance tick.
#[derive(Debug, Clone)]
pub struct Measured<'a> {
    /// The memory the pool may use (its cgroup's limit, else MemAvailable).
    pub limit: MemoryLimit,
    /// The PSS of its parents and of the whole pool.
    pub held: Held,
    /// What one worker is taken to need.
    pub worker: WorkerEstimate,
    /// The live `max_children` sizing by memory gave last, if any.
    pub sized: Option<u32>,
    /// A fixed `max_children`, measured within its check window and not warned about yet.
    pub check: bool,
    /// The workers that serve (neither retiring nor orphaned), with their last PSS: a
    /// retiring worker is on its way out, neither counted nor chosen again.
    pub serving: &'a [WorkerMemory],
}

/// The tick's actions for a pool with the `[pm]` keys `pm`. The retire is counted in
/// `state`, as the plan counts its own.
pub fn tick(pm: &Pm, measured: &Measured<'_>, state: &mut PolicyState) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut cap = measured.sized;
    if let Some(keys) = AutoKeys::of(&pm.memory) {
        let size = auto_max_children(
            &keys,
            measured.limit.clone(),
            measured.held,
            measured.worker,
        );
        cap = Some(size.max_children);
        actions.push(Action::Resize {
            changed: measured.sized != Some(size.max_children),
            size,
        });
    } else if measured.check
        && let WorkerEstimate::Measured { .. } = measured.worker
        && let Some(warning) = overcommitted(
            pm.max_children,
            &measured.limit,
            measured.held,
            measured.worker,
            pm.memory.reserve,
        )
    {
        actions.push(Action::Overcommitted(warning));
    }
    let total = measured.held.total;
    let max_pool_memory = pm.memory.max_pool_memory;
    if let Some((pid, over)) = over_ceiling(measured.serving, total, max_pool_memory, cap) {
        state.retire(&mut actions, pid, Reason::PoolMemory(over));
    }
    actions
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nix::unistd::Pid;

    use super::super::{LimitSource, MIB, Over};
    use super::*;
    use crate::config::PmMode;

    fn pm(memory: PmMemory) -> Pm {
        Pm {
            mode: PmMode::Dynamic,
            max_children: 8,
            start_servers: 2,
            min_spare_servers: 1,
            max_spare_servers: 3,
            max_spawn_rate: 32,
            process_idle_timeout: Duration::from_secs(10),
            max_requests: 0,
            max_requests_jitter: 0,
            max_memory: None,
            memory,
        }
    }

    fn w(pid: i32, mib: u64, idle: bool) -> WorkerMemory {
        WorkerMemory {
            pid: Pid::from_raw(pid),
            pss: mib * MIB,
            idle,
        }
    }

    fn measured(serving: &[WorkerMemory], total_mib: u64) -> Measured<'_> {
        Measured {
            limit: MemoryLimit {
                bytes: 1024 * MIB,
                source: LimitSource::CgroupV2("/test".into()),
            },
            held: Held {
                parents: 0,
                total: total_mib * MIB,
            },
            worker: WorkerEstimate::Measured {
                bytes: 100 * MIB,
                workers: 2,
            },
            sized: None,
            check: false,
            serving,
        }
    }

    fn retire(pid: i32, over: Over) -> Action {
        Action::Retire {
            pid: Pid::from_raw(pid),
            reason: Reason::PoolMemory(over),
        }
    }

    #[test]
    fn several_idle_workers_over_the_budget_retire_the_largest_one_a_tick() {
        let capped = pm(PmMemory {
            max_pool_memory: Some(200 * MIB),
            ..PmMemory::default()
        });
        let mut state = PolicyState::default();
        // Busy 3 is the largest: a request is never cut for the pool's memory.
        let serving = [w(1, 60, true), w(2, 80, true), w(3, 120, false)];
        let over = Over::PoolMemory {
            total: 260 * MIB,
            limit: 200 * MIB,
        };
        assert_eq!(
            tick(&capped, &measured(&serving, 260), &mut state),
            [retire(2, over)]
        );
        // Next tick, 2 retiring (no longer serving), still over: the next largest idle.
        let serving = [w(1, 60, true), w(3, 120, false)];
        let over = Over::PoolMemory {
            total: 210 * MIB,
            limit: 200 * MIB,
        };
        assert_eq!(
            tick(&capped, &measured(&serving, 210), &mut state),
            [retire(1, over)]
        );
        // Only a busy worker left over the budget: nothing retires.
        let serving = [w(3, 190, false)];
        assert_eq!(tick(&capped, &measured(&serving, 201), &mut state), []);
        assert_eq!(state.counters.retired_pool_memory, 2);
    }

    #[test]
    fn an_auto_pool_is_resized_every_tick_and_the_change_said_once() {
        let auto = pm(PmMemory {
            auto: Some((1, 64)),
            reserve: Some(24 * MIB),
            ..PmMemory::default()
        });
        let mut state = PolicyState::default();
        // (1024 − 24) MiB / 100 MiB = 10 workers.
        let actions = tick(&auto, &measured(&[], 0), &mut state);
        let [Action::Resize { size, changed }] = &actions[..] else {
            panic!("{actions:?}")
        };
        assert_eq!((size.max_children, *changed), (10, true));
        let again = Measured {
            sized: Some(10),
            ..measured(&[], 0)
        };
        let actions = tick(&auto, &again, &mut state);
        assert!(matches!(
            &actions[..],
            [Action::Resize { changed: false, .. }]
        ));
    }

    #[test]
    fn more_serving_workers_than_the_new_size_retire_the_largest_idle() {
        let auto = pm(PmMemory {
            auto: Some((1, 64)),
            reserve: Some(824 * MIB),
            ..PmMemory::default()
        });
        // (1024 − 824) / 100 = 2 workers, 3 serve.
        let serving = [w(1, 10, true), w(2, 30, true), w(3, 50, false)];
        let mut state = PolicyState::default();
        let actions = tick(&auto, &measured(&serving, 90), &mut state);
        let over = Over::AutoCap {
            workers: 3,
            max_children: 2,
        };
        assert_eq!(actions[1..], [retire(2, over)]);
    }

    #[test]
    fn a_fixed_pool_is_warned_about_only_with_a_measured_worker_in_its_window() {
        let fixed = pm(PmMemory::default());
        let mut state = PolicyState::default();
        let over = Measured {
            worker: WorkerEstimate::Measured {
                bytes: 200 * MIB,
                workers: 1,
            },
            ..measured(&[], 0)
        };
        assert_eq!(tick(&fixed, &over, &mut state), [], "outside its window");
        let check = Measured {
            check: true,
            ..over.clone()
        };
        let actions = tick(&fixed, &check, &mut state);
        assert!(
            matches!(&actions[..], [Action::Overcommitted(line)] if line.starts_with("max_children = 8 does not fit")),
            "{actions:?}"
        );
        let estimated = Measured {
            worker: WorkerEstimate::Default,
            ..check
        };
        assert_eq!(tick(&fixed, &estimated, &mut state), [], "nothing measured");
    }
}
