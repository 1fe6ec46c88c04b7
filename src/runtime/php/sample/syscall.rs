//! The fallback when a worker's memory cannot be read (unknown PHP build, or a `[command]`
//! worker): `/proc/PID/syscall` says which system call the worker is blocked in. A FastCGI
//! worker blocked in `accept`/`accept4` on fd 0 (the pool's listening socket) is idle;
//! anything else (running, reading a request, sleeping in a script) is busy.

use nix::unistd::Pid;

/// `accept` and `accept4` on this architecture.
#[cfg(target_arch = "x86_64")]
const ACCEPT: [u64; 2] = [43, 288];
#[cfg(target_arch = "aarch64")]
const ACCEPT: [u64; 2] = [202, 242];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ACCEPT: [u64; 0] = [];

/// `Some(true)` when `pid` is blocked in accept on fd 0, `Some(false)` when it is doing
/// anything else, `None` when `/proc/PID/syscall` cannot be read (gone, not ours, or a
/// kernel without it). Costs one small procfs read.
pub fn idle_by_syscall(pid: Pid) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    parse(&text, &ACCEPT)
}

/// Parses `/proc/PID/syscall`: `NR ARG1 ... ARG6 SP PC` when blocked in a syscall,
/// `-1 SP PC` when blocked elsewhere, `running` when on a CPU.
fn parse(text: &str, accept: &[u64]) -> Option<bool> {
    let mut fields = text.split_whitespace();
    let first = fields.next()?;
    if first == "running" {
        return Some(false);
    }
    let Ok(nr) = first.parse::<u64>() else {
        // "-1": blocked, but not in a system call.
        return first.parse::<i64>().ok().map(|_| false);
    };
    let arg0 = fields.next()?;
    let arg0 = u64::from_str_radix(arg0.trim_start_matches("0x"), 16).ok()?;
    Some(accept.contains(&nr) && arg0 == 0)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_proc_syscall() {
        let accept = [43, 288];
        assert_eq!(
            parse("43 0x0 0x7ffc 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n", &accept),
            Some(true)
        );
        assert_eq!(
            parse(
                "288 0x0 0x7ffc 0x7ffc 0x80000 0x0 0x0 0x7ffc 0x7f00\n",
                &accept
            ),
            Some(true)
        );
        assert_eq!(
            parse("43 0x3 0x7ffc 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n", &accept),
            Some(false)
        );
        assert_eq!(
            parse("230 0x1 0x0 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n", &accept),
            Some(false)
        );
        assert_eq!(parse("running\n", &accept), Some(false));
        assert_eq!(parse("-1 0x7ffc 0x7f00\n", &accept), Some(false));
        assert_eq!(parse("", &accept), None);
        assert_eq!(parse("garbage", &accept), None);
    }

    #[test]
    fn reads_our_own_thread() {
        // This test thread is running when it reads its process's main thread entry, which
        // may be anywhere; only the file format matters here.
        assert!(super::idle_by_syscall(nix::unistd::Pid::this()).is_some());
    }
}
