//! Why a process ended, typed from its wait status, and how that reads in the log.

use std::fmt;
use std::time::Duration;

use drover_proto::zygote::WorkerExit;
use nix::sys::signal::Signal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    Code(i32),
    Signal(Signal),
    /// A signal nix has no name for: a real-time one (a zygote killed by the target signal
    /// it had not blocked yet, say).
    OtherSignal(i32),
    /// A worker reaped by its parent (a php-cgi parent), which told nobody its status.
    SeenByParent,
}

impl ExitCause {
    /// How a process ended, from `drover_proto::zygote::reap_any` or a zygote's report.
    pub fn from_exit(exit: WorkerExit) -> ExitCause {
        match exit {
            WorkerExit::Code(code) => ExitCause::Code(code),
            WorkerExit::Signal(n) => Signal::try_from(n)
                .map(ExitCause::Signal)
                .unwrap_or(ExitCause::OtherSignal(n)),
        }
    }

    /// The crashes php-fpm's emergency restart counts.
    pub fn is_crash(self) -> bool {
        matches!(self, ExitCause::Signal(Signal::SIGSEGV | Signal::SIGBUS))
    }
}

impl fmt::Display for ExitCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitCause::Code(code) => write!(f, "with code {code}"),
            ExitCause::Signal(signal) => write!(f, "on {}", signal.as_str()),
            ExitCause::OtherSignal(n) => write!(f, "on signal {n}"),
            ExitCause::SeenByParent => write!(f, "(status seen only by its parent)"),
        }
    }
}

/// "0.25s", "3.2s", "12m 5s": precise when short, readable when long.
pub fn lifetime(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        let secs = d.as_secs_f64();
        if secs < 10.0 {
            format!("{secs:.2}s")
        } else {
            format!("{secs:.1}s")
        }
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_read_as_a_user_expects() {
        let code = ExitCause::from_exit(WorkerExit::Code(255));
        assert_eq!(code.to_string(), "with code 255");
        let killed = ExitCause::from_exit(WorkerExit::Signal(libc::SIGKILL));
        assert_eq!(killed.to_string(), "on SIGKILL");
        let real_time = ExitCause::from_exit(WorkerExit::Signal(libc::SIGRTMIN() + 1));
        assert_eq!(
            real_time.to_string(),
            format!("on signal {}", libc::SIGRTMIN() + 1)
        );
        assert!(!real_time.is_crash());
    }

    #[test]
    fn only_segv_and_bus_are_crashes() {
        assert!(ExitCause::Signal(Signal::SIGSEGV).is_crash());
        assert!(ExitCause::Signal(Signal::SIGBUS).is_crash());
        assert!(!ExitCause::Signal(Signal::SIGKILL).is_crash());
        assert!(!ExitCause::Code(139).is_crash());
    }

    #[test]
    fn lifetimes_are_short_and_readable() {
        assert_eq!(lifetime(Duration::from_millis(250)), "0.25s");
        assert_eq!(lifetime(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(lifetime(Duration::from_secs(725)), "12m 5s");
    }
}
