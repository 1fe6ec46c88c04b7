//! systemd integration: `Type=notify` readiness, reload and stop notices, and the
//! watchdog. Outside systemd (`NOTIFY_SOCKET` unset) every call is a no-op.
//!
//! A reload sends `RELOADING=1` with `MONOTONIC_USEC` when it begins and `READY=1` once
//! the new generations are up, as `Type=notify-reload` (systemd 253) expects; older
//! systemd shows the unit "reloading" in between.

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// Every pool is up: systemd may consider the unit started.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload has begun: `READY=1` follows once it is done ([`ready`]).
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `WatchdogSec=` in the unit: `WATCHDOG=1` at half the interval, from the master's loop,
/// so that a master that hangs is restarted by systemd.
#[derive(Debug)]
pub struct Watchdog {
    every: Duration,
    last: Option<Instant>,
}

impl Watchdog {
    /// The watchdog systemd asks for (`WATCHDOG_USEC`, for this pid), if any.
    pub fn from_env() -> Option<Watchdog> {
        sd_notify::watchdog_enabled().map(|interval| Watchdog {
            every: interval / 2,
            last: None,
        })
    }

    /// Pings when half the interval has passed since the last ping; true when it did.
    pub fn tick(&mut self, now: Instant) -> bool {
        let due = self
            .last
            .is_none_or(|last| now.duration_since(last) >= self.every);
        if due {
            self.last = Some(now);
            notify(&[NotifyState::Watchdog]);
        }
        due
    }
}

/// A graceful or fast stop has begun.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

pub fn status(status: &str) {
    notify(&[NotifyState::Status(status)]);
}

fn notify(states: &[NotifyState<'_>]) {
    // A failed notify is not worth stopping for: systemd would time the unit out and say so.
    if let Err(err) = sd_notify::notify(states) {
        tracing::debug!("sd_notify failed: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_at_once_then_every_half_interval() {
        let mut watchdog = Watchdog {
            every: Duration::from_secs(5),
            last: None,
        };
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let pinged: Vec<u64> = [0, 100, 4_900, 5_000, 5_100, 9_999, 10_000]
            .into_iter()
            .filter(|&ms| watchdog.tick(at(ms)))
            .collect();
        assert_eq!(pinged, [0, 5_000, 10_000]);
    }
}
