//! What `drover ctl top` shows, as pure functions: the status JSON parsed into [`Pool`]s,
//! two samples turned into [`Row`]s (rates and percentiles from the counters' deltas), the
//! keys applied to a [`View`], and a [`Frame`] laid out as the screen's lines. No terminal,
//! no clock, no socket: the shell in `mod.rs` brings those.

use std::cmp::Ordering;
use std::time::Duration;

use serde::Deserialize;

/// One pool as `GET /status?format=json&full` gives it: the fields top shows.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Pool {
    pub pool: String,
    #[serde(rename = "process manager")]
    pub process_manager: String,
    pub runtime: String,
    #[serde(rename = "start since")]
    pub start_since: u64,
    /// None where the workers do not count (php-cgi, command).
    #[serde(rename = "accepted conn")]
    pub accepted_conn: Option<u64>,
    #[serde(rename = "listen queue")]
    pub listen_queue: Option<u32>,
    #[serde(rename = "idle processes")]
    pub idle: u32,
    #[serde(rename = "active processes")]
    pub active: u32,
    #[serde(rename = "total processes")]
    pub total: u32,
    pub limits: Limits,
    pub recycled: Recycled,
    pub queue: Queue,
    #[serde(rename = "request durations")]
    pub durations: Option<Histogram>,
    #[serde(default)]
    pub processes: Vec<Worker>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Limits {
    pub max_children: u32,
}

/// Workers that ended, by cause (the status's `recycled`), in the order shown.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Recycled {
    pub crash: u64,
    pub terminate: u64,
    pub max_memory: u64,
    pub max_requests: u64,
    pub max_lifetime: u64,
    pub idle: u64,
    pub reload: u64,
}

