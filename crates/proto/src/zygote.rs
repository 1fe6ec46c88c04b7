//! The protocol between the master and a pool's zygote (`drover-python`, `drover-php`),
//! both sides of it in one place.
//!
//! - The master execs the zygote with `--pool NAME` as its command line (what `ps` shows)
//!   and its terms ([`crate::terms::Terms`]: [`PythonArgs`] or [`PhpArgs`], both holding
//!   [`ZygoteArgs`]) in a sealed memfd at [`TERMS_FD`]; the pool's listener as fd 0, the
//!   pool's output socket as fds 1 and 2, the pool's scoreboard as [`SCOREBOARD_FD`] and,
//!   when the pool has an `access_log`, the file the master opened as [`ACCESS_LOG_FD`]
//!   (named by the terms' `access_log_fd`): the zygote never opens it by path, so the
//!   pool's user needs no right on it.
//! - The zygote reports its workers' starts and exits on its stderr in [`Report`] lines, and
//!   a worker says why it retires itself in a [`retiring_line`]; each starts with
//!   [`REPORT_MARK`]. The master learns each line's writer from the kernel and trusts
//!   reports only from the zygote's pid.
//! - The master tells the zygote how many workers to keep with [`target_signal`], the count
//!   as the signal's value.
//! - A `drover-php` worker sent SIGUSR2 writes its PHP stack on its stderr for the slowlog,
//!   one [`frame_line`] per frame, innermost first, then [`FRAME_END`]; the master reads them
//!   with [`parse_frame`]. Sent SIGUSR1 (a `request_terminate_timeout` kill), it writes
//!   them the same way, then waits for SIGKILL: its script does not go on (the signal may
//!   have cut a `sleep()` short), and it kills itself should no SIGKILL come.
//! - A `drover-python` worker sent SIGUSR1 (a `request_terminate_timeout` kill) aborts the
//!   request in hand: gunicorn's `worker_abort` hook, then an exception raised inside the
//!   request; it exits once the request is over. The master SIGKILLs it `terminate_grace`
//!   later if it is still in that request.
//! - The zygote exits with [`EXIT_APP_LOAD`] when the app cannot be imported, with
//!   [`EXIT_TERMS`] when it cannot take its terms.
//! - `drover-php` [`PHP_PROBE`] says whether it can run PHP here (the master asks once, to
//!   pick a PHP pool's default runtime): exit 0 and one line naming PHP
//!   (`PHP 8.2.36 (embed)`), then a [`PROBE_LIBPHP`] line naming the libphp it loaded, or
//!   [`EXIT_NO_PHP`] and one line saying why.
//! - `drover-php` [`PHP_BIND_DIRECT`] writes the copy of that libphp whose calls to its own
//!   functions are direct into [`direct_libphp_dir`]; the master points a pool's zygote at
//!   it (`LD_LIBRARY_PATH`) while its build-id is the linked libphp's.

use std::path::PathBuf;
use std::time::Duration;

use nix::unistd::Pid;

pub use crate::terms::{Interface, PhpArgs, Protocol, PythonArgs, TERMS_FD, ZygoteArgs};

/// The descriptor number a zygote finds its pool's scoreboard at.
pub const SCOREBOARD_FD: i32 = 3;

/// The descriptor number a zygote finds its pool's access log at, opened by the master
/// for appending (the terms' `access_log_fd`).
pub const ACCESS_LOG_FD: i32 = 4;

/// The descriptor number a zygote of an HTTP pool with `certfile` finds its certificate and
/// key at: a sealed memfd the master wrote ([`crate::tls::Material`]), named by the terms'
/// `tls_fd`.
/// The master read the files (as root, when it runs as root); the pool's user needs no
/// right on them.
pub const TLS_FD: i32 = 5;

/// The zygote's exit code when the app cannot be imported: the master stops the pool
/// instead of restarting it in a loop (gunicorn's "app failed to load" is 4 too).
pub const EXIT_APP_LOAD: u8 = 4;

