//! Processes the master reaps but never started. drover is a child subreaper
//! ([`Master::bind`](super::Master)) and, in a container, PID 1: an orphan of a pool's app
//! (a background process whose parent, a worker or a shell, has exited) becomes the master's
//! child, and a PID 1 is handed every orphan of its PID namespace. The master reaps them all
//! (`waitpid(-1)`), so that none stays a zombie, and must never take one for a worker.
//!
//! That risk is real: when a zygote or php-cgi parent dies, the master adopts the processes
//! of its process group as its workers ([`super::pool`]'s `adopt_workers_of`), and an app's
//! background process is in that group too. So, on every tick, each child of the master
//! that no pool knows is classified ([`classify`]): one whose process group is led by a
//! pool parent that is still running reached the master while that parent ran, so its
//! parent was another process (a worker): it is a *stranger*, never a worker. The master
//! keeps the strangers' pids ([`Orphans`]), skips them when it adopts a dead parent's
//! workers, and logs them apart when it reaps them. A process that reaches the master in the
//! instant between a tick and its group leader's death cannot be told from a worker that
//! leader forked: it is adopted as a worker, and retired as one.
//!
//! On a stop, the strangers left once every pool is empty get one SIGTERM
//! ([`Orphans::terminate`]), and SIGKILL at the stop's deadline with any other child.
//!
//! **A `[program]` copy must run in the foreground**, and what one leaves behind when it
//! exits is stopped, as systemd stops what a service's main process leaves in its cgroup:
//! a program that daemonizes (forks, and its first process exits) would otherwise leave
//! one more process running unsupervised at every restart, forever. When a copy exits, the
//! rest of its process group gets the pool's `stop_signal` ([`Orphans::copy_exited`]); a
//! process that left the group (`setsid`, as daemons do) is known by its arrival: a
//! stranger of the copy's user that reaches the master within [`LEFT_WINDOW`] of the
//! copy's exit is taken for what the copy left ([`left_by`]) and gets the signal too. Each
//! is logged as a warning that names the pool and says why. Other strangers (a web
//! request's `nohup cmd &`) are logged once, at info, and left to run.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::{Pid, Uid};

/// How long after a `[program]` copy's exit a stranger of its user is taken for one it
/// left: its orphans reach the master when it (or the process between) exits, within a
/// tick or two.
pub const LEFT_WINDOW: Duration = Duration::from_secs(1);

/// A `[program]` copy that exited, for the strangers it may have left.
#[derive(Debug, Clone, PartialEq)]
pub struct Left {
    pub pool: String,
    pub copy: Pid,
    pub uid: Uid,
    pub signal: Signal,
    pub at: Instant,
}

/// The exited copy a new stranger of user `uid`, seen at `now`, was left by: the latest of
/// that user within [`LEFT_WINDOW`].
pub fn left_by(exits: &[Left], uid: Uid, now: Instant) -> Option<&Left> {
    exits
        .iter()
        .rev()
        .find(|left| left.uid == uid && now.saturating_duration_since(left.at) <= LEFT_WINDOW)
}

/// What a child of the master that no pool knows is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Not started by a pool process: never a worker.
    Stranger,
    /// In the process group of a pool parent that has exited but is not reaped yet: one of
    /// its workers, or a stranger; the parent's reaping decides.
    Undecided,
}

/// What the pools say about a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A process a pool started, or a worker it tracks.
    Pool,
    /// A pool parent (zygote, php-cgi parent) not yet reaped; `running`: not a zombie.
    Parent {
        running: bool,
    },
    Unknown,
}

/// Classifies `pid`, a child of the master in process group `group` (`None`: it is gone):
/// `None` for a process of a pool, or one gone.
pub fn classify(pid: Pid, group: Option<Pid>, known: impl Fn(Pid) -> Known) -> Option<Class> {
    if known(pid) != Known::Unknown {
        return None;
    }
    Some(match known(group?) {
        // Its group leader runs: it was handed to the master while the leader lived, so it
        // is no child of the leader's.
        Known::Parent { running: true } => Class::Stranger,
        Known::Parent { running: false } => Class::Undecided,
        // A group that no live pool parent leads: an exec'd worker's, a reaped parent's (its
        // workers were adopted when it was reaped), or the app's own (setsid).
        Known::Pool | Known::Unknown => Class::Stranger,
    })
}

