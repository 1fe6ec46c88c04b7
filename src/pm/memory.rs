//! Sizing a pool by memory, as pure functions: `max_children = "auto"` (how many workers fit
//! in the memory the pool may use), the warning for a fixed `max_children` that does not
//! fit, and `max_pool_memory` (which idle worker retires when the pool holds too much);
//! [`tick()`]: a maintenance tick's decisions, as [`crate::pm::Action`]s.
//!
//! The master measures (the cgroup limit or MemAvailable, each worker's PSS from
//! /proc/PID/smaps_rollup: `master::pool::memory`) and asks here; nothing here reads /proc.
//!
//! Why PSS: a worker's proportional set size counts the pages it shares with its zygote (or
//! php-cgi parent, or OPcache) divided by the processes sharing them, so the PSS of every
//! process of a pool sums to the memory the pool really holds, which is what a memory cgroup
//! is charged. RSS counts the shared app once per worker: a Python pool whose zygote holds
//! 30 MiB of imported modules would look 30 MiB larger with every worker, and a ceiling on
//! the RSS sum would retire workers long before memory runs short.

#[cfg(test)]
mod tests;
mod tick;

pub use tick::{Measured, sizes, tick};

use std::fmt;

use nix::unistd::Pid;

const MIB: u64 = 1024 * 1024;

/// Where the memory the pool may use was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitSource {
    /// memory.max of this cgroup v2 path (or of the lowest limited ancestor).
    CgroupV2(String),
    /// memory.limit_in_bytes of this cgroup v1 path (or of the lowest limited ancestor).
    CgroupV1(String),
    /// No cgroup limit: /proc/meminfo's MemAvailable, plus what the pool holds already.
    MemAvailable,
}

impl fmt::Display for LimitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitSource::CgroupV2(path) => write!(f, "cgroup v2 {path} memory.max"),
            LimitSource::CgroupV1(path) => write!(f, "cgroup v1 {path} memory.limit_in_bytes"),
            LimitSource::MemAvailable => f.write_str("MemAvailable"),
        }
    }
}

/// The memory the pool may use, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub source: LimitSource,
}

/// What one worker is taken to need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerEstimate {
    /// The highest PSS a worker of this generation had while in a request, sampled about
    /// once a second; `workers` were measured.
    Measured { bytes: u64, workers: u32 },
    /// No worker has been measured yet: the pool's `max_memory` (a worker past it is
    /// retired, so it is the most one keeps for long).
    MaxMemory(u64),
    /// No worker measured and no `max_memory`: [`STARTING_ESTIMATE`].
    Default,
}

/// A worker's memory before any has been measured and without `max_memory`: 64 MiB, above
/// what a warmed drover-php worker (about 5 MiB PSS with OPcache shared) or a Flask worker
/// (about 12 MiB) measured here, so that the first sizing errs towards fewer workers; it is
/// replaced by the measurement within a second of the first request.
pub const STARTING_ESTIMATE: u64 = 64 * MIB;

impl WorkerEstimate {
    pub fn bytes(self) -> u64 {
        match self {
            WorkerEstimate::Measured { bytes, .. } | WorkerEstimate::MaxMemory(bytes) => bytes,
            WorkerEstimate::Default => STARTING_ESTIMATE,
        }
        .max(1)
    }
}

impl fmt::Display for WorkerEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = mib(self.bytes());
        match *self {
            WorkerEstimate::Measured { workers, .. } => write!(
                f,
                "{mib} per worker (highest PSS of {workers} measured worker{})",
                if workers == 1 { "" } else { "s" }
            ),
            WorkerEstimate::MaxMemory(_) => {
                write!(f, "{mib} per worker (max_memory: none measured yet)")
            }
            WorkerEstimate::Default => {
                write!(f, "{mib} per worker (starting estimate: none measured yet)")
            }
        }
    }
}

