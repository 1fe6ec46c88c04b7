//! Signals to the master: one table maps each signal to what the master loop does.
//! Handlers only record (signal-hook's self-pipe); the loop acts.

use nix::sys::signal::Signal;

/// What a signal asks of the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// TERM, QUIT: stop spawning, let in-flight requests finish within
    /// `process_control_timeout`, then SIGKILL what is left; exit 0.
    StopGraceful,
    /// INT: SIGKILL every worker now; exit 0.
    StopFast,
    /// HUP, USR2: re-read and validate the files, then roll changed pools (on error: keep
    /// running as before and log where the error is).
    Reload,
    /// TTIN: one worker more in every static pool.
    MoreWorkers,
    /// TTOU: one worker fewer in every static pool.
    FewerWorkers,
    /// USR1: reopen the error log file.
    ReopenLogs,
    /// CHLD: reap exited processes.
    Reap,
}

/// Every signal the master handles, for registration.
pub const HANDLED: [Signal; 9] = [
    Signal::SIGTERM,
    Signal::SIGQUIT,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGUSR2,
    Signal::SIGUSR1,
    Signal::SIGCHLD,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
];

pub fn command(signal: Signal) -> Option<Command> {
    Some(match signal {
        Signal::SIGTERM | Signal::SIGQUIT => Command::StopGraceful,
        Signal::SIGINT => Command::StopFast,
        Signal::SIGHUP | Signal::SIGUSR2 => Command::Reload,
        Signal::SIGUSR1 => Command::ReopenLogs,
        Signal::SIGCHLD => Command::Reap,
        Signal::SIGTTIN => Command::MoreWorkers,
        Signal::SIGTTOU => Command::FewerWorkers,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handled_signal_has_a_command() {
        for signal in HANDLED {
            assert!(command(signal).is_some(), "{signal}");
        }
    }

    #[test]
    fn term_and_quit_are_graceful_int_is_fast() {
        assert_eq!(command(Signal::SIGTERM), Some(Command::StopGraceful));
        assert_eq!(command(Signal::SIGQUIT), Some(Command::StopGraceful));
        assert_eq!(command(Signal::SIGINT), Some(Command::StopFast));
        assert_eq!(command(Signal::SIGWINCH), None);
    }
}
