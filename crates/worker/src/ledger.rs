//! A worker's books, one per worker process, kept the same way by every loop that serves
//! requests: the blocking loop ([`crate::serve`]), a worker's threads ([`crate::threads`]),
//! the ASGI event loop (`drover-python`), and any caller that takes requests itself. (PHP
//! worker mode is the blocking loop's: it switches to the worker script inside
//! `Handler::handle`.) Each request is begun from its params
//! ([`Ledger::begin`], which gives a [`Ticket`]) and ended with its status
//! ([`Ledger::end`], which takes the ticket back). The ledger owns what a request leaves:
//!
//! - **The scoreboard slot**, claimed when the ledger opens. Busy while any request is in
//!   flight, it shows the *oldest* one, with its start: so `request_terminate_timeout` and
//!   the slowlog see a request that is stuck, and a worker that is only busy (a stream of
//!   short requests, some always in flight) never looks stuck. Every request counts once in
//!   the slot's total. A worker that runs one request at a time ([`Concurrency::One`]) also
//!   shows its reading and finishing phases.
//! - **The pool's area**: requests taken (`accepted conn`), the duration histogram and the
//!   responses by status class, every request counted (which the master's sampling could
//!   not achieve).
//! - **The access log**: a line per request, one writer at a time (lines never interleave).
//! - **The request id** ([`crate::request_id`]): the one the request came with, else one
//!   the ledger makes; in the slot (for the master's slowlog and kill lines), in the
//!   access log line (`%I`), and, when the loop calls [`Ledger::identify`] before the app
//!   runs, in what the app sees.
//! - **`max_requests`**, which counts the requests the worker *handled*: ended, answered or
//!   not (the client went away), status and ping requests too, as gunicorn and php-fpm
//!   count. Once the count reaches the limit the worker takes no new request; those in
//!   flight finish, so a worker that runs several at once may answer up to that many more.
//! - **`max_memory`**: the resident memory, checked after each request (the master's 100 ms
//!   sampling can miss many fast ones); above it the worker says why, once, and retires.
//! - **When the worker must stop** ([`Ledger::must_stop`]): SIGTERM ([`retire`]),
//!   `max_memory`, `max_requests`, the master's retire flag on the slot, or a loop that
//!   failed ([`Ledger::stop`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use drover_fastcgi::Params;
use drover_proto::zygote::retiring_line;
use drover_scoreboard::{PoolStats, Slot, State, now_us};

use crate::access::{AccessLog, Entry};
use crate::cpu::{CpuTime, process_cpu, thread_cpu};
use crate::request_id::{self, Ids};

/// Where a worker writes in its pool's scoreboard.
#[derive(Clone, Copy)]
pub struct Board<'a> {
    /// Its own slot: its state and current request.
    pub slot: &'a Slot,
    /// The pool's area: the request-duration histogram and responses by status class.
    pub pool: &'a PoolStats,
}

/// How the worker runs its requests, which decides what its slot can show and how a
/// request's CPU time is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// One at a time, on one thread (the blocking loop): the slot also shows the reading
    /// and finishing phases; a request's CPU time is its thread's.
    One,
    /// Several threads, each one request at a time: the slot shows requests only (a
    /// thread's slot of its own would show its phases); CPU time is each thread's.
    Threads,
    /// Interleaved on one thread (an event loop): the slot shows requests only; a
    /// request's CPU time is the process's since the previous request ended (or since it
    /// began, if none was in flight then), so that the figures of overlapping requests add
    /// up to the worker's (no request has a thread of its own), and the loop's idle time
    /// and the worker's start are no request's.
    EventLoop,
}

/// What the zygote decided for the worker's books.
#[derive(Default)]
pub struct Terms {
    /// What the slot and the log show as the script when the caller names none.
    pub label: String,
    /// The worker's generation, claimed with the slot.
    pub generation: u32,
    /// Requests handled before the worker stops (its own draw of the jitter); 0 = never.
    pub max_requests: u32,
    pub max_memory: Option<u64>,
    pub access_log: Option<AccessLog>,
}

