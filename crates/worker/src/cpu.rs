//! The CPU time a request used, split into user and system time as php-fpm's
//! `%{user}C` and `%{system}C` show them, for the scoreboard and the access log.
//!
//! A request's CPU time (`last request cpu`, the access log's `%C`) is its thread's from
//! the handler's start to its end, as php-fpm reads `times()` at the request's start and
//! end; as there, the CPU time of the children it ran and waited for (PHP's `exec()`)
//! counts too. Not the process's, because a worker with threads runs several requests at
//! once, and not since the previous request's end: a drover-php worker showed 450% of a
//! request's duration so, the previous request's close and a new worker's start counted
//! in. An ASGI worker runs its requests interleaved on one thread: it has only the
//! process's time, shared by the requests in flight, without its children's
//! ([`process_cpu`]).

use std::time::Duration;

/// CPU time, in user and in system mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTime {
    /// User and system time together.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// What was used since `earlier`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// The CPU time this process has used so far (all its threads), in one `getrusage`: an
/// event loop reads it at each request's end, and at a request's start only after it idled
/// (the ledger), where its requests' children are rare (the children's time would take a
/// second call each time).
pub fn process_cpu() -> CpuTime {
    usage(libc::RUSAGE_SELF)
}

/// The CPU time the calling thread and the process's waited-for children have used so far.
pub fn thread_cpu() -> CpuTime {
    usage(libc::RUSAGE_THREAD) + usage(libc::RUSAGE_CHILDREN)
}

fn usage(who: libc::c_int) -> CpuTime {
    // SAFETY: getrusage fills the zeroed struct it is given, and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return CpuTime::default();
        }
        usage
    };
    CpuTime {
        user: timeval(usage.ru_utime),
        system: timeval(usage.ru_stime),
    }
}

impl std::ops::Add for CpuTime {
    type Output = CpuTime;

    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user + other.user,
            system: self.system + other.system,
        }
    }
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::new(
        t.tv_sec.max(0) as u64,
        (t.tv_usec.clamp(0, 999_999) as u32) * 1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_counts_as_user_time() {
        let before = process_cpu();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let used = process_cpu().since(&before);
        assert!(used.user >= Duration::from_millis(10), "{used:?}");
        assert_eq!(used.total(), used.user + used.system);
        // The thread's own: another thread's loop does not count.
        let before = thread_cpu();
        std::thread::spawn(|| {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(30) {
                std::hint::black_box(0);
            }
        })
        .join()
        .unwrap();
        assert!(thread_cpu().since(&before).total() < Duration::from_millis(10));
    }
}