/// The zygote's exit code when it cannot take its terms ([`crate::terms::TermsError`]):
/// none at [`TERMS_FD`], another drover version's, or for another pool or runtime. Its
/// stderr says which, naming both versions on a mismatch.
pub const EXIT_TERMS: u8 = 5;

/// The argument that asks `drover-php` whether it can run PHP: it starts no zygote, prints
/// one line on its stdout and exits, 0 when it can.
pub const PHP_PROBE: &str = "--probe";

/// The start of `drover-php --probe`'s second line, followed by the path of the libphp the
/// process loaded (`PROBE_LIBPHP /usr/lib/libphp8.2.so`).
pub const PROBE_LIBPHP: &str = "PROBE_LIBPHP ";

/// `drover-php --bind-direct [SRC DEST]`: with no more arguments, writes the libphp it is
/// linked to, bound directly (`elfbind`), into [`DIRECT_LIBPHP_DIR`] under its file name,
/// with its SONAME as a symlink to it; with two, binds SRC into DEST.
pub const PHP_BIND_DIRECT: &str = "--bind-direct";

/// Where `drover-php --bind-direct` writes the bound copy of libphp, and the master looks
/// for it: the folder it puts first in a PHP pool's zygote's `LD_LIBRARY_PATH`. The
/// default of [`direct_libphp_dir`], which [`DIRECT_LIBPHP_DIR_ENV`] overrides.
pub const DIRECT_LIBPHP_DIR: &str = "/var/lib/drover/libphp";

/// The variable that names another folder than [`DIRECT_LIBPHP_DIR`], read by the master
/// and by `drover-php --bind-direct` alike (an install outside `/var/lib`, a test's own
/// folder). An absolute path; empty is as unset.
pub const DIRECT_LIBPHP_DIR_ENV: &str = "DROVER_LIBPHP_DIR";

/// The folder of the bound copy: [`DIRECT_LIBPHP_DIR_ENV`] when set and not empty, else
/// [`DIRECT_LIBPHP_DIR`]; `Err` names a value that is not an absolute path (the copy is
/// then not used, nor written).
pub fn direct_libphp_dir() -> Result<PathBuf, String> {
    match std::env::var_os(DIRECT_LIBPHP_DIR_ENV) {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                Ok(dir)
            } else {
                Err(format!(
                    "{DIRECT_LIBPHP_DIR_ENV}={} is not an absolute path",
                    dir.display()
                ))
            }
        }
        _ => Ok(PathBuf::from(DIRECT_LIBPHP_DIR)),
    }
}

/// The first argument of `drover-php --check --pool NAME` (`drover -t`), with the pool's
/// terms at [`TERMS_FD`]: starts PHP as the
/// pool's zygote would (php.ini, `[php.ini]`, `[php.admin_ini]`) and exits without forking,
/// 0 when it could, [`EXIT_APP_LOAD`] with the reason on its stdout when not.
pub const PHP_CHECK: &str = "--check";

/// `drover-php --probe`'s exit code when it cannot run PHP (built without PHP's headers, or
/// libphp missing); its line says why.
pub const EXIT_NO_PHP: u8 = 3;

/// The real-time signal whose value is the number of workers the master wants.
pub fn target_signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// The start of a report line, a character no app writes to stderr by accident.
pub const REPORT_MARK: char = '\u{1e}';

/// How a worker ended, as the zygote saw it when it reaped the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerExit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (its number: `nix::sys::signal::Signal::try_from` names it).
    Signal(i32),
}