impl Recycled {
    /// `(cause, count)` for every cause, crashes first.
    fn causes(&self) -> [(&'static str, u64); 7] {
        [
            ("crash", self.crash),
            ("terminate", self.terminate),
            ("max_memory", self.max_memory),
            ("max_requests", self.max_requests),
            ("max_lifetime", self.max_lifetime),
            ("idle", self.idle),
            ("reload", self.reload),
        ]
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Queue {
    /// Seconds; None where not measured.
    #[serde(rename = "oldest wait")]
    pub oldest_wait: Option<f64>,
    #[serde(rename = "timed out", default)]
    pub timed_out: u64,
    /// The queue-wait histogram, in the form of the request durations'; None where not
    /// measured.
    #[serde(default)]
    pub wait: Option<Histogram>,
}

/// The request-duration histogram: cumulative counts up to each `le` (seconds, `+Inf`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Histogram {
    pub count: u64,
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Bucket {
    pub le: String,
    pub count: u64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Worker {
    pub pid: i32,
    pub state: String,
    pub requests: Option<u64>,
    /// Microseconds: the running request's so far when busy, else the last one's.
    #[serde(rename = "request duration")]
    pub request_duration: Option<u64>,
    #[serde(rename = "request method")]
    pub method: Option<String>,
    #[serde(rename = "request uri")]
    pub uri: Option<String>,
    #[serde(rename = "request id", default)]
    pub request_id: Option<String>,
    pub rss: Option<u64>,
}

impl Worker {
    /// In a request, as the status says it (anything but `Idle` and `Starting`).
    pub fn is_busy(&self) -> bool {
        !matches!(self.state.as_str(), "Idle" | "Starting")
    }
}

/// The control socket's `--json --full` answer for every pool.
pub fn parse(json: &str) -> Result<Vec<Pool>, String> {
    serde_json::from_str(json).map_err(|e| format!("the status is not what top reads: {e}"))
}

/// One pool's line: what the status says now, and the rates since the previous sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub runtime: String,
    pub process_manager: String,
    pub busy: u32,
    pub idle: u32,
    pub total: u32,
    pub max_children: u32,
    /// Requests taken per second; None where the workers do not count them.
    pub rate: Option<f64>,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    pub queue: Option<u32>,
    pub oldest_wait: Option<Duration>,
    /// The 99th percentile of the queue waits since the previous sample.
    pub wait_p99: Option<Duration>,
    /// The queue-wait histogram's first bound: a wait within it is "about none", to the
    /// master's tick.
    pub wait_floor: Option<Duration>,
    pub timed_out: u64,
    /// The workers' resident memory, added up; None when no worker's is known.
    pub memory: Option<u64>,
    pub recycled: Recycled,
}

/// The pools of `now`, with rates over `since` from `before` (the previous sample, taken
/// `since` earlier). A pool without a previous sample, or whose counters went back (a
/// restart of drover), shows its figures since it started.
pub fn rows(before: Option<(&[Pool], Duration)>, now: &[Pool]) -> Vec<Row> {
    now.iter()
        .map(|pool| {
            let earlier = before.and_then(|(pools, since)| {
                let old = pools.iter().find(|p| p.pool == pool.pool)?;
                (!since.is_zero()).then_some((old, since))
            });
            row(earlier, pool)
        })
        .collect()
}

fn row(earlier: Option<(&Pool, Duration)>, pool: &Pool) -> Row {
    let lifetime = Duration::from_secs(pool.start_since);
    let rate = pool.accepted_conn.and_then(|accepted| {
        let delta = earlier.and_then(|(old, since)| {
            let before = old.accepted_conn?;
            Some((accepted.checked_sub(before)?, since))
        });
        let (count, over) = delta.unwrap_or((accepted, lifetime));
        (!over.is_zero()).then(|| count as f64 / over.as_secs_f64())
    });
    let (p50, p99) = match &pool.durations {
        Some(now) => {
            let old = earlier.and_then(|(old, _)| old.durations.as_ref());
            let counts = bucket_deltas(old, now);
            (quantile(&counts, 0.5), quantile(&counts, 0.99))
        }
        None => (None, None),
    };
    let (wait_p99, wait_floor) = match &pool.queue.wait {
        Some(now) => {
            let old = earlier.and_then(|(old, _)| old.queue.wait.as_ref());
            let counts = bucket_deltas(old, now);
            let floor = counts
                .first()
                .filter(|(bound, _)| bound.is_finite())
                .map(|&(bound, _)| Duration::from_secs_f64(bound));
            (quantile(&counts, 0.99), floor)
        }
        None => (None, None),
    };
    let rss: Vec<u64> = pool.processes.iter().filter_map(|w| w.rss).collect();
    Row {
        name: pool.pool.clone(),
        runtime: pool.runtime.clone(),
        process_manager: pool.process_manager.clone(),
        busy: pool.active,
        idle: pool.idle,
        total: pool.total,
        max_children: pool.limits.max_children,
        rate,
        p50,
        p99,
        queue: pool.listen_queue,
        oldest_wait: pool.queue.oldest_wait.map(Duration::from_secs_f64),
        wait_p99,
        wait_floor,
        timed_out: pool.queue.timed_out,
        memory: (!rss.is_empty()).then(|| rss.iter().sum()),
        recycled: pool.recycled.clone(),
    }
}

/// `(upper bound in seconds, cumulative count)` of the requests that ended between `old`
/// and `now`; every request so far when there is no `old`, or it does not fit (other
/// bounds, a count that went back).
fn bucket_deltas(old: Option<&Histogram>, now: &Histogram) -> Vec<(f64, u64)> {
    let bound = |le: &str| match le {
        "+Inf" => f64::INFINITY,
        le => le.parse().unwrap_or(f64::INFINITY),
    };
    let fits = |old: &&Histogram| {
        old.buckets.len() == now.buckets.len()
            && old
                .buckets
                .iter()
                .zip(&now.buckets)
                .all(|(o, n)| o.le == n.le && o.count <= n.count)
    };
    let old = old.filter(fits);
    now.buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let before = old.map_or(0, |o| o.buckets[i].count);
            (bound(&b.le), b.count - before)
        })
        .collect()
}

/// The `q` quantile of cumulative bucket counts, interpolated within its bucket as
/// Prometheus's `histogram_quantile` does; in the `+Inf` bucket, the highest finite bound.
/// None when no request ended.
fn quantile(cumulative: &[(f64, u64)], q: f64) -> Option<Duration> {
    let total = cumulative.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = (0.0, 0);
    for &(upper, count) in cumulative {
        if count as f64 >= rank && count > lower.1 {
            if upper.is_infinite() {
                return Some(Duration::from_secs_f64(lower.0));
            }
            let within = (rank - lower.1 as f64) / (count - lower.1) as f64;
            return Some(Duration::from_secs_f64(
                lower.0 + (upper - lower.0) * within,
            ));
        }
        lower = (upper, count);
    }
    None
}

/// The pools' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Name,
    Busy,
    Rate,
    P99,
    Queue,
    Memory,
}

impl Sort {
    const ALL: [Sort; 6] = [
        Sort::Name,
        Sort::Busy,
        Sort::Rate,
        Sort::P99,
        Sort::Queue,
        Sort::Memory,
    ];

