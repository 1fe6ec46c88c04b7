//! The pool's own area of the scoreboard: the requests accepted (php-fpm's `accepted conn`),
//! which every worker adds to as it takes a request, and a request-duration histogram and
//! responses by status class, which it adds to at the end of each.
//!
//! Counted by the workers, not sampled by the master: the master looks every 100 ms and
//! would miss most fast requests. Many workers write at once, so every field is a
//! `fetch_add` (one locked add per field, a handful per request); the master only reads.
//! A scoreboard is made per pool generation, so these counters start at 0 with it; the
//! master adds up a pool's generations (src/master/totals.rs).
//!
//! The fields are read one by one, so a read may see a request in one field and not yet
//! in another; [`PoolView::count`] is therefore the sum of the buckets, which keeps the
//! histogram's `+Inf` bucket and its count equal.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// The histogram's upper bounds in µs (`le`), as Prometheus client libraries' defaults
/// are: from 5 ms to 10 s. A last bucket, `+Inf`, takes the rest.
pub const BUCKET_BOUNDS_US: [u64; 11] = [
    5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
    10_000_000,
];

/// Buckets, `+Inf` included.
pub const BUCKETS: usize = BUCKET_BOUNDS_US.len() + 1;

/// Status classes counted: 1xx to 5xx.
pub const CLASSES: usize = 5;

/// The pool's area. `#[repr(C)]`, atomics only, 64-byte aligned, like a [`super::Slot`].
#[repr(C, align(64))]
pub struct PoolStats {
    /// Requests per bucket, not cumulative: the one a request falls in is [`bucket`]'s.
    buckets: [AtomicU64; BUCKETS],
    /// The durations' sum, in µs.
    sum_us: AtomicU64,
    /// Responses by status class, `[0]` = 1xx.
    classes: [AtomicU64; CLASSES],
    /// Requests taken, counted as each starts: a request whose worker dies in it counts too,
    /// as in php-fpm's `accepted conn`.
    accepted: AtomicU64,
    /// Connections taken off the listener, counted at each `accept()` (a kept connection
    /// counts once, however many requests it carries): with the listen queue, what the
    /// master's `queue_timeout` reads as arrivals (src/pm/queue.rs).
    connections: AtomicU64,
}

/// What the master read of a pool's area.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolView {
    /// Requests per bucket, not cumulative, `+Inf` last.
    pub buckets: [u64; BUCKETS],
    pub sum: Duration,
    /// Responses by class, `[0]` = 1xx.
    pub classes: [u64; CLASSES],
    /// Requests taken (accepted conn), those in progress included.
    pub accepted: u64,
    /// Connections taken off the listener.
    pub connections: u64,
}

impl PoolView {
    /// Requests counted: the sum of the buckets (see the module's doc).
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// The bucket a request of `duration_us` falls in: the first whose bound it does not pass
/// (`le` is "less than or equal").
pub fn bucket(duration_us: u64) -> usize {
    BUCKET_BOUNDS_US
        .iter()
        .position(|&bound| duration_us <= bound)
        .unwrap_or(BUCKETS - 1)
}

/// The class index of an HTTP status (1xx → 0); None outside 100..=599.
pub fn class(status: u16) -> Option<usize> {
    (100..600)
        .contains(&status)
        .then(|| usize::from(status / 100 - 1))
}

impl PoolStats {
    /// A worker took a request (its parameters are read; the application has not run).
    pub fn accept(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    /// A worker took a connection off the pool's listener.
    pub fn connection(&self) {
        self.connections.fetch_add(1, Relaxed);
    }

    /// A worker's request ended after `duration_us`, answered with `status` when the
    /// runtime knows it (an unknown or out-of-range status counts in the histogram only).
    pub fn record(&self, duration_us: u64, status: Option<u16>) {
        self.buckets[bucket(duration_us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(duration_us, Relaxed);
        if let Some(class) = status.and_then(class) {
            self.classes[class].fetch_add(1, Relaxed);
        }
    }

    /// Master side: a copy of the counters.
    pub fn view(&self) -> PoolView {
        PoolView {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum: Duration::from_micros(self.sum_us.load(Relaxed)),
            classes: std::array::from_fn(|i| self.classes[i].load(Relaxed)),
            accepted: self.accepted.load(Relaxed),
            connections: self.connections.load(Relaxed),
        }
    }
}
