//! The pool's status page data ([`PoolStatus`]): php-fpm's fields where drover can know
//! them, plus the configured limits, recycling by cause and each worker's live RSS.

use std::time::{Instant, SystemTime};

use super::PoolRun;
use super::worker::Worker;
use crate::config::PmMode;
use crate::control::{Limits, PoolStatus, Recycled, WorkerStatus};
use crate::master::totals::Totals;
use crate::scoreboard;

impl PoolRun {
    /// Whether this generation's workers count the connections they accept (a scoreboard's
    /// runtimes: drover-php, Python), which `queue_timeout` needs.
    pub fn counts_connections(&self) -> bool {
        self.handed.scoreboard().is_some()
    }

    /// Connections waiting for a worker now; every reading also feeds "max listen queue".
    pub fn listen_queue(&self) -> Option<u32> {
        use std::os::fd::AsFd;
        let waiting = crate::listener::queue::queue(self.listener.fd.as_fd(), &self.listener.addr)
            .map(|(waiting, _)| waiting)?;
        let max = &self.counters.max_listen_queue;
        max.set(max.get().max(waiting));
        Some(waiting)
    }

    pub fn status(&self, now: Instant) -> PoolStatus {
        let slots: std::collections::HashMap<i32, scoreboard::SlotView> = self
            .handed
            .scoreboard()
            .map(|board| {
                board
                    .snapshot()
                    .into_iter()
                    .map(|v| (v.pid.as_raw(), v))
                    .collect()
            })
            .unwrap_or_default();
        let serving: Vec<_> = self.table.workers().filter(|(_, w)| !w.orphan).collect();
        let active = serving.iter().filter(|(_, w)| w.state.busy).count() as u32;
        let total = serving.len() as u32;
        let since = now.saturating_duration_since(self.counters.born);
        let pm = &self.config.pm;
        let counters = self.sizing.counters();
        let workers = serving
            .iter()
            .map(|&(pid, w)| worker_status(pid, w, slots.get(&pid.as_raw()), now))
            .collect();
        PoolStatus {
            pool: self.config.name.clone(),
            process_manager: self.config.pm.mode.as_str().to_owned(),
            runtime: self.launch.kind.runtime_name().to_owned(),
            start_time: SystemTime::now() - since,
            start_since: since,
            // Only a scoreboard counts requests: its workers, as each takes one.
            accepted_conn: self
                .handed
                .scoreboard()
                .map(|board| board.pool().view().accepted),
            listen_queue: self.listen_queue(),
            max_listen_queue: Some(self.counters.max_listen_queue.get()),
            listen_queue_len: u32::try_from(self.config.listen_backlog).unwrap_or(0),
            idle_processes: total - active,
            active_processes: active,
            total_processes: total,
            max_active_processes: self.counters.max_active.max(active),
            max_children_reached: counters.max_children_reached,
            slow_requests: self.counters.slow_requests,
            limits: Limits {
                // The live cap: a memory-sized pool's computed count.
                max_children: self.sizing.max_children(),
                start_servers: if pm.mode == PmMode::Dynamic {
                    pm.start_servers
                } else {
                    0
                },
                min_spare_servers: pm.min_spare_servers,
                max_spare_servers: pm.max_spare_servers,
                max_requests: pm.max_requests,
                max_memory: pm.max_memory,
                request_terminate_timeout: self.config.request_terminate_timeout,
                request_slowlog_timeout: self.config.request_slowlog_timeout,
            },
            recycled: self.recycled(),
            requests: self.handed.scoreboard().map(|board| board.pool().view()),
            queue: crate::control::QueueStatus {
                timeout: self.config.queue_timeout,
                ..Default::default()
            },
            workers,
            memory: self.memory_status(),
            backoff: self.life.startup().status(now),
        }
    }
}

impl PoolRun {
    /// What this generation counted so far, for its pool's totals
    /// ([`crate::master::totals`]): the counters of [`PoolRun::status`], without its
    /// per-worker reads.
    pub fn totals(&self) -> Totals {
        let counters = self.sizing.counters();
        let requests = self.handed.scoreboard().map(|board| board.pool().view());
        Totals {
            born: Some(self.counters.born),
            accepted_conn: requests.as_ref().map(|view| view.accepted),
            max_listen_queue: Some(self.counters.max_listen_queue.get()),
            max_active_processes: self.counters.max_active,
            max_children_reached: counters.max_children_reached,
            slow_requests: self.counters.slow_requests,
            recycled: self.recycled(),
            requests,
        }
    }

