//! Handles on a pool's workers (pidfds), taken once the master has verified what a pool
//! process told it, and the only way the master signals a worker.
//!
//! A worker's pid reaches the master from a process that runs as the pool's user: a
//! zygote's `started PID` report, or a php-cgi parent's children read from /proc. That
//! process may be the app's own code (a script that attached to its zygote), so the pid is
//! untrusted input: [`child_of`] accepts it only if it names a child of that parent right
//! now, and returns a [`Pidfd`] pinned to that very process. Signals then go through
//! `pidfd_send_signal`: should the worker exit and its pid be reused by any other process,
//! the handle still names the old, gone one, and the signal fails with ESRCH instead of
//! hitting the newcomer.
//!
//! The master's own children (the zygotes and php-cgi parents it execs, and the orphans it
//! adopts as their subreaper) are signalled by pid: a child's pid cannot be reused until
//! its parent reaps it, and only the master's loop reaps them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// A process the master verified, pinned by a pidfd: its signals reach that process or
/// none.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
}

impl Pidfd {
    /// A handle on `pid` as it is now (`pidfd_open`, Linux 5.3). ESRCH: no such process;
    /// EINVAL: `pid` is a thread, not a process.
    pub fn open(pid: Pid) -> io::Result<Pidfd> {
        if pid.as_raw() <= 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just created for us and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Pidfd { fd })
    }

    /// Sends `signal` to the process, never to another that took its pid since.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        self.send(signal as libc::c_int)
    }

    /// Whether the process has not been reaped yet (a zombie counts): signal 0 through the
    /// handle, which tells "gone" from "there" without touching it.
    pub fn alive(&self) -> bool {
        self.send(0).is_ok()
    }

    fn send(&self, signal: libc::c_int) -> io::Result<()> {
        // SAFETY: pidfd_send_signal on a descriptor we own, with no siginfo and no flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Why a pid a pool process named is not taken for its worker.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such process (or it was gone before it could be checked), or it is a thread.
    Gone,
    /// It exists, but its parent is this one, not the one that named it.
    NotChild { parent: Option<Pid> },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Gone => write!(f, "no such process"),
            Refused::NotChild { parent: Some(p) } => write!(f, "its parent is {p}"),
            Refused::NotChild { parent: None } => write!(f, "its parent cannot be read"),
        }
    }
}

/// Verifies that `pid` is a child of `parent` and returns a handle on it. The handle is
/// taken first and checked last, so that the /proc read in between is known to be about
/// the handle's process: a process not yet reaped keeps its pid. A child whose parent died
/// in the meantime is the master's now (its subreaper): it is accepted when it still is in
/// `parent`'s process group, which a zygote or php-cgi parent leads.
pub fn child_of(pid: Pid, parent: Pid) -> Result<Pidfd, Refused> {
    let handle = Pidfd::open(pid).map_err(|_| Refused::Gone)?;
    let Some((ppid, pgid)) = parent_and_group(pid) else {
        return Err(Refused::Gone);
    };
    let ours = Pid::this();
    let child = ppid == parent || (ppid == ours && pgid == parent);
    if !handle.alive() {
        return Err(Refused::Gone);
    }
    if !child {
        return Err(Refused::NotChild { parent: Some(ppid) });
    }
    Ok(handle)
}

/// The parent and process group of `pid`, from /proc/PID/stat.
fn parent_and_group(pid: Pid) -> Option<(Pid, Pid)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// "PID (COMM) STATE PPID PGRP ...": COMM may hold spaces and parentheses, so the fields
/// are read after the last ')'.
fn parse_stat(stat: &str) -> Option<(Pid, Pid)> {
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let _state = fields.next()?;
    let ppid: i32 = fields.next()?.parse().ok()?;
    let pgid: i32 = fields.next()?.parse().ok()?;
    Some((Pid::from_raw(ppid), Pid::from_raw(pgid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let stat = "42 (a) b) (c) S 7 9 9 0 -1";
        assert_eq!(parse_stat(stat), Some((Pid::from_raw(7), Pid::from_raw(9))));
        assert_eq!(parse_stat("42 (x"), None);
    }

    #[test]
    fn a_child_is_accepted_and_signalled_through_its_handle() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let handle = child_of(pid, Pid::this()).unwrap();
        assert!(handle.alive());
        handle.signal(Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        // Reaped: the handle names the gone process, whatever takes its pid.
        assert!(!handle.alive());
        assert!(handle.signal(Signal::SIGKILL).is_err());
    }

    #[test]
    fn a_process_that_is_no_child_is_refused() {
        // Our parent (the test runner's) is no child of ours.
        let parent = nix::unistd::getppid();
        assert!(matches!(
            child_of(parent, Pid::this()),
            Err(Refused::NotChild { .. })
        ));
        for pid in [0, -1, i32::MAX] {
            assert_eq!(
                child_of(Pid::from_raw(pid), Pid::this()).err(),
                Some(Refused::Gone)
            );
        }
    }
}
