//! Background pools (`[program]`): `[pm] max_children` copies of one long-running command
//! (a queue consumer, a scheduler), one process per copy, exec'd by the master as a
//! `[command]` worker is, but with /dev/null as fd 0 instead of a listener
//! ([`crate::config::ListenAddr::NoSocket`]). Everything else is the pool machinery's:
//! restarts with the crash-loop backoff (`drover_proto::Backoff`), `max_memory`, graceful
//! retirement then SIGKILL, decorated output, status, reload, `drover ctl workers`.
//!
//! What is a program's own: the signal that asks a copy to stop ([`stop_signal`]), how
//! long it may take ([`stop_timeout`]) and its lifetime ([`max_lifetime`], drawn per copy
//! by [`crate::pm::lifetime`]), all pure.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::config::{Pool, Program, Runtime};

/// The program, arguments and environment of one copy (the pool's `[env]` is added by
/// [`super::launch`]).
pub fn plan(program: &Program) -> (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let path = PathBuf::from(&program.command[0]);
    let args = program.command[1..].iter().map(OsString::from).collect();
    (path, args, Vec::new())
}

/// The signal that asks one of `pool`'s workers to stop: a program's `stop_signal`, else
/// SIGTERM.
pub fn stop_signal(pool: &Pool) -> Signal {
    let Runtime::Program(program) = &pool.runtime else {
        return Signal::SIGTERM;
    };
    signal_named(&program.stop_signal)
}

/// A `stop_signal` name (validated at load: one of `config::program::STOP_SIGNALS`).
fn signal_named(name: &str) -> Signal {
    match name {
        "INT" => Signal::SIGINT,
        "QUIT" => Signal::SIGQUIT,
        "HUP" => Signal::SIGHUP,
        "USR1" => Signal::SIGUSR1,
        "USR2" => Signal::SIGUSR2,
        "KILL" => Signal::SIGKILL,
        _ => Signal::SIGTERM,
    }
}

/// How long a worker of `pool` asked to stop may take before SIGKILL, and the key that
/// says so (for the kill's log line): a program's `stop_timeout`, else
/// `process_control_timeout`.
pub fn stop_timeout(pool: &Pool, process_control_timeout: Duration) -> (Duration, &'static str) {
    match &pool.runtime {
        Runtime::Program(Program {
            stop_timeout: Some(timeout),
            ..
        }) => (*timeout, "stop_timeout"),
        _ => (process_control_timeout, "process_control_timeout"),
    }
}

/// `max_lifetime` and `max_lifetime_jitter` of `pool`, when it is a program with one.
pub fn max_lifetime(pool: &Pool) -> Option<(Duration, Duration)> {
    match &pool.runtime {
        Runtime::Program(program) => program
            .max_lifetime
            .map(|lifetime| (lifetime, program.max_lifetime_jitter)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_signal_name_is_a_signal() {
        for name in crate::config::STOP_SIGNALS {
            let signal = signal_named(name);
            assert_eq!(signal.as_str(), format!("SIG{name}"));
        }
    }
}