/// The operator's keys for a memory-sized pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoKeys {
    /// `memory_reserve`: left to everything else under the limit; None: [`default_reserve`].
    pub reserve: Option<u64>,
    /// `auto_min_children`: the floor, even when the memory says fewer.
    pub floor: u32,
    /// `auto_max_children`: the ceiling (also the scoreboard's size).
    pub ceiling: u32,
    /// `max_pool_memory`, which also bounds the budget.
    pub max_pool_memory: Option<u64>,
}

impl AutoKeys {
    /// The keys of a pool whose `max_children` is `"auto"`; None for a fixed one.
    pub fn of(memory: &crate::config::PmMemory) -> Option<AutoKeys> {
        let (floor, ceiling) = memory.auto?;
        Some(AutoKeys {
            reserve: memory.reserve,
            floor,
            ceiling,
            max_pool_memory: memory.max_pool_memory,
        })
    }
}

/// What the pool holds now, beside its workers' estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// The PSS of the pool's parent processes (zygote, php-cgi parent): paid once.
    pub parents: u64,
    /// The PSS of every process of the pool (parents and workers).
    pub total: u64,
}

/// Why the computed count is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Memory,
    Floor,
    Ceiling,
}

/// `max_children = "auto"` worked out, with its inputs (for the log, `drover -t`, status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoSize {
    pub max_children: u32,
    pub limit: MemoryLimit,
    /// The limit as the pool sees it (MemAvailable plus what the pool holds).
    pub usable: u64,
    pub reserve: u64,
    /// What the workers may use: usable − reserve − parents, within max_pool_memory.
    pub budget: u64,
    pub parents: u64,
    pub worker: WorkerEstimate,
    pub bound: Bound,
}

impl fmt::Display for AutoSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "max_children = {} from {} {}",
            self.max_children,
            self.limit.source,
            mib(self.limit.bytes)
        )?;
        if self.usable != self.limit.bytes {
            write!(
                f,
                " (+ the pool's own {})",
                mib(self.usable - self.limit.bytes)
            )?;
        }
        write!(f, " − reserve {}", mib(self.reserve))?;
        if self.parents > 0 {
            write!(f, " − parent {}", mib(self.parents))?;
        }
        write!(f, " = budget {}; {}", mib(self.budget), self.worker)?;
        match self.bound {
            Bound::Memory => Ok(()),
            Bound::Floor => f.write_str("; raised to auto_min_children"),
            Bound::Ceiling => f.write_str("; held at auto_max_children"),
        }
    }
}

/// The reserve when `memory_reserve` is left out: a tenth of the limit, at least 32 MiB and
/// at most 1 GiB. It covers what shares the limit with the pool's workers: the master, the
/// page cache the kernel cannot drop at once, nginx or a sidecar in the same container, and
/// a request's growth between two samples.
pub fn default_reserve(usable: u64) -> u64 {
    (usable / 10).clamp(32 * MIB, 1024 * MIB)
}

/// How many workers fit: (usable − reserve − parents) / worker, within floor and ceiling.
pub fn auto_max_children(
    keys: &AutoKeys,
    limit: MemoryLimit,
    held: Held,
    worker: WorkerEstimate,
) -> AutoSize {
    // MemAvailable does not count what the pool itself holds: that is the pool's too.
    let usable = match limit.source {
        LimitSource::MemAvailable => limit.bytes.saturating_add(held.total),
        _ => limit.bytes,
    };
    let reserve = keys.reserve.unwrap_or_else(|| default_reserve(usable));
    let mut budget = usable.saturating_sub(reserve);
    if let Some(ceiling) = keys.max_pool_memory {
        budget = budget.min(ceiling);
    }
    let budget = budget.saturating_sub(held.parents);
    let fit = u32::try_from(budget / worker.bytes()).unwrap_or(u32::MAX);
    let (max_children, bound) = if fit < keys.floor {
        (keys.floor, Bound::Floor)
    } else if fit > keys.ceiling {
        (keys.ceiling, Bound::Ceiling)
    } else {
        (fit, Bound::Memory)
    };
    AutoSize {
        max_children,
        limit,
        usable,
        reserve,
        budget,
        parents: held.parents,
        worker,
        bound,
    }
}

