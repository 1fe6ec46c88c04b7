//! ASGI 3.0 over FastCGI (and HTTP/1.1 with `protocol = "http"`): a Python pool with `interface = "asgi"` runs an event loop in each
//! worker (uvloop when it is importable, else asyncio), serving many requests at once.
//!
//! The split between the languages follows the cost of each part per request:
//!
//! | file        | side   | owns |
//! |-------------|--------|------|
//! | `server.py` | Python | the loop: each request's coroutine (`Exchange.run`) and the `receive` that waits, lifespan, the worker's retire and exit |
//! | `exchange.rs` | Rust | `Exchange`, one request's ASGI cycle: its `send` and `receive`, awaitables already done unless they must wait |
//! | `hub.rs`    | Rust   | `Hub`: every connection of the worker in one epoll set the loop watches; reads, writes, timeouts, lingering close; each request begun (its `Exchange` and task) |
//! | `hub/http.rs` | Rust | the hub's HTTP/1.1 connections: keep-alive and read clocks, refusals, pipelining, the WebSocket handover |
//! | `conn.rs`   | Rust   | `FastCgi`, one connection's protocol: bytes in → events (`drover_fastcgi::Decoder`, the scope built), ASGI messages → records, the ledger |
//! | `link.rs`   | Rust   | non-blocking `recv()` into Rust buffers |
//! | `scope.rs`  | Rust   | the HTTP scope from the params |
//! | `encode.rs` | Rust   | the CGI head, STDOUT and END_REQUEST records (pure) |
//! | `ring.rs`   | Rust   | the accepts on the pool's listener, on the loop's thread through io_uring: one `IORING_OP_ACCEPT` in flight, its completion in the hub's set |
//! | `accept.rs` | Rust   | where io_uring is not to be had: the thread that accepts on the listener and hands sockets to the hub's set |
//! | `http.py`   | Python | `protocol = "http"`: WebSockets, on asyncio's transport once the hub hands the socket over |
//! | `http.rs`   | Rust   | `Http`, `FastCgi`'s twin for HTTP: heads and framing by `drover_worker::http`, chunked bodies |
//!
//! Each request is begun and ended in the worker's [`Ledger`] (`drover_worker::ledger`, as
//! in every worker loop), which keeps the scoreboard slot (the oldest request in flight),
//! the pool's histogram, the access log, `max_requests` and `max_memory`.
//!
//! The worker's order: claim its slot, import the app when it was not preloaded, run
//! lifespan startup (a failure ends the worker with `EXIT_APP_LOAD`, and so the pool, as
//! an app that cannot be imported does), then start accepting. SIGTERM, `max_requests`,
//! `max_memory` and the master's retire flag stop the accepts; in-flight requests finish
//! (the master's `process_control_timeout` bounds them), lifespan shutdown runs, and the
//! worker exits.

mod accept;
mod conn;
pub mod encode;
mod exchange;
mod http;
mod hub;
mod link;
mod ring;
pub mod scope;

use std::ffi::CString;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use drover_worker::ledger::{Concurrency, Ledger, Terms};
use drover_worker::serve::{Board, WorkerConfig};
use pyo3::prelude::*;
use pyo3::types::PyModule;

/// The Python half, compiled into the binary.
const SERVER: &str = include_str!("server.py");
/// The HTTP listener's connection (`protocol = "http"`), on top of `server.py`.
const HTTP: &str = include_str!("http.py");

/// The worker's books, opened by [`open_ledger`]; the connections begin and end their
/// requests there.
static LEDGER: OnceLock<Ledger<'static>> = OnceLock::new();

/// Opens the worker's ledger, which claims its slot: first thing in an ASGI worker, before
/// the app loads (the slot then shows it starting, idle).
pub fn open_ledger(config: &mut WorkerConfig, board: Option<Board<'_>>) {
    // SAFETY: the scoreboard is mapped by the zygote before the fork and never unmapped in
    // the worker, which ends with `_exit` once its loop returns (`become_worker`); nothing
    // reads the ledger after that.
    let board: Option<Board<'static>> = unsafe { std::mem::transmute(board) };
    let _ = LEDGER.set(config.open_ledger(board, Concurrency::EventLoop));
}

