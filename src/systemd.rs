//! systemd integration: `Type=notify` readiness, reload and stop notices, a `STATUS=`
//! line kept current, the watchdog, and socket activation (the sockets a `.socket` unit
//! passes). Outside systemd (`NOTIFY_SOCKET`, `LISTEN_FDS` unset) every call is a no-op.
//!
//! A reload sends `RELOADING=1` with `MONOTONIC_USEC` when it begins and `READY=1` once
//! the new generations are up, as `Type=notify-reload` (systemd 253) expects; older
//! systemd shows the unit "reloading" in between.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// Every pool is up: systemd may consider the unit started.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload has begun: `READY=1` follows once it is done ([`ready`]).
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `WatchdogSec=` in the unit: `WATCHDOG=1` at half the interval, from the master's loop,
/// so that a master that hangs is restarted by systemd.
#[derive(Debug)]
pub struct Watchdog {
    every: Duration,
    last: Option<Instant>,
}

impl Watchdog {
    /// The watchdog systemd asks for (`WATCHDOG_USEC`, for this pid), if any.
    pub fn from_env() -> Option<Watchdog> {
        sd_notify::watchdog_enabled().map(|interval| Watchdog {
            every: interval / 2,
            last: None,
        })
    }

    /// Pings when half the interval has passed since the last ping; true when it did.
    pub fn tick(&mut self, now: Instant) -> bool {
        let due = self
            .last
            .is_none_or(|last| now.duration_since(last) >= self.every);
        if due {
            self.last = Some(now);
            notify(&[NotifyState::Watchdog]);
        }
        due
    }
}

/// A graceful or fast stop has begun.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

pub fn status(status: &str) {
    notify(&[NotifyState::Status(status)]);
}

/// Whether systemd listens (`NOTIFY_SOCKET` is set): otherwise nothing is worth computing
/// for it.
pub fn notifying() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// What the workers are doing, summed over the pools: what `systemctl status` shows in
/// php-fpm's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Activity {
    pub active: u32,
    pub idle: u32,
    /// Requests served since start, by the pools that count them (`None`: none does, as
    /// php-cgi pools cannot).
    pub requests: Option<u64>,
    pub slow: u64,
}

impl Activity {
    /// php-fpm's `STATUS=` line: "Processes active: 1, idle: 3, Requests: 12, slow: 0".
    pub fn status_line(&self) -> String {
        let requests = match self.requests {
            Some(n) => format!("Requests: {n}, "),
            None => String::new(),
        };
        format!(
            "Processes active: {}, idle: {}, {requests}slow: {}",
            self.active, self.idle, self.slow
        )
    }
}

/// Keeps `STATUS=` current: sends the activity when it changed, at most once per
/// [`StatusLine::EVERY`], so that the notify socket is not written on every tick.
#[derive(Debug, Default)]
pub struct StatusLine {
    last: Option<(Activity, Instant)>,
}

impl StatusLine {
    pub const EVERY: Duration = Duration::from_secs(1);

    /// The line to send now, if any; sends it.
    pub fn tick(&mut self, now: Instant, activity: Activity) -> Option<String> {
        let line = self.due(now, activity)?;
        status(&line);
        Some(line)
    }

    /// Another line replaced the activity on `STATUS=` ([`ready`] sends "ready: ..."
    /// after a reload): the next tick sends the activity again, even unchanged.
    pub fn overwritten(&mut self) {
        self.last = None;
    }

    fn due(&mut self, now: Instant, activity: Activity) -> Option<String> {
        if let Some((last, at)) = self.last
            && (last == activity || now.duration_since(at) < Self::EVERY)
        {
            return None;
        }
        self.last = Some((activity, now));
        Some(activity.status_line())
    }
}

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// One socket systemd passed: its descriptor and its `FileDescriptorName=` (systemd says
/// "unknown" when the unit sets none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedFd {
    pub fd: RawFd,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenFdsError {
    #[error("LISTEN_FDS={0:?} is not a number of descriptors")]
    BadCount(String),
    #[error("LISTEN_FDNAMES names {names} sockets but LISTEN_FDS={fds}")]
    NamesMismatch { fds: usize, names: usize },
    #[error("LISTEN_FDS: descriptor {fd} ({name:?}) is not open: {err}")]
    NotOpen {
        fd: RawFd,
        name: String,
        err: String,
    },
}

/// `sd_listen_fds_with_names(3)` on the variables' values: the sockets passed to `own_pid`
/// (none when `LISTEN_PID` names another process: the variables were inherited from a
/// parent), descriptors 3, 4, ... in order, with their names.
pub fn parse_listen_fds(
    pid: Option<&str>,
    fds: Option<&str>,
    names: Option<&str>,
    own_pid: u32,
) -> Result<Vec<PassedFd>, ListenFdsError> {
    let (Some(pid), Some(fds)) = (pid, fds) else {
        return Ok(Vec::new());
    };
    if pid.trim().parse::<u32>().ok() != Some(own_pid) {
        return Ok(Vec::new());
    }
    let count: usize = fds
        .trim()
        .parse()
        .map_err(|_| ListenFdsError::BadCount(fds.to_string()))?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let names: Vec<String> = match names {
        Some(names) => names.split(':').map(str::to_string).collect(),
        None => vec!["unknown".to_string(); count],
    };
    if names.len() != count {
        return Err(ListenFdsError::NamesMismatch {
            fds: count,
            names: names.len(),
        });
    }
    Ok(names
        .into_iter()
        .zip(LISTEN_FDS_START..)
        .map(|(name, fd)| PassedFd { fd, name })
        .collect())
}

