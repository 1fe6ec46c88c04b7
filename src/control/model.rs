//! What the status page shows, as plain data: the master fills it from its pools, the
//! renderers ([`super::render`]) turn it into text, JSON or OpenMetrics. php-fpm's pool and
//! per-process fields, plus what php-fpm lacks (configured limits, recycling by cause, live
//! RSS, the listen queue of unix sockets).

use std::time::{Duration, SystemTime};

use crate::scoreboard::PoolView;

#[derive(Debug, Clone, PartialEq)]
pub struct PoolStatus {
    pub pool: String,
    /// "static", "dynamic" or "ondemand".
    pub process_manager: String,
    /// "php", "python" or "command".
    pub runtime: String,
    pub start_time: SystemTime,
    pub start_since: Duration,
    /// Requests accepted since start, where drover can count them (Python: from the
    /// scoreboard); None where it cannot (php-cgi and command workers).
    pub accepted_conn: Option<u64>,
    /// Connections waiting in the listen queue now; None when unknown.
    pub listen_queue: Option<u32>,
    /// The highest listen_queue seen since start.
    pub max_listen_queue: Option<u32>,
    /// The listen backlog (listen_backlog).
    pub listen_queue_len: u32,
    pub idle_processes: u32,
    pub active_processes: u32,
    pub total_processes: u32,
    pub max_active_processes: u32,
    pub max_children_reached: u64,
    pub slow_requests: u64,
    pub limits: Limits,
    pub recycled: Recycled,
    /// Counted by the workers at the end of every request (the scoreboard's pool area):
    /// the request-duration histogram and responses by status class. None where the
    /// workers cannot count them (php-cgi, command): left out, never shown as 0.
    pub requests: Option<PoolView>,
    /// `queue_timeout`: what the master sheds, and the oldest wait it sees.
    pub queue: QueueStatus,
    pub workers: Vec<WorkerStatus>,
    /// Sizing by memory, for pools with `max_children = "auto"` or `max_pool_memory`.
    pub memory: Option<MemoryStatus>,
    /// Workers (or parents) that failed before their first request, and the back-off.
    pub backoff: BackoffStatus,
}

/// Start-up failures: processes that died before their first request, each of which holds
/// the next start back (doubling from 1 s to 60 s). A worker that dies after it took a
/// request is a crash (`recycled.crash`), never one of these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackoffStatus {
    /// Since the pool started.
    pub startup_failures: u64,
    /// Starts are held back for this long still; None: not held.
    pub holding: Option<Duration>,
    /// The last failure's cause, as the log says it.
    pub last_cause: Option<String>,
}

/// A memory-sized pool's cap and what it was computed from (bytes; `None`: not known yet).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MemoryStatus {
    /// `max_children = "auto"`: `limits.max_children` is the computed cap.
    pub auto: bool,
    /// The memory the pool may use, and where it was read ("cgroup v1 /x memory.limit_in_bytes").
    pub limit: Option<u64>,
    pub limit_source: Option<String>,
    pub reserve: Option<u64>,
    /// What the workers may use: the limit less the reserve and the parents' PSS.
    pub budget: Option<u64>,
    /// One worker's size as the cap counts it, and whence: "measured", "max_memory" or
    /// "starting estimate".
    pub worker_memory: Option<u64>,
    pub worker_memory_source: Option<&'static str>,
    /// Warmed workers whose PSS was measured.
    pub measured_workers: u32,
    /// The PSS of every process of the pool at the last sample.
    pub pool_pss: Option<u64>,
    pub max_pool_memory: Option<u64>,
    /// Idle workers retired for the pool's memory (max_pool_memory, the auto cap).
    pub retired: u64,
}

/// The listen queue as `queue_timeout` sees it (src/master/shed.rs), for an autoscaler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStatus {
    /// The pool's `queue_timeout`; None: off.
    pub timeout: Option<Duration>,
    /// Connections the master answered 503 since the pool started (every generation).
    pub timed_out: u64,
    /// The oldest waiting connection has waited at least this long; None where the workers
    /// do not count their accepts (php-cgi, command), Some(0) when nothing waits.
    pub oldest_wait: Option<Duration>,
    /// The estimated waits of the connections that left the queue (taken by a worker or
    /// answered 503), from the master's samples ([`crate::pm::queue`]); None where the
    /// workers do not count their accepts.
    pub waits: Option<crate::pm::queue::Waits>,
}

/// The pool's configured limits (php-fpm's status lacks them: php-src#16221).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_children: u32,
    pub start_servers: u32,
    pub min_spare_servers: u32,
    pub max_spare_servers: u32,
    pub max_requests: u32,
    pub max_memory: Option<u64>,
    pub request_terminate_timeout: Option<Duration>,
    pub request_slowlog_timeout: Option<Duration>,
}

/// Workers that ended, by cause, since start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recycled {
    pub max_requests: u64,
    pub max_memory: u64,
    pub terminate: u64,
    pub crash: u64,
    /// Retired by the pm (above max_spare_servers, idle past process_idle_timeout).
    pub idle: u64,
    /// Retired because a reload (or a live change) replaced their generation.
    pub reload: u64,
    /// A program's copies stopped past their `max_lifetime` (and its jitter).
    pub max_lifetime: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStatus {
    pub pid: i32,
    /// "Idle", "Running", "Reading headers", "Finishing", "Starting" (php-fpm's words).
    pub state: String,
    pub start_time: SystemTime,
    pub start_since: Duration,
    /// Requests served, where known.
    pub requests: Option<u64>,
    /// The running request's duration so far when busy, else the last one's.
    pub request_duration: Option<Duration>,
    pub request_method: Option<String>,
    pub request_uri: Option<String>,
    pub query_string: Option<String>,
    pub script: Option<String>,
    /// The running request's id (docs/logs.md, "Request ids"); None when idle, or when the
    /// workers write no scoreboard slot (php-cgi, command).
    pub request_id: Option<String>,
    /// Resident memory now (bytes).
    pub rss: Option<u64>,
    pub last_request_duration: Option<Duration>,
    pub last_request_cpu: Option<Duration>,
    /// php-fpm's "last request memory": the peak memory of the last request, in bytes, as
    /// the runtime measures it (embedded PHP: the Zend allocator's peak); None elsewhere.
    pub last_request_memory: Option<u64>,
}

impl WorkerStatus {
    /// In a request: anything but waiting for one ("Idle") or not yet ready ("Starting").
    /// Only then is `request_duration` the running request's.
    pub fn is_busy(&self) -> bool {
        !matches!(self.state.as_str(), "Idle" | "Starting")
    }

    /// php-fpm's "request uri": the path, then `?query` when there is one.
    pub fn uri_and_query(&self) -> Option<String> {
        let uri = self.request_uri.as_deref()?;
        Some(match self.query_string.as_deref() {
            Some(query) if !query.is_empty() => format!("{uri}?{query}"),
            _ => uri.to_owned(),
        })
    }

    /// php-fpm's "last request cpu": CPU time over wall time of the last request, in %.
    pub fn last_request_cpu_percent(&self) -> Option<f64> {
        let cpu = self.last_request_cpu?;
        let wall = self.last_request_duration?;
        if wall.is_zero() {
            return None;
        }
        Some(cpu.as_secs_f64() / wall.as_secs_f64() * 100.0)
    }
}
