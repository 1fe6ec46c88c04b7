//! The master's stop: `shutdown_delay` first, then the graceful stop (pools stop accepting,
//! requests finish) until the deadline, then SIGKILL and the last reaps.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::pool::{PoolRun, own_children};
use super::{Master, Phase};
use crate::systemd;

/// After SIGKILL, how long to wait for the last reaps before exiting anyway.
const KILL_GRACE: Duration = Duration::from_secs(3);

impl Master {
    /// TERM and QUIT: the graceful stop, after `shutdown_delay` when it is set. A second
    /// one within the delay cuts it short (as a second stop signal can only make a stop
    /// sooner).
    pub(super) fn stop_after_delay(&mut self) {
        let timeout = self.config.global.process_control_timeout;
        let delay = self.config.global.shutdown_delay;
        crate::control::health::mark_stopping();
        match self.phase {
            Phase::Running if !delay.is_zero() => {
                tracing::info!(
                    "stopping: graceful after shutdown_delay {} (readyz answers 503; the pools serve on)",
                    humantime::format_duration(delay)
                );
                systemd::stopping();
                self.phase = Phase::Delaying {
                    until: Instant::now() + delay,
                    timeout,
                };
            }
            Phase::Delaying { .. } => {
                tracing::info!("stopping: a second stop signal ends shutdown_delay now");
                self.stop(timeout, "graceful");
            }
            _ => self.stop(timeout, "graceful"),
        }
    }

    /// Within `shutdown_delay`: once it has run out, the graceful stop begins.
    pub(super) fn end_delay(&mut self, now: Instant) {
        if let Phase::Delaying { until, timeout } = self.phase
            && now >= until
        {
            self.stop(timeout, "graceful, shutdown_delay over");
        }
    }

    pub(super) fn stop(&mut self, timeout: Duration, how: &str) {
        let deadline = Instant::now() + timeout;
        crate::control::health::mark_stopping();
        match self.phase {
            // A second stop signal can only make the stop sooner.
            Phase::Stopping {
                deadline: current, ..
            } if current <= deadline => {}
            Phase::Stopping { killed, .. } => self.phase = Phase::Stopping { deadline, killed },
            Phase::Running | Phase::Delaying { .. } => {
                tracing::info!(
                    "stopping: {how} (timeout {})",
                    humantime::format_duration(timeout)
                );
                if self.phase == Phase::Running {
                    systemd::stopping();
                }
                for pool in self.pools.iter_mut() {
                    pool.stop_accepting();
                }
                self.phase = Phase::Stopping {
                    deadline,
                    killed: false,
                };
            }
        }
    }

    /// True when every process is gone (or the grace after SIGKILL ran out).
    pub(super) fn advance_stop(&mut self, now: Instant) -> bool {
        let Phase::Stopping { deadline, killed } = self.phase else {
            return false;
        };
        // Done when no child is left at all: that includes workers a dying php-cgi parent
        // forked after the last look and handed to us.
        let children = own_children();
        let pools_empty = self.pools.iter().all(PoolRun::is_empty);
        if pools_empty && children.is_empty() {
            return true;
        }
        if pools_empty && !killed {
            // What is left are orphans of the apps (or of the namespace, as PID 1).
            self.orphans.terminate(&children);
        }
        if !killed && now >= deadline {
            tracing::warn!("stopping: timeout reached; killing what is left");
            for pool in self.pools.iter_mut() {
                pool.kill_all();
            }
            for pid in children {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            }
            self.phase = Phase::Stopping {
                deadline: now + KILL_GRACE,
                killed: true,
            };
        } else if killed && now >= deadline {
            tracing::error!("stopping: some processes could not be reaped; exiting anyway");
            return true;
        }
        false
    }

    pub(super) fn finish(&mut self) {
        for pool in self.pools.iter() {
            pool.listener.unlink();
        }
        if let Some(path) = &self.notify.pid_file {
            let _ = std::fs::remove_file(path);
        }
        tracing::info!("stopped");
    }
}
