//! Workers whose parent died (orphans, adopted by the master, its subreaper): which are
//! forgotten, and whether one just adopted may be serving. The master reads /proc and the
//! handles; here is only what follows from what it saw.

use nix::unistd::Pid;

/// An orphaned worker as the master sees it this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Orphan {
    pub pid: Pid,
    /// Not reaped yet (by its dead parent, just before it died, or by the master).
    pub alive: bool,
    /// Its parent was reaped within the grace its reports get to arrive.
    pub parent_gone_lately: bool,
}

/// The orphans to forget: those that no longer exist (their parent reaped them just
/// before it died). `reports`: the parent reports each exit with its cause (a zygote), so
/// an orphan whose parent is just gone is kept a moment, for that report and its last
/// lines to arrive.
pub fn forgotten_orphans(orphans: &[Orphan], reports: bool) -> Vec<Pid> {
    orphans
        .iter()
        .filter(|o| !o.alive)
        .filter(|o| !(reports && o.parent_gone_lately))
        .map(|o| o.pid)
        .collect()
}

/// Whether a worker just adopted counts as busy until the next tick samples it:
/// `idle_in_accept` is what /proc says (Some(true): waiting in accept()). Anything else
/// may be a request, which must not get a SIGTERM in its middle.
pub fn adopted_busy(idle_in_accept: Option<bool>) -> bool {
    idle_in_accept != Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orphan(pid: i32, alive: bool, parent_gone_lately: bool) -> Orphan {
        Orphan {
            pid: Pid::from_raw(pid),
            alive,
            parent_gone_lately,
        }
    }

    #[test]
    fn only_orphans_that_are_gone_are_forgotten() {
        let orphans = [orphan(1, true, false), orphan(2, false, false)];
        assert_eq!(forgotten_orphans(&orphans, false), [Pid::from_raw(2)]);
        assert_eq!(forgotten_orphans(&orphans, true), [Pid::from_raw(2)]);
    }

    #[test]
    fn a_reporting_parent_just_gone_gets_its_report_in_first() {
        let orphans = [orphan(1, false, true), orphan(2, false, false)];
        assert_eq!(forgotten_orphans(&orphans, true), [Pid::from_raw(2)]);
        // A parent that reports nothing: nothing to wait for.
        assert_eq!(
            forgotten_orphans(&orphans, false),
            [Pid::from_raw(1), Pid::from_raw(2)]
        );
    }

    #[test]
    fn an_adopted_worker_is_idle_only_when_seen_in_accept() {
        assert!(!adopted_busy(Some(true)));
        assert!(adopted_busy(Some(false)));
        assert!(adopted_busy(None));
    }
}
