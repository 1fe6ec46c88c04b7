//! A worker with several threads taking requests (`[python] threads = N`), as gunicorn's
//! gthread worker: each thread runs the worker loop of [`crate::serve`] on its own (accept,
//! read, handle, keep the connection), so that requests that wait (a sleep, a database
//! answer) overlap. The runtime releases its lock (Python's GIL) around those waits; the
//! threads share nothing else but what this file guards.
//!
//! What the worker's guarantees become:
//! - `max_requests` counts the worker's requests, all threads together, as they start: once
//!   reached, no thread takes another, and the worker exits when every thread has finished
//!   the request in hand (a thread that had just accepted a connection serves it: the
//!   overshoot is at most `threads - 1`).
//! - SIGTERM, `max_memory`, the master's retire flag: the same, for every thread.
//! - The scoreboard: the worker has one slot. It is busy while any thread runs a request and
//!   shows the *oldest* one in flight, with its start (as an ASGI worker's does), so
//!   `request_terminate_timeout` and the slowlog still see a stuck request; every request
//!   counts once in the slot's total. The reading phase and the lingering close are not
//!   shown (a thread's slot of its own would show them).
//! - The access log: one writer, behind a lock, so lines never interleave.
//!
//! The worker's own thread serves nothing: it starts the threads, then watches for the
//! worker's end and wakes the threads blocked in `accept` or on a kept connection (a
//! SIGTERM sent to that thread alone interrupts its wait: the handler has no
//! `SA_RESTART`). A thread inside a request is never signalled.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use drover_proto::zygote::EXIT_APP_LOAD;
use drover_scoreboard::Slot;

use crate::access::{AccessLog, Entry};
use crate::serve::{self, Board, Handler, Worker, WorkerConfig};

/// How often the worker's own thread looks for the worker's end. SIGTERM reaches any
/// thread, and the threads' count reaches `max_requests` on its own: a short poll notices
/// both without a wake-up channel into the signal handler.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// Runs a worker whose threads serve requests: the start as [`serve::run`]'s (signals,
/// slot, [`Handler::start`] on `handler`), then `threads(handler)` gives each thread its
/// handler (they share the app `start` loaded). Returns the worker's exit code once every
/// thread has ended.
pub fn run<H: Handler, T: Handler + Send>(
    handler: &mut H,
    threads: impl FnOnce(&mut H) -> Vec<T>,
    mut config: WorkerConfig,
    board: Option<Board<'_>>,
) -> i32 {
    let slot = board.map(|b| b.slot);
    if let Err(code) = serve::prepare(handler, &config, slot) {
        return code;
    }
    // The configuration refuses threads with protocol = "http"; a zygote started by hand
    // with both is told so.
    if config.http.is_some() {
        eprintln!("threads serve FastCGI only, not protocol = \"http\"");
        return i32::from(EXIT_APP_LOAD);
    }
    let allowed = serve::allowed_clients();
    let handlers = threads(handler);
    let shared = Shared::new(config.access_log.take());
    let lanes: Vec<Lane> = handlers.iter().map(|_| Lane::default()).collect();
    let max_requests = config.max_requests;
    std::thread::scope(|scope| {
        for (mut handler, lane) in handlers.into_iter().zip(&lanes) {
            let config = thread_config(&config);
            let (shared, allowed) = (&shared, &allowed);
            scope.spawn(move || {
                T::thread(|| serve_thread(&mut handler, config, board, shared, lane, allowed));
            });
        }
        handler.blocking(|| watch(&shared, &lanes, slot, max_requests));
    });
    0
}

/// A thread's copy of the worker's configuration: the access log stays in [`Shared`].
fn thread_config(config: &WorkerConfig) -> WorkerConfig {
    WorkerConfig {
        label: config.label.clone(),
        max_requests: config.max_requests,
        generation: config.generation,
        max_memory: config.max_memory,
        request_read_timeout: config.request_read_timeout,
        access_log: None,
        http: None,
        builtin: config.builtin.clone(),
    }
}