/// The worker's ledger (one that writes nowhere if none was opened: never in a worker).
fn ledger() -> &'static Ledger<'static> {
    LEDGER.get_or_init(|| Ledger::open(Terms::default(), None, Concurrency::EventLoop))
}

/// Runs an ASGI worker to its end; returns its exit code. `app` is loaded already, the
/// ledger open ([`open_ledger`]).
pub fn run(py: Python<'_>, app: Py<PyAny>, mount: &str, config: &WorkerConfig) -> i32 {
    let read_timeout = config.request_read_timeout.map(|t| t.as_secs_f64());
    let http = config.http.is_some();
    if let Some(http) = config.http.clone() {
        http::configure(http);
    }
    match serve(py, app, mount, read_timeout, http) {
        Ok(code) => code,
        Err(err) => {
            err.print(py);
            1
        }
    }
}

/// `http`: the pool's protocol is HTTP (the hub's connections speak it).
fn serve(
    py: Python<'_>,
    app: Py<PyAny>,
    mount: &str,
    read_timeout: Option<f64>,
    http: bool,
) -> PyResult<i32> {
    let module = PyModule::new(py, "_drover_asgi")?;
    module.add_class::<hub::Hub>()?;
    module.add_class::<exchange::Exchange>()?;
    module.add_class::<exchange::Ready>()?;
    module.add(
        "ClientDisconnected",
        py.get_type::<exchange::ClientDisconnected>(),
    )?;
    module.add_function(pyo3::wrap_pyfunction!(must_retire, &module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(retiring, &module)?)?;
    module.add_function(pyo3::wrap_pyfunction!(give_back_memory, &module)?)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item("_drover_asgi", &module)?;
    let code =
        CString::new(SERVER).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let server = PyModule::from_code(py, &code, c"drover_asgi/server.py", c"drover_asgi")?;
    if http {
        // The hub frames HTTP itself (`hub/http.rs`); http.py adds the WebSockets, whose
        // sockets the hub hands to asyncio after the handshake.
        let code = CString::new(HTTP)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let http = PyModule::from_code(py, &code, c"drover_asgi/http.py", c"drover_asgi_http")?;
        http.setattr("WS_MAX_SIZE", WS_MAX_SIZE.load(Ordering::Relaxed))?;
    }
    server
        .getattr("run")?
        .call1((app, mount, read_timeout))?
        .extract()
}

/// In the zygote, before `gc.freeze()` and the forks: imports what every ASGI worker's
/// loop needs (asyncio, and uvloop when it is there), so that the workers share it
/// copy-on-write instead of each importing it after its fork.
pub fn preload(py: Python<'_>) {
    for module in ["asyncio", "uvloop"] {
        // uvloop is optional: the worker falls back to asyncio.
        let _ = py.import(module);
    }
}

/// The pool's `ws_max_size`, set by the zygote before the forks.
static WS_MAX_SIZE: AtomicU64 = AtomicU64::new(16 << 20);

/// Records the pool's `ws_max_size` (bytes) for the workers to come.
pub fn configure_websockets(max_size: u64) {
    WS_MAX_SIZE.store(max_size, Ordering::Relaxed);
}

/// A WebSocket that held a large message closed: the heap's free memory goes back to the
/// system. glibc's mmap threshold rises with each large free, so a message's later
/// fragments come from the heap, and its free pages stay with the worker: after a 16 MiB
/// message closed with 1009 a worker settled 5 MiB above where it began (24 → 43 → 29 MiB
/// of RSS); with `malloc_trim`, 1 MiB (24 → 43 → 25).
#[pyfunction]
fn give_back_memory() {
    // SAFETY: malloc_trim only walks glibc's own arenas, under their locks.
    unsafe { libc::malloc_trim(0) };
}

/// The worker's books say it must stop (`max_requests`, `max_memory`, the master's flag).
#[pyfunction]
fn must_retire() -> bool {
    ledger().must_stop()
}

/// SIGTERM came before the loop took the signal over.
#[pyfunction]
fn retiring() -> bool {
    drover_worker::ledger::retiring()
}
