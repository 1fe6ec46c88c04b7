//! Exec one process of a pool: the listener as fd 0, the pool's output socket as stdout
//! and stderr, its own process group, the pool's environment, directory and user.
//!
//! The master never forks to run code of its own: `std::process::Command` forks and execs
//! at once, and the `pre_exec` hook below only makes syscalls on data prepared before.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use nix::unistd::Pid;

use crate::runtime::ProcessSpec;

use drover_proto::zygote::{ACCESS_LOG_FD, SCOREBOARD_FD, TERMS_FD, TLS_FD};

/// The descriptors a zygote inherits beside 0, 1 and 2: the pool's scoreboard, its access
/// log and its TLS memfd, each at its number of the zygote protocol (and its terms, which
/// [`spawn`] writes from the spec).
#[derive(Clone, Copy, Default)]
pub struct Inherited<'a> {
    pub scoreboard: Option<BorrowedFd<'a>>,
    pub access_log: Option<BorrowedFd<'a>>,
    /// `certfile`: the memfd with the certificate and key the master read.
    pub tls: Option<BorrowedFd<'a>>,
}

/// Starts `spec` with `listener` as fd 0, `output` as fds 1 and 2, and, if it has them, the
/// pool's scoreboard as fd 3, its access log as fd 4, the TLS memfd as fd 5 and a zygote's
/// terms (a sealed memfd the spawn writes) as fd 6. Returns its pid; the
/// master reaps it with `waitpid`, not through `std::process::Child`.
///
/// `zygote`: a zygote, which the master tells its worker count with `target_signal`,
/// starts with that signal blocked. The mask crosses the exec, so a count sent before the zygote has
/// set up its own signals (an ondemand pool whose first request is already waiting) waits
/// for it, instead of killing it by the signal's default action.
pub fn spawn(
    spec: &ProcessSpec,
    listener: OwnedFd,
    output: &OwnedFd,
    inherited: Inherited<'_>,
    zygote: bool,
) -> io::Result<Pid> {
    let mut command = std::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .stdin(Stdio::from(listener))
        .stdout(Stdio::from(output.try_clone()?))
        .stderr(Stdio::from(output.try_clone()?))
        // Its own group: a Ctrl-C in the master's terminal does not reach the workers, and
        // the master can signal a php-cgi parent together with its workers.
        .process_group(0);
    if spec.clear_env {
        command.env_clear();
    }
    command.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &spec.chdir {
        command.current_dir(dir);
    }
    let credentials = spec.credentials.clone();
    // A zygote's terms, in a memfd of this spawn's (closed here once the child has it).
    let terms = spec.terms.as_ref().map(|terms| terms.memfd()).transpose()?;
    // (from, to) pairs, a fixed array: nothing is allocated after the fork.
    let moves = [
        inherited
            .scoreboard
            .map(|fd| (fd.as_raw_fd(), SCOREBOARD_FD)),
        inherited
            .access_log
            .map(|fd| (fd.as_raw_fd(), ACCESS_LOG_FD)),
        inherited.tls.map(|fd| (fd.as_raw_fd(), TLS_FD)),
        terms.as_ref().map(|fd| (fd.as_raw_fd(), TERMS_FD)),
    ];
    let target = zygote.then(drover_proto::zygote::target_signal);
    let death_signal = spec.death_signal as libc::c_int;
    let rlimit_files = spec.rlimit_files;
    // Taken before the fork: the child compares its parent with it once its death signal
    // is set, so that a master which died before then is noticed.
    let master = Pid::this().as_raw();
    // SAFETY: runs in the forked child before exec; it only makes syscalls (prctl,
    // setrlimit, getppid, sigprocmask, setgroups, setgid, setuid, fcntl, dup2, close_range)
    // on memory allocated before the fork or on its own stack.
    unsafe {
        command.pre_exec(move || {
            // The pool's `rlimit_files` (before the credentials: only root raises a hard
            // limit), else the soft limit drover was started with, not the master's own.
            match rlimit_files {
                Some(files) => super::limits::set_in_child(files)?,
                None => super::limits::restore_in_child()?,
            }
            if let Some(signal) = target {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, signal);
                if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(credentials) = &credentials {
                credentials.apply()?;
            }
            die_with(master, death_signal)?;
            // Whatever started drover may have left descriptors open without close-on-exec
            // (a terminal's, a supervisor's pipe): none may reach a worker, only the
            // inherited ones, which are put in place after.
            close_on_exec_from(3);
            move_descriptors(moves)?;
            Ok(())
        });
    }
    let child = command.spawn()?;
    Ok(Pid::from_raw(child.id() as i32))
}

/// Asks for `signal` when the master dies (`PR_SET_PDEATHSIG`), so that a master killed
/// with SIGKILL leaves no process of its pools running: php-cgi's SIGTERM handler and a
/// zygote's stop their workers too, instead of leaving them serving on an orphaned
/// socket. Set after the credentials: the kernel clears the death signal when a process's
/// user or group changes, which is why it is not set first. Then the master must still be
/// the parent: one that died before the prctl sent nothing, and the process ends here
/// (std reports the error on a pipe no one reads). The setting crosses the exec (none of
/// the pools' programs is set-user-ID for drover). Runs between fork and exec: syscalls
/// only.
fn die_with(master: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: prctl with a valid signal number; getppid has no preconditions.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != master {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// Puts each `(from, to)` descriptor at `to`, without close-on-exec there. Each is first
/// copied above every `to`, so that one whose number is another's `to` is not overwritten
/// before it is moved. Runs between fork and exec: syscalls only, no allocation.
fn move_descriptors<const N: usize>(moves: [Option<(i32, i32)>; N]) -> io::Result<()> {
    let above = ACCESS_LOG_FD.max(SCOREBOARD_FD).max(TLS_FD).max(TERMS_FD) + 1;
    let mut copies = [None; N];
    for (copy, pair) in copies.iter_mut().zip(moves) {
        if let Some((from, to)) = pair {
            // SAFETY: fcntl on a descriptor the master holds open across the spawn.
            let high = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, above) };
            if high < 0 {
                return Err(io::Error::last_os_error());
            }
            *copy = Some((high, to));
        }
    }
    for (high, to) in copies.into_iter().flatten() {
        // dup2 clears close-on-exec on the copy at `to`; the one above keeps it.
        // SAFETY: dup2 between two open descriptor numbers.
        if unsafe { libc::dup2(high, to) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Marks every descriptor from `first` up close-on-exec. Marked rather than closed: std's
/// own pipe, which reports a failed exec to the master, must stay open until the exec.
/// Runs between fork and exec: syscalls only, no allocation.
fn close_on_exec_from(first: i32) {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    };
    if marked == 0 {
        return;
    }
    // Kernels before 5.11: one fcntl per descriptor up to the limit on open files.
    // SAFETY: sysconf has no preconditions.
    let limit = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
    let limit = if limit > 0 {
        limit.min(65_536) as i32
    } else {
        1024
    };
    for fd in first..limit {
        // SAFETY: fcntl on a descriptor number; EBADF for one not open is harmless.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}
