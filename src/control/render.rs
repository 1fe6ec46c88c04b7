//! Status as text and JSON (and, from `openmetrics.rs`, OpenMetrics and Prometheus text):
//! pure functions of [`PoolStatus`] values.
//!
//! php-fpm's fields come first under php-fpm's names and layouts, so that tools written for
//! php-fpm's page keep working; drover's own fields follow under names of their own (the
//! config keys for limits, `recycled ...`, `rss`). php-fpm fields drover does not track
//! (content length, user) are left out rather than shown as zero. An unknown value is `-`
//! in text and `null` in JSON: "last request memory" is known for embedded PHP only.
//! While a request runs, php-fpm shows 0 as the last request's cpu and memory; drover keeps
//! showing the last request's.
//!
//! Text and JSON differ from php-fpm in one respect on purpose: php-fpm printed request URIs
//! raw into JSON until php-src#11050 and still does into text. Here JSON strings are escaped
//! by serde_json, and control characters in text are escaped (`\n`), so a URI cannot forge
//! a line of the page.

use std::borrow::Cow;
use std::fmt::{self, Display, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::model::{Limits, MemoryStatus, PoolStatus, Recycled, WorkerStatus};
use super::openmetrics::{LE, WAIT_LE};
use crate::scoreboard::PoolView;

pub use super::openmetrics::{Exposition, metrics, openmetrics};

/// php-fpm's plain-text page, pool after pool (a blank line between); `full` adds a block
/// per worker.
pub fn text(pools: &[PoolStatus], full: bool) -> String {
    let mut out = String::new();
    for (index, pool) in pools.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        pool_text(&mut out, pool, full);
    }
    out
}

/// Every pool, as a JSON array of php-fpm's objects.
pub fn json(pools: &[PoolStatus], full: bool) -> String {
    let pools: Vec<PoolJson<'_>> = pools.iter().map(|p| PoolJson::new(p, full)).collect();
    // A struct of strings and numbers always serializes.
    serde_json::to_string(&pools).expect("status JSON")
}

/// One pool, as php-fpm's own page shows it: a single object.
pub fn json_pool(pool: &PoolStatus, full: bool) -> String {
    serde_json::to_string(&PoolJson::new(pool, full)).expect("status JSON")
}

fn pool_text(out: &mut String, p: &PoolStatus, full: bool) {
    line(out, "pool", clean(&p.pool));
    line(out, "process manager", &p.process_manager);
    line(out, "start time", local_time(p.start_time));
    line(out, "start since", p.start_since.as_secs());
    line(out, "accepted conn", OrDash(p.accepted_conn));
    line(out, "listen queue", OrDash(p.listen_queue));
    line(out, "max listen queue", OrDash(p.max_listen_queue));
    line(out, "listen queue len", p.listen_queue_len);
    line(out, "idle processes", p.idle_processes);
    line(out, "active processes", p.active_processes);
    line(out, "total processes", p.total_processes);
    line(out, "max active processes", p.max_active_processes);
    line(out, "max children reached", p.max_children_reached);
    line(out, "slow requests", p.slow_requests);
    // drover's own, after php-fpm's.
    line(out, "runtime", &p.runtime);
    let l = &p.limits;
    line(out, "pm.max_children", l.max_children);
    line(out, "pm.start_servers", l.start_servers);
    line(out, "pm.min_spare_servers", l.min_spare_servers);
    line(out, "pm.max_spare_servers", l.max_spare_servers);
    line(out, "pm.max_requests", l.max_requests);
    line(out, "pm.max_memory", OrDash(l.max_memory));
    line(
        out,
        "request_terminate_timeout",
        OrDash(l.request_terminate_timeout.map(humantime::format_duration)),
    );
    line(
        out,
        "request_slowlog_timeout",
        OrDash(l.request_slowlog_timeout.map(humantime::format_duration)),
    );
    let r = &p.recycled;
    line(out, "recycled max_requests", r.max_requests);
    line(out, "recycled max_memory", r.max_memory);
    line(out, "recycled terminate", r.terminate);
    line(out, "recycled crash", r.crash);
    line(out, "recycled idle", r.idle);
    line(out, "recycled reload", r.reload);
    line(out, "recycled max_lifetime", r.max_lifetime);
    let q = &p.queue;
    line(
        out,
        "queue_timeout",
        OrDash(q.timeout.map(humantime::format_duration)),
    );
    line(out, "queue timed out", q.timed_out);
    line(
        out,
        "queue oldest wait",
        OrDash(
            q.oldest_wait
                .map(|d| humantime::format_duration(round_ms(d))),
        ),
    );
    line(out, "start-up failures", p.backoff.startup_failures);
    line(
        out,
        "start-up backoff",
        OrDash(
            p.backoff
                .holding
                .map(|d| humantime::format_duration(round_ms(d))),
        ),
    );
    if let Some(m) = &p.memory {
        memory_text(out, m);
    }
    if full {
        for w in &p.workers {
            worker_text(out, w);
        }
    }
}