    /// As the header names it, the column's heading.
    pub fn label(self) -> &'static str {
        match self {
            Sort::Name => "pool",
            Sort::Busy => "busy",
            Sort::Rate => "req/s",
            Sort::P99 => "p99",
            Sort::Queue => "queue",
            Sort::Memory => "memory",
        }
    }

    fn step(self, by: isize) -> Sort {
        let at = Sort::ALL.iter().position(|&s| s == self).unwrap_or(0) as isize;
        let len = Sort::ALL.len() as isize;
        Sort::ALL[(at + by).rem_euclid(len) as usize]
    }

    /// Largest first, except names (a to z); unknowns last either way; ties by name.
    fn compare(self, a: &Row, b: &Row) -> Ordering {
        fn desc<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
            match (a, b) {
                (Some(a), Some(b)) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        }
        let by = match self {
            Sort::Name => Ordering::Equal,
            Sort::Busy => b.busy.cmp(&a.busy),
            Sort::Rate => desc(a.rate, b.rate),
            Sort::P99 => desc(a.p99, b.p99),
            Sort::Queue => desc(a.queue, b.queue).then(desc(a.oldest_wait, b.oldest_wait)),
            Sort::Memory => desc(a.memory, b.memory),
        };
        by.then_with(|| a.name.cmp(&b.name))
    }
}

/// What the operator chose: the order, and one pool to look into (None: every pool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub sort: Sort,
    pub reverse: bool,
    pub pick: Option<String>,
}

impl Default for View {
    fn default() -> View {
        View {
            sort: Sort::Name,
            reverse: false,
            pick: None,
        }
    }
}

/// A key the view acts on (the shell maps the terminal's events to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Tab,
    BackTab,
    Esc,
    /// Ctrl-C: raw mode delivers it as a key, not as SIGINT.
    Interrupt,
}

/// What the shell does after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Draw the screen again (the view changed, or the key meant nothing).
    Redraw,
    Quit,
}

impl View {
    /// Applies `key`; `rows` are the pools on screen, for picking the next one in their order.
    pub fn key(&mut self, key: Key, rows: &[Row]) -> Action {
        match key {
            Key::Char('q' | 'Q') | Key::Interrupt => return Action::Quit,
            Key::Char('s' | '>') => self.sort = self.sort.step(1),
            Key::Char('S' | '<') => self.sort = self.sort.step(-1),
            Key::Char('r') => self.reverse = !self.reverse,
            Key::Char('p') | Key::Tab => self.pick = self.next_pool(rows, 1),
            Key::Char('P') | Key::BackTab => self.pick = self.next_pool(rows, -1),
            Key::Char('a') | Key::Esc => self.pick = None,
            Key::Char(_) => {}
        }
        Action::Redraw
    }

    /// The pool after (or before) the picked one in the screen's order; from every pool,
    /// the first (or the last); past the last, every pool again.
    fn next_pool(&self, rows: &[Row], by: isize) -> Option<String> {
        let names: Vec<&str> = self.order(rows).iter().map(|r| r.name.as_str()).collect();
        let len = names.len() as isize;
        // Every pool is the position before the first, and after the last.
        let at = match &self.pick {
            Some(pick) => names
                .iter()
                .position(|n| n == pick)
                .map_or(-1, |i| i as isize),
            None => -1,
        };
        let next = (at + 1 + by).rem_euclid(len + 1) - 1;
        (next >= 0).then(|| names[next as usize].to_owned())
    }

    /// `rows` in the view's order.
    pub fn order<'r>(&self, rows: &'r [Row]) -> Vec<&'r Row> {
        let mut sorted: Vec<&Row> = rows.iter().collect();
        sorted.sort_by(|a, b| self.sort.compare(a, b));
        if self.reverse {
            sorted.reverse();
        }
        sorted
    }
}

/// A request running now, for the slowest-requests list.
#[derive(Debug, Clone, PartialEq)]
pub struct Flight<'p> {
    pub pool: &'p str,
    pub worker: &'p Worker,
    pub elapsed: Duration,
}

/// Every request running now in `pools`, the longest first.
pub fn in_flight(pools: &[Pool]) -> Vec<Flight<'_>> {
    let mut flights: Vec<Flight<'_>> = pools
        .iter()
        .flat_map(|p| p.processes.iter().map(move |w| (p.pool.as_str(), w)))
        .filter(|(_, w)| w.is_busy())
        .filter_map(|(pool, worker)| {
            let elapsed = Duration::from_micros(worker.request_duration?);
            Some(Flight {
                pool,
                worker,
                elapsed,
            })
        })
        .collect();
    flights.sort_by(|a, b| {
        b.elapsed
            .cmp(&a.elapsed)
            .then(a.worker.pid.cmp(&b.worker.pid))
    });
    flights
}

