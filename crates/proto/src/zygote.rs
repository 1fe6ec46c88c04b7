//! The protocol between the master and a Python pool's zygote (`drover-python`), both sides
//! of it in one place.
//!
//! - The master execs the zygote with the command line [`ZygoteArgs`], the pool's listener
//!   as fd 0, the pool's output socket as fds 1 and 2, and the pool's scoreboard as
//!   [`SCOREBOARD_FD`].
//! - The zygote reports its workers' starts and exits on its stderr in [`Report`] lines, and
//!   a worker says why it retires itself in a [`retiring_line`]; each starts with
//!   [`REPORT_MARK`]. The master learns each line's writer from the kernel and trusts
//!   reports only from the zygote's pid.
//! - The master tells the zygote how many workers to keep with [`target_signal`], the count
//!   as the signal's value.
//! - The zygote exits with [`EXIT_APP_LOAD`] when the app cannot be imported.

use std::path::PathBuf;
use std::time::Duration;

use nix::unistd::Pid;

/// The descriptor number a Python zygote finds its pool's scoreboard at.
pub const SCOREBOARD_FD: i32 = 3;

/// The zygote's exit code when the app cannot be imported: the master stops the pool
/// instead of restarting it in a loop (gunicorn's "app failed to load" is 4 too).
pub const EXIT_APP_LOAD: u8 = 4;

/// The real-time signal whose value is the number of workers the master wants.
pub fn target_signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// What the master passes to `drover-python`, on its command line (visible in `ps`).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ZygoteArgs {
    #[arg(long)]
    pub pool: String,
    /// "package.module:callable"
    #[arg(long)]
    pub app: String,
    #[arg(long = "python-path")]
    pub python_path: Vec<PathBuf>,
    #[arg(long)]
    pub virtualenv: Option<PathBuf>,
    /// Import the app in each worker after fork instead of once in the zygote.
    #[arg(long)]
    pub no_preload: bool,
    #[arg(long, default_value = "")]
    pub mount: String,
    /// A `warmup` request path, sent through the app before the first fork (repeated).
    #[arg(long = "warmup")]
    pub warmup: Vec<String>,
    #[arg(long)]
    pub workers: u32,
    #[arg(long, default_value_t = 0)]
    pub max_requests: u32,
    #[arg(long, default_value_t = 0)]
    pub max_requests_jitter: u32,
    /// The pool's scoreboard, inherited from the master.
    #[arg(long)]
    pub scoreboard_fd: Option<i32>,
    /// max_memory in bytes: a worker checks itself after each request.
    #[arg(long)]
    pub max_memory: Option<u64>,
}

/// The start of a report line, a character no app writes to stderr by accident.
pub const REPORT_MARK: char = '\u{1e}';

/// What the zygote tells the master about its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    Started {
        pid: Pid,
    },
    /// `status` is the raw wait status, decoded by the master.
    Exited {
        pid: Pid,
        status: i32,
        lived: Duration,
    },
}

impl Report {
    pub fn encode(&self) -> String {
        match self {
            Report::Started { pid } => format!("{REPORT_MARK}started {pid}\n"),
            Report::Exited { pid, status, lived } => {
                format!("{REPORT_MARK}exited {pid} {status} {}\n", lived.as_millis())
            }
        }
    }

    /// `None` for a line that is not a report (ordinary output).
    pub fn parse(line: &str) -> Option<Report> {
        let mut words = line.strip_prefix(REPORT_MARK)?.split(' ');
        let kind = words.next()?;
        let pid = Pid::from_raw(words.next()?.parse().ok()?);
        match kind {
            "started" => Some(Report::Started { pid }),
            "exited" => {
                let status = words.next()?.parse().ok()?;
                let lived = Duration::from_millis(words.next()?.parse().ok()?);
                Some(Report::Exited { pid, status, lived })
            }
            _ => None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        let reports = [
            Report::Started {
                pid: Pid::from_raw(42),
            },
            Report::Exited {
                pid: Pid::from_raw(43),
                status: 9,
                lived: Duration::from_millis(1500),
            },
        ];
        for report in reports {
            let line = report.encode();
            assert_eq!(Report::parse(line.trim_end()), Some(report));
        }
    }

    #[test]
    fn ordinary_lines_are_not_reports() {
        assert_eq!(Report::parse("started 42"), None);
        assert_eq!(Report::parse("\u{1e}bogus 42"), None);
        assert_eq!(Report::parse("\u{1e}exited x 1 2"), None);
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
}
