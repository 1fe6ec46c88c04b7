//! Processes of a pool that are gone but not forgotten, a part of the pool that owns its
//! state: a parent's last output lines may be read after it was reaped and must still be
//! tagged and trusted, and a worker a zygote reported started may be gone before the
//! master could verify it, while its exit report, which follows, must still be counted.
//! Nothing is ever signalled from these lists.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

/// How many vanished workers a generation remembers at most.
const VANISHED_MAX: usize = 64;
/// How long a gone process is remembered.
const KEPT: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub struct Recent {
    /// Processes that exited lately, with their role and when.
    exited: Vec<(Pid, &'static str, Instant)>,
    /// Workers a zygote reported started that were gone before the master could verify
    /// them (a crash at once, reaped by the zygote first), with that zygote and when: a
    /// crash loop must still reach the emergency restart. Bounded.
    vanished: Vec<(Pid, Pid, Instant)>,
}

impl Recent {
    /// The pool's process `pid`, a `role`, was reaped at `now`.
    pub fn exited(&mut self, pid: Pid, role: &'static str, now: Instant) {
        self.exited.push((pid, role, now));
    }

    /// The role of `pid`, if it exited lately.
    pub fn role(&self, pid: Pid) -> Option<&'static str> {
        self.exited
            .iter()
            .find(|(p, _, _)| *p == pid)
            .map(|(_, role, _)| *role)
    }

    /// Whether `pid` exited within `grace` before `now`.
    pub fn gone_within(&self, pid: Pid, now: Instant, grace: Duration) -> bool {
        self.exited
            .iter()
            .any(|(p, _, at)| *p == pid && now.saturating_duration_since(*at) < grace)
    }

    /// The zygote `zygote` reported `pid` started, and it was gone before it was verified.
    pub fn vanished(&mut self, pid: Pid, zygote: Pid, now: Instant) {
        if self.vanished.len() >= VANISHED_MAX {
            self.vanished.remove(0);
        }
        self.vanished.push((pid, zygote, now));
    }

    /// Whether `pid` is a vanished worker of `zygote`; forgets it (its exit is counted
    /// once).
    pub fn take_vanished(&mut self, pid: Pid, zygote: Pid) -> bool {
        match self
            .vanished
            .iter()
            .position(|&(p, z, _)| p == pid && z == zygote)
        {
            Some(at) => {
                self.vanished.remove(at);
                true
            }
            None => false,
        }
    }

    /// Forgets what is older than a few seconds.
    pub fn forget_old(&mut self, now: Instant) {
        self.exited
            .retain(|(_, _, at)| now.saturating_duration_since(*at) < KEPT);
        self.vanished
            .retain(|(_, _, at)| now.saturating_duration_since(*at) < KEPT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_process_keeps_its_role_for_a_while() {
        let mut recent = Recent::default();
        let now = Instant::now();
        let zygote = Pid::from_raw(10);
        recent.exited(zygote, "zygote", now);
        assert_eq!(recent.role(zygote), Some("zygote"));
        assert!(recent.gone_within(zygote, now, Duration::from_secs(1)));
        assert!(!recent.gone_within(zygote, now + Duration::from_secs(1), Duration::from_secs(1)));
        recent.forget_old(now + KEPT);
        assert_eq!(recent.role(zygote), None);
    }

    #[test]
    fn a_vanished_worker_is_counted_once_and_only_for_its_zygote() {
        let mut recent = Recent::default();
        let now = Instant::now();
        let (worker, zygote) = (Pid::from_raw(11), Pid::from_raw(10));
        recent.vanished(worker, zygote, now);
        assert!(!recent.take_vanished(worker, Pid::from_raw(99)));
        assert!(recent.take_vanished(worker, zygote));
        assert!(!recent.take_vanished(worker, zygote));
    }

    #[test]
    fn vanished_workers_are_bounded() {
        let mut recent = Recent::default();
        let now = Instant::now();
        let zygote = Pid::from_raw(1);
        for pid in 0..(VANISHED_MAX as i32 + 10) {
            recent.vanished(Pid::from_raw(1000 + pid), zygote, now);
        }
        assert!(!recent.take_vanished(Pid::from_raw(1000), zygote));
        assert!(recent.take_vanished(Pid::from_raw(1000 + VANISHED_MAX as i32 + 9), zygote));
    }
}
