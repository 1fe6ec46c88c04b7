//! The process table of one generation, a part that owns its state: the processes the
//! master exec'd, the workers it holds by a handle, the processes gone lately
//! ([`Recent`]) and the handles that sample php-cgi workers ([`Probes`]). A process or a
//! worker enters and leaves only through its methods, so that what hangs off a worker (its
//! probe) leaves with it. It signals nothing: the executor does, through [`Worker::signal`].

use std::collections::BTreeMap;
use std::time::Instant;

use nix::unistd::Pid;

use super::recent::Recent;
use super::worker::{Probes, Process, Worker};
use crate::master::orphans::Known;

#[derive(Default)]
pub(super) struct Table {
    /// The processes the master exec'd, its own children: signalled by pid (and a
    /// parent's process group by its pid), which no other process can take before the
    /// master reaps them, and only its loop reaps.
    processes: BTreeMap<Pid, Process>,
    /// Every worker, each verified and held by a handle ([`crate::master::pidfd`]):
    /// signalled through it only, never by a pid a pool process named.
    workers: BTreeMap<Pid, Worker>,
    /// Processes gone lately: their last lines and reports still count.
    recent: Recent,
    /// php-cgi workers being sampled, one handle per worker of the table.
    probes: Probes,
}

impl Table {
    /// The master exec'd `pid` at `now`.
    pub fn add_process(&mut self, pid: Pid, now: Instant) {
        let process = Process {
            started: now,
            retiring: false,
        };
        self.processes.insert(pid, process);
    }

    /// The exec'd process `pid` was reaped: it leaves the table, and its worker with it
    /// when it was one.
    pub fn remove_process(&mut self, pid: Pid) -> Option<(Process, Option<Worker>)> {
        let process = self.processes.remove(&pid)?;
        Some((process, self.remove_worker(pid)))
    }

    pub fn has_process(&self, pid: Pid) -> bool {
        self.processes.contains_key(&pid)
    }

    pub fn processes(&self) -> impl Iterator<Item = (Pid, &Process)> {
        self.processes.iter().map(|(&pid, process)| (pid, process))
    }

    pub fn process_pids(&self) -> Vec<Pid> {
        self.processes.keys().copied().collect()
    }

    pub fn process_count(&self) -> usize {
        self.processes.len()
    }

    /// The exec'd processes not asked to exit.
    pub fn running_processes(&self) -> usize {
        self.processes.values().filter(|p| !p.retiring).count()
    }

    /// The master asks `pid` to exit (if it exec'd it): its exit is not a failure.
    pub fn process_retiring(&mut self, pid: Pid) {
        if let Some(process) = self.processes.get_mut(&pid) {
            process.retiring = true;
        }
    }

    /// Every exec'd process is asked to exit; their pids, to signal.
    pub fn retire_processes(&mut self) -> Vec<Pid> {
        for process in self.processes.values_mut() {
            process.retiring = true;
        }
        self.process_pids()
    }

    pub fn add_worker(&mut self, pid: Pid, worker: Worker) {
        self.workers.insert(pid, worker);
    }

    /// The worker `pid` is gone: it leaves the table with its probe.
    pub fn remove_worker(&mut self, pid: Pid) -> Option<Worker> {
        self.probes.php.remove(&pid);
        self.workers.remove(&pid)
    }

    pub fn has_worker(&self, pid: Pid) -> bool {
        self.workers.contains_key(&pid)
    }

    pub fn worker(&self, pid: Pid) -> Option<&Worker> {
        self.workers.get(&pid)
    }

    pub fn worker_mut(&mut self, pid: Pid) -> Option<&mut Worker> {
        self.workers.get_mut(&pid)
    }

    pub fn workers(&self) -> impl Iterator<Item = (Pid, &Worker)> {
        self.workers.iter().map(|(&pid, worker)| (pid, worker))
    }

    pub fn workers_mut(&mut self) -> impl Iterator<Item = (Pid, &mut Worker)> {
        self.workers.iter_mut().map(|(&pid, worker)| (pid, worker))
    }

    pub fn worker_pids(&self) -> Vec<Pid> {
        self.workers.keys().copied().collect()
    }

    /// Workers serving now (not orphaned, not retiring).
    pub fn serving(&self) -> usize {
        self.workers
            .values()
            .filter(|w| !w.orphan && w.retiring.is_none())
            .count()
    }

    /// Workers in a request now (not orphaned).
    pub fn active(&self) -> u32 {
        let active = self
            .workers
            .values()
            .filter(|w| !w.orphan && w.state.busy)
            .count();
        u32::try_from(active).unwrap_or(u32::MAX)
    }

    /// Every worker and process is asked to exit, now.
    pub fn retire_all(&mut self, now: Instant) {
        for (pid, worker) in &mut self.workers {
            worker.retiring.get_or_insert(now);
            if let Some(process) = self.processes.get_mut(pid) {
                process.retiring = true;
            }
        }
    }

    /// Nothing of the pool is alive.
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty() && self.workers.is_empty()
    }

    /// What `pid` is to this generation, for telling its processes from orphans: with
    /// `has_parent`, an exec'd process that is no worker is a parent.
    pub fn knows(&self, pid: Pid, has_parent: bool) -> Known {
        let worker = self.workers.contains_key(&pid);
        let process = self.processes.contains_key(&pid);
        if process && !worker && has_parent {
            Known::Parent {
                running: crate::master::orphans::running(pid),
            }
        } else if worker || process {
            Known::Pool
        } else {
            Known::Unknown
        }
    }

    /// The role of `pid`, for tagging its output: `process_role` for an exec'd process,
    /// "worker" for a worker, the role it had for a process gone lately.
    pub fn role(&self, pid: Pid, process_role: &'static str) -> Option<&'static str> {
        if let Some(role) = self.recent.role(pid) {
            return Some(role);
        }
        if self.processes.contains_key(&pid) {
            Some(process_role)
        } else if self.workers.contains_key(&pid) {
            Some("worker")
        } else {
            None
        }
    }

    pub fn recent(&self) -> &Recent {
        &self.recent
    }

    pub fn recent_mut(&mut self) -> &mut Recent {
        &mut self.recent
    }

    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    pub fn probes_mut(&mut self) -> &mut Probes {
        &mut self.probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::pidfd::Pidfd;

    fn this_worker(now: Instant) -> Worker {
        Worker::new(
            now,
            None,
            Pidfd::open(Pid::this()).expect("a handle on this process"),
        )
    }

    #[test]
    fn a_reaped_process_leaves_with_its_worker() {
        let now = Instant::now();
        let mut table = Table::default();
        let pid = Pid::this();
        table.add_process(pid, now);
        table.add_worker(pid, this_worker(now));
        assert_eq!(table.serving(), 1);
        assert_eq!(table.knows(pid, false), Known::Pool);
        assert_eq!(table.role(pid, "zygote"), Some("zygote"));
        let (process, worker) = table.remove_process(pid).expect("the process");
        assert!(!process.retiring);
        assert!(worker.is_some());
        assert!(table.is_empty());
        assert_eq!(table.knows(pid, false), Known::Unknown);
    }

    #[test]
    fn retiring_counts_no_longer_serving() {
        let now = Instant::now();
        let mut table = Table::default();
        let pid = Pid::this();
        table.add_process(pid, now);
        table.add_worker(pid, this_worker(now));
        table.retire_all(now);
        assert_eq!(table.serving(), 0);
        assert_eq!(table.running_processes(), 0);
        assert!(table.worker(pid).is_some_and(|w| w.retiring == Some(now)));
    }
}