impl WorkerExit {
    /// From a raw wait status; `None` for a stop or a continue.
    pub fn from_raw(status: libc::c_int) -> Option<WorkerExit> {
        if libc::WIFEXITED(status) {
            Some(WorkerExit::Code(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(WorkerExit::Signal(libc::WTERMSIG(status)))
        } else {
            None
        }
    }

    /// `None` for wait statuses that are not an end (stopped, continued).
    pub fn from_status(status: nix::sys::wait::WaitStatus) -> Option<WorkerExit> {
        match status {
            nix::sys::wait::WaitStatus::Exited(_, code) => Some(WorkerExit::Code(code)),
            nix::sys::wait::WaitStatus::Signaled(_, signal, _) => {
                Some(WorkerExit::Signal(signal as i32))
            }
            _ => None,
        }
    }
}

/// Reaps one child that ended, without waiting: `Ok(None)` when none has (or none is
/// left: ECHILD). Every wait status is decoded, a death by a real-time signal included:
/// nix's `waitpid` fails with EINVAL on a signal it cannot name, and a caller that gives up
/// there never reaps that child (nor learns that it died). Stopped and continued children
/// come back with no exit.
pub fn reap_any() -> nix::Result<Option<(Pid, Option<WorkerExit>)>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid with a valid out-pointer; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        match pid {
            0 => return Ok(None),
            -1 => match nix::errno::Errno::last() {
                nix::errno::Errno::EINTR => continue,
                nix::errno::Errno::ECHILD => return Ok(None),
                err => return Err(err),
            },
            pid => return Ok(Some((Pid::from_raw(pid), WorkerExit::from_raw(status)))),
        }
    }
}

/// What the zygote tells the master about its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The runtime is started (PHP's modules, a preloaded Python app), before the first
    /// fork: the pool can serve once its workers are forked, so an `ondemand` pool is
    /// ready from here.
    Ready,
    Started {
        pid: Pid,
    },
    Exited {
        pid: Pid,
        exit: WorkerExit,
        lived: Duration,
    },
    /// The worker `pid` (just reported exited) died before its first request: a start-up
    /// failure, the `failures`-th in a row, and the zygote forks no worker for `delay`.
    Holding {
        pid: Pid,
        delay: Duration,
        failures: u32,
    },
}

impl Report {
    /// One line: `MARK ready`, `MARK started PID`, `MARK exited PID code N MS`,
    /// `MARK exited PID signal N MS` or `MARK holding PID MS FAILURES`.
    pub fn encode(&self) -> String {
        match self {
            Report::Ready => format!("{REPORT_MARK}ready\n"),
            Report::Started { pid } => format!("{REPORT_MARK}started {pid}\n"),
            Report::Exited { pid, exit, lived } => {
                let (kind, n) = match exit {
                    WorkerExit::Code(code) => ("code", code),
                    WorkerExit::Signal(signal) => ("signal", signal),
                };
                format!(
                    "{REPORT_MARK}exited {pid} {kind} {n} {}\n",
                    lived.as_millis()
                )
            }
            Report::Holding {
                pid,
                delay,
                failures,
            } => format!(
                "{REPORT_MARK}holding {pid} {} {failures}\n",
                delay.as_millis()
            ),
        }
    }

    /// `None` for a line that is not a report (ordinary output). The line comes from a
    /// process that runs as the pool's user, the app's own code perhaps: every number is
    /// read strictly (plain decimal digits, no sign) and bounded, a pid above 0 (`kill`
    /// reads 0 and -1 as "a group", "everyone"), an exit code within 0..=255, a signal
    /// within 1..=64, a lifetime below a year. What the master then believes of a
    /// well-formed report is its own business (see `drover::master`).
    pub fn parse(line: &str) -> Option<Report> {
        let body = line.strip_prefix(REPORT_MARK)?;
        if body == "ready" {
            return Some(Report::Ready);
        }
        let mut words = body.split(' ');
        let kind = words.next()?;
        let pid = Pid::from_raw(number(words.next()?, 1, i32::MAX as u64)? as i32);
        let report = match kind {
            "started" => Report::Started { pid },
            "exited" => {
                let how = words.next()?;
                let n = words.next()?;
                let exit = match how {
                    "code" => WorkerExit::Code(number(n, 0, 255)? as i32),
                    "signal" => WorkerExit::Signal(number(n, 1, 64)? as i32),
                    _ => return None,
                };
                let year = 366 * 24 * 3600 * 1000;
                let lived = Duration::from_millis(number(words.next()?, 0, year)?);
                Report::Exited { pid, exit, lived }
            }
            "holding" => {
                let hour = 3600 * 1000;
                let delay = Duration::from_millis(number(words.next()?, 0, hour)?);
                let failures = number(words.next()?, 1, u64::from(u32::MAX))? as u32;
                Report::Holding {
                    pid,
                    delay,
                    failures,
                }
            }
            _ => return None,
        };
        words.next().is_none().then_some(report)
    }
}

