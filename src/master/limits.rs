//! The master's limit on open descriptors, raised at start as nginx's
//! `worker_rlimit_nofile` and systemd's `LimitNOFILE=` raise a server's.
//!
//! The master holds every pool's listener, output socket and scoreboard, a pidfd per
//! process, and every connection to the control socket, `status_listen` and
//! `health_listen`. Under the usual soft limit of 1024, a client holding idle connections
//! could take the descriptors a respawn needs (an EMFILE, and no worker), so [`raise`]
//! lifts the soft limit to the hard one (systemd's is 524288) at start. The processes the
//! master starts get the soft limit it was started with back ([`restore_in_child`]):
//! programs that use `select()` (FD_SETSIZE is 1024) keep the limit they expect, as
//! systemd keeps 1024 soft for services.

use std::sync::atomic::{AtomicU64, Ordering};

/// At most this many: a hard limit of "unlimited" must not become an allocation hint.
const CEILING: libc::rlim_t = 1 << 20;

/// The soft limit drover was started with, for its children; 0 until [`raise`] ran.
static STARTED_WITH: AtomicU64 = AtomicU64::new(0);

/// Raises the soft limit on open descriptors to the hard limit (at most [`CEILING`]).
/// Returns (was, now); a failure leaves the limit as it was.
pub fn raise() -> std::io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let was = limit.rlim_cur;
    STARTED_WITH.store(was, Ordering::Relaxed);
    let now = limit.rlim_max.min(CEILING).max(was);
    if now > was {
        let raised = libc::rlimit {
            rlim_cur: now,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((was, now))
}

/// Sets a child's soft and hard limits on open files to `files` (a pool's
/// `rlimit_files`, checked at load against `fs.nr_open` and, for a master not run as
/// root, its hard limit). Runs between fork and exec: syscalls only.
pub fn set_in_child(files: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: files,
        rlim_max: files,
    };
    // SAFETY: setrlimit reads the struct on this stack.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Gives a child the soft limit drover was started with. Runs between fork and exec:
/// syscalls only.
pub fn restore_in_child() -> std::io::Result<()> {
    let was = STARTED_WITH.load(Ordering::Relaxed);
    if was == 0 {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on a struct on this stack.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur != was {
            limit.rlim_cur = was.min(limit.rlim_max);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}