    fn recycled(&self) -> Recycled {
        let counters = self.sizing.counters();
        Recycled {
            max_requests: self.counters.clean_exits,
            max_memory: counters.retired_max_memory,
            terminate: counters.killed_request_timeout,
            crash: self.counters.crash_exits,
            idle: counters.retired_max_spare + counters.retired_idle_timeout,
            reload: self.counters.reload_exits,
            max_lifetime: counters.retired_max_lifetime,
        }
    }
}

/// One worker's line of the status page; `slot`: its scoreboard slot, when it has one.
fn worker_status(
    pid: nix::unistd::Pid,
    w: &Worker,
    slot: Option<&scoreboard::SlotView>,
    now: Instant,
) -> WorkerStatus {
    let started = SystemTime::now() - now.saturating_duration_since(w.started);
    let request = w.state.request.as_ref().filter(|_| w.state.busy);
    WorkerStatus {
        pid: pid.as_raw(),
        state: state_word(slot, w.state.busy, w.state.reading.is_some()).to_owned(),
        start_time: started,
        start_since: now.saturating_duration_since(w.started),
        requests: slot.map(|s| s.requests),
        request_duration: w
            .state
            .busy
            .then(|| now.saturating_duration_since(w.state.since)),
        request_method: request.map(|r| r.method.clone()),
        request_uri: request.map(|r| r.uri.clone()),
        query_string: request.map(|r| r.query.clone()),
        script: request.map(|r| r.script.clone()),
        request_id: request
            .filter(|r| !r.request_id.is_empty())
            .map(|r| r.request_id.clone()),
        rss: crate::runtime::resident_memory(Some(pid)),
        last_request_duration: slot.map(|s| s.last_duration),
        last_request_cpu: slot.map(|s| s.last_cpu),
        last_request_memory: slot.and_then(|s| s.last_memory),
    }
}

/// php-fpm's word for a worker's state: from its scoreboard slot when it has one (Python),
/// so that a worker waiting for a slow client's request reads "Reading headers".
fn state_word(slot: Option<&scoreboard::SlotView>, busy: bool, reading: bool) -> &'static str {
    match slot.map(|s| s.state) {
        Some(scoreboard::State::Starting) => "Starting",
        Some(scoreboard::State::Idle) => "Idle",
        Some(scoreboard::State::Reading) => "Reading headers",
        Some(scoreboard::State::Running) => "Running",
        Some(scoreboard::State::Finishing) => "Finishing",
        // php-cgi, seen from outside: blocked reading its connection, running no PHP.
        None if busy && reading => "Reading headers",
        None if busy => "Running",
        None => "Idle",
    }
}

/// What a generation counts for its status page, since it started (a pool's status adds
/// up its generations': [`crate::master::totals`]). The policy's own
/// counts (retired for spare or memory, killed past a timeout, max_children reached) are
/// kept by the policy ([`crate::pm::PolicyState`]), which updates them as it decides.
#[derive(Debug)]
pub struct Counters {
    /// When this generation started (status: start time, start since).
    pub born: Instant,
    /// The most workers busy at once (max active processes).
    pub max_active: u32,
    /// The longest listen queue seen, on a tick or by a status request (max listen queue);
    /// a Cell because a status read updates it too.
    pub max_listen_queue: std::cell::Cell<u32>,
    /// Requests that ran past `request_slowlog_timeout` (slow requests).
    pub slow_requests: u64,
    /// Worker exits with code 0 not asked for: php-cgi or Python reaching max_requests.
    pub clean_exits: u64,
    /// Worker deaths by a signal the master did not send, or exits non-zero.
    pub crash_exits: u64,
    /// Workers that ended retired by a reload (their generation drained).
    pub reload_exits: u64,
}

impl Counters {
    pub fn new(born: Instant) -> Counters {
        Counters {
            born,
            max_active: 0,
            max_listen_queue: std::cell::Cell::new(0),
            slow_requests: 0,
            clean_exits: 0,
            crash_exits: 0,
            reload_exits: 0,
        }
    }
}
