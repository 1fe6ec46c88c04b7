//! A pool's start-up, a part of the pool that owns its state: the crash-loop backoff that
//! holds spawning back ([`Startup`]), the start-up failures as the log, the status page and
//! `/metrics` show them (each back-off with its cause and its length), and an app that
//! failed to load, reported once its traceback is in the log. Who decides a back-off: the master for the
//! processes it execs ([`super::PoolRun::on_reaped`]), a zygote for the workers it forks
//! (it reports each hold, `drover_proto::zygote::Report::Holding`). Only a process that
//! failed before its first request backs off: one that took a request and then died is
//! that request's fault, which no client can turn into a wait for the whole pool.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::control::BackoffStatus;
use crate::master::exit::{ExitCause, lifetime};
use crate::pm::{Backoff, Respawn};

/// How long an app's failure to load waits for its traceback lines before it is said.
const LATE: Duration = Duration::from_millis(300);

/// Whether the pool may spawn now, and why not: the backoff after start-up failures.
#[derive(Debug, Default)]
pub struct Startup {
    backoff: Backoff,
    /// After a start-up failure: no spawn before this.
    hold_until: Option<Instant>,
    /// The start-up failures, the master's and a zygote's, for the status page.
    failures: StartupFailures,
    /// When the app failed to load: the message waits a moment for the traceback lines.
    failed_at: Option<Instant>,
    /// The zygote said its runtime is started (`Report::Ready`), so that an ondemand pool
    /// is ready only once a request would find PHP or the app loaded; true from the start
    /// for runtimes whose parent does not report.
    runtime_ready: bool,
}

impl Startup {
    /// `runtime_ready`: the runtime's parent does not report it started.
    pub fn new(runtime_ready: bool) -> Startup {
        Startup {
            runtime_ready,
            ..Startup::default()
        }
    }

    pub fn runtime_ready(&self) -> bool {
        self.runtime_ready
    }

    /// The zygote reported its runtime started.
    pub fn runtime_started(&mut self) {
        self.runtime_ready = true;
    }

    /// A start-up failure holds spawning back until its backoff ends.
    pub fn holding(&mut self, now: Instant) -> bool {
        if self.hold_until.is_some_and(|until| now < until) {
            return true;
        }
        self.hold_until = None;
        false
    }

    /// Records a start-up failure of pool `pool` and holds spawning back as the backoff
    /// says.
    pub fn hold(&mut self, pool: &str, now: Instant, lived: Duration, reason: &str) {
        if let Respawn::After { delay, failures } = self.backoff.on_exit(lived, false) {
            tracing::error!(
                "pool {pool}: failed to start ({reason}); retrying in {}s ({failures} failure{} in a row)",
                delay.as_secs(),
                if failures == 1 { "" } else { "s" }
            );
            self.hold_until = Some(now + delay);
            self.failures.record(now, delay, reason.to_owned());
        }
    }

    /// The zygote `from` holds its forks back after its worker `pid` failed to start.
    pub fn zygote_holding(
        &mut self,
        pool: &str,
        (from, pid): (Pid, Pid),
        delay: Duration,
        failures: u32,
        now: Instant,
    ) {
        let cause = self.failures.cause_of(pid);
        tracing::error!(
            "pool {pool}: failed to start ({cause}); zygote {from} forks again in {} ({failures} \
             failure{} in a row)",
            lifetime(delay),
            if failures == 1 { "" } else { "s" }
        );
        self.failures.record(now, delay, cause);
    }

    /// A zygote reported how its worker `pid` exited, for the cause of a hold that follows.
    pub fn worker_exited(&mut self, pid: Pid, cause: ExitCause, lived: Duration) {
        self.failures.exited(pid, cause, lived);
    }

    /// The app failed to load: said by [`Startup::app_failure_due`] once its traceback had
    /// time to arrive.
    pub fn app_failed(&mut self, now: Instant) {
        self.failed_at = Some(now);
    }

    /// True once, when the app's failure to load is due to be said.
    pub fn app_failure_due(&mut self, now: Instant) -> bool {
        if self
            .failed_at
            .is_some_and(|at| now.saturating_duration_since(at) >= LATE)
        {
            self.failed_at = None;
            return true;
        }
        false
    }

    pub fn status(&self, now: Instant) -> BackoffStatus {
        self.failures.status(now)
    }
}

/// What the pool's start-up failures were, since this generation started.
#[derive(Debug, Default)]
struct StartupFailures {
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
                    lifetime(lived)
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
    fn a_failure_holds_spawning_back_then_lets_go() {
        let mut startup = Startup::default();
        let now = Instant::now();
        assert!(!startup.holding(now));
        startup.hold("www", now, Duration::from_millis(10), "worker 42 exited");
        assert!(startup.holding(now));
        let status = startup.status(now);
        assert_eq!(status.startup_failures, 1);
        let delay = status.holding.expect("held");
        assert!(startup.holding(now + delay - Duration::from_millis(1)));
        assert!(!startup.holding(now + delay));
    }

    #[test]
    fn an_app_failure_is_said_once_after_its_traceback() {
        let mut startup = Startup::default();
        let now = Instant::now();
        startup.app_failed(now);
        assert!(!startup.app_failure_due(now + Duration::from_millis(100)));
        assert!(startup.app_failure_due(now + LATE));
        assert!(!startup.app_failure_due(now + LATE * 2));
    }

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
