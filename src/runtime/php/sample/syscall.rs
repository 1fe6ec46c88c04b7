//! The fallback when a worker's memory cannot be read (unknown PHP build, or a `[command]`
//! worker): `/proc/PID/syscall` says which system call the worker is blocked in. A FastCGI
//! worker blocked in `accept`/`accept4` on fd 0 (the pool's listening socket) is idle;
//! anything else (running, reading a request, sleeping in a script) is busy. The same file
//! tells a worker waiting for a client's request: blocked in a read or a poll of another fd
//! ([`reading`](super::reading)).

use nix::unistd::Pid;

/// System call numbers this module tells apart, on this architecture.
struct Table {
    accept: [u64; 2],
    /// `read`, `readv`, `recvfrom`, `recvmsg`: the fd is the first argument.
    read: [u64; 4],
    /// `poll`, `ppoll`: the first argument points to the `struct pollfd` array, the second
    /// is its length.
    poll: [u64; 2],
}

#[cfg(target_arch = "x86_64")]
const TABLE: Table = Table {
    accept: [43, 288],
    read: [0, 19, 45, 47],
    poll: [7, 271],
};
// aarch64 has no poll(2): ppoll twice keeps the table's shape.
#[cfg(target_arch = "aarch64")]
const TABLE: Table = Table {
    accept: [202, 242],
    read: [63, 65, 207, 212],
    poll: [73, 73],
};
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const TABLE: Table = Table {
    accept: [u64::MAX; 2],
    read: [u64::MAX; 4],
    poll: [u64::MAX; 2],
};

/// Where a worker is blocked, as far as a FastCGI worker's life goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// In accept on fd 0: waiting for a connection, idle.
    Accept,
    /// In a read of this fd.
    Read { fd: i32 },
    /// In poll over `nfds` entries at address `fds` in the worker's memory.
    Poll { fds: u64, nfds: u64 },
    /// Running, or blocked in anything else.
    Other,
}

/// `Some(true)` when `pid` is blocked in accept on fd 0, `Some(false)` when it is doing
/// anything else, `None` when `/proc/PID/syscall` cannot be read (gone, not ours, or a
/// kernel without it). Costs one small procfs read.
pub fn idle_by_syscall(pid: Pid) -> Option<bool> {
    blocked(pid).map(|b| b == Blocked::Accept)
}

/// What `pid` is blocked in; `None` when `/proc/PID/syscall` cannot be read.
pub fn blocked(pid: Pid) -> Option<Blocked> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    parse(&text, &TABLE)
}

/// Parses `/proc/PID/syscall`: `NR ARG1 ... ARG6 SP PC` when blocked in a syscall,
/// `-1 SP PC` when blocked elsewhere, `running` when on a CPU.
fn parse(text: &str, table: &Table) -> Option<Blocked> {
    let mut fields = text.split_whitespace();
    let first = fields.next()?;
    if first == "running" {
        return Some(Blocked::Other);
    }
    let Ok(nr) = first.parse::<u64>() else {
        // "-1": blocked, but not in a system call.
        return first.parse::<i64>().ok().map(|_| Blocked::Other);
    };
    let mut arg = || u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok();
    let arg0 = arg()?;
    Some(if table.accept.contains(&nr) && arg0 == 0 {
        Blocked::Accept
    } else if table.read.contains(&nr) {
        // An fd is an int; the register may carry garbage above it.
        Blocked::Read {
            fd: arg0 as u32 as i32,
        }
    } else if table.poll.contains(&nr) {
        Blocked::Poll {
            fds: arg0,
            nfds: arg()?,
        }
    } else {
        Blocked::Other
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: Table = Table {
        accept: [43, 288],
        read: [0, 19, 45, 47],
        poll: [7, 271],
    };

    #[test]
    fn parses_proc_syscall() {
        let p = |text| parse(text, &X86);
        assert_eq!(
            p("43 0x0 0x7ffc 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Accept)
        );
        assert_eq!(
            p("288 0x0 0x7ffc 0x7ffc 0x80000 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Accept)
        );
        assert_eq!(
            p("43 0x3 0x7ffc 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Other)
        );
        assert_eq!(
            p("0 0x3 0x7ffc4000 0x8 0x0 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Read { fd: 3 })
        );
        assert_eq!(
            p("7 0x7ffd1000 0x1 0x1388 0x0 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Poll {
                fds: 0x7ffd1000,
                nfds: 1
            })
        );
        assert_eq!(
            p("230 0x1 0x0 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n"),
            Some(Blocked::Other)
        );
        assert_eq!(p("running\n"), Some(Blocked::Other));
        assert_eq!(p("-1 0x7ffc 0x7f00\n"), Some(Blocked::Other));
        assert_eq!(p(""), None);
        assert_eq!(p("garbage"), None);
    }

    #[test]
    fn reads_our_own_thread() {
        // This test thread is running when it reads its process's main thread entry, which
        // may be anywhere; only the file format matters here.
        assert!(idle_by_syscall(Pid::this()).is_some());
    }
}