/// Sizing by memory, after the pool's counters (drover's own lines).
fn memory_text(out: &mut String, m: &MemoryStatus) {
    line(out, "memory auto", m.auto);
    line(out, "memory limit", OrDash(m.limit));
    line(
        out,
        "memory limit source",
        OrDash(m.limit_source.as_deref()),
    );
    line(out, "memory reserve", OrDash(m.reserve));
    line(out, "memory budget", OrDash(m.budget));
    line(out, "memory per worker", OrDash(m.worker_memory));
    line(
        out,
        "memory per worker source",
        OrDash(m.worker_memory_source),
    );
    line(out, "memory measured workers", m.measured_workers);
    line(out, "memory pool pss", OrDash(m.pool_pss));
    line(out, "pm.max_pool_memory", OrDash(m.max_pool_memory));
    line(out, "recycled pool memory", m.retired);
}

fn worker_text(out: &mut String, w: &WorkerStatus) {
    out.push_str("\n************************\n");
    line(out, "pid", w.pid);
    line(out, "state", clean(&w.state));
    line(out, "start time", local_time(w.start_time));
    line(out, "start since", w.start_since.as_secs());
    line(out, "requests", OrDash(w.requests));
    line(
        out,
        "request duration",
        OrDash(w.request_duration.map(micros)),
    );
    line(
        out,
        "request method",
        OrDash(w.request_method.as_deref().map(clean)),
    );
    line(
        out,
        "request URI",
        OrDash(w.uri_and_query().as_deref().map(clean)),
    );
    line(out, "script", OrDash(w.script.as_deref().map(clean)));
    line(
        out,
        "last request cpu",
        OrDash(w.last_request_cpu_percent().map(|c| format!("{c:.2}"))),
    );
    line(out, "last request memory", OrDash(w.last_request_memory));
    line(out, "rss", OrDash(w.rss));
    line(
        out,
        "request id",
        OrDash(w.request_id.as_deref().map(clean)),
    );
    line(
        out,
        "last request duration",
        OrDash(w.last_request_duration.map(micros)),
    );
}

/// `label:` padded so that values start in php-fpm's column 22; longer labels get a space.
fn line(out: &mut String, label: &str, value: impl Display) {
    let _ = writeln!(out, "{:<21} {value}", format!("{label}:"));
}

struct OrDash<T>(Option<T>);

impl<T: Display> Display for OrDash<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// Control characters escaped (`\n`, `\u{1b}`), everything else as is.
fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// php-fpm's unit for request durations.
fn micros(d: Duration) -> u128 {
    d.as_micros()
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// php-fpm's text time, `%d/%b/%Y:%H:%M:%S %z`, in the local time zone.
pub fn local_time(t: SystemTime) -> String {
    let unix = unix_seconds(t) as i64;
    clf_time(unix, local_offset(unix))
}

/// The local time zone's offset from UTC at `unix`, in seconds (0 if unknown).
fn local_offset(unix: i64) -> i64 {
    let t = unix as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of the plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r only reads `t` and writes `tm`, both owned here and valid.
    let converted = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if converted { tm.tm_gmtoff } else { 0 }
}

/// `unix` as `23/Mar/2024:10:00:00 +0000` at `offset` seconds east of UTC.
fn clf_time(unix: i64, offset: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let local = unix + offset;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil: years of 400 are 146097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let sign = if offset < 0 { '-' } else { '+' };
    let off = offset.abs() / 60;
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} {sign}{:02}{:02}",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        off / 60,
        off % 60
    )
}

