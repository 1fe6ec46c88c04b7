//! A memory cgroup made by a test, below the test's own (cgroup v1's memory controller at
//! /sys/fs/cgroup/memory, else cgroup v2 with the memory controller), with a hard limit;
//! removed on drop, after the processes the test started in it are gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::proc;

pub struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
    /// The cgroup path as /proc/PID/cgroup shows it (what drover's log names).
    path: String,
}

impl MemoryCgroup {
    /// A new cgroup limited to `limit` bytes; None without root or a memory controller.
    pub fn create(limit: u64) -> Option<MemoryCgroup> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        if !proc::running_as_root() {
            return None;
        }
        let name = format!(
            "drover-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let v1 = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then(|| path.trim_end_matches('/').to_owned())
        });
        let (dir, v2, path) = match v1 {
            Some(parent) => (
                PathBuf::from(format!("/sys/fs/cgroup/memory{parent}/{name}")),
                false,
                format!("{parent}/{name}"),
            ),
            None => {
                let parent = own.lines().find_map(|l| l.strip_prefix("0::"))?;
                let parent = parent.trim_end_matches('/');
                let root = Path::new("/sys/fs/cgroup");
                let controllers =
                    std::fs::read_to_string(root.join(format!(".{parent}/cgroup.controllers")))
                        .ok()?;
                if !controllers.split_whitespace().any(|c| c == "memory") {
                    return None;
                }
                (
                    root.join(format!(".{parent}/{name}")),
                    true,
                    format!("{parent}/{name}"),
                )
            }
        };
        std::fs::create_dir(&dir).ok()?;
        let cgroup = MemoryCgroup { dir, v2, path };
        let file = if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        std::fs::write(cgroup.dir.join(file), limit.to_string())
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", cgroup.dir.display()));
        if !v2 {
            // No swap here, but where there is, the limit must hold for memory and swap.
            let _ = std::fs::write(
                cgroup.dir.join("memory.memsw.limit_in_bytes"),
                limit.to_string(),
            );
        }
        Some(cgroup)
    }

    /// The file a process writes its pid to, to join.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// How drover names the limit it read: "cgroup v1 /path memory.limit_in_bytes".
    pub fn source(&self) -> String {
        if self.v2 {
            format!("cgroup v2 {} memory.max", self.path)
        } else {
            format!("cgroup v1 {} memory.limit_in_bytes", self.path)
        }
    }

    /// Processes the kernel's OOM killer killed in this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The most memory charged to the cgroup at once.
    pub fn peak(&self) -> u64 {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Only the processes this test started are in it (drover and what it started,
        // already killed by their own guards when they dropped first).
        proc::poll(crate::common::TIMEOUT, || {
            let pids = self.pids();
            for &pid in &pids {
                proc::signal(pid, nix::sys::signal::Signal::SIGKILL);
            }
            pids.is_empty()
        });
        let _ = std::fs::remove_dir(&self.dir);
    }
}
