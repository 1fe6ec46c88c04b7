//! A pool's start-up failures as the log, the status page and `/metrics` show them: each
//! back-off with its cause and its length. Who decides a back-off: the master for the
//! processes it execs ([`super::PoolRun::on_reaped`]), a zygote for the workers it forks
//! (it reports each hold, `drover_proto::zygote::Report::Holding`). Only a process that
//! failed before its first request backs off: one that took a request and then died is
//! that request's fault, which no client can turn into a wait for the whole pool.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::control::BackoffStatus;
use crate::master::exit::ExitCause;

/// What the pool's start-up failures were, since this generation started.
#[derive(Debug, Default)]
pub struct StartupFailures {
    /// Start-up failures that held spawning back, since the generation started.
    count: u64,
    /// The last back-off's end.
    until: Option<Instant>,
    /// The last back-off's cause, as the log said it.
    cause: Option<String>,
    /// The last worker a zygote reported exited, with its exit and life: the cause of a
    /// hold the zygote reports next.
    last_exit: Option<(Pid, ExitCause, Duration)>,
}

impl StartupFailures {
    /// A back-off of `delay` from `now`, for `cause`.
    pub fn record(&mut self, now: Instant, delay: Duration, cause: String) {
        self.count += 1;
        self.until = Some(now + delay);
        self.cause = Some(cause);
    }

    /// A zygote reported `pid`'s exit: remembered, for the hold it may report next.
    pub fn exited(&mut self, pid: Pid, cause: ExitCause, lived: Duration) {
        self.last_exit = Some((pid, cause, lived));
    }

    /// How `pid`, of which a zygote reports a hold, ended, as a log line says it.
    pub fn cause_of(&self, pid: Pid) -> String {
        match self.last_exit {
            Some((last, cause, lived)) if last == pid => {
                format!(
                    "worker {pid} exited {cause} after {} before its first request",
                    crate::master::exit::lifetime(lived)
                )
            }
            _ => format!("worker {pid} exited before its first request"),
        }
    }

    pub fn status(&self, now: Instant) -> BackoffStatus {
        BackoffStatus {
            startup_failures: self.count,
            holding: self
                .until
                .map(|until| until.saturating_duration_since(now))
                .filter(|left| !left.is_zero()),
            last_cause: self.cause.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_shown_until_it_ends_and_counted_for_good() {
        let mut failures = StartupFailures::default();
        let now = Instant::now();
        let pid = Pid::from_raw(42);
        failures.exited(pid, ExitCause::Code(255), Duration::from_millis(120));
        let cause = failures.cause_of(pid);
        assert_eq!(
            cause,
            "worker 42 exited with code 255 after 0.12s before its first request"
        );
        failures.record(now, Duration::from_secs(2), cause.clone());
        let held = failures.status(now + Duration::from_secs(1));
        assert_eq!(held.startup_failures, 1);
        assert_eq!(held.holding, Some(Duration::from_secs(1)));
        assert_eq!(held.last_cause.as_deref(), Some(cause.as_str()));
        let after = failures.status(now + Duration::from_secs(3));
        assert_eq!((after.startup_failures, after.holding), (1, None));
        assert_eq!(
            failures.cause_of(Pid::from_raw(7)),
            "worker 7 exited before its first request"
        );
    }
}