/// One worker's books: shared by its loops (`Sync`), written under one lock per request.
pub struct Ledger<'a> {
    board: Option<Board<'a>>,
    concurrency: Concurrency,
    label: String,
    max_requests: u32,
    max_memory: Option<u64>,
    /// Whether there is an access log, without taking the lock.
    logging: bool,
    /// Whether its lines show a response header: each response's head is kept.
    heads: bool,
    /// Requests ended, for `max_requests`.
    handled: AtomicU32,
    /// A loop asked the worker to stop (a thread that failed, or the worker's end seen).
    stop: AtomicBool,
    /// The ids it makes for requests that came without one.
    ids: Ids,
    books: Mutex<Books>,
}

/// What the requests write in turn: the slot's request strings (a seqlock with one writer),
/// the access log (a line at a time), the CPU mark.
struct Books {
    access_log: Option<AccessLog>,
    /// The requests in flight, oldest first: (start, number) → what the slot shows.
    in_flight: BTreeMap<(u64, u64), Shown>,
    next: u64,
    /// Requests begun and not yet ended (the slot's map holds them only with a slot).
    running: usize,
    /// The process's CPU time when the previous request ended, or when the oldest in
    /// flight began ([`Concurrency::EventLoop`]).
    cpu_mark: CpuTime,
    /// When the previous request ended ([`Concurrency::EventLoop`]).
    ended_us: u64,
}

/// An event loop whose next request begins within this of the previous one's end went
/// from one to the other without idling: the end's CPU reading is the next one's start
/// (one `getrusage` per request instead of two), what the loop did between (the closed
/// connection, the next one's accept and read) counted in the next request.
const BUSY_GAP_US: u64 = 1_000;

/// What the slot shows of a request.
struct Shown {
    method: String,
    uri: String,
    query: String,
    /// None: the ledger's label.
    script: Option<String>,
    request_id: String,
}

/// A request in flight, from [`Ledger::begin`] to [`Ledger::end`]. Plain data: it may be
/// kept anywhere meanwhile (an ASGI connection object, a PHP worker-mode request).
#[must_use = "a request begun must be ended, or the slot shows it in flight for ever"]
pub struct Ticket {
    key: (u64, u64),
    start_us: u64,
    /// The thread's CPU time at the start ([`Concurrency::One`], [`Concurrency::Threads`]).
    cpu_start: CpuTime,
    /// The params and script, for the access log line; None without a log.
    logged: Option<(Params, Option<String>)>,
    keeps_head: bool,
    /// The response's CGI head, kept for the access log's `%{Name}o`.
    head: Vec<u8>,
    request_id: String,
}

impl Ticket {
    /// Whether the access log shows a response header: the caller keeps the response's
    /// head and gives it to [`Ticket::keep_head`].
    pub fn keeps_head(&self) -> bool {
        self.keeps_head
    }

    /// The request's id ([`crate::request_id`]), as every line about it shows it.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The response's CGI head went out: a copy is kept when the log shows a header.
    pub fn keep_head(&mut self, head: &[u8]) {
        if self.keeps_head {
            self.head.clear();
            self.head.extend_from_slice(head);
        }
    }
}

