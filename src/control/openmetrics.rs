//! Status as OpenMetrics text (which Prometheus scrapes natively) or as Prometheus's own
//! text format 0.0.4: php-fpm's metrics under `drover_` instead of `phpfpm_`, with a `pool`
//! label on every sample so that one scrape covers every pool, plus drover's own: limits,
//! recycling by cause, the request-duration histogram and responses by status class
//! (counted by the workers, where they can), and per-worker gauges.
//!
//! Per-worker series carry a `pid` label, so every recycled worker would leave a dead
//! series behind: they are only rendered when asked for (`?full`).
//!
//! The two formats differ only in this: OpenMetrics names a counter's family without its
//! `_total` (Prometheus's text names it with), has `# UNIT` lines, and ends with `# EOF`.
//!
//! Differences from php-fpm's page, each because php-fpm's is not valid OpenMetrics or loses
//! information: counters' samples end in `_total`; highwater marks (max listen queue, max
//! active processes) are gauges, since they are not counts of events; the process manager
//! is a label of `drover_up`, not prose in its HELP. Unknown values are left out, never 0.
//! A family's samples are contiguous (every pool's, in order), as the format requires.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use super::model::{PoolStatus, WorkerStatus};

use crate::scoreboard::BUCKETS;

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
    Histogram,
}

/// Which text: OpenMetrics 1.0 or Prometheus's 0.0.4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    OpenMetrics,
    Prometheus,
}

