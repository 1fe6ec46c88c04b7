//! `queue_timeout`'s arithmetic: how long the oldest connection waiting in a pool's listen
//! queue has waited, told from two numbers the master can read on its tick, without ever
//! seeing the connections arrive (pure; the shell is `src/master/shed.rs`).
//!
//! The kernel hands connections out of a listen queue in the order they arrived. Number
//! them 1, 2, 3, ... in that order. At any moment, every connection that has arrived has
//! either been taken (by a worker's `accept()`, which the workers count in the scoreboard,
//! or by the master answering it 503) or still waits, so `taken + queued` is how many have
//! arrived by then. Sampled on each tick, that is a staircase of arrivals over time. The
//! oldest waiting connection is number `taken + 1`; the first sample whose count reached
//! that number had seen it arrive, so it has waited at least since that sample, and at
//! most since the sample before. The bound is as fine as the sampling (100 ms), and never
//! early: a read that races a worker's accept undercounts arrivals (taken is read first),
//! which only makes a connection look younger.
//!
//! The same staircase dates each connection's departure: those numbered from the last
//! sample's `taken + 1` to this one's left the queue between the two samples, and each
//! arrived within the sample interval of its mark. [`Waits`] histograms, per connection,
//! the time from the middle of its arrival interval to the middle of its departure
//! interval: an estimate within one sampling step (100 ms) either way, never a
//! measurement of the one connection. A connection that arrived and left between two
//! samples is counted as waiting 0 (below the first bucket, 0.1 s).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The staircase of arrivals: only the samples where the count rose, and only those that
/// still cover a waiting connection (at most one per connection waiting).
#[derive(Debug, Default)]
pub struct Arrivals {
    marks: VecDeque<Mark>,
    /// The previous sample's time: a connection first counted now arrived after it.
    last: Option<Instant>,
    /// The highest count sampled: arrivals never go back.
    arrived: u64,
    /// The highest `taken` sampled: the connections up to it have left the queue.
    departed: u64,
    /// The estimated waits of the connections that left.
    waits: Waits,
}

/// The upper bounds of the queue-wait histogram's buckets, in milliseconds; a last bucket
/// (+Inf) holds the rest. The first is the sampling step: nothing finer is known.
pub const WAIT_BOUNDS_MS: [u64; 9] = [100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000];

/// A histogram of estimated queue waits: `buckets[i]` counts the waits up to
/// `WAIT_BOUNDS_MS[i]` and above the bound before (not cumulative); the last, the rest.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Waits {
    pub buckets: [u64; WAIT_BOUNDS_MS.len() + 1],
    pub sum: Duration,
    pub count: u64,
}

impl Waits {
    /// Counts `n` connections that each waited `wait`.
    pub fn observe(&mut self, wait: Duration, n: u64) {
        if n == 0 {
            return;
        }
        let ms = wait.as_millis();
        let i = WAIT_BOUNDS_MS
            .iter()
            .position(|&bound| ms <= u128::from(bound))
            .unwrap_or(WAIT_BOUNDS_MS.len());
        self.buckets[i] += n;
        self.count += n;
        let total = wait.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
        self.sum = self.sum.saturating_add(total);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    /// The sample before: the connections up to `count` not counted then arrived after it.
    after: Option<Instant>,
    /// The sample that counted them.
    by: Instant,
    count: u64,
}

/// How long the oldest waiting connection has waited: at least `least`; at most `most`
/// (None: it was counted at the first sample, so its arrival is unbounded before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub least: Duration,
    pub most: Option<Duration>,
}

impl Arrivals {
    /// A sample at `now`: `taken` connections have left the queue (read first), `queued`
    /// wait in it (read after).
    pub fn sample(&mut self, now: Instant, taken: u64, queued: u64) {
        let count = taken.saturating_add(queued);
        if count > self.arrived {
            self.arrived = count;
            self.marks.push_back(Mark {
                after: self.last,
                by: now,
                count,
            });
        }
        self.depart(now, taken);
        self.last = Some(now);
        self.forget(taken);
    }

