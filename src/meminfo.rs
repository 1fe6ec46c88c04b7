//! The machine's memory as Linux reports it: a process's PSS (/proc/PID/smaps_rollup) and
//! the memory drover's processes may use (the lowest limit of its memory cgroup, v1 or v2,
//! else MemAvailable). Readers only: what to do with the figures is [`crate::pm::memory`]'s
//! to decide. Below `runtime` and `master`, both of which read them (`drover -t` checks a
//! pool's reserve against the limit; the master sizes pools by it).

use nix::unistd::Pid;

use crate::pm::memory::{LimitSource, MemoryLimit};

/// A process's proportional set size in bytes: the `Pss:` line of /proc/PID/smaps_rollup
/// (Linux ≥ 4.14), in kB.
pub fn pss(pid: Pid) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    parse_kb(&text, "Pss:")
}

fn parse_kb(text: &str, field: &str) -> Option<u64> {
    let kb: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The memory drover's own processes may use: the lowest limit on its memory cgroup and
/// the cgroup's ancestors (v1's memory controller where it is mounted, else v2), else
/// MemAvailable.
pub fn memory_limit() -> Option<MemoryLimit> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    cgroup_limit(&cgroups).or_else(|| {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        Some(MemoryLimit {
            bytes: parse_kb(&meminfo, "MemAvailable:")?,
            source: LimitSource::MemAvailable,
        })
    })
}

/// Limits at or above this are "no limit" (v1 writes 2^63 rounded down to a page).
const UNLIMITED: u64 = 1 << 62;

fn cgroup_limit(cgroups: &str) -> Option<MemoryLimit> {
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            let limit = lowest(path, |dir| {
                read_limit(&format!("/sys/fs/cgroup/memory{dir}/memory.limit_in_bytes"))
            });
            return limit.map(|(bytes, at)| MemoryLimit {
                bytes,
                source: LimitSource::CgroupV1(at),
            });
        }
    }
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if let Some((bytes, at)) =
            lowest(path, |dir| read_limit(&format!("{root}{dir}/memory.max")))
        {
            return Some(MemoryLimit {
                bytes,
                source: LimitSource::CgroupV2(at),
            });
        }
    }
    None
}

/// The lowest limit `read` finds on `path` and its ancestors, with the cgroup that sets it.
fn lowest(path: &str, read: impl Fn(&str) -> Option<u64>) -> Option<(u64, String)> {
    let mut dirs = vec![path.trim_end_matches('/').to_owned()];
    while let Some(cut) = dirs.last().and_then(|d| d.rfind('/')) {
        let parent = dirs[dirs.len() - 1][..cut].to_owned();
        dirs.push(parent);
    }
    dirs.iter()
        .filter_map(|dir| {
            let bytes = read(dir).filter(|&b| b < UNLIMITED)?;
            Some((
                bytes,
                if dir.is_empty() {
                    "/".into()
                } else {
                    dir.clone()
                },
            ))
        })
        .min_by_key(|(bytes, _)| *bytes)
}

/// A cgroup limit file: bytes, or "max" (v2) for none.
fn read_limit(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pss_and_mem_available_are_read_in_kb() {
        let rollup = "00400000-7ffd rw-p 00000000 00:00 0 [rollup]\nRss: 10240 kB\nPss: 5120 kB\n";
        assert_eq!(parse_kb(rollup, "Pss:"), Some(5120 * 1024));
        assert_eq!(parse_kb(rollup, "Swap:"), None);
    }

    #[test]
    fn the_lowest_limit_on_the_path_or_its_ancestors_wins() {
        let limits = |dir: &str| match dir {
            "/a/b/c" => Some(u64::MAX / 2),
            "/a/b" => Some(512),
            "/a" => Some(1024),
            "" => Some(u64::MAX),
            _ => None,
        };
        assert_eq!(lowest("/a/b/c", limits), Some((512, "/a/b".into())));
        assert_eq!(lowest("/x", limits), None);
    }

    #[test]
    fn this_process_reads_some_limit() {
        // A cgroup limit where there is one, else MemAvailable: never nothing on Linux.
        let limit = memory_limit().expect("a memory limit");
        assert!(limit.bytes > 0);
    }
}
