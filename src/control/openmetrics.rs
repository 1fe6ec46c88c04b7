//! Status as OpenMetrics text (which Prometheus scrapes natively): php-fpm's metrics under
//! `drover_` instead of `phpfpm_`, with a `pool` label on every sample so that one scrape
//! covers every pool, plus drover's own: limits, recycling by cause, per-worker gauges.
//!
//! Differences from php-fpm's page, each because php-fpm's is not valid OpenMetrics or loses
//! information: counters' samples end in `_total`; highwater marks (max listen queue, max
//! active processes) are gauges, since they are not counts of events; the process manager
//! is a label of `drover_up`, not prose in its HELP. Unknown values are left out, never 0.
//! A family's samples are contiguous (every pool's, in order), as the format requires.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use super::model::{PoolStatus, WorkerStatus};

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

/// Every pool's metrics, ending with `# EOF`.
pub fn openmetrics(pools: &[PoolStatus]) -> String {
    let mut m = Metrics {
        out: String::new(),
        pools,
    };
    m.up();
    m.pool(
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
    m.pool(
        Kind::Gauge,
        "start_since_seconds",
        "How long the pool has been running.",
        |p| Some(int(p.start_since.as_secs())),
    );
    m.pool(
        Kind::Counter,
        "accepted_connections",
        "Requests accepted by the pool.",
        |p| p.accepted_conn.map(int),
    );
    m.pool(
        Kind::Gauge,
        "listen_queue",
        "Connections waiting in the listen queue.",
        |p| p.listen_queue.map(int),
    );
    m.pool(
        Kind::Gauge,
        "max_listen_queue",
        "The longest listen queue since the pool started.",
        |p| p.max_listen_queue.map(int),
    );
    m.pool(
        Kind::Gauge,
        "listen_queue_length",
        "The listen backlog: how many connections may wait.",
        |p| Some(int(p.listen_queue_len)),
    );
    m.pool(
        Kind::Gauge,
        "idle_processes",
        "Workers waiting for a request.",
        |p| Some(int(p.idle_processes)),
    );
    m.pool(
        Kind::Gauge,
        "active_processes",
        "Workers in a request.",
        |p| Some(int(p.active_processes)),
    );
    m.pool(
        Kind::Gauge,
        "total_processes",
        "Idle and active workers.",
        |p| Some(int(p.total_processes)),
    );
    m.pool(
        Kind::Gauge,
        "max_active_processes",
        "The most workers in a request at once since the pool started.",
        |p| Some(int(p.max_active_processes)),
    );
    m.pool(
        Kind::Counter,
        "max_children_reached",
        "Times max_children stopped the pool from spawning a worker.",
        |p| Some(int(p.max_children_reached)),
    );
    m.pool(
        Kind::Counter,
        "slow_requests",
        "Requests that ran past request_slowlog_timeout.",
        |p| Some(int(p.slow_requests)),
    );
    m.limits();
    m.recycled();
    m.workers();
    m.out.push_str("# EOF\n");
    m.out
}

struct Metrics<'a> {
    out: String,
    pools: &'a [PoolStatus],
}

impl Metrics<'_> {
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
                (labels, "1".to_owned())
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
            .filter_map(|p| Some((labels(&[("pool", &p.pool)]), value(p)?)))
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
            ];
            for (cause, count) in causes {
                samples.push((labels(&[("pool", &p.pool), ("cause", cause)]), int(count)));
            }
        }
        self.family(
            Kind::Counter,
            "workers_recycled",
            "Workers that ended, by cause.",
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
                    samples.push((labels(&[("pool", &p.pool), ("pid", &w.pid.to_string())]), v));
                }
            }
        }
        self.family(kind, name, help, samples);
    }

    /// HELP, TYPE, UNIT (when the name ends in one) and the samples; nothing for a family
    /// without samples.
    fn family(&mut self, kind: Kind, name: &str, help: &str, samples: Vec<(String, String)>) {
        if samples.is_empty() {
            return;
        }
        let (kind, suffix) = match kind {
            Kind::Gauge => ("gauge", ""),
            Kind::Counter => ("counter", "_total"),
        };
        let out = &mut self.out;
        let _ = writeln!(out, "# HELP drover_{name} {}", escape(help, false));
        let _ = writeln!(out, "# TYPE drover_{name} {kind}");
        if let Some(unit) = ["seconds", "bytes"]
            .into_iter()
            .find(|u| name.ends_with(&format!("_{u}")))
        {
            let _ = writeln!(out, "# UNIT drover_{name} {unit}");
        }
        for (labels, value) in samples {
            let _ = writeln!(out, "drover_{name}{suffix}{labels} {value}");
        }
    }
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