impl Exposition {
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// OpenMetrics when `accept` (an `Accept` header) lists it, as Prometheus's scraper
    /// asks; else the Prometheus text, which every scraper reads.
    pub fn from_accept(accept: Option<&str>) -> Exposition {
        let asks = accept.is_some_and(|accept| {
            accept.split(',').any(|kind| {
                let mut params = kind.split(';').map(str::trim);
                let media = params.next().unwrap_or("");
                let refused = params.any(|p| p.replace(' ', "") == "q=0");
                media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if asks {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }
}

/// The histogram's `le` labels, as the parsers want them written (`1.0`, not `1`).
pub(super) const LE: [&str; BUCKETS] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf",
];

/// The queue-wait histogram's `le` labels: [`crate::pm::queue::WAIT_BOUNDS_MS`] in seconds
/// (1.0, not 1: OpenMetrics wants canonical numbers), then +Inf.
pub(super) const WAIT_LE: [&str; crate::pm::queue::WAIT_BOUNDS_MS.len() + 1] = [
    "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "60.0", "+Inf",
];

/// Every pool's metrics as OpenMetrics, ending with `# EOF`; per-worker series when `full`.
pub fn openmetrics(pools: &[PoolStatus], full: bool) -> String {
    metrics(pools, full, Exposition::OpenMetrics)
}

/// Every pool's metrics in `exposition`; per-worker series when `full`.
pub fn metrics(pools: &[PoolStatus], full: bool, exposition: Exposition) -> String {
    let mut m = Metrics {
        out: String::new(),
        pools,
        exposition,
    };
    m.up();
    m.pool_counts();
    m.saturation();
    m.queue_wait();
    m.limits();
    m.recycled();
    m.memory();
    m.request_duration();
    m.responses();
    if full {
        m.workers();
    }
    if exposition == Exposition::OpenMetrics {
        m.out.push_str("# EOF\n");
    }
    m.out
}

struct Metrics<'a> {
    out: String,
    pools: &'a [PoolStatus],
    exposition: Exposition,
}

impl Metrics<'_> {
    /// php-fpm's pool fields: its start, the accepted connections, the listen queue and
    /// the worker counts.
    fn pool_counts(&mut self) {
        self.pool(
            Kind::Gauge,
            "start_time_seconds",
            "When the pool started, in seconds since the epoch.",
            |p| {
                Some(
                    p.start_time
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs()
                        .to_string(),
                )
            },
        );
        self.pool(
            Kind::Gauge,
            "start_since_seconds",
            "How long the pool has been running.",
            |p| Some(int(p.start_since.as_secs())),
        );
        self.pool(
            Kind::Counter,
            "accepted_connections",
            "Requests accepted by the pool.",
            |p| p.accepted_conn.map(int),
        );
        self.pool(
            Kind::Gauge,
            "listen_queue",
            "Connections waiting in the listen queue.",
            |p| p.listen_queue.map(int),
        );
        self.pool(
            Kind::Gauge,
            "max_listen_queue",
            "The longest listen queue since the pool started.",
            |p| p.max_listen_queue.map(int),
        );
        self.pool(
            Kind::Gauge,
            "listen_queue_length",
            "The listen backlog: how many connections may wait.",
            |p| Some(int(p.listen_queue_len)),
        );
        self.pool(
            Kind::Gauge,
            "idle_processes",
            "Workers waiting for a request.",
            |p| Some(int(p.idle_processes)),
        );
        self.pool(
            Kind::Gauge,
            "active_processes",
            "Workers in a request.",
            |p| Some(int(p.active_processes)),
        );
        self.pool(
            Kind::Gauge,
            "total_processes",
            "Idle and active workers.",
            |p| Some(int(p.total_processes)),
        );
        self.pool(
            Kind::Gauge,
            "max_active_processes",
            "The most workers in a request at once since the pool started.",
            |p| Some(int(p.max_active_processes)),
        );
        self.pool(
            Kind::Counter,
            "max_children_reached",
            "Times max_children stopped the pool from spawning a worker.",
            |p| Some(int(p.max_children_reached)),
        );
        self.pool(
            Kind::Counter,
            "slow_requests",
            "Requests that ran past request_slowlog_timeout.",
            |p| Some(int(p.slow_requests)),
        );
    }

    /// How near the pool is to its limits: the busy ratio, the listen queue's oldest wait
    /// and `queue_timeout`'s answers, start-up failures and the backoff they hold.
    fn saturation(&mut self) {
        self.pool(
            Kind::Gauge,
            "busy_ratio",
            "Active workers over max_children: 1 when the pool can grow no more.",
            |p| {
                (p.limits.max_children > 0).then(|| {
                    format!(
                        "{}",
                        f64::from(p.active_processes) / f64::from(p.limits.max_children)
                    )
                })
            },
        );
        self.pool(
            Kind::Gauge,
            "queue_oldest_wait_seconds",
            "How long the oldest connection in the listen queue has waited, at least (to 0.1 s).",
            |p| p.queue.oldest_wait.map(seconds),
        );
        self.pool(
            Kind::Counter,
            "queue_timeouts",
            "Connections answered 503 after waiting queue_timeout for a worker.",
            |p| p.queue.timeout.map(|_| int(p.queue.timed_out)),
        );
        self.pool(
            Kind::Counter,
            "startup_failures",
            "Workers that died before their first request, each holding the next start back.",
            |p| Some(int(p.backoff.startup_failures)),
        );
        self.pool(
            Kind::Gauge,
            "startup_backoff_seconds",
            "How long starts are held back still after a start-up failure (0: not held).",
            |p| Some(seconds(p.backoff.holding.unwrap_or_default())),
        );
    }

    /// php-fpm's `up`, with the process manager and runtime as labels.
    fn up(&mut self) {
        let samples = self
            .pools
            .iter()
            .map(|p| {
                let labels = labels(&[
                    ("pool", &p.pool),
                    ("process_manager", &p.process_manager),
                    ("runtime", &p.runtime),
                ]);
                (String::new(), labels, "1".to_owned())
            })
            .collect();
        self.family(Kind::Gauge, "up", "The pool is running.", samples);
    }

    /// One sample per pool whose value is known.
    fn pool(
        &mut self,
        kind: Kind,
        name: &str,
        help: &str,
        value: impl Fn(&PoolStatus) -> Option<String>,
    ) {
        let samples = self
            .pools
            .iter()
            .filter_map(|p| Some((String::new(), labels(&[("pool", &p.pool)]), value(p)?)))
            .collect();
        self.family(kind, name, help, samples);
    }

    fn limits(&mut self) {
        let g = Kind::Gauge;
        self.pool(g, "limit_max_children", "pm.max_children.", |p| {
            Some(int(p.limits.max_children))
        });
        self.pool(g, "limit_start_servers", "pm.start_servers.", |p| {
            Some(int(p.limits.start_servers))
        });
        self.pool(g, "limit_min_spare_servers", "pm.min_spare_servers.", |p| {
            Some(int(p.limits.min_spare_servers))
        });
        self.pool(g, "limit_max_spare_servers", "pm.max_spare_servers.", |p| {
            Some(int(p.limits.max_spare_servers))
        });
        self.pool(
            g,
            "limit_max_requests",
            "pm.max_requests (0 = no limit).",
            |p| Some(int(p.limits.max_requests)),
        );
        self.pool(
            g,
            "limit_max_memory_bytes",
            "pm.max_memory, where set.",
            |p| p.limits.max_memory.map(int),
        );
        self.pool(
            g,
            "limit_request_terminate_timeout_seconds",
            "request_terminate_timeout, where set.",
            |p| p.limits.request_terminate_timeout.map(seconds),
        );
        self.pool(
            g,
            "limit_request_slowlog_timeout_seconds",
            "request_slowlog_timeout, where set.",
            |p| p.limits.request_slowlog_timeout.map(seconds),
        );
        self.pool(
            g,
            "limit_queue_timeout_seconds",
            "queue_timeout, where set.",
            |p| p.queue.timeout.map(seconds),
        );
    }

    /// Sizing by memory: the cap's inputs, for pools with `max_children = "auto"` or
    /// `max_pool_memory` (the cap itself is `limit_max_children`).
    fn memory(&mut self) {
        let g = Kind::Gauge;
        let m = |p: &PoolStatus| p.memory.clone();
        self.pool(
            g,
            "memory_limit_bytes",
            "The memory the pool may use (cgroup limit, else MemAvailable).",
            |p| m(p)?.limit.map(int),
        );
        self.pool(
            g,
            "memory_reserve_bytes",
            "memory_reserve: left out of the pool's budget.",
            |p| m(p)?.reserve.map(int),
        );
        self.pool(
            g,
            "memory_budget_bytes",
            "What the workers may use: the limit less the reserve and the parents' PSS.",
            |p| m(p)?.budget.map(int),
        );
        self.pool(
            g,
            "memory_worker_bytes",
            "One worker's memory as max_children = \"auto\" counts it (highest measured PSS).",
            |p| m(p)?.worker_memory.map(int),
        );
        self.pool(
            g,
            "memory_pss_bytes",
            "The PSS of every process of the pool.",
            |p| m(p)?.pool_pss.map(int),
        );
        self.pool(
            g,
            "limit_max_pool_memory_bytes",
            "pm.max_pool_memory, where set.",
            |p| m(p)?.max_pool_memory.map(int),
        );
        self.pool(
            Kind::Counter,
            "retired_pool_memory",
            "Idle workers retired for the pool's memory (max_pool_memory, the auto cap).",
            |p| Some(int(m(p)?.retired)),
        );
    }

    /// One counter, the cause as a label: the causes add up to every worker that ended.
    fn recycled(&mut self) {
        let mut samples = Vec::new();
        for p in self.pools {
            let r = &p.recycled;
            let causes = [
                ("max_requests", r.max_requests),
                ("max_memory", r.max_memory),
                ("terminate", r.terminate),
                ("crash", r.crash),
                ("idle", r.idle),
                ("reload", r.reload),
                ("max_lifetime", r.max_lifetime),
            ];
            for (cause, count) in causes {
                let labels = labels(&[("pool", &p.pool), ("cause", cause)]);
                samples.push((String::new(), labels, int(count)));
            }
        }
        self.family(
            Kind::Counter,
            "workers_recycled",
            "Workers that ended, by cause.",
            samples,
        );
    }

    /// The histogram of every request's duration, for the pools whose workers count them.
    fn request_duration(&mut self) {
        let mut samples = Vec::new();
        for p in self.pools {
            let Some(requests) = &p.requests else {
                continue;
            };
            histogram(&mut samples, &p.pool, &LE, &requests.buckets, requests.sum);
        }
        self.family(
            Kind::Histogram,
            "request_duration_seconds",
            "How long requests took, from the accept to the end of the response.",
            samples,
        );
    }

    /// The histogram of the connections' estimated waits in the listen queue
    /// ([`crate::pm::queue`]: from the master's samples, to about 0.1 s).
    fn queue_wait(&mut self) {
        let mut samples = Vec::new();
        for p in self.pools {
            let Some(waits) = &p.queue.waits else {
                continue;
            };
            histogram(&mut samples, &p.pool, &WAIT_LE, &waits.buckets, waits.sum);
        }
        self.family(
            Kind::Histogram,
            "queue_wait_seconds",
            "How long connections waited in the listen queue, estimated from the master's \
             samples (to about 0.1 s).",
            samples,
        );
    }

    /// Responses by status class, for the pools whose workers know the status.
    fn responses(&mut self) {
        let mut samples = Vec::new();
        for p in self.pools {
            let Some(requests) = &p.requests else {
                continue;
            };
            for (class, count) in ["1xx", "2xx", "3xx", "4xx", "5xx"]
                .into_iter()
                .zip(requests.classes)
            {
                let labels = labels(&[("pool", &p.pool), ("class", class)]);
                samples.push((String::new(), labels, int(count)));
            }
        }
        self.family(
            Kind::Counter,
            "responses",
            "Responses sent, by HTTP status class.",
            samples,
        );
    }

    fn workers(&mut self) {
        self.worker(
            Kind::Gauge,
            "worker_rss_bytes",
            "The worker's resident memory now.",
            |w| w.rss.map(int),
        );
        // Only while busy: an idle worker has no current request, and a stale value would
        // keep alerts on long requests firing.
        self.worker(
            Kind::Gauge,
            "worker_request_duration_seconds",
            "How long the worker's current request has run.",
            |w| w.request_duration.filter(|_| w.is_busy()).map(seconds),
        );
        self.worker(
            Kind::Gauge,
            "worker_last_request_duration_seconds",
            "How long the worker's last request took.",
            |w| w.last_request_duration.map(seconds),
        );
        self.worker(
            Kind::Gauge,
            "worker_last_request_memory_bytes",
            "The peak memory of the worker's last request (embedded PHP only).",
            |w| w.last_request_memory.map(int),
        );
        self.worker(
            Kind::Counter,
            "worker_requests",
            "Requests the worker has served.",
            |w| w.requests.map(int),
        );
    }

    fn worker(
        &mut self,
        kind: Kind,
        name: &str,
        help: &str,
        value: impl Fn(&WorkerStatus) -> Option<String>,
    ) {
        let mut samples = Vec::new();
        for p in self.pools {
            for w in &p.workers {
                if let Some(v) = value(w) {
                    let labels = labels(&[("pool", &p.pool), ("pid", &w.pid.to_string())]);
                    samples.push((String::new(), labels, v));
                }
            }
        }
        self.family(kind, name, help, samples);
    }

    /// HELP, TYPE, UNIT (OpenMetrics, when the name ends in one) and the samples, each
    /// `(suffix, labels, value)` (a counter's `_total` is added here); nothing for a family
    /// without samples.
    fn family(
        &mut self,
        kind: Kind,
        name: &str,
        help: &str,
        samples: Vec<(String, String, String)>,
    ) {
        if samples.is_empty() {
            return;
        }
        let (kind, total) = match kind {
            Kind::Gauge => ("gauge", ""),
            Kind::Counter => ("counter", "_total"),
            Kind::Histogram => ("histogram", ""),
        };
        let open = self.exposition == Exposition::OpenMetrics;
        // Prometheus's text names a counter's family by its samples' name.
        let family = if open {
            format!("drover_{name}")
        } else {
            format!("drover_{name}{total}")
        };
        let out = &mut self.out;
        let _ = writeln!(out, "# HELP {family} {}", escape(help, false));
        let _ = writeln!(out, "# TYPE {family} {kind}");
        if let Some(unit) = ["seconds", "bytes"]
            .into_iter()
            .find(|u| open && name.ends_with(&format!("_{u}")))
        {
            let _ = writeln!(out, "# UNIT {family} {unit}");
        }
        for (suffix, labels, value) in samples {
            let _ = writeln!(out, "drover_{name}{total}{suffix}{labels} {value}");
        }
    }
}

/// One pool's histogram samples: `_bucket` per bound of `les`, cumulative, from `buckets`
/// (each its own count, the last the rest: `+Inf`), then `_count` (all of them) and `_sum`.
fn histogram(
    samples: &mut Vec<(String, String, String)>,
    pool: &str,
    les: &[&str],
    buckets: &[u64],
    sum: Duration,
) {
    let mut cumulative = 0;
    for (le, count) in les.iter().zip(buckets) {
        cumulative += count;
        let labels = labels(&[("pool", pool), ("le", le)]);
        samples.push(("_bucket".to_owned(), labels, int(cumulative)));
    }
    let pool = labels(&[("pool", pool)]);
    samples.push(("_count".to_owned(), pool.clone(), int(cumulative)));
    samples.push(("_sum".to_owned(), pool, seconds(sum)));
}

fn int(n: impl Into<u64>) -> String {
    n.into().to_string()
}

/// Seconds with microsecond precision; Rust prints no exponent, which both parsers accept.
fn seconds(d: Duration) -> String {
    format!("{}", d.as_micros() as f64 / 1e6)
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v, true)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// The format's escapes: backslash and newline everywhere, the double quote in label values.
fn escape(s: &str, quote: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "openmetrics_tests.rs"]
mod tests;