#[derive(Serialize)]
struct PoolJson<'a> {
    pool: &'a str,
    #[serde(rename = "process manager")]
    process_manager: &'a str,
    #[serde(rename = "start time")]
    start_time: u64,
    #[serde(rename = "start since")]
    start_since: u64,
    #[serde(rename = "accepted conn")]
    accepted_conn: Option<u64>,
    #[serde(rename = "listen queue")]
    listen_queue: Option<u32>,
    #[serde(rename = "max listen queue")]
    max_listen_queue: Option<u32>,
    #[serde(rename = "listen queue len")]
    listen_queue_len: u32,
    #[serde(rename = "idle processes")]
    idle_processes: u32,
    #[serde(rename = "active processes")]
    active_processes: u32,
    #[serde(rename = "total processes")]
    total_processes: u32,
    #[serde(rename = "max active processes")]
    max_active_processes: u32,
    #[serde(rename = "max children reached")]
    max_children_reached: u64,
    #[serde(rename = "slow requests")]
    slow_requests: u64,
    runtime: &'a str,
    limits: LimitsJson,
    recycled: RecycledJson,
    queue: QueueJson,
    backoff: BackoffJson<'a>,
    /// Counted by the workers; `null` where they cannot count (php-cgi, command).
    #[serde(rename = "request durations")]
    request_durations: Option<HistogramJson>,
    responses: Option<ResponsesJson>,
    /// Sizing by memory (bytes); left out for pools sized by count.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a MemoryStatus>,
    /// Last, as in php-fpm's page.
    #[serde(skip_serializing_if = "Option::is_none")]
    processes: Option<Vec<WorkerJson<'a>>>,
}

/// The config keys; durations in seconds, memory in bytes; `null` = not set.
#[derive(Serialize)]
struct LimitsJson {
    max_children: u32,
    start_servers: u32,
    min_spare_servers: u32,
    max_spare_servers: u32,
    max_requests: u32,
    max_memory: Option<u64>,
    request_terminate_timeout: Option<f64>,
    request_slowlog_timeout: Option<f64>,
}

/// The request-duration histogram: seconds; buckets cumulative, as in `/metrics`.
#[derive(Serialize)]
struct HistogramJson {
    count: u64,
    sum: f64,
    buckets: Vec<BucketJson>,
}

#[derive(Serialize)]
struct BucketJson {
    le: &'static str,
    count: u64,
}

impl HistogramJson {
    fn new(requests: &PoolView) -> HistogramJson {
        HistogramJson::cumulative(&LE, &requests.buckets, requests.count(), requests.sum)
    }

    /// The queue-wait histogram.
    fn waits(waits: &crate::pm::queue::Waits) -> HistogramJson {
        HistogramJson::cumulative(&WAIT_LE, &waits.buckets, waits.count, waits.sum)
    }

    /// `buckets` (each its own count, the last the rest) as cumulative counts up to each
    /// bound of `les`, as Prometheus has them.
    fn cumulative(
        les: &[&'static str],
        buckets: &[u64],
        count: u64,
        sum: Duration,
    ) -> HistogramJson {
        let mut cumulative = 0;
        let buckets = les
            .iter()
            .zip(buckets)
            .map(|(&le, count)| {
                cumulative += count;
                BucketJson {
                    le,
                    count: cumulative,
                }
            })
            .collect();
        HistogramJson {
            count,
            sum: sum.as_secs_f64(),
            buckets,
        }
    }
}

/// Responses by status class.
#[derive(Serialize)]
struct ResponsesJson {
    #[serde(rename = "1xx")]
    informational: u64,
    #[serde(rename = "2xx")]
    success: u64,
    #[serde(rename = "3xx")]
    redirection: u64,
    #[serde(rename = "4xx")]
    client_error: u64,
    #[serde(rename = "5xx")]
    server_error: u64,
}

impl ResponsesJson {
    fn new(requests: &PoolView) -> ResponsesJson {
        let [
            informational,
            success,
            redirection,
            client_error,
            server_error,
        ] = requests.classes;
        ResponsesJson {
            informational,
            success,
            redirection,
            client_error,
            server_error,
        }
    }
}

#[derive(Serialize)]
struct RecycledJson {
    max_requests: u64,
    max_memory: u64,
    terminate: u64,
    crash: u64,
    idle: u64,
    reload: u64,
    max_lifetime: u64,
}

/// Start-up failures and the back-off they hold: `holding` in seconds, `null` when none.
#[derive(Serialize)]
struct BackoffJson<'a> {
    #[serde(rename = "start-up failures")]
    startup_failures: u64,
    holding: Option<f64>,
    #[serde(rename = "last cause")]
    last_cause: Option<&'a str>,
}

/// `queue_timeout`: seconds; `null` = off, or not measured.
#[derive(Serialize)]
struct QueueJson {
    timeout: Option<f64>,
    #[serde(rename = "timed out")]
    timed_out: u64,
    #[serde(rename = "oldest wait")]
    oldest_wait: Option<f64>,
    /// The queue-wait histogram (estimated, as in `/metrics`); `null` where not measured.
    wait: Option<HistogramJson>,
}

