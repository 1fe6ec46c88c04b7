//! Respawn policy after worker exits: per-pool backoff for workers that die during start-up,
//! and php-fpm's emergency restart when workers keep crashing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

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
    After {
        delay: Duration,
        failures: u32,
    },
}

impl Backoff {
    /// `expected`: the process was asked to exit (retired, restarted), exited 0, or got past
    /// its start (it took a request): never a start-up failure.
    pub fn on_exit(&mut self, lived: Duration, expected: bool) -> Respawn {
        if expected || lived >= STARTUP_WINDOW {
            self.failures = 0;
            return Respawn::Now;
        }
        self.failures += 1;
        let doublings = (self.failures - 1).min(16);
        let delay = FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY);
        Respawn::After {
            delay,
            failures: self.failures,
        }
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
        EmergencyRestart {
            threshold,
            interval,
            crashes: VecDeque::new(),
        }
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

    #[test]
    fn a_healthy_exit_respawns_at_once_and_resets() {
        let mut b = Backoff::default();
        assert!(matches!(
            b.on_exit(Duration::ZERO, false),
            Respawn::After { .. }
        ));
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
        assert!(
            !e.on_crash(t0 + Duration::from_secs(3)),
            "the window restarts after firing"
        );
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
