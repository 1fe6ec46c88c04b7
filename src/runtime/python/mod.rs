//! Python WSGI pools: the master execs `drover-python` (the [`PROGRAM`] beside `drover`)
//! as the pool's zygote; the zygote loads CPython and the app once, then forks the
//! workers, which share the loaded app copy-on-write (DESIGN §1, §4).
//!
//! Only `drover-python` links libpython: the master, and the php-cgi pools it runs, never
//! map it (it cost a PHP-only drover 2.3 MiB of PSS, 1.2 MiB of it dirty relocations).
//!
//! - [`zygote`]: single-threaded; imports the app, `gc.freeze()`, forks and replaces
//!   workers, reports their starts and exits to the master.
//! - [`warmup`]: the `warmup` requests the zygote sends through the app before it forks.
//! - [`worker`]: the blocking accept → FastCGI → WSGI loop of one worker.
//! - [`wsgi`]: PEP 3333: environ, `wsgi.input`, `start_response`, the response.
//!
//! This folder is the only code that touches the GIL.
//!
//! The zygote reports to the master on its stderr (the pool's output socket, where the
//! master learns the writer's pid from the kernel) in lines that start with
//! [`REPORT_MARK`]; see [`Report`]. The master trusts them only from the zygote's pid.

pub mod warmup;
pub mod worker;
pub mod wsgi;
pub mod zygote;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use nix::unistd::Pid;

use super::{Layout, allowed_clients_env};
use crate::config::{Pool, Python};
use crate::pm;

/// The zygote's exit code when the app cannot be imported: the master stops the pool
/// instead of restarting it in a loop (gunicorn's "app failed to load" is 4 too).
pub const EXIT_APP_LOAD: u8 = 4;

/// The Python runtime's binary, installed beside `drover`.
pub const PROGRAM: &str = "drover-python";

/// Where the master finds [`PROGRAM`]: beside the running `drover`, so that the zygote is
/// the same version as the master.
pub fn program() -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(PROGRAM),
        Err(_) => PathBuf::from(PROGRAM),
    }
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

/// The master's plan for a Python pool: one zygote, `max_children` workers.
pub fn plan(
    pool: &Pool,
    python: &Python,
) -> (Layout, PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let workers = pm::initial_workers(&pool.pm);
    let mut args: Vec<OsString> = vec![
        "--pool".into(),
        pool.name.clone().into(),
        "--app".into(),
        format!("{}:{}", python.module, python.callable).into(),
        "--workers".into(),
        workers.to_string().into(),
        "--max-requests".into(),
        pool.pm.max_requests.to_string().into(),
        "--max-requests-jitter".into(),
        pool.pm.max_requests_jitter.to_string().into(),
        "--mount".into(),
        python.mount.clone().into(),
        "--scoreboard-fd".into(),
        crate::master::SCOREBOARD_FD.to_string().into(),
    ];
    for dir in &python.python_path {
        args.push("--python-path".into());
        args.push(dir.into());
    }
    if let Some(venv) = &python.virtualenv {
        args.push("--virtualenv".into());
        args.push(venv.into());
    }
    if !python.preload {
        args.push("--no-preload".into());
    }
    for path in &python.warmup {
        args.push("--warmup".into());
        args.push(path.into());
    }
    if let Some(limit) = pool.pm.max_memory {
        args.push("--max-memory".into());
        args.push(limit.to_string().into());
    }
    let env = allowed_clients_env(pool).into_iter().collect();
    (
        Layout::Parent {
            workers: pool.pm.max_children,
        },
        program(),
        args,
        env,
    )
}

/// Tells a zygote how many workers to keep (dynamic and ondemand pools). It forks up to
/// that many; above it, it stops replacing workers that exit, and the master retires the
/// ones it chooses.
pub fn set_target(zygote: Pid, workers: u32) -> nix::Result<()> {
    let value = libc::sigval {
        sival_ptr: workers as usize as *mut libc::c_void,
    };
    // SAFETY: sigqueue with a valid pid, signal number and value.
    let rc = unsafe { libc::sigqueue(zygote.as_raw(), zygote::target_signal(), value) };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::Error::last())
    }
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
}