#[derive(Serialize)]
struct WorkerJson<'a> {
    pid: i32,
    state: &'a str,
    #[serde(rename = "start time")]
    start_time: u64,
    #[serde(rename = "start since")]
    start_since: u64,
    requests: Option<u64>,
    /// Microseconds, as php-fpm.
    #[serde(rename = "request duration")]
    request_duration: Option<u128>,
    #[serde(rename = "request method")]
    request_method: Option<&'a str>,
    #[serde(rename = "request uri")]
    request_uri: Option<String>,
    script: Option<&'a str>,
    /// drover's: the running request's id.
    #[serde(rename = "request id")]
    request_id: Option<&'a str>,
    #[serde(rename = "last request cpu")]
    last_request_cpu: Option<f64>,
    /// Bytes, as php-fpm.
    #[serde(rename = "last request memory")]
    last_request_memory: Option<u64>,
    /// Bytes.
    rss: Option<u64>,
    #[serde(rename = "last request duration")]
    last_request_duration: Option<u128>,
}

impl<'a> PoolJson<'a> {
    fn new(p: &'a PoolStatus, full: bool) -> PoolJson<'a> {
        let Limits {
            max_children,
            start_servers,
            min_spare_servers,
            max_spare_servers,
            max_requests,
            ..
        } = p.limits;
        let Recycled {
            max_requests: recycled_max_requests,
            max_memory,
            terminate,
            crash,
            idle,
            reload,
            max_lifetime,
        } = p.recycled;
        PoolJson {
            pool: &p.pool,
            process_manager: &p.process_manager,
            start_time: unix_seconds(p.start_time),
            start_since: p.start_since.as_secs(),
            accepted_conn: p.accepted_conn,
            listen_queue: p.listen_queue,
            max_listen_queue: p.max_listen_queue,
            listen_queue_len: p.listen_queue_len,
            idle_processes: p.idle_processes,
            active_processes: p.active_processes,
            total_processes: p.total_processes,
            max_active_processes: p.max_active_processes,
            max_children_reached: p.max_children_reached,
            slow_requests: p.slow_requests,
            runtime: &p.runtime,
            limits: LimitsJson {
                max_children,
                start_servers,
                min_spare_servers,
                max_spare_servers,
                max_requests,
                max_memory: p.limits.max_memory,
                request_terminate_timeout: p
                    .limits
                    .request_terminate_timeout
                    .map(|d| d.as_secs_f64()),
                request_slowlog_timeout: p.limits.request_slowlog_timeout.map(|d| d.as_secs_f64()),
            },
            recycled: RecycledJson {
                max_requests: recycled_max_requests,
                max_memory,
                terminate,
                crash,
                idle,
                reload,
                max_lifetime,
            },
            queue: QueueJson {
                timeout: p.queue.timeout.map(|d| d.as_secs_f64()),
                timed_out: p.queue.timed_out,
                oldest_wait: p.queue.oldest_wait.map(|d| d.as_secs_f64()),
                wait: p.queue.waits.as_ref().map(HistogramJson::waits),
            },
            backoff: BackoffJson {
                startup_failures: p.backoff.startup_failures,
                holding: p.backoff.holding.map(|d| d.as_secs_f64()),
                last_cause: p.backoff.last_cause.as_deref(),
            },
            request_durations: p.requests.as_ref().map(HistogramJson::new),
            responses: p.requests.as_ref().map(ResponsesJson::new),
            memory: p.memory.as_ref(),
            processes: full.then(|| p.workers.iter().map(WorkerJson::new).collect()),
        }
    }
}

impl<'a> WorkerJson<'a> {
    fn new(w: &'a WorkerStatus) -> WorkerJson<'a> {
        WorkerJson {
            pid: w.pid,
            state: &w.state,
            start_time: unix_seconds(w.start_time),
            start_since: w.start_since.as_secs(),
            requests: w.requests,
            request_duration: w.request_duration.map(micros),
            request_method: w.request_method.as_deref(),
            request_uri: w.uri_and_query(),
            script: w.script.as_deref(),
            request_id: w.request_id.as_deref(),
            // php-fpm's two decimals.
            last_request_cpu: w
                .last_request_cpu_percent()
                .map(|c| (c * 100.0).round() / 100.0),
            last_request_memory: w.last_request_memory,
            rss: w.rss,
            last_request_duration: w.last_request_duration.map(micros),
        }
    }
}

/// A wait to the millisecond, as the text page shows it.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
