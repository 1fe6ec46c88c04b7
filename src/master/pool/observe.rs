//! What each worker of a pool is doing, refreshed every tick: the workers a php-cgi parent
//! forked (read from /proc), busy or idle and the request in hand (php-cgi: sampled from
//! its memory; Python: its scoreboard slot; commands: /proc/PID/syscall), and the resident
//! memory when `max_memory` is set. A php-cgi worker that runs no PHP but is blocked reading
//! a connection is waiting for its client's request: busy, "Reading", for as long as it
//! reads that same connection (see [`Reading`]).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::unistd::Pid;

use super::PoolRun;
use super::worker::{Reading, RequestInfo, Worker};
use crate::master::exit::ExitCause;
use crate::master::pidfd;
use crate::pm;
use crate::runtime::kind::Probe;
use crate::runtime::php::sample::{self, Sampler, idle_by_syscall};
use crate::scoreboard;

impl PoolRun {
    /// Refreshes the worker list of php-cgi parents and every worker's state.
    pub fn observe(&mut self, now: Instant, sampler: &mut Sampler) {
        self.find_parent_workers(now);
        self.forget_vanished_orphans(now);
        let slots: HashMap<Pid, scoreboard::SlotView> = match self.handed.scoreboard() {
            Some(board) => board.snapshot().into_iter().map(|v| (v.pid, v)).collect(),
            None => HashMap::new(),
        };
        let now_us = scoreboard::now_us();
        let want_rss = self.config.pm.max_memory.is_some();
        let probe = self.launch.kind.probe();
        let pids = self.table.worker_pids();
        for pid in pids {
            let observed = match probe {
                Probe::Scoreboard => slots.get(&pid).map(|view| from_slot(view, now, now_us)),
                Probe::PhpMemory => self.sample_php(pid, now, sampler),
                Probe::Syscall => idle_by_syscall(pid).map(|idle| (!idle, None, None)),
                Probe::Nothing => None,
            };
            // Workers probed from outside look idle between ticks even when they serve
            // short requests all the time: a worker that made syscalls since the last tick
            // was working, so it is not idle since before. A scoreboard sees every request.
            let activity = match probe {
                Probe::Scoreboard | Probe::Nothing => None,
                Probe::PhpMemory | Probe::Syscall => io_syscalls(pid),
            };
            // Only php-cgi: its memory says whether PHP runs, so a read outside of that is
            // the request's. A [command] worker blocked reading a socket may as well be in
            // its request, waiting on a database.
            let reading = match (probe, &observed) {
                (Probe::PhpMemory, Some((false, _, _))) => sample::reading(pid),
                _ => None,
            };
            if let Some(worker) = self.table.worker_mut(pid) {
                update(worker, probe, observed, activity, reading, now);
                worker.state.rss = if want_rss {
                    crate::runtime::resident_memory(Some(pid))
                } else {
                    None
                };
            }
        }
        let active = self.table.active();
        self.counters.max_active = self.counters.max_active.max(active);
        self.listen_queue();
    }

    /// php-cgi: read the worker's globals; an unknown build falls back to /proc (once).
    fn sample_php(&mut self, pid: Pid, now: Instant, sampler: &mut Sampler) -> Option<Observation> {
        if self.table.probes().fallback {
            return idle_by_syscall(pid).map(|idle| (!idle, None, None));
        }
        if let Entry::Vacant(vacant) = self.table.probes_mut().php.entry(pid) {
            match sampler.attach(pid) {
                Ok(handle) => {
                    vacant.insert(handle);
                }
                Err(err) if err.is_unknown_build() => {
                    tracing::warn!(
                        "pool {}: cannot read php-cgi's state ({err}); busy and idle come from /proc/PID/syscall, without request details",
                        self.config.name
                    );
                    self.table.probes_mut().fallback = true;
                    return idle_by_syscall(pid).map(|idle| (!idle, None, None));
                }
                Err(_) => return None,
            }
        }
        let sample = self.table.probes().php.get(&pid)?.sample().ok()?;
        let since = sample.request_time.and_then(|t| unix_to_instant(t, now));
        let request = sample.busy.then(|| {
            RequestInfo::untrusted(
                sample.method.as_deref().unwrap_or_default(),
                sample.uri.as_deref().unwrap_or_default(),
                sample.query.as_deref().unwrap_or_default(),
                sample.script.as_deref().unwrap_or_default(),
                "",
            )
        });
        Some((sample.busy, since.filter(|_| sample.busy), request))
    }