/// One screen's worth: the sample, its rows, and what the header says.
pub struct Frame<'s> {
    pub pools: &'s [Pool],
    pub rows: &'s [Row],
    /// The sample's time, as the header shows it.
    pub clock: &'s str,
    pub interval: Duration,
    /// Why the figures are old (the last fetch failed), shown under the header.
    pub note: Option<&'s str>,
    /// A terminal (the keys' line is shown) rather than batch output.
    pub interactive: bool,
}

/// The pools' columns: heading, width, right-aligned.
const POOL_COLUMNS: [(&str, usize, bool); 14] = [
    ("POOL", 14, false),
    ("RUNTIME", 7, false),
    ("PM", 8, false),
    ("BUSY", 4, true),
    ("IDLE", 4, true),
    ("TOTAL/MAX", 9, true),
    ("REQ/S", 8, true),
    ("P50", 7, true),
    ("P99", 7, true),
    ("QUEUE", 5, true),
    ("WAIT", 7, true),
    ("WAIT99", 7, true),
    ("503", 5, true),
    ("MEMORY", 8, true),
];

/// `frame` as the screen's lines, each at most `width` characters, at most `height` of
/// them (None: no limit, for batch output).
pub fn screen(frame: &Frame<'_>, view: &View, width: usize, height: Option<usize>) -> Vec<String> {
    let mut lines = Vec::new();
    let order = view.order(frame.rows);
    let direction = if view.reverse { " (reversed)" } else { "" };
    let pick = view
        .pick
        .as_deref()
        .map_or_else(|| "all".to_owned(), clean_str);
    lines.push(format!(
        "drover top - {} - {} pools - every {} - sort: {}{direction} - pool: {pick}",
        frame.clock,
        frame.rows.len(),
        humantime::format_duration(frame.interval),
        view.sort.label(),
    ));
    if frame.interactive {
        lines.push(
            "keys: s/S sort  r reverse  p/P or Tab pick a pool  a all pools  q quit".to_owned(),
        );
    }
    if let Some(note) = frame.note {
        lines.push(clean_str(note));
    }
    lines.push(String::new());
    let mut heading: Vec<String> = POOL_COLUMNS
        .iter()
        .map(|&(name, width, right)| cell(name, width, right))
        .collect();
    heading.push("RESTARTS".to_owned());
    lines.push(format!("  {}", heading.join(" ")));
    for row in &order {
        let mark = if view.pick.as_deref() == Some(row.name.as_str()) {
            "> "
        } else {
            "  "
        };
        lines.push(format!("{mark}{}", pool_line(row)));
    }
    lines.push(String::new());
    match &view.pick {
        Some(pick) => match frame.pools.iter().find(|p| &p.pool == pick) {
            Some(pool) => workers(&mut lines, pool),
            None => lines.push(format!("pool {} is gone", clean_str(pick))),
        },
        None => slowest(&mut lines, frame.pools),
    }
    if let Some(height) = height {
        lines.truncate(height);
    }
    lines
        .into_iter()
        .map(|line| line.chars().take(width).collect())
        .collect()
}

fn pool_line(row: &Row) -> String {
    let caps = format!("{}/{}", row.total, row.max_children);
    let cells = [
        clean_str(&row.name),
        clean_str(&row.runtime),
        clean_str(&row.process_manager),
        row.busy.to_string(),
        row.idle.to_string(),
        caps,
        or_dash(row.rate.map(|r| format!("{r:.1}"))),
        or_dash(row.p50.map(duration)),
        or_dash(row.p99.map(duration)),
        or_dash(row.queue),
        or_dash(row.oldest_wait.map(duration)),
        or_dash(row.wait_p99.map(|p99| match row.wait_floor {
            // Within the first bucket is "no wait" to the estimate's resolution.
            Some(floor) if p99 <= floor => format!("<{}", duration(floor)),
            _ => duration(p99),
        })),
        row.timed_out.to_string(),
        or_dash(row.memory.map(bytes)),
    ];
    let mut out: Vec<String> = cells
        .iter()
        .zip(POOL_COLUMNS)
        .map(|(text, (_, width, right))| cell(text, width, right))
        .collect();
    let restarts: Vec<String> = row
        .recycled
        .causes()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(cause, n)| format!("{cause} {n}"))
        .collect();
    out.push(if restarts.is_empty() {
        "-".to_owned()
    } else {
        restarts.join(", ")
    });
    out.join(" ")
}

