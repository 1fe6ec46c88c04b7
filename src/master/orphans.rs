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

use std::collections::HashSet;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

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
}

impl Orphans {
    /// Records the strangers among `children` (every child of the master, as now);
    /// `group` reads a process's group.
    pub fn observe(
        &mut self,
        children: &[Pid],
        known: impl Fn(Pid) -> Known,
        group: impl Fn(Pid) -> Option<Pid>,
    ) {
        for &pid in children {
            if self.strangers.contains(&pid) || known(pid) != Known::Unknown {
                continue;
            }
            let group = group(pid);
            if classify(pid, group, &known) == Some(Class::Stranger) {
                tracing::debug!(
                    "process {pid} is an orphan drover did not start (process group {})",
                    group.map_or(0, Pid::as_raw)
                );
                self.strangers.insert(pid);
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
    fn a_zombie_does_not_run() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let p = pid(sleeper.id() as i32);
        assert!(running(p));
        sleeper.kill().unwrap();
        // Killed, not reaped: a zombie until wait().
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while running(p) {
            assert!(std::time::Instant::now() < deadline, "{p} still runs");
            std::thread::yield_now();
        }
        sleeper.wait().unwrap();
        assert!(!running(p));
    }
}
