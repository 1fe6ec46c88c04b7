//! Reaping the master's children: each exit handed to the pool it belongs to (which
//! decides what it means, [`crate::pm::on_exit`]), the app's orphans reaped quietly, and
//! php-fpm's emergency restart when workers keep crashing.

use std::time::Instant;

use drover_proto::zygote::reap_any;

use super::exit::ExitCause;
use super::pool::{Reaped, own_children};
use super::{Master, orphans};

impl Master {
    pub(super) fn reap(&mut self, now: Instant) {
        loop {
            let (pid, cause) = match reap_any() {
                Ok(Some((pid, Some(exit)))) => (pid, ExitCause::from_exit(exit)),
                // Stopped or continued: not an end.
                Ok(Some((_, None))) => continue,
                Ok(None) => return,
                Err(err) => {
                    tracing::error!("waitpid: {err}");
                    return;
                }
            };
            if self.orphans.reaped(pid) {
                tracing::debug!("reaped orphan {pid} ({cause}), not started by drover");
                continue;
            }
            let orphans = &self.orphans;
            let mut program = None;
            let owner = self
                .pools
                .iter_mut()
                .map(|pool| {
                    let reaped = pool.on_reaped(pid, cause, now, orphans);
                    if !matches!(reaped, Reaped::NotOurs) {
                        program = pool
                            .program_user()
                            .map(|user| (pool.name().to_owned(), user));
                    }
                    reaped
                })
                .find(|r| !matches!(r, Reaped::NotOurs));
            if let Some((pool, (uid, signal))) = program {
                self.orphans.copy_exited(&pool, pid, uid, signal, now);
            }
            match owner {
                Some(Reaped::Exit { crash: true }) if self.emergency.on_crash(now) => {
                    self.emergency_restart()
                }
                Some(_) => {}
                None => tracing::debug!("reaped process {pid} ({cause}), not a worker"),
            }
        }
    }

    /// Takes note of the master's children that no pool started ([`orphans`]), so that
    /// none is ever taken for a worker.
    pub(super) fn observe_orphans(&mut self) {
        let children = own_children();
        let pools = &self.pools;
        let known = |pid| {
            pools
                .iter()
                .map(|pool| pool.knows(pid))
                .find(|known| *known != orphans::Known::Unknown)
                .unwrap_or(orphans::Known::Unknown)
        };
        let new = self.orphans.observe(&children, known, orphans::group_of);
        self.orphans
            .settle(&new, Instant::now(), orphans::uid_of, orphans::comm_of);
    }

    pub(super) fn emergency_restart(&mut self) {
        tracing::error!(
            "emergency restart: {} workers crashed (SIGSEGV/SIGBUS) within {}; restarting every pool",
            self.config.global.emergency_restart_threshold,
            humantime::format_duration(self.config.global.emergency_restart_interval)
        );
        for pool in self.pools.iter_mut() {
            pool.retire_all();
        }
    }
}

/// Gives the memory freed by a reload or a dropped generation back to the system: a large
/// configuration loaded once would otherwise stay in the master's heap for good.
pub(super) fn release_freed_memory() {
    // SAFETY: malloc_trim only walks glibc's own heap; it takes no pointer from us.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
