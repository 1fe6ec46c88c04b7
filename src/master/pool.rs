//! One pool as the master runs it: its listener, its processes and workers, its backoff.
//!
//! With a php-cgi parent ([`Layout::Parent`]) the master execs one process and *sees* its
//! workers by reading the parent's children from /proc each tick; when the parent dies
//! the workers are re-parented to the master (a child subreaper), which then reaps them
//! and retires them. With [`Layout::Workers`] every process is a worker.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::exit::{lifetime, ExitCause};
use super::spawn::spawn;
use crate::config::{Pool, Runtime};
use crate::runtime::python::{Report, EXIT_APP_LOAD};
use nix::sys::wait::WaitStatus;
use crate::listener::Listener;
use crate::pm::{self, Backoff, Respawn};
use crate::runtime::{self, Layout};

/// A process the master exec'd: a worker, or a php-cgi parent of workers.
#[derive(Debug)]
struct Process {
    started: Instant,
    /// The master asked it to exit: its exit is not a failure.
    retiring: bool,
}

/// A worker forked by a php-cgi parent.
#[derive(Debug)]
struct Worker {
    started: Instant,
    parent: Pid,
    /// Its parent is gone: the master is its parent now and has asked it to finish.
    orphan: bool,
}

pub struct PoolRun {
    pub config: Pool,
    pub listener: Listener,
    /// The write end of the pool's output socket, given to every process as fds 1 and 2.
    output: OwnedFd,
    layout: Layout,
    processes: BTreeMap<Pid, Process>,
    workers: BTreeMap<Pid, Worker>,
    backoff: Backoff,
    /// After a start-up failure: no spawn before this.
    hold_until: Option<Instant>,
    /// The app cannot load: the pool runs nothing until drover restarts.
    stopped: bool,
}

/// What the master learns from one reaped pid.
pub enum Reaped {
    NotOurs,
    Exit { crash: bool },
}