    /// Dates the connections that left the queue since the last sample (numbers
    /// `departed + 1 ..= taken`): each mark covers those from the previous mark's count on.
    fn depart(&mut self, now: Instant, taken: u64) {
        if taken <= self.departed {
            return;
        }
        let left = middle(self.last.unwrap_or(now), now);
        let mut from = self.departed;
        for mark in &self.marks {
            if from >= taken {
                break;
            }
            let upto = mark.count.min(taken);
            if upto > from {
                let arrived = middle(mark.after.unwrap_or(mark.by), mark.by);
                self.waits
                    .observe(left.saturating_duration_since(arrived), upto - from);
                from = upto;
            }
        }
        self.departed = taken;
    }

    /// The estimated waits of the connections that have left the queue so far.
    pub fn waits(&self) -> &Waits {
        &self.waits
    }

    /// Marks whose connections have all been taken are of no more use.
    fn forget(&mut self, taken: u64) {
        while self.marks.front().is_some_and(|m| m.count <= taken) {
            self.marks.pop_front();
        }
    }

    /// The wait of the oldest waiting connection, number `taken + 1`; None when no sample
    /// counted it (nothing waits, as far as the samples know).
    pub fn oldest(&self, now: Instant, taken: u64) -> Option<Wait> {
        let mark = self.marks.iter().find(|m| m.count > taken)?;
        Some(Wait {
            least: now.saturating_duration_since(mark.by),
            most: mark.after.map(|after| now.saturating_duration_since(after)),
        })
    }

    /// How many waiting connections have waited at least `timeout` for sure: those counted
    /// by a sample `timeout` old or older. They are the oldest, so the next to leave the
    /// queue: taking that many from its head takes exactly them, unless workers took some
    /// meanwhile (then the next ones, which have waited nearly as long; see the shell).
    pub fn overdue(&self, now: Instant, taken: u64, timeout: Duration) -> u64 {
        self.marks
            .iter()
            .rev()
            .find(|m| now.saturating_duration_since(m.by) >= timeout)
            .map_or(0, |m| m.count.saturating_sub(taken))
    }
}

/// The instant halfway between `a` and the later `b`.
fn middle(a: Instant, b: Instant) -> Instant {
    a + b.saturating_duration_since(a) / 2
}