    /// The PHP stack of a busy php-cgi worker, for the log of a killed request.
    pub fn php_stack(&self, pid: Pid, depth: usize) -> Option<sample::Stack> {
        self.table.probes().php.get(&pid)?.stack(depth).ok()
    }

    /// php-cgi parents: which workers each has now. Logs new ones, and those the parent
    /// reaped (whose status only the parent saw).
    fn find_parent_workers(&mut self, now: Instant) {
        if !self.launch.kind.watches_parent() {
            return;
        }
        let parents = self.table.process_pids();
        for parent in parents {
            let Some(current) = children_of(parent) else {
                continue;
            };
            for &pid in &current {
                if self.table.has_worker(pid) {
                    continue;
                }
                // Read from the kernel a moment ago; checked again with the handle held,
                // as the child may have gone and its pid been taken since.
                match pidfd::child_of(pid, parent) {
                    Ok(handle) => {
                        tracing::info!("pool {}: worker {pid} started", self.config.name);
                        self.table
                            .add_worker(pid, Worker::new(now, Some(parent), handle));
                    }
                    Err(err) => tracing::debug!(
                        "pool {}: {pid}, a child of {parent} a moment ago: not taken ({err})",
                        self.config.name
                    ),
                }
            }
            let gone: Vec<Pid> = self
                .table
                .workers()
                .filter(|(pid, w)| w.parent == Some(parent) && !w.orphan && !current.contains(pid))
                .map(|(pid, _)| pid)
                .collect();
            for pid in gone {
                if let Some(worker) = self.table.remove_worker(pid) {
                    self.log_worker_exit(pid, &worker, ExitCause::SeenByParent, now);
                }
            }
        }
    }

    /// Orphans that no longer exist (reaped by their parent just before it died). A zygote
    /// reported such an exit, with its cause: its last lines get a moment to arrive.
    fn forget_vanished_orphans(&mut self, now: Instant) {
        const REPORT_GRACE: Duration = Duration::from_secs(1);
        let reports = self.launch.kind.parent_reports();
        let recent = self.table.recent();
        let parent_just_gone = |parent: Option<Pid>| {
            parent.is_some_and(|parent| recent.gone_within(parent, now, REPORT_GRACE))
        };
        let orphans: Vec<pm::Orphan> = self
            .table
            .workers()
            .filter(|(_, w)| w.orphan)
            .map(|(pid, w)| pm::Orphan {
                pid,
                alive: w.alive(),
                parent_gone_lately: parent_just_gone(w.parent),
            })
            .collect();
        for pid in pm::forgotten_orphans(&orphans, reports) {
            if let Some(worker) = self.table.remove_worker(pid) {
                self.log_worker_exit(pid, &worker, ExitCause::SeenByParent, now);
            }
        }
    }
}

/// (busy, request start if known, request if known)
type Observation = (bool, Option<Instant>, Option<RequestInfo>);