impl PoolRun {
    pub fn new(config: Pool, listener: Listener, output: OwnedFd) -> Result<PoolRun, runtime::RuntimeError> {
        let layout = runtime::launch(&config, 0)?.layout;
        Ok(PoolRun {
            config,
            listener,
            output,
            layout,
            processes: BTreeMap::new(),
            workers: BTreeMap::new(),
            backoff: Backoff::default(),
            hold_until: None,
            stopped: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Workers seen running now.
    pub fn workers(&self) -> usize {
        match self.layout {
            Layout::Parent { .. } => self.workers.values().filter(|w| !w.orphan).count(),
            Layout::Workers { .. } => self.processes.values().filter(|p| !p.retiring).count(),
        }
    }

    pub fn target_workers(&self) -> usize {
        self.layout.workers() as usize
    }

    /// Running all its workers, or stopped for good: nothing more to wait for at start.
    pub fn settled(&self) -> bool {
        self.stopped || self.workers() >= self.target_workers()
    }

    /// The name of the process that forks this pool's workers, for the log.
    fn parent_name(&self) -> &'static str {
        match self.config.runtime {
            Runtime::Python(_) => "python zygote",
            _ => "php-cgi parent",
        }
    }

    /// Python zygotes report their workers' starts and exits; php-cgi parents are watched.
    fn reports(&self) -> bool {
        matches!(self.config.runtime, Runtime::Python(_))
    }

    /// Every pid of this pool still alive (for stop).
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty() && self.workers.is_empty()
    }

    /// Starts missing processes, unless a start-up failure holds the pool back.
    pub fn maintain(&mut self, now: Instant) {
        if self.stopped {
            return;
        }
        if self.hold_until.is_some_and(|until| now < until) {
            return;
        }
        self.hold_until = None;
        let running = self.processes.values().filter(|p| !p.retiring).count();
        for _ in running..self.layout.processes() as usize {
            if !self.spawn_one(now) {
                break;
            }
        }
    }

    fn spawn_one(&mut self, now: Instant) -> bool {
        let limit = pm::max_requests(self.config.pm.max_requests, self.config.pm.max_requests_jitter, |jitter| {
            rand::random_range(0..=jitter)
        });
        let result = runtime::launch(&self.config, limit)
            .map_err(|e| e.to_string())
            .and_then(|launch| {
                let fd0 = self.listener.dup().map_err(|e| e.to_string())?;
                spawn(&launch.spec, fd0, &self.output)
                    .map_err(|e| format!("cannot start {}: {e}", launch.spec.program.display()))
            });
        match result {
            Ok(pid) => {
                self.processes.insert(pid, Process { started: now, retiring: false });
                match self.layout {
                    // A Python zygote draws each worker's limit itself.
                    Layout::Parent { workers } if self.reports() => tracing::info!(
                        "pool {}: {} {pid} started ({workers} workers)",
                        self.name(),
                        self.parent_name()
                    ),
                    Layout::Parent { workers } => tracing::info!(
                        "pool {}: {} {pid} started ({workers} workers, max_requests {limit})",
                        self.name(),
                        self.parent_name()
                    ),
                    Layout::Workers { .. } => tracing::info!("pool {}: worker {pid} started", self.name()),
                }
                true
            }
            Err(reason) => {
                self.hold(now, Duration::ZERO, &reason);
                false
            }
        }
    }

    /// Records a start-up failure and holds spawning back as the backoff says.
    fn hold(&mut self, now: Instant, lived: Duration, reason: &str) {
        if let Respawn::After { delay, failures } = self.backoff.on_exit(lived, false) {
            tracing::error!(
                "pool {}: failed to start ({reason}); retrying in {}s ({failures} failure{} in a row)",
                self.name(),
                delay.as_secs(),
                if failures == 1 { "" } else { "s" }
            );
            self.hold_until = Some(now + delay);
        }
    }

    /// Handles one reaped pid if it belongs to this pool.
    pub fn on_reaped(&mut self, pid: Pid, cause: ExitCause, now: Instant) -> Reaped {
        if let Some(process) = self.processes.remove(&pid) {
            let lived = now.duration_since(process.started);
            let what = match self.layout {
                Layout::Parent { .. } => self.parent_name(),
                Layout::Workers { .. } => "worker",
            };
            if process.retiring {
                tracing::info!("pool {}: {what} {pid} exited {cause} after {}", self.name(), lifetime(lived));
            } else {
                tracing::warn!("pool {}: {what} {pid} exited {cause} after {}", self.name(), lifetime(lived));
            }
            if matches!(self.layout, Layout::Parent { .. }) {
                self.orphan_workers_of(pid, !process.retiring);
            }
            if self.reports() && cause == ExitCause::Code(i32::from(EXIT_APP_LOAD)) {
                tracing::error!(
                    "pool {}: the app failed to load (traceback above); the pool is stopped until drover restarts",
                    self.name()
                );
                self.stopped = true;
            } else if !process.retiring {
                let reason = format!("{what} {pid} exited {cause} after {}", lifetime(lived));
                self.hold(now, lived, &reason);
            }
            return Reaped::Exit { crash: cause.is_crash() };
        }
        if let Some(worker) = self.workers.remove(&pid) {
            self.log_worker_exit(pid, &worker, cause, now);
            return Reaped::Exit { crash: cause.is_crash() };
        }
        Reaped::NotOurs
    }

    /// The parent died: its workers are the master's now. After a crash a new parent
    /// brings a full set, so they are retired (`retire`); on a stop the closed listener
    /// ends them after their last request.
    fn orphan_workers_of(&mut self, parent: Pid, retire: bool) {
        for (&pid, worker) in self.workers.iter_mut().filter(|(_, w)| w.parent == parent) {
            worker.orphan = true;
            if retire {
                let _ = kill(pid, Signal::SIGTERM);
            }
        }
    }

    fn log_worker_exit(&self, pid: Pid, worker: &Worker, cause: ExitCause, now: Instant) {
        let lived = lifetime(now.duration_since(worker.started));
        let level_warn = !matches!(cause, ExitCause::Code(0) | ExitCause::SeenByParent) && !worker.orphan;
        if level_warn {
            tracing::warn!("pool {}: worker {pid} exited {cause} after {lived}", self.name());
        } else {
            tracing::info!("pool {}: worker {pid} exited {cause} after {lived}", self.name());
        }
    }

    /// Reads which workers each php-cgi parent has now: logs new ones, and those its
    /// parent reaped (whose status only the parent saw). Orphans that no longer exist
    /// (reaped by the parent just before it died) are dropped too.
    pub fn observe_workers(&mut self, now: Instant) {
        if !matches!(self.layout, Layout::Parent { .. }) || self.reports() {
            self.forget_vanished_orphans(now);
            return;
        }
        for &parent in self.processes.keys() {
            let Some(current) = children_of(parent) else { continue };
            for &pid in &current {
                if !self.workers.contains_key(&pid) {
                    tracing::info!("pool {}: worker {pid} started", self.config.name);
                    self.workers.insert(pid, Worker { started: now, parent, orphan: false });
                }
            }
            let gone: Vec<Pid> = self
                .workers
                .iter()
                .filter(|(pid, w)| w.parent == parent && !w.orphan && !current.contains(pid))
                .map(|(&pid, _)| pid)
                .collect();
            for pid in gone {
                if let Some(worker) = self.workers.remove(&pid) {
                    self.log_worker_exit(pid, &worker, ExitCause::SeenByParent, now);
                }
            }
        }
        self.forget_vanished_orphans(now);
    }

    fn forget_vanished_orphans(&mut self, now: Instant) {
        let vanished: Vec<Pid> =
            self.workers.iter().filter(|(pid, w)| w.orphan && kill(**pid, None).is_err()).map(|(pid, _)| *pid).collect();
        for pid in vanished {
            if let Some(worker) = self.workers.remove(&pid) {
                self.log_worker_exit(pid, &worker, ExitCause::SeenByParent, now);
            }
        }
    }

    /// Graceful stop: no new connection reaches the pool, every worker finishes what it
    /// has. A php-cgi parent is killed first (it serves nothing, and would replace the
    /// workers that exit); then the listener is shut down for reading: connections already
    /// queued on a unix socket are still accepted and served, new ones are refused, and a
    /// worker whose accept() then fails exits on its own, as php-fpm's children do when
    /// they close the listener on SIGQUIT. No signal interrupts a running request (a
    /// SIGTERM would cut php-cgi's sleep() and I/O short).
    pub fn stop_accepting(&mut self, now: Instant) {
        if matches!(self.layout, Layout::Parent { .. }) {
            let parents: Vec<Pid> = self.processes.keys().copied().collect();
            for pid in parents {
                if let Some(process) = self.processes.get_mut(&pid) {
                    process.retiring = true;
                }
                let _ = kill(pid, Signal::SIGKILL);
                // It must be gone before the listener closes, or it would fork replacements
                // for the workers that exit. SIGKILL makes this wait short.
                if let Ok(status) = nix::sys::wait::waitpid(pid, None) {
                    if let Some(cause) = ExitCause::from_status(status) {
                        self.on_reaped(pid, cause, now);
                    }
                }
            }
        }
        if let Err(err) = nix::sys::socket::shutdown(self.listener.fd.as_raw_fd(), nix::sys::socket::Shutdown::Read) {
            tracing::error!("pool {}: cannot shut down the listener: {err}", self.name());
        }
    }

    /// Asks every process to finish (SIGTERM: php-cgi passes it to its workers). Their
    /// exits are expected, and replaced.
    pub fn retire_all(&mut self) {
        for (&pid, process) in &mut self.processes {
            process.retiring = true;
            let _ = kill(pid, Signal::SIGTERM);
        }
        for &pid in self.workers.keys() {
            let _ = kill(pid, Signal::SIGTERM);
        }
    }

    /// SIGKILL to every process group and worker of the pool.
    pub fn kill_all(&mut self) {
        for (&pid, process) in &mut self.processes {
            process.retiring = true;
            let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        }
        for &pid in self.workers.keys() {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }

    /// A line from the zygote that reports a worker's start or exit (`Some`: it was a report,
    /// with the exit's nature). `None` for any other line, or one from another process:
    /// only the zygote's reports are trusted.
    pub fn on_report(&mut self, from: Pid, line: &str, now: Instant) -> Option<Reaped> {
        if !self.reports() || !self.processes.contains_key(&from) {
            return None;
        }
        match Report::parse(line) {
            Some(Report::Started { pid }) => {
                tracing::info!("pool {}: worker {pid} started", self.config.name);
                self.workers.insert(pid, Worker { started: now, parent: from, orphan: false });
            }
            Some(Report::Exited { pid, status, lived }) => {
                let cause = WaitStatus::from_raw(pid, status).ok().and_then(ExitCause::from_status);
                let worker = self.workers.remove(&pid);
                let started = worker.as_ref().map_or(now.checked_sub(lived).unwrap_or(now), |w| w.started);
                let worker = Worker { started, parent: from, orphan: false };
                let cause = cause.unwrap_or(ExitCause::SeenByParent);
                self.log_worker_exit(pid, &worker, cause, now);
                return Some(Reaped::Exit { crash: cause.is_crash() });
            }
            None => return None,
        }
        Some(Reaped::NotOurs)
    }

    /// The role of a pid in this pool, for tagging its output.
    pub fn role(&self, pid: Pid) -> Option<&'static str> {
        if self.processes.contains_key(&pid) {
            Some(match self.layout {
                Layout::Parent { .. } => self.parent_name(),
                Layout::Workers { .. } => "worker",
            })
        } else if self.workers.contains_key(&pid) {
            Some("worker")
        } else {
            None
        }
    }
}

/// The children of `pid` from /proc (Linux ≥ 3.5 with CONFIG_PROC_CHILDREN), or by
/// scanning every process's parent where that file is missing. `None` if `pid` is gone.
fn children_of(pid: Pid) -> Option<Vec<Pid>> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text.split_whitespace().filter_map(|s| s.parse().ok()).map(Pid::from_raw).collect()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && std::fs::metadata(format!("/proc/{pid}")).is_ok() => {
            Some(scan_children(pid))
        }
        Err(_) => None,
    }
}

fn scan_children(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse::<i32>().ok())
                == Some(parent.as_raw())
        })
        .map(Pid::from_raw)
        .collect()
}