/// The strangers among the master's children, by pid: a child's pid is not reused before
/// the master reaps it, and only the master reaps its children.
#[derive(Debug, Default)]
pub struct Orphans {
    strangers: HashSet<Pid>,
    /// Those asked to stop (SIGTERM) during a stop.
    terminated: HashSet<Pid>,
    /// `[program]` copies that exited within [`LEFT_WINDOW`].
    exits: Vec<Left>,
}

impl Orphans {
    /// Records the strangers among `children` (every child of the master, as now);
    /// `group` reads a process's group. Returns the new ones.
    pub fn observe(
        &mut self,
        children: &[Pid],
        known: impl Fn(Pid) -> Known,
        group: impl Fn(Pid) -> Option<Pid>,
    ) -> Vec<Pid> {
        let mut new = Vec::new();
        for &pid in children {
            if self.strangers.contains(&pid) || known(pid) != Known::Unknown {
                continue;
            }
            let group = group(pid);
            if classify(pid, group, &known) == Some(Class::Stranger) {
                self.strangers.insert(pid);
                new.push(pid);
            }
        }
        new
    }

    /// A `[program]` copy of `pool` exited: the rest of its process group gets `signal`
    /// now, and a stranger of `uid` that arrives within [`LEFT_WINDOW`] gets it too.
    pub fn copy_exited(&mut self, pool: &str, copy: Pid, uid: Uid, signal: Signal, now: Instant) {
        // Its group is its pid (spawn's process_group(0)); the kernel reuses no pid that
        // names a group still in use, and an empty group answers ESRCH.
        if nix::sys::signal::killpg(copy, signal).is_ok() {
            tracing::warn!(
                "pool {pool}: copy {copy} exited and left processes in its process group: \
                 {signal} to them (a [program] must run in the foreground)"
            );
        }
        self.exits
            .retain(|left| now.saturating_duration_since(left.at) <= LEFT_WINDOW);
        self.exits.push(Left {
            pool: pool.to_owned(),
            copy,
            uid,
            signal,
            at: now,
        });
    }

    /// What to do with `new` strangers: stop those an exited `[program]` copy left
    /// ([`left_by`]), log the others once. `uid` and `comm` read a process's user and name.
    pub fn settle(
        &self,
        new: &[Pid],
        now: Instant,
        uid: impl Fn(Pid) -> Option<Uid>,
        comm: impl Fn(Pid) -> String,
    ) {
        for &pid in new {
            let Some(owner) = uid(pid) else { continue };
            match left_by(&self.exits, owner, now) {
                Some(left) => {
                    tracing::warn!(
                        "pool {}: copy {} left process {pid} ({}) running when it exited: the \
                         program daemonized; {} to it (a [program] must run in the foreground)",
                        left.pool,
                        left.copy,
                        comm(pid),
                        left.signal
                    );
                    let _ = nix::sys::signal::kill(pid, left.signal);
                }
                None => tracing::info!(
                    "process {pid} is an orphan drover did not start ({}, uid {owner}): its \
                     parent exited; it runs on, unsupervised, and is reaped when it exits",
                    comm(pid)
                ),
            }
        }
    }

    pub fn is_stranger(&self, pid: Pid) -> bool {
        self.strangers.contains(&pid)
    }

    /// `pid` was reaped: true when it was a stranger (then it is forgotten).
    pub fn reaped(&mut self, pid: Pid) -> bool {
        self.terminated.remove(&pid);
        self.strangers.remove(&pid)
    }

    /// During a stop, once every pool is empty: SIGTERM, once, to each of `children` (all
    /// that is left are orphans of the pools' apps, or strangers handed to a PID 1).
    pub fn terminate(&mut self, children: &[Pid]) {
        for &pid in children {
            if self.terminated.insert(pid) {
                tracing::info!("stopping: SIGTERM to orphaned process {pid}");
                let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            }
        }
    }
}

/// The process group of `pid` (`None`: it is gone).
pub fn group_of(pid: Pid) -> Option<Pid> {
    nix::unistd::getpgid(Some(pid)).ok()
}

/// The effective user of `pid` (the owner of /proc/PID); `None`: it is gone.
pub fn uid_of(pid: Pid) -> Option<Uid> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(format!("/proc/{pid}")).ok()?;
    Some(Uid::from_raw(meta.uid()))
}

