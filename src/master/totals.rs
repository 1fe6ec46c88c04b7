//! A pool's counters across its generations. Every reload (so every deploy) starts a new
//! generation with a scoreboard of its own, whose counters start at 0, while the old one
//! drains and still counts the requests it finishes. Prometheus wants a counter that only
//! grows, so what a pool reports is the sum over its generations: those already dropped
//! (their last counts, carried by [`super::pools::Pools`]) plus those running now (serving,
//! starting, draining). Highwater marks take the highest; the start is the first
//! generation's. Pure: unit-tested on plain values.

use std::time::{Instant, SystemTime};

use crate::control::{PoolStatus, Recycled};
use crate::scoreboard::PoolView;

/// The counts of one generation, or the sum of several.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// When the earliest generation counted started.
    pub born: Option<Instant>,
    /// Requests served (None where the runtime cannot count them: php-cgi, command).
    pub accepted_conn: Option<u64>,
    pub max_listen_queue: Option<u32>,
    pub max_active_processes: u32,
    pub max_children_reached: u64,
    pub slow_requests: u64,
    pub recycled: Recycled,
    /// The request-duration histogram and the responses by class (None: not counted).
    pub requests: Option<PoolView>,
}

impl Totals {
    /// Adds the counts of another generation of the pool.
    pub fn add(&mut self, other: &Totals) {
        self.born = earliest(self.born, other.born);
        self.accepted_conn = either(self.accepted_conn, other.accepted_conn, |a, b| a + b);
        self.max_listen_queue = either(self.max_listen_queue, other.max_listen_queue, u32::max);
        self.max_active_processes = self.max_active_processes.max(other.max_active_processes);
        self.max_children_reached += other.max_children_reached;
        self.slow_requests += other.slow_requests;
        let (r, o) = (&mut self.recycled, &other.recycled);
        r.max_requests += o.max_requests;
        r.max_memory += o.max_memory;
        r.terminate += o.terminate;
        r.crash += o.crash;
        r.idle += o.idle;
        r.reload += o.reload;
        r.max_lifetime += o.max_lifetime;
        self.requests = either(self.requests.take(), other.requests.clone(), add_views);
    }

    /// Writes the pool's totals into its serving generation's status, whose per-worker
    /// rows and gauges stay its own. A count the serving generation cannot make (its
    /// runtime does not count requests) stays unknown, whatever older ones counted.
    pub fn report(&self, status: &mut PoolStatus, now: Instant) {
        if let Some(born) = self.born {
            let since = now.saturating_duration_since(born);
            status.start_since = since;
            status.start_time = SystemTime::now() - since;
        }
        status.accepted_conn = status.accepted_conn.and(self.accepted_conn);
        status.requests = status.requests.take().and(self.requests.clone());
        status.max_listen_queue = either(status.max_listen_queue, self.max_listen_queue, u32::max);
        status.max_active_processes = status.max_active_processes.max(self.max_active_processes);
        status.max_children_reached = self.max_children_reached;
        status.slow_requests = self.slow_requests;
        status.recycled = self.recycled.clone();
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Both known: combined; one known: that one; neither: unknown.
fn either<T>(a: Option<T>, b: Option<T>, combine: impl FnOnce(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(combine(a, b)),
        (a, b) => a.or(b),
    }
}

fn add_views(mut a: PoolView, b: PoolView) -> PoolView {
    for (x, y) in a.buckets.iter_mut().zip(b.buckets) {
        *x += y;
    }
    for (x, y) in a.classes.iter_mut().zip(b.classes) {
        *x += y;
    }
    a.sum += b.sum;
    a.accepted += b.accepted;
    a.connections += b.connections;
    a
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::control::fixture;

    /// A generation born `age` before `now` that counted `requests` requests, all 2xx
    /// within 5 ms, one of them slow.
    fn generation(now: Instant, age: u64, requests: u64) -> Totals {
        let mut buckets = [0; crate::scoreboard::BUCKETS];
        buckets[0] = requests;
        Totals {
            born: Some(now - Duration::from_secs(age)),
            accepted_conn: Some(requests),
            max_listen_queue: Some(2),
            max_active_processes: 1,
            max_children_reached: 1,
            slow_requests: 1,
            recycled: Recycled {
                crash: 1,
                ..Recycled::default()
            },
            requests: Some(PoolView {
                buckets,
                sum: Duration::from_millis(requests),
                classes: [0, requests, 0, 0, 0],
                accepted: requests,
                connections: requests,
            }),
        }
    }

    #[test]
    fn counts_add_up_over_generations_and_marks_take_the_highest() {
        let now = Instant::now();
        let mut total = Totals::default();
        total.add(&generation(now, 60, 5));
        let mut newer = generation(now, 10, 3);
        newer.max_active_processes = 4;
        newer.max_listen_queue = None;
        total.add(&newer);
        assert_eq!(total.born, Some(now - Duration::from_secs(60)));
        assert_eq!(total.accepted_conn, Some(8));
        assert_eq!(total.max_listen_queue, Some(2));
        assert_eq!(total.max_active_processes, 4);
        assert_eq!((total.max_children_reached, total.slow_requests), (2, 2));
        assert_eq!(total.recycled.crash, 2);
        let requests = total.requests.as_ref().unwrap();
        assert_eq!(requests.count(), 8);
        assert_eq!(requests.classes, [0, 8, 0, 0, 0]);
        assert_eq!(requests.sum, Duration::from_millis(8));
        assert_eq!(requests.accepted, 8);
    }

    #[test]
    fn the_status_reports_the_totals_and_keeps_its_own_workers_and_gauges() {
        let now = Instant::now();
        let mut total = generation(now, 3600 * 2, 1000);
        total.add(&generation(now, 10, 234));
        let mut status = fixture::www();
        let (workers, idle) = (status.workers.clone(), status.idle_processes);
        total.report(&mut status, now);
        assert_eq!(status.accepted_conn, Some(1234));
        assert_eq!(status.requests.as_ref().map(PoolView::count), Some(1234));
        assert_eq!(status.start_since, Duration::from_secs(7200));
        assert_eq!(status.slow_requests, 2);
        // The fixture's own marks are higher: kept.
        assert_eq!(status.max_listen_queue, Some(7));
        assert_eq!(status.max_active_processes, 4);
        assert_eq!((status.workers, status.idle_processes), (workers, idle));
    }

    #[test]
    fn a_count_the_serving_generation_cannot_make_stays_unknown() {
        // A Python pool that became a php-cgi one: its old request counts are not shown.
        let now = Instant::now();
        let total = generation(now, 60, 5);
        let mut status = fixture::www();
        status.accepted_conn = None;
        status.requests = None;
        total.report(&mut status, now);
        assert_eq!((status.accepted_conn, status.requests), (None, None));
    }
}
