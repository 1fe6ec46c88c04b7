//! What sizes a pool, a part that owns its state: the limits [`pm::plan`] reads
//! (`max_children` live, when sized by memory), what the plan remembers between ticks
//! (with the policy's counters), the count a zygote was told to keep, and what the memory
//! watch measured ([`MemoryWatch`]). Every decision on them is pure ([`pm::plan`],
//! [`pm::drain_tick`], [`pm::memory::tick()`], [`pm::target_for_spawn`]); other parts read
//! and change them through these methods only.

use std::time::Instant;

use super::memory::MemoryWatch;
use crate::config::Pm;
use crate::pm::{self, Action, PolicyState, PoolLimits, WorkerView};

pub(super) struct Sizing {
    limits: PoolLimits,
    policy: PolicyState,
    /// Python dynamic and ondemand pools: the worker count the zygote was given.
    desired: u32,
    memory: MemoryWatch,
}

impl Sizing {
    /// `desired`: the count a zygote starts with.
    pub fn new(limits: PoolLimits, desired: u32) -> Sizing {
        Sizing {
            limits,
            policy: PolicyState::default(),
            desired,
            memory: MemoryWatch::default(),
        }
    }

    pub fn limits(&self) -> &PoolLimits {
        &self.limits
    }

    /// The live cap: a memory-sized pool's computed count, else the configured one.
    pub fn max_children(&self) -> u32 {
        self.limits.pm.max_children
    }

    /// What the policy counted since the generation started.
    pub fn counters(&self) -> &pm::Counters {
        &self.policy.counters
    }

    /// A tick's plan ([`pm::plan`]).
    pub fn plan(
        &mut self,
        workers: &[WorkerView],
        waiting: Option<u32>,
        now: Instant,
        maintenance_due: bool,
    ) -> Vec<Action> {
        let limits = &self.limits;
        pm::plan(
            limits,
            &mut self.policy,
            workers,
            waiting,
            now,
            maintenance_due,
        )
    }

    /// A draining generation's tick ([`pm::drain_tick`]).
    pub fn drain_tick(
        &mut self,
        linger: &mut pm::Linger,
        workers: &[WorkerView],
        now: Instant,
    ) -> Vec<Action> {
        pm::drain_tick(&self.limits, &mut self.policy, linger, workers, now)
    }

    /// A maintenance tick of sizing by memory ([`pm::memory::tick()`]), for the `[pm]` keys
    /// `pm` as configured.
    pub fn memory_tick(&mut self, pm: &Pm, measured: &pm::memory::Measured<'_>) -> Vec<Action> {
        pm::memory::tick(pm, measured, &mut self.policy)
    }

    /// Sizing by memory worked out `size`: the plan spawns within its `max_children` now.
    pub fn resize(&mut self, size: pm::memory::AutoSize) {
        self.limits.pm.max_children = size.max_children;
        self.memory.sized_to(size);
    }

    /// A program pool scaled in place: its new `[pm]` keys.
    pub fn set_pm(&mut self, pm: Pm) {
        self.limits.pm = pm;
    }

    /// A zygote's worker retires itself for `max_memory` (it said so): counted as the
    /// plan counts its own.
    pub fn count_retired_max_memory(&mut self) {
        self.policy.counters.retired_max_memory += 1;
    }

    /// The count the zygote was told.
    pub fn desired(&self) -> u32 {
        self.desired
    }

    /// The plan asks for `n` more workers with `staying` reported workers staying: the new
    /// count ([`pm::target_for_spawn`]).
    pub fn grow_target(&mut self, staying: u32, n: u32) -> u32 {
        let max_children = self.max_children();
        self.desired = pm::target_for_spawn(self.desired, staying, n, max_children);
        self.desired
    }

    /// A worker retired for good: one fewer.
    pub fn lower_target(&mut self) -> u32 {
        self.desired = self.desired.saturating_sub(1);
        self.desired
    }

    /// A new zygote starts with `initial` workers.
    pub fn reset_target(&mut self, initial: u32) {
        self.desired = initial;
    }

    pub fn memory(&self) -> &MemoryWatch {
        &self.memory
    }

    pub fn memory_mut(&mut self) -> &mut MemoryWatch {
        &mut self.memory
    }
}
