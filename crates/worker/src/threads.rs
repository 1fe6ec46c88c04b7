//! A worker with several threads taking requests (`[python] threads = N`), as gunicorn's
//! gthread worker: each thread runs the worker loop of [`crate::serve`] on its own (accept,
//! read, handle, keep the connection), so that requests that wait (a sleep, a database
//! answer) overlap. The runtime releases its lock (Python's GIL) around those waits; the
//! threads share nothing else but the worker's ledger and what this file guards.
//!
//! What the worker's guarantees become, kept by the worker's one [`Ledger`]:
//! - `max_requests` counts the worker's requests handled (as each ends), all threads
//!   together: once reached, no thread takes another, and the worker exits when every
//!   thread has finished the request in hand (or that of the connection it had just
//!   accepted): the overshoot is at most `threads - 1`.
//! - SIGTERM, `max_memory`, the master's retire flag: the same, for every thread.
//! - The scoreboard: the worker has one slot. It is busy while any thread runs a request and
//!   shows the *oldest* one in flight, with its start (as an ASGI worker's does), so
//!   `request_terminate_timeout` and the slowlog still see a stuck request; every request
//!   counts once in the slot's total. The reading phase and the lingering close are not
//!   shown (a thread's slot of its own would show them).
//! - The access log: one writer, behind the ledger's lock, so lines never interleave.
//!
//! The worker's own thread serves nothing: it starts the threads, then watches for the
//! worker's end and wakes the threads blocked in `accept` or on a kept connection (a
//! SIGTERM sent to that thread alone interrupts its wait: the handler has no
//! `SA_RESTART`). A thread inside a request is never signalled.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use drover_fastcgi::{Params, Request};
use drover_proto::zygote::EXIT_APP_LOAD;

use crate::ledger::{Concurrency, Ledger};
use crate::serve::{self, Board, Conn, Handler, Outcome, Worker, WorkerConfig};

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
    let ledger = match serve::prepare(handler, &mut config, board, Concurrency::Threads) {
        Ok(ledger) => ledger,
        Err(code) => return code,
    };
    // The configuration refuses threads with protocol = "http"; a zygote started by hand
    // with both is told so.
    if config.http.is_some() {
        eprintln!("threads serve FastCGI only, not protocol = \"http\"");
        return i32::from(EXIT_APP_LOAD);
    }
    let allowed = serve::allowed_clients();
    let handlers = threads(handler);
    let lanes: Vec<Lane> = handlers.iter().map(|_| Lane::default()).collect();
    std::thread::scope(|scope| {
        for (handler, lane) in handlers.into_iter().zip(&lanes) {
            let config = thread_config(&config);
            let (ledger, allowed) = (&ledger, &allowed);
            scope.spawn(move || {
                T::thread(|| serve_thread(handler, config, ledger, lane, allowed));
            });
        }
        handler.blocking(|| watch(&ledger, &lanes));
    });
    0
}

/// A thread's copy of the worker's configuration: the access log is the ledger's.
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
    handler: T,
    config: WorkerConfig,
    ledger: &Ledger<'_>,
    lane: &Lane,
    allowed: &[IpAddr],
) {
    // SAFETY: pthread_self has no preconditions.
    lane.pthread
        .store(unsafe { libc::pthread_self() } as u64, Relaxed);
    let _finished = Finished { ledger, lane };
    let mut handler = OnLane { handler, lane };
    let mut worker = Worker {
        handler: &mut handler,
        config,
        ledger,
        buffers: None,
    };
    if serve::accept_loop(&mut worker, allowed) != 0 {
        // A thread that cannot accept ends the worker: the master starts a whole one.
        ledger.stop();
    }
}

/// Marks a thread finished when its loop returns or unwinds: a thread that panicked stops
/// the worker too (the scope then re-raises the panic), rather than leaving the others to
/// serve on short of a thread and [`watch`] waiting for it forever.
struct Finished<'a> {
    ledger: &'a Ledger<'a>,
    lane: &'a Lane,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.ledger.stop();
        }
        self.lane.finished.store(true, Relaxed);
    }
}

