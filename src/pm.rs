//! Process-management policy, as pure functions of (configuration, state, now).
//!
//! Nothing here starts, signals or waits on a process: the master asks, applies the
//! answer, and the answers are unit-tested without processes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::Pm;

/// How many workers a pool runs. In 0.1 every mode runs `max_children` workers: dynamic
/// and ondemand scheduling is a later issue, and their limits are only validated now.
pub fn target_workers(pm: &Pm) -> u32 {
    pm.max_children
}

/// The request limit one worker (or php-cgi generation) is given: `max_requests` plus a
/// draw in `0..=max_requests_jitter`, so that workers do not all recycle at once. 0 = never.
pub fn max_requests(max_requests: u32, jitter: u32, draw: impl FnOnce(u32) -> u32) -> u32 {
    if max_requests == 0 {
        return 0;
    }
    max_requests.saturating_add(draw(jitter).min(jitter))
}

/// A process that exits sooner than this after its start failed to start.
pub const STARTUP_WINDOW: Duration = Duration::from_secs(2);
const FIRST_DELAY: Duration = Duration::from_secs(1);
const MAX_DELAY: Duration = Duration::from_secs(60);

/// Per-pool respawn backoff: a worker that dies during start-up delays the next spawn,
/// doubling from 1 s to 60 s; a worker that lived past [`STARTUP_WINDOW`] resets it.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    /// Start-up failures in a row.
    failures: u32,
}

/// What to do after a worker exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Respawn {
    Now,
    /// The n-th start-up failure in a row: wait until then.
    After { delay: Duration, failures: u32 },
}

impl Backoff {
    /// `expected`: the master asked it to exit (retired, restarted); never a failure.
    pub fn on_exit(&mut self, lived: Duration, expected: bool) -> Respawn {
        if expected || lived >= STARTUP_WINDOW {
            self.failures = 0;
            return Respawn::Now;
        }
        self.failures += 1;
        let doublings = (self.failures - 1).min(16);
        let delay = FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY);
        Respawn::After { delay, failures: self.failures }
    }

    pub fn failing(&self) -> bool {
        self.failures > 0
    }
}

/// php-fpm's emergency restart: `threshold` workers dying of SIGSEGV or SIGBUS within
/// `interval` restart every pool. Off when either is zero.
#[derive(Debug, Clone)]
pub struct EmergencyRestart {
    threshold: u32,
    interval: Duration,
    crashes: VecDeque<Instant>,
}

impl EmergencyRestart {
    pub fn new(threshold: u32, interval: Duration) -> Self {
        EmergencyRestart { threshold, interval, crashes: VecDeque::new() }
    }

    /// Records one crash; true when it completes the threshold (the window then restarts).
    pub fn on_crash(&mut self, now: Instant) -> bool {
        if self.threshold == 0 || self.interval.is_zero() {
            return false;
        }
        self.crashes.push_back(now);
        while let Some(&first) = self.crashes.front() {
            if now.duration_since(first) > self.interval {
                self.crashes.pop_front();
            } else {
                break;
            }
        }
        if self.crashes.len() >= self.threshold as usize {
            self.crashes.clear();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PmMode;

    fn pm(max_requests: u32, jitter: u32) -> Pm {
        Pm {
            mode: PmMode::Static,
            max_children: 4,
            start_servers: 0,
            min_spare_servers: 0,
            max_spare_servers: 0,
            max_spawn_rate: 32,
            process_idle_timeout: Duration::from_secs(10),
            max_requests,
            max_requests_jitter: jitter,
            max_memory: None,
        }
    }

    #[test]
    fn every_mode_runs_max_children_in_0_1() {
        assert_eq!(target_workers(&pm(0, 0)), 4);
    }

    #[test]
    fn max_requests_zero_means_never_whatever_the_jitter() {
        assert_eq!(max_requests(0, 10, |_| 7), 0);
    }

    #[test]
    fn max_requests_adds_the_draw_bounded_by_jitter() {
        assert_eq!(max_requests(500, 50, |j| j), 550);
        assert_eq!(max_requests(500, 50, |_| 0), 500);
        assert_eq!(max_requests(500, 50, |_| 999), 550, "a bad draw is clamped");
    }

    #[test]
    fn a_healthy_exit_respawns_at_once_and_resets() {
        let mut b = Backoff::default();
        assert!(matches!(b.on_exit(Duration::ZERO, false), Respawn::After { .. }));
        assert_eq!(b.on_exit(Duration::from_secs(5), false), Respawn::Now);
        assert!(!b.failing());
    }

    #[test]
    fn startup_failures_double_the_delay_up_to_a_minute() {
        let mut b = Backoff::default();
        let delays: Vec<_> = (0..9)
            .map(|_| match b.on_exit(Duration::from_millis(10), false) {
                Respawn::After { delay, .. } => delay.as_secs(),
                Respawn::Now => 0,
            })
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert!(b.failing());
    }

    #[test]
    fn an_expected_exit_is_never_a_failure() {
        let mut b = Backoff::default();
        assert_eq!(b.on_exit(Duration::ZERO, true), Respawn::Now);
    }

    #[test]
    fn emergency_restart_fires_at_threshold_within_interval() {
        let t0 = Instant::now();
        let mut e = EmergencyRestart::new(3, Duration::from_secs(10));
        assert!(!e.on_crash(t0));
        assert!(!e.on_crash(t0 + Duration::from_secs(1)));
        assert!(e.on_crash(t0 + Duration::from_secs(2)));
        assert!(!e.on_crash(t0 + Duration::from_secs(3)), "the window restarts after firing");
    }

    #[test]
    fn emergency_restart_forgets_crashes_outside_the_interval() {
        let t0 = Instant::now();
        let mut e = EmergencyRestart::new(2, Duration::from_secs(10));
        assert!(!e.on_crash(t0));
        assert!(!e.on_crash(t0 + Duration::from_secs(11)));
        assert!(e.on_crash(t0 + Duration::from_secs(12)));
    }

    #[test]
    fn emergency_restart_off_when_threshold_or_interval_is_zero() {
        let t0 = Instant::now();
        let mut e = EmergencyRestart::new(0, Duration::from_secs(10));
        assert!((0..10).all(|_| !e.on_crash(t0)));
        let mut e = EmergencyRestart::new(1, Duration::ZERO);
        assert!(!e.on_crash(t0));
    }
}