impl<'a> Ledger<'a> {
    /// Opens the worker's books and claims its slot (idle, for this pid and generation).
    pub fn open(terms: Terms, board: Option<Board<'a>>, concurrency: Concurrency) -> Ledger<'a> {
        if let Some(board) = board {
            board.slot.claim(nix::unistd::getpid(), terms.generation);
            board.slot.set_state(State::Idle);
        }
        let access_log = terms.access_log;
        Ledger {
            board,
            concurrency,
            label: terms.label,
            max_requests: terms.max_requests,
            max_memory: terms.max_memory,
            logging: access_log.is_some(),
            heads: access_log
                .as_ref()
                .is_some_and(AccessLog::shows_response_headers),
            handled: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            ids: Ids::default(),
            books: Mutex::new(Books {
                access_log,
                in_flight: BTreeMap::new(),
                next: 0,
                running: 0,
                cpu_mark: CpuTime::default(),
                ended_us: 0,
            }),
        }
    }

    /// A request's params are read, before the app sees them: they get the request's id
    /// as `HTTP_X_REQUEST_ID` ([`request_id::stamp`]), the one it came with or a new one,
    /// which [`Ledger::begin`] then takes. Returns the id.
    pub fn identify(&self, params: &mut Params) -> String {
        request_id::stamp(params, &self.ids)
    }

    /// The worker took a connection off the pool's listener (refused or not): counted for
    /// the master's `queue_timeout`, which reads arrivals as connections taken plus those
    /// still queued.
    pub fn connection(&self) {
        if let Some(board) = self.board {
            board.pool.connection();
        }
    }

    /// A request's params are read: it runs from `start_us` (the accept, or its first
    /// bytes). `script`: what the slot and the log show as its script (None: the label).
    /// The slot shows it if no older request is in flight. Its id is the one the params
    /// carry ([`request_id::given`]), else a new one (which the app does not see unless
    /// the loop called [`Ledger::identify`] first).
    pub fn begin(&self, params: &Params, script: Option<String>, start_us: u64) -> Ticket {
        let request_id = request_id::given(params).map_or_else(|| self.ids.make(), str::to_owned);
        if let Some(board) = self.board {
            board.pool.accept();
        }
        let logged = self.logging.then(|| (params.clone(), script.clone()));
        let key = {
            let mut books = self.books();
            if books.running == 0
                && self.concurrency == Concurrency::EventLoop
                && now_us().saturating_sub(books.ended_us) > BUSY_GAP_US
            {
                books.cpu_mark = process_cpu();
            }
            books.running += 1;
            books.next += 1;
            let key = (start_us, books.next);
            if let Some(board) = self.board {
                let text = |name: &str| {
                    String::from_utf8_lossy(params.get(name).unwrap_or_default()).into_owned()
                };
                let shown = Shown {
                    method: text("REQUEST_METHOD"),
                    uri: text("DOCUMENT_URI"),
                    query: text("QUERY_STRING"),
                    script,
                    request_id: request_id.clone(),
                };
                if books.in_flight.is_empty() {
                    self.show(board.slot, start_us, &shown);
                }
                books.in_flight.insert(key, shown);
            }
            key
        };
        Ticket {
            key,
            start_us,
            cpu_start: match self.concurrency {
                Concurrency::EventLoop => CpuTime::default(),
                Concurrency::One | Concurrency::Threads => thread_cpu(),
            },
            logged,
            keeps_head: self.heads,
            head: Vec::new(),
            request_id,
        }
    }

    /// The request ended with `status` (None: unknown, or no head went out) and, when the
    /// runtime measures it, its peak `memory`. It counts as handled; the slot goes idle
    /// when it was the last in flight, else shows the oldest left. Checks `max_memory`;
    /// returns whether the worker must stop ([`Ledger::must_stop`]).
    pub fn end(&self, ticket: Ticket, status: Option<u16>, memory: Option<u64>) -> bool {
        let end_us = now_us();
        let duration_us = end_us.saturating_sub(ticket.start_us);
        let thread = match self.concurrency {
            Concurrency::EventLoop => None,
            Concurrency::One | Concurrency::Threads => Some(thread_cpu().since(&ticket.cpu_start)),
        };
        let mut books = self.books();
        let cpu = thread.unwrap_or_else(|| {
            let now = process_cpu();
            let cpu = now.since(&books.cpu_mark);
            books.cpu_mark = now;
            books.ended_us = end_us;
            cpu
        });
        books.running = books.running.saturating_sub(1);
        if let Some(board) = self.board {
            let slot = board.slot;
            let was_oldest = books.in_flight.keys().next() == Some(&ticket.key);
            books.in_flight.remove(&ticket.key);
            match books.in_flight.iter().next() {
                None => slot.end_request(end_us, cpu.total(), memory),
                Some((&(start_us, _), shown)) => {
                    slot.count_request(duration_us, cpu.total(), memory);
                    if was_oldest {
                        self.show(slot, start_us, shown);
                    }
                }
            }
            board.pool.record(duration_us, status);
        }
        if let (Some(log), Some((params, script))) = (&mut books.access_log, &ticket.logged) {
            log.write(&Entry {
                params,
                status,
                duration: Duration::from_micros(duration_us),
                cpu,
                memory,
                script: script.as_deref().unwrap_or(&self.label),
                head: &ticket.head,
                request_id: &ticket.request_id,
            });
        }
        drop(books);
        self.handled.fetch_add(1, Relaxed);
        self.check_memory();
        self.must_stop()
    }

    /// Requests handled so far (ended, whatever their status).
    pub fn handled(&self) -> u32 {
        self.handled.load(Relaxed)
    }

    /// The worker must take no new request: SIGTERM or `max_memory` ([`retiring`]),
    /// `max_requests` handled, the master's retire flag, or [`Ledger::stop`].
    pub fn must_stop(&self) -> bool {
        retiring()
            || self.stop.load(Relaxed)
            || reached(self.max_requests, self.handled())
            || self.board.is_some_and(|b| b.slot.retire_requested())
    }

    /// Stops the worker: its loops take no new request (a thread that cannot accept ends
    /// the whole worker, which the master replaces).
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// [`Concurrency::One`]: a connection is accepted, or the next request starts on a kept
    /// one; the worker reads a request it knows nothing of yet, from `start_us`.
    pub fn show_reading(&self, start_us: u64) {
        if let Some(slot) = self.phase_slot() {
            slot.begin_reading(start_us);
        }
    }

    /// [`Concurrency::One`]: the worker lingers on a close, for body left unread.
    pub fn show_finishing(&self) {
        if let Some(slot) = self.phase_slot() {
            slot.set_state(State::Finishing);
        }
    }

    /// [`Concurrency::One`]: the connection is closed; idle again, nothing more served.
    pub fn show_idle(&self) {
        if let Some(slot) = self.phase_slot() {
            slot.end_reading(now_us());
        }
    }

    /// The slot, when the worker shows its phases there.
    fn phase_slot(&self) -> Option<&Slot> {
        self.board
            .filter(|_| self.concurrency == Concurrency::One)
            .map(|b| b.slot)
    }

    fn show(&self, slot: &Slot, start_us: u64, shown: &Shown) {
        let script = shown.script.as_deref().unwrap_or(&self.label);
        slot.begin_request_id(
            start_us,
            &shown.method,
            &shown.uri,
            &shown.query,
            script,
            &shown.request_id,
        );
    }

    /// max_memory, after a request: a worker above it says why (one marked write, which
    /// the master logs as the pool's retire line) and retires. Not again once it stops.
    fn check_memory(&self) {
        if self.must_stop() {
            return;
        }
        let rss = || drover_proto::resident_memory(None);
        if let Some(why) = over_memory(self.max_memory, rss) {
            let _ = std::io::stderr().write_all(retiring_line(&why).as_bytes());
            retire();
        }
    }

    /// The lock, even when a thread panicked holding it: what it guards stays whole (a
    /// map and a file), and a panic ends the worker anyway.
    fn books(&self) -> MutexGuard<'_, Books> {
        self.books
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `max_requests`'s decision: `handled` requests reach a limit of `max_requests` (0: none).
fn reached(max_requests: u32, handled: u32) -> bool {
    max_requests > 0 && handled >= max_requests
}

/// `max_memory`'s decision: why a worker whose resident memory (`rss`, read only when there
/// is a limit) is above `limit` retires; None under it, unknown, or without a limit.
fn over_memory(limit: Option<u64>, rss: impl FnOnce() -> Option<u64>) -> Option<String> {
    let limit = limit?;
    let rss = rss().filter(|&rss| rss > limit)?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    Some(format!(
        "resident memory {:.1} MiB, above max_memory ({:.1} MiB)",
        mib(rss),
        mib(limit)
    ))
}

/// Set by SIGTERM, or by `max_memory`: finish the requests in hand, then exit.
static RETIRE: AtomicBool = AtomicBool::new(false);

/// True once SIGTERM (or `max_memory`) asked this worker to stop; a runtime may poll it.
pub fn retiring() -> bool {
    RETIRE.load(Relaxed)
}

/// Asks the worker to stop once the requests in hand are served (SIGTERM's handler;
/// Python, after a request it aborted past `request_terminate_timeout`). Only an atomic
/// store: safe in a signal handler.
pub fn retire() {
    RETIRE.store(true, Relaxed);
}

#[cfg(test)]
mod tests;
