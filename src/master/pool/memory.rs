//! The measuring shell of sizing by memory ([`crate::pm::memory::tick()`] decides): once
//! a second, for a pool with `max_children = "auto"` or `max_pool_memory`, the memory it
//! may use (its cgroup's limit, v2 or v1, else MemAvailable) and the PSS of each of its
//! processes (/proc/PID/smaps_rollup); then the live `max_children` the policy spawns
//! within, and the largest idle worker retired when the pool holds too much. A pool with a
//! fixed `max_children` is measured for 30 s from its first worker seen in a request: a
//! count whose workers would not fit is warned about once, with the figures.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use nix::unistd::Pid;

use super::PoolRun;
use crate::control::MemoryStatus;
use crate::meminfo::{memory_limit, pss};
use crate::pm::memory::{self, AutoKeys, AutoSize, Held, Measured, WorkerEstimate, WorkerMemory};

/// What a generation has measured of its memory.
#[derive(Debug, Default)]
pub struct MemoryWatch {
    /// Workers seen in a request: only their PSS is a worker's size (a worker just forked
    /// from a zygote holds almost nothing of its own yet).
    warmed: HashSet<Pid>,
    /// The last PSS sample of each process of the pool.
    pss: HashMap<Pid, u64>,
    /// The highest PSS of a worker sampled in a request, and how many workers were so
    /// measured. Only samples taken during a request count: between requests a worker has
    /// given back what its request held (PHP frees it all), and a pool sized from such a
    /// sample would not fit once every worker is busy.
    peak: Option<(u64, u32)>,
    /// The live workers already counted in `peak`'s count.
    measured: HashSet<Pid>,
    /// Maintenance ticks seen, and the one at which a worker was first seen warmed: a fixed
    /// pool is checked for [`FIXED_CHECK_FOR`] ticks from then.
    ticks: u64,
    warm_since: Option<u64>,
    /// The last sizing: for the status page and to log a change once.
    sized: Option<AutoSize>,
    /// The PSS total of the pool's processes at the last sample.
    total: Option<u64>,
    /// A fixed max_children was checked against the limit with a measured worker.
    checked: bool,
}

/// A fixed pool is measured on this many maintenance ticks (seconds) after its first worker
/// was seen in a request, and warned about once if its workers would not fit: a worker's
/// PSS is high while a request holds memory, so one sample of an idle worker would miss it.
const FIXED_CHECK_FOR: u64 = 30;

impl MemoryWatch {
    /// Sizing by memory worked out `size`: for the status page, and to log a change once.
    pub(super) fn sized_to(&mut self, size: AutoSize) {
        self.sized = Some(size);
    }

    /// A fixed `max_children` was warned about: once is enough.
    pub(super) fn warned(&mut self) {
        self.checked = true;
    }
}

impl PoolRun {
    /// Called on every policy tick before the policy: notes the workers in a request, and on
    /// the maintenance tick measures, and carries out what [`memory::tick()`] decides (see
    /// the module's doc).
    pub(super) fn watch_memory(&mut self, maintenance_due: bool, now: Instant) {
        let watch = self.sizing.memory_mut();
        for (pid, worker) in self.table.workers() {
            if worker.state.busy && !worker.orphan {
                watch.warmed.insert(pid);
            }
        }
        if !maintenance_due {
            return;
        }
        watch.ticks += 1;
        if watch.warm_since.is_none() && !watch.warmed.is_empty() {
            watch.warm_since = Some(watch.ticks);
        }
        let sizes = memory::sizes(&self.config.pm.memory);
        let check = !sizes
            && !watch.checked
            && watch
                .warm_since
                .is_some_and(|t| watch.ticks <= t + FIXED_CHECK_FOR);
        if !(sizes || check) {
            return;
        }
        self.sample_pss();
        let Some(limit) = memory_limit() else {
            return;
        };
        let watch = self.sizing.memory();
        let serving: Vec<WorkerMemory> = self
            .table
            .workers()
            .filter(|(_, w)| !w.orphan && w.retiring.is_none())
            .map(|(pid, w)| WorkerMemory {
                pid,
                pss: watch.pss.get(&pid).copied().unwrap_or(0),
                idle: !w.state.busy,
            })
            .collect();
        let measured = Measured {
            limit,
            held: self.held(),
            worker: self.worker_estimate(),
            sized: watch.sized.as_ref().map(|s| s.max_children),
            check,
            serving: &serving,
        };
        let actions = self.sizing.memory_tick(&self.config.pm, &measured);
        self.execute(actions, now, None);
    }