/// The name of `pid` (/proc/PID/comm), for log lines; `?` when gone.
pub fn comm_of(pid: Pid) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| drover_proto::log_text(c.trim_end()).into_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Whether `pid` runs (is neither a zombie nor gone), from /proc/PID/stat.
pub fn running(pid: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rfind(')')
        .and_then(|at| stat[at + 1..].split_whitespace().next())
        .is_some_and(|state| !matches!(state, "Z" | "X" | "x"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(n: i32) -> Pid {
        Pid::from_raw(n)
    }

    /// Pools: zygote 10 running, zygote 20 exited not reaped, worker 11 of zygote 10, and
    /// an exec'd command worker 30.
    fn known(p: Pid) -> Known {
        match p.as_raw() {
            10 => Known::Parent { running: true },
            20 => Known::Parent { running: false },
            11 | 30 => Known::Pool,
            _ => Known::Unknown,
        }
    }

    fn class(p: i32, group: i32) -> Option<Class> {
        classify(pid(p), Some(pid(group)), known)
    }

    /// The groups of the processes the tests name: 1x in 10's, 2x in 20's.
    fn group(p: Pid) -> Option<Pid> {
        Some(pid(p.as_raw() / 10 * 10))
    }

    #[test]
    fn the_pools_processes_are_not_classified() {
        assert_eq!(class(10, 10), None);
        assert_eq!(class(11, 10), None);
        assert_eq!(class(30, 30), None);
    }

    #[test]
    fn an_orphan_in_a_running_zygotes_group_is_a_stranger() {
        // A worker's background process: handed to the master while zygote 10 runs.
        assert_eq!(class(12, 10), Some(Class::Stranger));
    }

    #[test]
    fn an_orphan_in_an_exited_zygotes_group_is_left_to_its_reaping() {
        assert_eq!(class(21, 20), Some(Class::Undecided));
    }

    #[test]
    fn orphans_of_other_groups_are_strangers() {
        // A command worker's child, a reaped parent's group, the app's own session.
        assert_eq!(class(31, 30), Some(Class::Stranger));
        assert_eq!(class(41, 40), Some(Class::Stranger));
        assert_eq!(class(42, 42), Some(Class::Stranger));
        // Gone before its group could be read: nothing to decide.
        assert_eq!(classify(pid(43), None, known), None);
    }

    #[test]
    fn strangers_are_kept_until_reaped_and_terminated_once() {
        let mut orphans = Orphans::default();
        orphans.observe(&[pid(12), pid(21), pid(11)], known, group);
        assert!(orphans.is_stranger(pid(12)));
        assert!(!orphans.is_stranger(pid(21)));
        assert!(!orphans.is_stranger(pid(11)));
        // A stranger stays one even once its group leader has exited.
        let exited = |p: Pid| match p.as_raw() {
            10 => Known::Parent { running: false },
            _ => known(p),
        };
        orphans.observe(&[pid(12)], exited, group);
        assert!(orphans.is_stranger(pid(12)));
        assert!(orphans.reaped(pid(12)));
        assert!(!orphans.reaped(pid(12)));
        assert!(!orphans.reaped(pid(11)));
    }

    #[test]
    fn a_stranger_is_left_by_the_latest_copy_of_its_user_within_the_window() {
        let now = Instant::now();
        let left = |pool: &str, uid: u32, ago: u64| Left {
            pool: pool.to_owned(),
            copy: pid(100),
            uid: Uid::from_raw(uid),
            signal: Signal::SIGTERM,
            at: now - Duration::from_millis(ago),
        };
        let exits = [left("a", 33, 500), left("b", 33, 200), left("c", 1000, 100)];
        let by = |uid: u32| left_by(&exits, Uid::from_raw(uid), now).map(|l| l.pool.as_str());
        assert_eq!(by(33), Some("b"));
        assert_eq!(by(1000), Some("c"));
        // Another user's stranger, or one past the window, is nobody's leftover.
        assert_eq!(by(0), None);
        let old = [left("a", 33, 1500)];
        assert_eq!(left_by(&old, Uid::from_raw(33), now), None);
    }

    #[test]
    fn a_zombie_does_not_run() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let p = pid(sleeper.id() as i32);
        assert!(running(p));
        sleeper.kill().unwrap();
        // Killed, not reaped: a zombie until wait().
        let deadline = Instant::now() + Duration::from_secs(10);
        while running(p) {
            assert!(Instant::now() < deadline, "{p} still runs");
            std::thread::yield_now();
        }
        sleeper.wait().unwrap();
        assert!(!running(p));
    }
}