/// The worker's own thread, while the others serve: once the worker must stop, wakes every
/// thread that waits for a connection or a request, until all have ended.
fn watch(ledger: &Ledger<'_>, lanes: &[Lane]) {
    loop {
        if lanes.iter().all(|lane| lane.finished.load(Relaxed)) {
            return;
        }
        if ledger.must_stop() {
            // Every thread's loop sees it from now on, whatever made it so.
            ledger.stop();
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
    /// In a wait for a connection or for the next request on a kept one
    /// ([`Handler::blocking`]): signalled only there, never in a request, so that the
    /// app's own waits (a C library that does not retry on `EINTR`) and the worker's own
    /// (the status fetched from the master) are not interrupted.
    waiting: AtomicBool,
    finished: AtomicBool,
}

impl Lane {
    /// Interrupts the thread's wait for a connection or a request.
    fn wake(&self) {
        let pthread = self.pthread.load(Relaxed);
        if pthread == 0 || self.finished.load(Relaxed) || !self.waiting.load(Relaxed) {
            return;
        }
        // SAFETY: the thread is alive (scoped threads are joined after `watch` returns,
        // and it has not finished); SIGTERM's handler only sets the worker's retire flag,
        // which is set already or harmless now that the worker stops.
        unsafe { libc::pthread_kill(pthread as libc::pthread_t, libc::SIGTERM) };
    }
}

/// A thread's handler, which marks its lane while the thread waits.
struct OnLane<'a, T> {
    handler: T,
    lane: &'a Lane,
}

impl<T: Handler> Handler for OnLane<'_, T> {
    fn script(&self, params: &Params) -> Option<String> {
        self.handler.script(params)
    }

    fn handle(&mut self, conn: &Conn, request: Request) -> Outcome {
        self.handler.handle(conn, request)
    }

    fn request_memory(&self) -> Option<u64> {
        self.handler.request_memory()
    }

    fn response_status(&self) -> Option<u16> {
        self.handler.response_status()
    }

    fn blocking<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.lane.waiting.store(true, Relaxed);
        let waited = self.handler.blocking(f);
        self.lane.waiting.store(false, Relaxed);
        waited
    }

    fn thread<R>(f: impl FnOnce() -> R) -> R {
        T::thread(f)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use drover_fastcgi::{Connection, Limits};

    use super::*;
    use crate::exchange::Exchange;

    /// Answers nothing; says whether its lane was marked while it ran.
    struct Probe<'a> {
        lane: &'a Lane,
        marked: Option<bool>,
    }

    impl Handler for Probe<'_> {
        fn handle(&mut self, _conn: &Conn, _request: Request) -> Outcome {
            self.marked = Some(self.lane.waiting.load(Relaxed));
            Outcome { keep: false }
        }
    }

    /// A thread is marked while it waits (for a connection, for the next request), and
    /// only then: the watch never signals it in a request.
    #[test]
    fn a_thread_is_marked_while_it_waits_and_never_in_a_request() {
        let lane = Lane::default();
        let (socket, _web_server) = crate::socket::tests::pair();
        let conn: Conn = Rc::new(RefCell::new(Exchange::fastcgi(Connection::new(
            socket,
            Limits::default(),
        ))));
        let mut on_lane = OnLane {
            handler: Probe {
                lane: &lane,
                marked: None,
            },
            lane: &lane,
        };
        assert!(on_lane.blocking(|| lane.waiting.load(Relaxed)));
        assert!(!lane.waiting.load(Relaxed));
        let request = Request {
            id: 1,
            keep_conn: false,
            params: Params::default(),
        };
        on_lane.handle(&conn, request);
        assert_eq!(on_lane.handler.marked, Some(false));
    }

    /// A thread that panics stops the worker, so the watch does not wait for it forever.
    #[test]
    fn a_thread_that_panics_is_finished_and_stops_the_worker() {
        let ledger = Ledger::open(crate::ledger::Terms::default(), None, Concurrency::Threads);
        let lane = Lane::default();
        let panicked = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _finished = Finished {
                        ledger: &ledger,
                        lane: &lane,
                    };
                    panic!("the handler panicked");
                })
                .join()
        });
        assert!(panicked.is_err());
        assert!(lane.finished.load(Relaxed) && ledger.must_stop());
    }
}