    /// Reads the PSS of every process of the pool; the peak of workers in a request goes up.
    fn sample_pss(&mut self) {
        let mut pids = self.table.worker_pids();
        pids.extend(self.table.process_pids());
        let table = &self.table;
        let watch = self.sizing.memory_mut();
        watch.pss.retain(|pid, _| pids.contains(pid));
        watch.warmed.retain(|&pid| table.has_worker(pid));
        for pid in pids {
            let Some(pss) = pss(pid) else { continue };
            watch.pss.insert(pid, pss);
            let busy = table.worker(pid).is_some_and(|w| w.state.busy && !w.orphan);
            if busy {
                let (peak, mut count) = watch.peak.unwrap_or((0, 0));
                if watch.measured.insert(pid) {
                    count += 1;
                }
                watch.peak = Some((peak.max(pss), count));
            }
        }
        watch.measured.retain(|&pid| table.has_worker(pid));
        watch.total = Some(watch.pss.values().sum());
    }

    /// The parents' and the whole pool's PSS at the last sample.
    fn held(&self) -> Held {
        let parents = self
            .table
            .processes()
            .filter(|&(pid, _)| !self.table.has_worker(pid))
            .filter_map(|(pid, _)| self.sizing.memory().pss.get(&pid))
            .sum();
        Held {
            parents,
            total: self.sizing.memory().total.unwrap_or(0),
        }
    }

    fn worker_estimate(&self) -> WorkerEstimate {
        match (self.sizing.memory().peak, self.config.pm.max_memory) {
            (Some((bytes, workers)), _) => WorkerEstimate::Measured { bytes, workers },
            (None, Some(max_memory)) => WorkerEstimate::MaxMemory(max_memory),
            (None, None) => WorkerEstimate::Default,
        }
    }
}

impl PoolRun {
    /// The status page's view of sizing by memory; None for a pool that sizes by count.
    pub(super) fn memory_status(&self) -> Option<MemoryStatus> {
        let pm = &self.config.pm;
        if pm.memory.auto.is_none() && pm.memory.max_pool_memory.is_none() {
            return None;
        }
        let sized = self.sizing.memory().sized.as_ref();
        let worker = self.worker_estimate();
        Some(MemoryStatus {
            auto: pm.memory.auto.is_some(),
            limit: sized.map(|s| s.limit.bytes),
            limit_source: sized.map(|s| s.limit.source.to_string()),
            reserve: sized.map(|s| s.reserve).or(pm.memory.reserve),
            budget: sized.map(|s| s.budget),
            worker_memory: Some(worker.bytes()),
            worker_memory_source: Some(match worker {
                WorkerEstimate::Measured { .. } => "measured",
                WorkerEstimate::MaxMemory(_) => "max_memory",
                WorkerEstimate::Default => "starting estimate",
            }),
            measured_workers: self.sizing.memory().peak.map_or(0, |(_, n)| n),
            pool_pss: self.sizing.memory().total,
            max_pool_memory: pm.memory.max_pool_memory,
            retired: self.sizing.counters().retired_pool_memory,
        })
    }
}

/// `drover -t`'s lines on sizing by memory, before any worker runs: what each
/// `max_children = "auto"` pool would start with (from the limit read now and the starting
/// estimate), and each fixed pool whose `max_memory` workers could not all fit.
pub fn start_notes(pools: &[crate::config::Pool]) -> Vec<String> {
    let Some(limit) = memory_limit() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for pool in pools {
        let pm = &pool.pm;
        let worker = match pm.max_memory {
            Some(bytes) => WorkerEstimate::MaxMemory(bytes),
            None => WorkerEstimate::Default,
        };
        if let Some(keys) = AutoKeys::of(&pm.memory) {
            let size = memory::auto_max_children(&keys, limit.clone(), Held::default(), worker);
            notes.push(format!(
                "pool {}: {size}; then sized from its workers' measured PSS",
                pool.name
            ));
        } else if pm.max_memory.is_some()
            && let Some(warning) = memory::overcommitted(
                pm.max_children,
                &limit,
                Held::default(),
                worker,
                pm.memory.reserve,
            )
        {
            notes.push(format!("pool {}: {warning}", pool.name));
        }
    }
    notes
}