/// One thread's life: the worker loop, until the worker must stop.
fn serve_thread<T: Handler>(
    handler: &mut T,
    config: WorkerConfig,
    board: Option<Board<'_>>,
    shared: &Shared,
    lane: &Lane,
    allowed: &[IpAddr],
) {
    // SAFETY: pthread_self has no preconditions.
    lane.pthread
        .store(unsafe { libc::pthread_self() } as u64, Relaxed);
    let _finished = Finished { shared, lane };
    let mut worker = Worker {
        handler,
        config,
        slot: board.map(|b| b.slot),
        pool: board.map(|b| b.pool),
        served: 0,
        threaded: Some(Threaded { shared, lane }),
        buffers: None,
    };
    if serve::accept_loop(&mut worker, allowed) != 0 {
        // A thread that cannot accept ends the worker: the master starts a whole one.
        shared.stop.store(true, Relaxed);
    }
}

/// Marks a thread finished when its loop returns or unwinds: a thread that panicked stops
/// the worker too (the scope then re-raises the panic), rather than leaving the others to
/// serve on short of a thread and [`watch`] waiting for it forever.
struct Finished<'a> {
    shared: &'a Shared,
    lane: &'a Lane,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.stop.store(true, Relaxed);
        }
        self.lane.finished.store(true, Relaxed);
    }
}

/// The worker's own thread, while the others serve: once the worker must stop, wakes every
/// thread that waits for a connection or a request, until all have ended.
fn watch(shared: &Shared, lanes: &[Lane], slot: Option<&Slot>, max_requests: u32) {
    loop {
        if lanes.iter().all(|lane| lane.finished.load(Relaxed)) {
            return;
        }
        let stopping = serve::retiring()
            || shared.stopping()
            || slot.is_some_and(Slot::retire_requested)
            || (max_requests > 0 && shared.started() >= max_requests);
        if stopping {
            shared.stop.store(true, Relaxed);
            // Again on every round: a signal that lands just before a thread enters its
            // wait is lost, the next one is not.
            for lane in lanes {
                lane.wake();
            }
        }
        std::thread::sleep(WATCH_EVERY);
    }
}

/// What one thread shows the others.
#[derive(Default)]
struct Lane {
    /// The thread's `pthread_t` (0 until it runs), for `pthread_kill`.
    pthread: AtomicU64,
    /// Inside [`Handler::handle`]: never signalled there, so that the app's own waits (a C
    /// library that does not retry on `EINTR`) are not interrupted.
    in_request: AtomicBool,
    finished: AtomicBool,
}

impl Lane {
    /// Interrupts the thread's wait for a connection or a request.
    fn wake(&self) {
        let pthread = self.pthread.load(Relaxed);
        if pthread == 0 || self.finished.load(Relaxed) || self.in_request.load(Relaxed) {
            return;
        }
        // SAFETY: the thread is alive (scoped threads are joined after `watch` returns,
        // and it has not finished); SIGTERM's handler only sets the worker's retire flag,
        // which is set already or harmless now that the worker stops.
        unsafe { libc::pthread_kill(pthread as libc::pthread_t, libc::SIGTERM) };
    }
}

/// What a worker's threads share.
pub(crate) struct Shared {
    /// Requests started, all threads together, for `max_requests`.
    started: AtomicU32,
    /// The worker stops: no thread takes another request.
    stop: AtomicBool,
    /// Whether there is an access log, without taking the lock.
    logging: bool,
    /// Whether its lines show a response header: each response's head is kept.
    heads: bool,
    books: Mutex<Books>,
}

/// What the threads write in turn: the slot's request strings (a seqlock with one writer)
/// and the access log (one line at a time).
struct Books {
    access_log: Option<AccessLog>,
    /// The requests in flight, oldest first: (start, number) → what the slot shows.
    in_flight: BTreeMap<(u64, u64), [String; 4]>,
    next: u64,
}

impl Shared {
    fn new(access_log: Option<AccessLog>) -> Shared {
        Shared {
            started: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            logging: access_log.is_some(),
            heads: access_log
                .as_ref()
                .is_some_and(AccessLog::shows_response_headers),
            books: Mutex::new(Books {
                access_log,
                in_flight: BTreeMap::new(),
                next: 0,
            }),
        }
    }

    pub(crate) fn started(&self) -> u32 {
        self.started.load(Relaxed)
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
    }

    pub(crate) fn logging(&self) -> bool {
        self.logging
    }

    pub(crate) fn heads(&self) -> bool {
        self.heads
    }

    /// A request starts on a worker without a slot: it counts for `max_requests`.
    pub(crate) fn count_start(&self) {
        self.started.fetch_add(1, Relaxed);
    }