/// A decimal number of ASCII digits only (no sign, no space), within `min..=max`.
fn number(word: &str, min: u64, max: u64) -> Option<u64> {
    if word.is_empty() || word.len() > 20 || !word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    word.parse().ok().filter(|n| (min..=max).contains(n))
}

/// The line a worker writes before it retires itself (over `max_memory`): the master logs
/// `reason` as that worker's retire line.
pub fn retiring_line(reason: &str) -> String {
    format!("{REPORT_MARK}retiring {reason}\n")
}

/// The reason in a [`retiring_line`]; `None` for any other line.
pub fn parse_retiring(line: &str) -> Option<&str> {
    line.strip_prefix(REPORT_MARK)?.strip_prefix("retiring ")
}

/// The line that closes a PHP worker's stack dump.
pub const FRAME_END: &str = "\u{1e}frame-end\n";

/// One line of a PHP worker's stack dump: `MARK frame FUNCTION() FILE:LINE`. `frame` is
/// one line; a line break in it (a file name may hold one) is written as a space, so that
/// the master never reads half a frame as ordinary output.
pub fn frame_line(frame: &str) -> String {
    let frame = frame.replace(['\n', '\r'], " ");
    format!("{REPORT_MARK}frame {frame}\n")
}

/// A line of a stack dump, as [`parse_frame`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackLine<'a> {
    /// One frame, `FUNCTION() FILE:LINE`, innermost first.
    Frame(&'a str),
    /// [`FRAME_END`]: the dump is complete.
    End,
}