/// A worker's state from this tick's `observed`, its syscall counts (`activity`: all I/O,
/// writes) and the connection it is `reading` (a php-cgi worker waiting for its request).
fn update(
    worker: &mut Worker,
    probe: Probe,
    observed: Option<Observation>,
    activity: Option<(u64, u64)>,
    reading: Option<u64>,
    now: Instant,
) {
    worker.served |= past_start(probe, observed.as_ref(), reading.is_some());
    if let Some((count, _)) = activity {
        if worker.syscalls.is_some_and(|before| before != count) && !worker.state.busy {
            worker.state.since = now;
        }
        worker.syscalls = Some(count);
    }
    let writes = activity.map_or(0, |(_, writes)| writes);
    let was_reading = worker.state.reading.take();
    if let Some(inode) = reading {
        // The same wait goes on: same connection, nothing written since.
        let same = was_reading.filter(|r| r.inode == inode && r.writes == writes);
        if same.is_none() || !worker.state.busy {
            worker.state.since = now;
        }
        worker.state.busy = true;
        worker.state.request = None;
        worker.state.reading = Some(same.unwrap_or(Reading { inode, writes }));
        worker.state.waited = true;
    } else if let Some((busy, since, request)) = observed {
        let was_busy = worker.state.busy;
        worker.state.set_busy(busy, now);
        // A request's start read again (php-cgi's is a wall-clock time converted
        // anew each tick) stays the same Instant, so that the request keeps one
        // identity (one slowlog entry).
        // A request that was being read goes on with its script: the wait counts
        // toward request_terminate_timeout, so the start stays the wait's.
        if let Some(since) = since.filter(|_| !(was_busy && busy && worker.state.waited)) {
            let moved = since.max(worker.state.since) - since.min(worker.state.since);
            if !(was_busy && busy && moved < Duration::from_millis(100)) {
                worker.state.since = since;
            }
        }
        if busy {
            worker.state.request = request.or(worker.state.request.take());
        }
    }
}

/// Whether an observation shows a worker the master exec'd past its start: php-cgi's
/// memory says when PHP runs a request (or reads one); /proc says when a process waits in
/// accept() (and nothing before it is known to be a request's).
fn past_start(probe: Probe, observed: Option<&Observation>, reading: bool) -> bool {
    match (probe, observed) {
        (Probe::PhpMemory, Some((busy, _, _))) => *busy || reading,
        (Probe::Syscall, Some((busy, _, _))) => !*busy,
        _ => false,
    }
}

fn from_slot(view: &scoreboard::SlotView, now: Instant, now_us: u64) -> Observation {
    let busy = view.state.is_busy();
    let request = view
        .request
        .as_ref()
        .map(|r| RequestInfo::untrusted(&r.method, &r.uri, &r.query, &r.script, &r.request_id));
    // A slot just claimed has no time yet: keep what the master saw (its start).
    let since = (view.since_us != 0).then(|| view.since(now, now_us));
    (busy, since, request)
}

/// A Unix time from PHP (`SG(global_request_time)`) as an Instant on our clock.
fn unix_to_instant(unix: f64, now: Instant) -> Option<Instant> {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    let ago = wall - unix;
    if !(0.0..86_400.0).contains(&ago) {
        return None;
    }
    now.checked_sub(Duration::from_secs_f64(ago))
}

/// Read and write syscalls the process has made (/proc/PID/io): a cheap sign of activity;
/// and the write syscalls alone.
fn io_syscalls(pid: Pid) -> Option<(u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let writes = field("syscw:")?;
    Some((field("syscr:")? + writes, writes))
}

/// The children of `pid` from /proc (Linux ≥ 3.5 with CONFIG_PROC_CHILDREN), or by
/// scanning every process's parent where that file is missing. `None` if `pid` is gone.
fn children_of(pid: Pid) -> Option<Vec<Pid>> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(
            text.split_whitespace()
                .filter_map(|s| s.parse().ok())
                .map(Pid::from_raw)
                .collect(),
        ),
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound
                && std::fs::metadata(format!("/proc/{pid}")).is_ok() =>
        {
            Some(scan_children(pid))
        }
        Err(_) => None,
    }
}

fn scan_children(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    stat.rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse::<i32>()
                        .ok()
                })
                == Some(parent.as_raw())
        })
        .map(Pid::from_raw)
        .collect()
}
