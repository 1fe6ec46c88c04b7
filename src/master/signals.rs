//! Signals to the master: one table maps each signal to what the master loop does.
//! Handlers only record (signal-hook's self-pipe); the loop acts.
//!
//! The self-pipe stream says *that* a signal came, not how often: deliveries between two
//! reads are merged into one. TTIN and TTOU are counts, so a second handler ([`Tally`])
//! counts each delivery in an atomic, and the loop takes the counts when the stream wakes
//! it. (The kernel itself merges a signal sent again before the first was delivered: no
//! handler can count those.)

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::Signal;

/// What a signal asks of the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// TERM, QUIT: stop spawning, let in-flight requests finish within
    /// `process_control_timeout`, then SIGKILL what is left; exit 0.
    StopGraceful,
    /// INT: SIGKILL every worker now; exit 0.
    StopFast,
    /// HUP, USR2: re-read and validate the files, then roll every pool to a new generation
    /// (on error: keep running as before and log where the error is).
    Reload,
    /// TTIN and TTOU: one worker more (TTIN) or fewer (TTOU) in every static pool for
    /// each one delivered; the count is in [`Tally`].
    Resize,
    /// USR1: reopen the error log file; the workers reopen the pools' access logs.
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

/// Every TTIN and TTOU delivered, as the net change in workers asked for.
pub struct Tally {
    delta: Arc<AtomicI32>,
}

impl Tally {
    /// Registers the counting handlers (beside the stream's, which wake the loop).
    pub fn register() -> std::io::Result<Tally> {
        let delta = Arc::new(AtomicI32::new(0));
        for (signal, step) in [(Signal::SIGTTIN, 1), (Signal::SIGTTOU, -1)] {
            let delta = delta.clone();
            // SAFETY: the handler only adds to an atomic, which is async-signal-safe (no
            // allocation, no lock); the Arc it holds lives as long as the registration.
            unsafe {
                signal_hook::low_level::register(signal as i32, move || {
                    delta.fetch_add(step, Ordering::Relaxed);
                })?;
            }
        }
        Ok(Tally { delta })
    }

    /// The net TTIN − TTOU count since the last call.
    pub fn take(&self) -> i32 {
        self.delta.swap(0, Ordering::Relaxed)
    }
}

pub fn command(signal: Signal) -> Option<Command> {
    Some(match signal {
        Signal::SIGTERM | Signal::SIGQUIT => Command::StopGraceful,
        Signal::SIGINT => Command::StopFast,
        Signal::SIGHUP | Signal::SIGUSR2 => Command::Reload,
        Signal::SIGUSR1 => Command::ReopenLogs,
        Signal::SIGCHLD => Command::Reap,
        Signal::SIGTTIN | Signal::SIGTTOU => Command::Resize,
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

    #[test]
    fn every_ttin_and_ttou_delivered_is_counted() {
        let tally = Tally::register().unwrap();
        for _ in 0..5 {
            nix::sys::signal::raise(Signal::SIGTTIN).unwrap();
        }
        for _ in 0..7 {
            nix::sys::signal::raise(Signal::SIGTTOU).unwrap();
        }
        assert_eq!(tally.take(), -2);
        assert_eq!(tally.take(), 0);
    }
}