/// The `Retry-After` a 503 of `queue_timeout` carries: the timeout in whole seconds,
/// rounded up, at least 1 (the header takes whole seconds).
pub fn retry_after(timeout: Duration) -> u64 {
    (timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nothing_waits_before_a_sample_counts_a_connection() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 10, 0);
        a.sample(t0 + 100 * MS, 12, 0);
        assert_eq!(a.oldest(t0 + 200 * MS, 12), None);
        assert_eq!(a.overdue(t0 + 10_000 * MS, 12, 100 * MS), 0);
    }

    #[test]
    fn the_oldest_wait_is_bounded_by_the_samples_around_its_arrival() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 5, 0);
        // Between t0 and t0+100ms, three arrive and wait.
        a.sample(t0 + 100 * MS, 5, 3);
        a.sample(t0 + 200 * MS, 5, 3);
        let wait = a.oldest(t0 + 250 * MS, 5).unwrap();
        assert_eq!(wait.least, 150 * MS);
        assert_eq!(wait.most, Some(250 * MS));
    }

    #[test]
    fn overdue_counts_only_what_a_sample_saw_a_timeout_ago() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 0, 0);
        a.sample(t0 + 100 * MS, 0, 2); // 1, 2 arrived by t0+100
        a.sample(t0 + 200 * MS, 0, 5); // 3..5 by t0+200
        a.sample(t0 + 300 * MS, 0, 6); // 6 by t0+300
        let timeout = 1000 * MS;
        assert_eq!(a.overdue(t0 + 1099 * MS, 0, timeout), 0);
        assert_eq!(a.overdue(t0 + 1100 * MS, 0, timeout), 2);
        assert_eq!(a.overdue(t0 + 1200 * MS, 0, timeout), 5);
        // Workers took 3 meanwhile: only two of the overdue ones still wait.
        assert_eq!(a.overdue(t0 + 1200 * MS, 3, timeout), 2);
        assert_eq!(a.overdue(t0 + 1200 * MS, 6, timeout), 0);
    }

    #[test]
    fn taken_connections_are_forgotten_and_the_next_one_is_the_oldest() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 0, 0);
        a.sample(t0 + 100 * MS, 0, 2);
        a.sample(t0 + 200 * MS, 0, 4);
        a.sample(t0 + 300 * MS, 2, 2);
        assert_eq!(a.marks.len(), 1);
        let wait = a.oldest(t0 + 300 * MS, 2).unwrap();
        assert_eq!(wait.least, 100 * MS);
        assert_eq!(wait.most, Some(200 * MS));
    }

    #[test]
    fn a_racing_read_never_makes_a_connection_older() {
        // A worker took connection 3 between the reads: the sample undercounts (2 + 0), the
        // next one counts it with the later arrivals: it looks younger, never older.
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 2, 0);
        a.sample(t0 + 100 * MS, 3, 2);
        assert_eq!(a.oldest(t0 + 100 * MS, 3).unwrap().least, Duration::ZERO);
        // Arrivals never go back, whatever a later read says.
        a.sample(t0 + 200 * MS, 3, 0);
        assert_eq!(a.arrived, 5);
    }

    #[test]
    fn the_first_sample_bounds_a_wait_from_below_only() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 0, 4);
        let wait = a.oldest(t0 + 50 * MS, 0).unwrap();
        assert_eq!(
            wait,
            Wait {
                least: 50 * MS,
                most: None
            }
        );
    }

    #[test]
    fn each_departure_is_dated_from_the_middle_of_its_arrival_interval() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 0, 0);
        // Two arrive before t0+100ms and wait; one more by t0+200ms.
        a.sample(t0 + 100 * MS, 0, 2);
        for tick in 2..=10 {
            a.sample(t0 + tick * 100 * MS, 0, 3);
        }
        assert_eq!(a.waits().count, 0);
        // Between t0+1000 and t0+1100 workers take the first two: arrived ~t0+50, left
        // ~t0+1050: 1 s each.
        a.sample(t0 + 1100 * MS, 2, 1);
        assert_eq!(a.waits().count, 2);
        assert_eq!(a.waits().sum, 2000 * MS);
        assert_eq!(a.waits().buckets[3], 2); // (0.5, 1] s
        // The third (arrived ~t0+150), left with a fourth that came and went at once.
        a.sample(t0 + 1200 * MS, 4, 0);
        let w = a.waits();
        assert_eq!(w.count, 4);
        assert_eq!(w.buckets[0], 1); // the fourth: 0
        assert_eq!(w.buckets[3], 3); // the third too: ~t0+150ms to ~t0+1150ms
        assert_eq!(w.sum, 2000 * MS + 1000 * MS);
    }

    #[test]
    fn connections_taken_at_once_wait_nothing() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        for i in 0..10u64 {
            a.sample(t0 + i as u32 * 100 * MS, i * 50, 0);
        }
        let w = a.waits();
        assert_eq!(w.count, 450);
        assert_eq!(w.buckets[0], 450);
        assert_eq!(w.sum, Duration::ZERO);
    }

    #[test]
    fn a_lower_taken_count_dates_nothing_again() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        a.sample(t0, 0, 3);
        a.sample(t0 + 100 * MS, 3, 0);
        a.sample(t0 + 200 * MS, 1, 0);
        a.sample(t0 + 300 * MS, 3, 0);
        assert_eq!(a.waits().count, 3);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after(Duration::from_millis(500)), 1);
        assert_eq!(retry_after(Duration::from_secs(1)), 1);
        assert_eq!(retry_after(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after(Duration::from_secs(5)), 5);
        assert_eq!(retry_after(Duration::ZERO), 1);
    }
}