/// Takes the sockets systemd passed to this process: reads `LISTEN_PID`, `LISTEN_FDS` and
/// `LISTEN_FDNAMES`, removes them from the environment (so that workers do not take the
/// sockets as theirs) and marks each descriptor close-on-exec (workers get only their own
/// pool's socket, as fd 0).
///
/// Must be called while drover is single-threaded, before the tokio runtime and the
/// logger start.
pub fn take_listen_fds() -> Result<Vec<(OwnedFd, String)>, ListenFdsError> {
    let var = |name| std::env::var(name).ok();
    let passed = parse_listen_fds(
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
        std::process::id(),
    );
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        // SAFETY: the caller runs before any other thread exists (see above), so nothing
        // reads the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    let mut taken = Vec::new();
    for PassedFd { fd, name } in passed? {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        // SAFETY: a borrow only for the fcntl calls; `fd` is checked open before it is owned.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(|err| {
            ListenFdsError::NotOpen {
                fd,
                name: name.clone(),
                err: err.to_string(),
            }
        })?;
        // SAFETY: systemd passed this open descriptor to this process (LISTEN_PID is ours)
        // and nothing else in drover owns it; it is taken once, the variables now gone.
        taken.push((unsafe { OwnedFd::from_raw_fd(fd) }, name));
    }
    Ok(taken)
}

fn notify(states: &[NotifyState<'_>]) {
    // A failed notify is not worth stopping for: systemd would time the unit out and say so.
    if let Err(err) = sd_notify::notify(states) {
        tracing::debug!("sd_notify failed: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_at_once_then_every_half_interval() {
        let mut watchdog = Watchdog {
            every: Duration::from_secs(5),
            last: None,
        };
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let pinged: Vec<u64> = [0, 100, 4_900, 5_000, 5_100, 9_999, 10_000]
            .into_iter()
            .filter(|&ms| watchdog.tick(at(ms)))
            .collect();
        assert_eq!(pinged, [0, 5_000, 10_000]);
    }

    #[test]
    fn the_status_line_says_what_php_fpm_says() {
        let mut activity = Activity {
            active: 1,
            idle: 3,
            requests: Some(12),
            slow: 2,
        };
        assert_eq!(
            activity.status_line(),
            "Processes active: 1, idle: 3, Requests: 12, slow: 2"
        );
        activity.requests = None;
        assert_eq!(
            activity.status_line(),
            "Processes active: 1, idle: 3, slow: 2"
        );
    }

    #[test]
    fn the_status_line_is_sent_when_it_changes_at_most_once_a_second() {
        let mut line = StatusLine::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let busy = |active| Activity {
            active,
            idle: 4 - active,
            requests: Some(0),
            slow: 0,
        };
        let sent: Vec<(u64, u32)> = [
            (0, 0),
            (100, 1),
            (900, 2),
            (1_000, 2),
            (1_500, 3),
            (2_500, 3),
            (4_000, 3),
        ]
        .into_iter()
        .filter_map(|(ms, active)| line.due(at(ms), busy(active)).map(|_| (ms, active)))
        .collect();
        // At once, then a change only a second after the last line; nothing when unchanged.
        assert_eq!(sent, [(0, 0), (1_000, 2), (2_500, 3)]);
    }

    #[test]
    fn the_activity_comes_back_after_another_line_replaced_it() {
        let mut line = StatusLine::default();
        let start = Instant::now();
        let idle = Activity {
            active: 0,
            idle: 4,
            requests: Some(7),
            slow: 0,
        };
        assert!(line.due(start, idle).is_some());
        // An idle host: nothing changes, so nothing is sent...
        assert_eq!(line.due(start + Duration::from_secs(5), idle), None);
        // ...until a reload's "ready: ..." takes STATUS=: the same activity is due again,
        // at once, not only when it next changes.
        line.overwritten();
        assert_eq!(
            line.due(start + Duration::from_millis(5_100), idle),
            Some(idle.status_line())
        );
        assert_eq!(line.due(start + Duration::from_secs(7), idle), None);
    }

    fn fd(fd: RawFd, name: &str) -> PassedFd {
        PassedFd {
            fd,
            name: name.to_string(),
        }
    }

    #[test]
    fn listen_fds_for_this_process_are_numbered_from_3_with_their_names() {
        let passed = parse_listen_fds(Some("42"), Some("2"), Some("www:api"), 42);
        assert_eq!(passed, Ok(vec![fd(3, "www"), fd(4, "api")]));
    }

    #[test]
    fn listen_fds_without_names_are_unknown() {
        let passed = parse_listen_fds(Some("42"), Some("1"), None, 42);
        assert_eq!(passed, Ok(vec![fd(3, "unknown")]));
    }

    #[test]
    fn listen_fds_for_another_process_or_unset_are_none() {
        assert_eq!(
            parse_listen_fds(Some("41"), Some("1"), Some("www"), 42),
            Ok(vec![])
        );
        assert_eq!(
            parse_listen_fds(Some("x"), Some("1"), Some("www"), 42),
            Ok(vec![])
        );
        assert_eq!(
            parse_listen_fds(None, Some("1"), Some("www"), 42),
            Ok(vec![])
        );
        assert_eq!(parse_listen_fds(Some("42"), None, None, 42), Ok(vec![]));
        assert_eq!(
            parse_listen_fds(Some("42"), Some("0"), None, 42),
            Ok(vec![])
        );
    }

    #[test]
    fn listen_fds_that_disagree_with_their_names_are_an_error() {
        assert_eq!(
            parse_listen_fds(Some("42"), Some("2"), Some("www"), 42),
            Err(ListenFdsError::NamesMismatch { fds: 2, names: 1 })
        );
        assert_eq!(
            parse_listen_fds(Some("42"), Some("two"), None, 42),
            Err(ListenFdsError::BadCount("two".to_string()))
        );
    }
}