    /// Writes a request's access log line.
    pub(crate) fn log(&self, entry: &Entry<'_>) {
        if let Some(log) = &mut self.books().access_log {
            log.write(entry);
        }
    }

    /// The lock, even when a thread panicked holding it: what it guards stays whole (a
    /// map and a file), and a panic ends the worker anyway.
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A thread of a worker, as its loop ([`Worker`]) sees it.
#[derive(Clone, Copy)]
pub(crate) struct Threaded<'a> {
    pub(crate) shared: &'a Shared,
    lane: &'a Lane,
}

/// A request in flight, as [`Threaded::begin`] recorded it.
pub(crate) struct Ticket((u64, u64));

impl Threaded<'_> {
    /// A request's params are read: it counts, and the slot shows it if it is the only one.
    /// `shown`: method, URI, query, script.
    pub(crate) fn begin(&self, slot: &Slot, start_us: u64, shown: [String; 4]) -> Ticket {
        self.shared.started.fetch_add(1, Relaxed);
        self.lane.in_request.store(true, Relaxed);
        let mut books = self.shared.books();
        books.next += 1;
        let key = (start_us, books.next);
        if books.in_flight.is_empty() {
            show(slot, start_us, &shown);
        }
        books.in_flight.insert(key, shown);
        Ticket(key)
    }

    /// The request ended: one more served; the slot goes idle when it was the last in
    /// flight, else shows the oldest left.
    pub(crate) fn end(
        &self,
        slot: &Slot,
        ticket: Ticket,
        end_us: u64,
        duration_us: u64,
        cpu: Duration,
        memory: Option<u64>,
    ) {
        self.lane.in_request.store(false, Relaxed);
        let mut books = self.shared.books();
        let was_oldest = books.in_flight.keys().next() == Some(&ticket.0);
        books.in_flight.remove(&ticket.0);
        match books.in_flight.iter().next() {
            None => slot.end_request(end_us, cpu, memory),
            Some((&(start_us, _), shown)) => {
                slot.count_request(duration_us, cpu, memory);
                if was_oldest {
                    show(slot, start_us, shown);
                }
            }
        }
    }
}

fn show(slot: &Slot, start_us: u64, [method, uri, query, script]: &[String; 4]) {
    slot.begin_request(start_us, method, uri, query, script);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot shows the oldest request in flight and goes idle with the last.
    #[test]
    fn slot_shows_the_oldest_request_in_flight() {
        let board = drover_scoreboard::Scoreboard::create("test", 1).expect("memfd scoreboard");
        let slot = board.slot(0);
        assert!(slot.claim(nix::unistd::Pid::from_raw(100), 1));
        let view = || board.snapshot().pop().expect("the claimed slot");
        let uri = || view().request.expect("an untorn read").uri;
        let shared = Shared::new(None);
        let (a, b) = (Lane::default(), Lane::default());
        let (ta, tb) = (
            Threaded {
                shared: &shared,
                lane: &a,
            },
            Threaded {
                shared: &shared,
                lane: &b,
            },
        );
        let shown = |uri: &str| ["GET".into(), uri.into(), String::new(), "app".into()];
        let first = ta.begin(slot, 100, shown("/first"));
        let second = tb.begin(slot, 200, shown("/second"));
        assert_eq!(shared.started(), 2);
        assert!(a.in_request.load(Relaxed) && b.in_request.load(Relaxed));
        assert_eq!((uri(), view().since_us), ("/first".to_string(), 100));
        ta.end(slot, first, 300, 200, Duration::ZERO, None);
        assert_eq!((uri(), view().since_us), ("/second".to_string(), 200));
        assert!(view().state.is_busy());
        assert_eq!(view().requests, 1);
        tb.end(slot, second, 400, 200, Duration::ZERO, None);
        assert!(!view().state.is_busy());
        assert_eq!(view().requests, 2);
        assert!(!b.in_request.load(Relaxed));
    }

    /// A thread that panics stops the worker, so the watch does not wait for it forever.
    #[test]
    fn a_thread_that_panics_is_finished_and_stops_the_worker() {
        let shared = Shared::new(None);
        let lane = Lane::default();
        let panicked = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _finished = Finished {
                        shared: &shared,
                        lane: &lane,
                    };
                    panic!("the handler panicked");
                })
                .join()
        });
        assert!(panicked.is_err());
        assert!(lane.finished.load(Relaxed) && shared.stopping());
    }
}