/// The frame or end in a [`frame_line`] or [`FRAME_END`] (its line break optional); `None`
/// for any other line.
pub fn parse_frame(line: &str) -> Option<StackLine<'_>> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let rest = line.strip_prefix(REPORT_MARK)?;
    if rest == "frame-end" {
        return Some(StackLine::End);
    }
    rest.strip_prefix("frame ").map(StackLine::Frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        let reports = [
            Report::Ready,
            Report::Started {
                pid: Pid::from_raw(42),
            },
            Report::Exited {
                pid: Pid::from_raw(43),
                exit: WorkerExit::Signal(11),
                lived: Duration::from_millis(1500),
            },
            Report::Exited {
                pid: Pid::from_raw(44),
                exit: WorkerExit::Code(0),
                lived: Duration::from_millis(2),
            },
            Report::Holding {
                pid: Pid::from_raw(45),
                delay: Duration::from_secs(4),
                failures: 3,
            },
        ];
        for report in reports {
            let line = report.encode();
            assert_eq!(Report::parse(line.trim_end()), Some(report));
        }
    }

    #[test]
    fn a_child_killed_by_a_real_time_signal_is_reaped_and_named() {
        let rt = libc::SIGRTMIN() + 3;
        // SAFETY: the child only calls async-signal-safe functions before it dies.
        let child = match unsafe { libc::fork() } {
            0 => unsafe {
                // SAFETY: as above.
                libc::raise(rt);
                libc::_exit(9)
            },
            pid => Pid::from_raw(pid),
        };
        let reaped = loop {
            if let Some(reaped) = reap_any().unwrap() {
                if reaped.0 == child {
                    break reaped;
                }
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        assert_eq!(reaped, (child, Some(WorkerExit::Signal(rt))));
    }

    #[test]
    fn ordinary_lines_are_not_reports() {
        assert_eq!(Report::parse("started 42"), None);
        assert_eq!(Report::parse("\u{1e}bogus 42"), None);
        assert_eq!(Report::parse("\u{1e}exited x 1 2"), None);
        assert_eq!(Report::parse("\u{1e}exited 42 11 17"), None);
        assert_eq!(Report::parse("\u{1e}exited 42 core 11 17"), None);
        // A hold of no failure, or past an hour, is no report.
        assert_eq!(Report::parse("\u{1e}holding 42 1000 0"), None);
        assert_eq!(Report::parse("\u{1e}holding 42 3600001 1"), None);
        assert_eq!(Report::parse("\u{1e}holding 42 1000"), None);
    }

    #[test]
    fn hostile_numbers_are_not_reports() {
        for line in [
            "\u{1e}started -1",
            "\u{1e}started 0",
            "\u{1e}started +42",
            "\u{1e}started 42 ",
            "\u{1e}started  42",
            "\u{1e}started 4294967338",
            "\u{1e}started 0x2a",
            "\u{1e}exited 42 code 256 1",
            "\u{1e}exited 42 code -1 1",
            "\u{1e}exited 42 signal 0 1",
            "\u{1e}exited 42 signal 65 1",
            "\u{1e}exited 42 signal 9 -5",
            "\u{1e}exited 42 signal 9 99999999999999999999",
        ] {
            assert_eq!(Report::parse(line), None, "{line:?}");
        }
        assert_eq!(
            Report::parse("\u{1e}started 2147483647"),
            Some(Report::Started {
                pid: Pid::from_raw(i32::MAX)
            })
        );
    }

    #[test]
    fn retiring_lines_round_trip_and_are_not_reports() {
        let line = retiring_line("resident memory 80.0 MiB");
        assert_eq!(
            parse_retiring(line.trim_end()),
            Some("resident memory 80.0 MiB")
        );
        assert_eq!(Report::parse(line.trim_end()), None);
        assert_eq!(parse_retiring("retiring x"), None);
    }

    #[test]
    fn frame_lines_round_trip_and_are_not_reports() {
        let line = frame_line("level3() /var/www/slow.php:2");
        assert_eq!(line, "\u{1e}frame level3() /var/www/slow.php:2\n");
        assert_eq!(
            parse_frame(&line),
            Some(StackLine::Frame("level3() /var/www/slow.php:2"))
        );
        assert_eq!(
            parse_frame(line.trim_end()),
            Some(StackLine::Frame("level3() /var/www/slow.php:2"))
        );
        assert_eq!(parse_frame(FRAME_END), Some(StackLine::End));
        assert_eq!(parse_frame(FRAME_END.trim_end()), Some(StackLine::End));
        for line in [line.trim_end(), FRAME_END.trim_end()] {
            assert_eq!(Report::parse(line), None);
            assert_eq!(parse_retiring(line), None);
        }
    }

    #[test]
    fn a_frame_stays_on_one_line() {
        let line = frame_line("f() /srv/a\nb.php:3");
        assert_eq!(line.lines().count(), 1);
        assert_eq!(
            parse_frame(&line),
            Some(StackLine::Frame("f() /srv/a b.php:3"))
        );
    }

    #[test]
    fn other_lines_are_not_frames() {
        assert_eq!(parse_frame("frame f() a.php:1"), None);
        assert_eq!(parse_frame("\u{1e}frames"), None);
        assert_eq!(parse_frame("\u{1e}frame-ended"), None);
        assert_eq!(parse_frame("\u{1e}started 42"), None);
        assert_eq!(parse_frame(&retiring_line("x")), None);
    }
}
