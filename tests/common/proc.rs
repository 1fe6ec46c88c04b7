//! Processes as `/proc` shows them: who descends from whom, who is still running.

use std::collections::BTreeMap;
use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Polls `probe` every 20 ms until it returns `Some`, for at most `timeout`; panics naming
/// `what` otherwise.
pub fn wait_until<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let mut value = None;
    let found = poll(timeout, || {
        value = probe();
        value.is_some()
    });
    assert!(found, "timed out after {timeout:?} waiting for {what}");
    value.unwrap()
}

/// Polls `probe` every 20 ms until it holds, for at most `timeout`; says whether it did.
pub fn poll(timeout: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if probe() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn signal(pid: i32, signal: Signal) {
    // ESRCH (already gone) is fine: the caller wanted it stopped.
    let _ = kill(Pid::from_raw(pid), signal);
}

/// `pid`'s command name, state letter and parent, from `/proc/PID/stat`.
pub struct Stat {
    pub comm: String,
    pub state: char,
    pub ppid: i32,
}

/// How long ago `pid` started, from its start time in `/proc/PID/stat` and the uptime.
pub fn age(pid: i32) -> Option<Duration> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = text.rfind(')')?;
    // After COMM: state is field 3, starttime field 22 (in clock ticks since boot).
    let started: f64 = text[close + 1..].split_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let uptime: f64 = fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Duration::from_secs_f64((uptime - started / ticks).max(0.0)))
}

pub fn stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so cut at the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let mut rest = text[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some(Stat {
        comm: text[open + 1..close].to_string(),
        state,
        ppid,
    })
}

/// The CPU time `pid` has used (user and system), from `/proc/PID/stat`.
pub fn cpu_time(pid: i32) -> Option<Duration> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = text.rfind(')')?;
    // After COMM: utime and stime are fields 14 and 15 (clock ticks).
    let mut fields = text[close + 1..].split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Some(Duration::from_micros((user + system) * 1_000_000 / ticks))
}

/// `pid`'s resident memory (VmRSS) in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// How many descriptors `pid` has open.
pub fn open_fds(pid: i32) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Alive and not a zombie waiting to be reaped.
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Every process below `root`, parents before their children.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for entry in fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(s) = stat(pid) {
            children.entry(s.ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(pid) = next.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            found.push(child);
            next.push(child);
        }
    }
    found
}

/// SIGKILLs `root` and every process below it. The tree is frozen (SIGSTOP) first, so
/// that no parent (a php-cgi pool parent, nginx's master) replaces a killed child while
/// we work through the list.
pub fn kill_tree(root: i32) {
    let mut frozen = vec![root];
    signal(root, Signal::SIGSTOP);
    loop {
        let new: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !frozen.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            signal(pid, Signal::SIGSTOP);
            frozen.push(pid);
        }
    }
    for pid in frozen {
        signal(pid, Signal::SIGKILL);
    }
}

/// The process group of `pid`, from `/proc/PID/stat` (the field after the parent).
pub fn pgid(pid: i32) -> Option<i32> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The live processes below `master` that are not a pool process the status knows: not a
/// worker in `listed` (the pids `drover ctl status --full` shows), and not a pool parent
/// (a php-cgi parent or Python zygote: a child of the master whose every child is listed,
/// and which has at least one). Each comes with its `comm`, for the message.
pub fn untracked(master: i32, listed: &[i32]) -> Vec<(i32, String)> {
    let below = descendants(master);
    let children = |parent: i32| -> Vec<i32> {
        below
            .iter()
            .copied()
            .filter(|&p| stat(p).is_some_and(|s| s.ppid == parent && s.state != 'Z'))
            .collect()
    };
    below
        .iter()
        .copied()
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, s)| s.state != 'Z')
        .filter(|&(pid, ref s)| {
            if listed.contains(&pid) {
                return false;
            }
            let own = children(pid);
            let pool_parent =
                s.ppid == master && !own.is_empty() && own.iter().all(|c| listed.contains(c));
            !pool_parent
        })
        .map(|(pid, s)| (pid, s.comm))
        .collect()
}

/// Sends `signal` to `pid` and waits until the kernel has delivered it (it is no longer
/// pending in `/proc/PID/status`): a signal sent again while the first is pending would be
/// merged with it by the kernel, so a test that counts signals sends each this way.
pub fn signal_delivered(pid: i32, sig: Signal) {
    signal(pid, sig);
    let bit = 1u64 << (sig as i32 - 1);
    let delivered = poll(Duration::from_secs(5), || {
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            return true;
        };
        let pending = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap_or(0)
        };
        (pending("ShdPnd:") | pending("SigPnd:")) & bit == 0
    });
    assert!(delivered, "{sig} to {pid} still pending after 5 s");
}