/// Every pool's running requests, the longest first.
fn slowest(lines: &mut Vec<String>, pools: &[Pool]) {
    lines.push("SLOWEST REQUESTS IN FLIGHT".to_owned());
    lines.push(format!(
        "  {} {} {} {} {:<40} REQUEST ID",
        cell("POOL", 14, false),
        cell("PID", 8, true),
        cell("ELAPSED", 8, true),
        cell("METHOD", 7, false),
        "URI"
    ));
    let flights = in_flight(pools);
    if flights.is_empty() {
        lines.push("  (none)".to_owned());
    }
    for flight in flights {
        let w = flight.worker;
        lines.push(format!(
            "  {} {} {} {} {} {}",
            cell(&clean_str(flight.pool), 14, false),
            cell(&w.pid.to_string(), 8, true),
            cell(&duration(flight.elapsed), 8, true),
            cell(&or_dash(w.method.as_deref().map(clean_str)), 7, false),
            cell(&or_dash(w.uri.as_deref().map(clean_str)), 40, false),
            or_dash(w.request_id.as_deref().map(clean_str)),
        ));
    }
}

/// One pool's workers: those in a request first, the longest first, then the others.
fn workers(lines: &mut Vec<String>, pool: &Pool) {
    lines.push(format!("WORKERS OF {}", clean_str(&pool.pool)));
    lines.push(format!(
        "  {} {} {} {} {} {} {:<40} REQUEST ID",
        cell("PID", 8, true),
        cell("STATE", 15, false),
        cell("REQS", 6, true),
        cell("ELAPSED", 8, true),
        cell("RSS", 8, true),
        cell("METHOD", 7, false),
        "URI"
    ));
    let mut sorted: Vec<&Worker> = pool.processes.iter().collect();
    sorted.sort_by(|a, b| {
        let running = |w: &Worker| w.is_busy().then_some(w.request_duration.unwrap_or(0));
        running(b).cmp(&running(a)).then(a.pid.cmp(&b.pid))
    });
    for w in sorted {
        let busy = w.is_busy();
        let shown = |value: Option<&str>| or_dash(value.filter(|_| busy).map(clean_str));
        lines.push(format!(
            "  {} {} {} {} {} {} {} {}",
            cell(&w.pid.to_string(), 8, true),
            cell(&clean_str(&w.state), 15, false),
            cell(&or_dash(w.requests), 6, true),
            cell(
                &or_dash(
                    w.request_duration
                        .filter(|_| busy)
                        .map(|us| duration(Duration::from_micros(us)))
                ),
                8,
                true
            ),
            cell(&or_dash(w.rss.map(bytes)), 8, true),
            cell(&shown(w.method.as_deref()), 7, false),
            cell(&shown(w.uri.as_deref()), 40, false),
            shown(w.request_id.as_deref()),
        ));
    }
}

/// `text` padded (or cut) to `width` characters.
fn cell(text: &str, width: usize, right: bool) -> String {
    let text: String = text.chars().take(width).collect();
    if right {
        format!("{text:>width$}")
    } else {
        format!("{text:<width$}")
    }
}

fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// What a client or an app wrote, safe for a terminal: control characters (an escape
/// sequence's ESC among them) as `?`.
fn clean_str(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A duration in the unit that reads best: `0`, `850us`, `12.5ms`, `340ms`, `2.35s`, `4m05s`.
pub fn duration(d: Duration) -> String {
    let us = d.as_micros();
    match us {
        0 => "0".to_owned(),
        1..1_000 => format!("{us}us"),
        1_000..10_000 => format!("{:.1}ms", us as f64 / 1e3),
        10_000..1_000_000 => format!("{}ms", us / 1_000),
        1_000_000..60_000_000 => format!("{:.2}s", us as f64 / 1e6),
        _ => format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60),
    }
}

/// Bytes in binary units, one decimal: `812K`, `36.1M`, `1.2G`.
pub fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let n = n as f64;
    if n < KIB * KIB {
        format!("{:.0}K", n / KIB)
    } else if n < KIB * KIB * KIB {
        format!("{:.1}M", n / (KIB * KIB))
    } else {
        format!("{:.1}G", n / (KIB * KIB * KIB))
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