/// A fixed `max_children` whose workers, at the measured size, would not fit in the limit
/// (less the reserve): the figures for the warning, or None when they fit.
pub fn overcommitted(
    max_children: u32,
    limit: &MemoryLimit,
    held: Held,
    worker: WorkerEstimate,
    reserve: Option<u64>,
) -> Option<String> {
    let keys = AutoKeys {
        reserve,
        floor: 0,
        ceiling: u32::MAX,
        max_pool_memory: None,
    };
    let fits = auto_max_children(&keys, limit.clone(), held, worker);
    let needed = u64::from(max_children)
        .saturating_mul(worker.bytes())
        .saturating_add(held.parents);
    (max_children > fits.max_children).then(|| {
        format!(
            "max_children = {max_children} does not fit: {max_children} × {} = {} above the \
             budget {} ({} {} − reserve {}); {} fit (max_children = \"auto\" sizes it)",
            mib(worker.bytes()),
            mib(needed),
            mib(fits.budget + fits.parents),
            limit.source,
            mib(fits.usable),
            mib(fits.reserve),
            fits.max_children
        )
    })
}

/// One worker's memory this tick, for [`over_ceiling`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerMemory {
    pub pid: Pid,
    pub pss: u64,
    /// Serving and out of any request: the only kind that may retire for the pool.
    pub idle: bool,
}

/// Why a worker retires for the pool's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// The pool's PSS total is above `max_pool_memory`.
    PoolMemory { total: u64, limit: u64 },
    /// More workers than the memory-sized `max_children` (the estimate grew).
    AutoCap { workers: u32, max_children: u32 },
}

/// The idle worker to retire this tick, if the pool holds more than `max_pool_memory` or has
/// more workers than its memory-sized cap: the largest idle one (the most memory back for
/// one worker's capacity). Busy workers are never chosen: a request is never cut for the
/// pool's memory. One per tick, as the next sample shows what the retire gave back.
pub fn over_ceiling(
    workers: &[WorkerMemory],
    total: u64,
    max_pool_memory: Option<u64>,
    auto_cap: Option<u32>,
) -> Option<(Pid, Over)> {
    let count = u32::try_from(workers.len()).unwrap_or(u32::MAX);
    let over = match (max_pool_memory, auto_cap) {
        (Some(limit), _) if total > limit => Over::PoolMemory { total, limit },
        (_, Some(max_children)) if count > max_children => Over::AutoCap {
            workers: count,
            max_children,
        },
        _ => return None,
    };
    let largest = workers
        .iter()
        .filter(|w| w.idle)
        .max_by_key(|w| (w.pss, std::cmp::Reverse(w.pid.as_raw())))?;
    Some((largest.pid, over))
}

/// The cause in a retire's log line.
pub(super) fn describe(f: &mut fmt::Formatter<'_>, over: Over) -> fmt::Result {
    match over {
        Over::PoolMemory { total, limit } => write!(
            f,
            "the largest idle worker of a pool holding {} (PSS), above max_pool_memory ({})",
            mib(total),
            mib(limit)
        ),
        Over::AutoCap {
            workers,
            max_children,
        } => write!(
            f,
            "the largest idle of {workers} workers, above the memory-sized max_children \
             ({max_children})"
        ),
    }
}

/// Bytes as MiB for the log: "57.3 MiB".
/// Why `memory_reserve` (`reserve` bytes) cannot work under `limit`, if it cannot: a reserve
/// of the whole cgroup limit or more leaves the workers nothing, and `"auto"` would run its
/// floor of workers on no budget. MemAvailable moves with the machine's load, so it is no
/// ground to refuse a file.
pub fn reserve_problem(reserve: u64, limit: &MemoryLimit) -> Option<String> {
    if limit.source == LimitSource::MemAvailable || reserve < limit.bytes {
        return None;
    }
    Some(format!(
        "{} is not less than the memory limit, {} ({}): it would leave the workers nothing",
        mib(reserve),
        mib(limit.bytes),
        limit.source
    ))
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}
