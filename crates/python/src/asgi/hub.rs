//! The FastCGI connections of an ASGI worker, all in Rust: one `Hub` per worker owns an
//! epoll set holding every connection, and the loop watches only that set's descriptor
//! (`add_reader`, with uvloop or plain asyncio; the reader is [`Hub::on_ready`]). When it
//! is readable, one call ([`Hub::poll`]) reads every connection that has bytes, decodes
//! the records (`drover_fastcgi::Decoder`, through [`FastCgi`]) and says what happened:
//! the requests that came (id, scope, the body so far), more body, aborts, connections
//! lost; [`Hub::dispatch`] acts on it, in Rust too: a request gets its `Exchange`
//! (`exchange.rs`, subclassed by `server.py`) and its asyncio Task ([`Hub::begin`]), the
//! rest goes to the request's `Exchange`. The app's `send` (`Exchange.send`) frames through
//! [`Hub::respond`] at once, and the frames go out at the end of the loop's turn, every
//! response of the turn together ([`Hub::on_turn_end`], non-blocking: docs/ARCHITECTURE.md,
//! "A turn's responses go out together"); what the socket does not take is kept here and
//! flushed when the set says the socket is writable, and the app waits only when that
//! exceeds [`WRITE_HIGH`]. The timeouts (`request_read_timeout`, HTTP's `send_timeout`, the
//! lingering close, a retiring worker's idle connections) are deadlines here, behind one
//! loop timer ([`Hub::settle`] has the worker arm it only when the earliest deadline
//! moved; [`Hub::expire`]).
//!
//! Python keeps no object per connection: only each request's (`server.py`'s `Exchange`,
//! and its task).
//!
//! On an HTTP pool (`protocol = "http"`) the connections are HTTP/1.1 clients' and the
//! framing is [`super::http::Http`]'s; what HTTP adds to the hub (keep-alive, its clocks,
//! pipelining, refusals, the WebSocket handover to asyncio) is in `hub/http.rs`.
//!
//! The accepts run on the loop's own thread through io_uring (`ring.rs`: the listener is
//! shared with every worker of the pool and of the next generation, and must stay
//! blocking): the ring's descriptor is in the set, and each socket accepted joins it and
//! is read at once (nginx's request usually came with the connect). Where io_uring is not
//! to be had, they run on a thread (`accept.rs`), which adds each new socket to the set
//! itself: the loop then wakes when nginx's request is there, not for the accept.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::accept::{Accepting, CLOSED};
use super::conn::{self, Decoded, KEEP, RETIRE};
use super::exchange::Exchange;
use super::ring::Ring;

mod bridge;
mod http;
use http::{KICK, Side, Wire};

/// The epoll events a connection is watched for while its bytes are wanted.
pub(super) const READ: u32 = libc::EPOLLIN as u32;
const WRITE: u32 = libc::EPOLLOUT as u32;

/// What [`Hub::poll`] and [`Hub::expire`] return, as the first item of each tuple.
const REQUEST: u8 = 0;
const BODY: u8 = 1;
const ABORT: u8 = 2;
const GONE: u8 = 4;
const DRAINED: u8 = 5;
const SHUT: u8 = 6;

/// What [`Hub::respond`] and [`Hub::fail`] say: sent; sent, and the app must wait for
/// [`DRAINED`]; the connection is gone; the request ended and the worker must retire.
const SENT: u8 = 0;
pub(super) const PRESSED: u8 = 1;
pub(super) const LOST: u8 = 2;
pub(super) const RETIRED: u8 = 3;

/// Unsent bytes past which the app's `send()` waits, and below which it goes on (asyncio's
/// transport marks).
const WRITE_HIGH: usize = 64 << 10;
const WRITE_LOW: usize = 16 << 10;
/// How long a closing connection with request body still arriving is read and dropped.
const LINGER: Duration = Duration::from_secs(5);
/// How long a retiring worker keeps a kept connection open while it idles between
/// requests. nginx may send a request on an idle kept connection at any moment, and a close
/// under it loses the request (nginx tries again only for a non-POST on a kept connection,
/// and on another kept one, which may be this worker's too): so the connection waits for
/// its next request, which is served and ends the connection ([`NOT_KEPT`]), or for nginx
/// to close it. Idle this long, it is at the cold end of nginx's cache, the last one nginx
/// would pick: it closes.
const RETIRE_IDLE: Duration = Duration::from_secs(1);
/// Sent after a retiring worker's last END_REQUEST on a kept connection, in the same write:
/// nginx keeps a connection only when the END_REQUEST record ends what it has read, so it
/// closes this one itself (an empty FCGI_GET_VALUES_RESULT, a management record that asks
/// nothing). Closing it ourselves right after leaves nginx a moment to keep it, pick it for
/// the next request and have it reset.
const NOT_KEPT: &[u8] = b"\x01\x0a\x00\x00\x00\x00\x00\x00";
/// The events one `epoll_wait` takes.
const BATCH: usize = 64;
/// The ring's event in the set (0 is the accept thread's pipe, [`KICK`] HTTP's).
const RING: u64 = u64::MAX - 1;

/// One connection.
struct Slot {
    fd: OwnedFd,
    /// The protocol: FastCGI, or HTTP/1.1 on an HTTP pool (`hub/http.rs`).
    fcgi: Wire,
    /// Bytes written that the socket has not taken, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    /// The events the set watches the socket for now.
    watching: u32,
    /// The app has not taken the body that came (over `server.py`'s `BODY_HIGH`).
    paused: bool,
    /// Closing with body still arriving: what comes is read and dropped.
    lingering: bool,
    /// Closes once `out` has gone.
    closing: bool,
    /// `shutdown(SHUT_WR)` once `out` has gone (lingering).
    shut_after: bool,
    /// The app waits for `out` to drain.
    pressed: bool,
    /// `out` holds the app's response, sent at the end of the loop's turn
    /// ([`Hub::on_turn_end`]): the set is not watching for it.
    deferred: bool,
    /// Bytes came since the accept.
    got_any: bool,
    /// A request ended and the connection went on (counted in [`Hub::kept`]).
    kept: bool,
    read_by: Option<Instant>,
    idle_by: Option<Instant>,
    linger_by: Option<Instant>,
    /// HTTP's `send_timeout`: when unsent bytes the client has taken nothing of since
    /// drop the connection. Each write the socket takes part of moves it on without a
    /// new timer: the one in the heap (`send_timer`) comes due first, and pushes the next.
    send_by: Option<Instant>,
    send_timer: Option<Instant>,
}

impl Slot {
    fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    fn wanted(&self) -> u32 {
        let read = if self.lingering || !(self.paused || self.closing) {
            READ
        } else {
            0
        };
        let write = if self.pending() > 0 && !self.deferred {
            WRITE
        } else {
            0
        };
        read | write
    }
}

#[pyclass(module = "_drover_asgi")]
pub struct Hub {
    epoll: OwnedFd,
    /// The accepts: on the loop's thread through io_uring, or else on a thread.
    ring: Option<Ring>,
    accepting: Option<Accepting>,
    /// Connections that went on after a request: the ring's accepts pause for them
    /// (`accept.rs`'s `spread`).
    kept: usize,
    slots: HashMap<u64, Slot>,
    /// Connections adopted in this call, whose `request_read_timeout` starts unless their
    /// request came whole.
    fresh: Vec<u64>,
    /// Connections that closed with a request in hand, for the loop.
    gone: Vec<u64>,
    mount: Py<PyString>,
    asgi: Py<PyDict>,
    read_timeout: Option<Duration>,
    /// HTTP's `send_timeout` (None over FastCGI: nginx reads what it asked for).
    send_timeout: Option<Duration>,
    retiring: bool,
    stopping: bool,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// When the loop's timer is due, if it is armed.
    armed: Option<Instant>,
    /// On an HTTP pool, what its connections add (`hub/http.rs`).
    http: Option<Side>,
    /// The worker (`server.py`'s `Worker`), and what of it each request needs: its
    /// `Exchange` class, the lifespan's `state`, its `tasks`, its loop.
    pub(super) worker: Py<PyAny>,
    exchange: Py<PyAny>,
    state: Py<PyDict>,
    pub(super) tasks: Py<PyDict>,
    pub(super) event_loop: Py<PyAny>,
    /// The requests in hand, by connection id.
    exchanges: HashMap<u64, Py<Exchange>>,
    /// The connections whose responses wait for the end of the loop's turn, and the
    /// hub's `on_turn_end`, which the loop calls then (`call_soon`) when one is waiting.
    deferred: Vec<u64>,
    turn_end: Option<Py<PyAny>>,
    turn_scheduled: bool,
}

#[pymethods]
impl Hub {
    /// Makes the set and starts accepting (says once how). `read_timeout`: the pool's
    /// `request_read_timeout` in seconds; `worker`, `server.py`'s `Worker`, whose requests
    /// are made `exchange`s.
    #[new]
    fn new(
        mount: Py<PyString>,
        asgi: Py<PyDict>,
        read_timeout: Option<f64>,
        worker: &Bound<'_, PyAny>,
        exchange: Py<PyAny>,
    ) -> PyResult<Hub> {
        let py = worker.py();
        // SAFETY: epoll_create1 makes a new descriptor, which the OwnedFd then owns.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
        let (ring, accepting) = match Ring::new() {
            Ok(mut ring) => {
                eprintln!("accepting on the loop's thread (io_uring)");
                ctl(&epoll, libc::EPOLL_CTL_ADD, ring.fileno(), READ, RING);
                ring.arm(Duration::ZERO);
                (Some(ring), None)
            }
            Err(err) => {
                eprintln!("accepting on a thread (io_uring: {err})");
                let accepting = Accepting::start(epoll.as_raw_fd())?;
                ctl(&epoll, libc::EPOLL_CTL_ADD, accepting.fileno(), READ, 0);
                (None, Some(accepting))
            }
        };
        let http = Side::new(&epoll)?;
        Ok(Hub {
            epoll,
            ring,
            accepting,
            kept: 0,
            slots: HashMap::new(),
            fresh: Vec::new(),
            gone: Vec::new(),
            mount,
            asgi,
            read_timeout: read_timeout.map(Duration::from_secs_f64),
            send_timeout: super::http::config().map(|config| config.send_timeout),
            retiring: false,
            stopping: false,
            timers: BinaryHeap::new(),
            armed: None,
            http,
            state: worker.getattr(pyo3::intern!(py, "state"))?.extract()?,
            tasks: worker.getattr(pyo3::intern!(py, "tasks"))?.extract()?,
            event_loop: worker.getattr(pyo3::intern!(py, "loop"))?.unbind(),
            worker: worker.clone().unbind(),
            exchange,
            exchanges: HashMap::new(),
            deferred: Vec::new(),
            turn_end: None,
            turn_scheduled: false,
        })
    }

    /// The loop starts watching the set ([`Hub::on_ready`] its reader), and the hub keeps
    /// its `on_turn_end` for the turns to come.
    fn serve(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (fd, event_loop) = {
            let hub = slf.borrow();
            (hub.epoll.as_raw_fd(), hub.event_loop.clone_ref(py))
        };
        event_loop.bind(py).call_method1(
            pyo3::intern!(py, "add_reader"),
            (fd, slf.getattr(pyo3::intern!(py, "on_ready"))?),
        )?;
        slf.borrow_mut().turn_end = Some(slf.getattr(pyo3::intern!(py, "on_turn_end"))?.unbind());
        Ok(())
    }

    /// The connections open.
    fn open(&self) -> usize {
        self.slots.len()
    }

    /// The app's `http.response.body` for request `id` (its head held from
    /// `http.response.start` given as `status` and `headers`): framed at once, sent at the
    /// turn's end ([`Hub::write_deferred`]).
    /// Returns 0 sent, 1 sent but the app must wait for `(5, id)`, 2 the connection is
    /// gone, 3 the request ended and the worker must retire.
    #[pyo3(signature = (id, status, headers, body, more))]
    pub(super) fn respond(
        &mut self,
        py: Python<'_>,
        id: u64,
        status: Option<u16>,
        headers: Option<Bound<'_, PyAny>>,
        body: &[u8],
        more: bool,
    ) -> PyResult<u8> {
        if !more {
            self.forget(id);
        }
        let retiring = self.retiring;
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(LOST);
        };
        let mut data = Vec::new();
        slot.fcgi.frame(&mut data, status, headers, body, more)?;
        let verdict = if more {
            KEEP
        } else {
            if retiring {
                data.extend_from_slice(slot.fcgi.not_kept());
            }
            slot.fcgi.done()
        };
        if !self.write_deferred(py, id, &data)? {
            return Ok(LOST);
        }
        if more {
            let slot = self.slots.get_mut(&id).expect("written to");
            if slot.pending() > WRITE_HIGH {
                slot.pressed = true;
                return Ok(PRESSED);
            }
            return Ok(SENT);
        }
        Ok(self.ended(py, id, verdict))
    }

    /// The app failed on request `id` (raised, or returned without finishing its
    /// response): a 500, or the response cut short ([`FastCgi::fail_into`]); `gone`: the
    /// client is gone, nothing is written and the connection closes. Returns as
    /// [`Hub::respond`].
    fn fail(&mut self, py: Python<'_>, id: u64, gone: bool) -> PyResult<u8> {
        self.forget(id);
        let retiring = self.retiring;
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(LOST);
        };
        if gone || !slot.fcgi.in_hand() {
            slot.fcgi.gone();
            self.close(id, true);
            return Ok(LOST);
        }
        let mut data = Vec::new();
        slot.fcgi.fail_into(&mut data);
        if retiring {
            data.extend_from_slice(slot.fcgi.not_kept());
        }
        let verdict = slot.fcgi.done();
        if !self.write_deferred(py, id, &data)? {
            return Ok(LOST);
        }
        Ok(self.ended(py, id, verdict))
    }

    /// The app has not taken the body that came: the connection is not read until
    /// [`Hub::resume`].
    pub(super) fn pause(&mut self, id: u64) {
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.paused = true;
            watch(&self.epoll, id, slot);
        }
    }

    pub(super) fn resume(&mut self, id: u64) {
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.paused = false;
            watch(&self.epoll, id, slot);
        }
    }

    /// A WebSocket's socket, handed to asyncio ([`http`]'s upgrade), is closed: the
    /// acceptor stops counting it.
    fn release(&self) {
        if let Some(accepting) = &self.accepting {
            accepting.released();
        }
    }

    /// The worker retires: accepts stop; a connection with a request in hand closes after
    /// its response, one between requests at once (`stopping`: the pool stops, and
    /// nothing would serve what nginx sends on it) or once it has idled [`RETIRE_IDLE`].
    /// Returns whether the listener was found shut meanwhile.
    fn retire(&mut self, py: Python<'_>, stopping: bool) -> PyResult<bool> {
        self.retiring = true;
        self.stopping |= stopping;
        if let Some(accepting) = &mut self.accepting {
            accepting.stop(py);
        }
        if let Some(ring) = &mut self.ring {
            ring.stop();
        }
        // A retiring worker defers nothing: its loop may stop before the turn's end.
        self.send_deferred();
        let out = PyList::empty(py);
        self.adopt_queued(py, &out)?;
        self.adopt_ring(py, None)?;
        self.settle_fresh();
        let ids: Vec<u64> = self.slots.keys().copied().collect();
        for id in ids {
            self.retire_one(id);
        }
        Ok(self.stopping)
    }

    /// How long until the loop's timer must fire, when it must be armed anew (an earlier
    /// deadline came); else -1.
    fn timer(&mut self) -> f64 {
        if self.timers.len() > 64 + 4 * self.slots.len() {
            self.rebuild_timers();
        }
        let Some(Reverse((at, _))) = self.timers.peek() else {
            return -1.0;
        };
        let at = *at;
        if self.armed.is_some_and(|armed| armed <= at) {
            return -1.0;
        }
        self.armed = Some(at);
        at.saturating_duration_since(Instant::now()).as_secs_f64()
    }

    /// The set is readable (the loop's reader): one call serves it, begins the requests
    /// that came and tells the others what happened to theirs.
    fn on_ready(slf: &Bound<'_, Self>) -> PyResult<()> {
        let events = slf.borrow_mut().poll(slf.py())?;
        Hub::dispatch(slf, &events)?;
        Hub::settle(slf)
    }

    /// The end of the loop's turn, when a response waits for it: the responses the turn's
    /// requests made go out, one `send` each, close together. So the peer (nginx, or an
    /// HTTP client) finds them together and reads them in one wake, and sends the next
    /// requests together, which the next poll reads together; written as each app sent
    /// them, they went out one by one and the peer woke for each.
    fn on_turn_end(slf: &Bound<'_, Self>) -> PyResult<()> {
        let out = {
            let mut hub = slf.borrow_mut();
            hub.turn_scheduled = false;
            hub.send_deferred();
            let out = PyList::empty(slf.py());
            hub.report_gone(&out)?;
            out
        };
        if !out.is_empty() {
            Hub::dispatch(slf, &out)?;
        }
        Hub::settle(slf)
    }

    /// The loop's timer fired: the deadlines due are acted on.
    fn on_timer(slf: &Bound<'_, Self>) -> PyResult<()> {
        let events = slf.borrow_mut().expire(slf.py())?;
        Hub::dispatch(slf, &events)?;
        Hub::settle(slf)
    }

    /// After the hub acted: its earliest deadline gets the loop's timer (`Worker.arm`,
    /// called only when that deadline moved), and a retiring worker looks whether it is
    /// done.
    pub(super) fn settle(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (delay, retiring, worker) = {
            let mut hub = slf.borrow_mut();
            (hub.timer(), hub.retiring, hub.worker.clone_ref(py))
        };
        let worker = worker.bind(py);
        if delay >= 0.0 {
            worker.call_method1(pyo3::intern!(py, "arm"), (delay,))?;
        }
        if retiring {
            worker.call_method0(pyo3::intern!(py, "check_done"))?;
        }
        Ok(())
    }
}

impl Hub {
    /// The worker retires (its `retiring`, once the hub is made).
    pub(super) fn is_retiring(&self) -> bool {
        self.retiring
    }

    /// Request `id` ended (its response complete, or failed): the hub forgets its exchange.
    fn forget(&mut self, id: u64) {
        self.exchanges.remove(&id);
    }

    /// Serves what the set holds: new connections, bytes in, sockets writable. Returns
    /// what the loop acts on: `(0, id, scope, body, complete)` a request, `(1, id, body,
    /// complete)` more of its body, `(2, id)` nginx aborted it, `(4, id)` its connection
    /// is gone, `(5, id)` its unsent bytes drained, `(6, 0)` the listener is shut.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        // SAFETY: epoll_wait writes at most BATCH events into the array; timeout 0.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                BATCH as libc::c_int,
                0,
            )
        };
        let out = PyList::empty(py);
        // After the wait: every id an event names was queued before it joined the set.
        self.adopt_queued(py, &out)?;
        for event in &events[..n.max(0) as usize] {
            let (id, flags) = (event.u64, event.events);
            if id == KICK {
                self.kicked(py, &out)?;
                continue;
            }
            // RING is checked before BRIDGE: its id has every bit but the lowest set.
            if id == RING {
                self.adopt_ring(py, Some(&out))?;
                continue;
            }
            if id & bridge::BRIDGE != 0 {
                self.bridged(id, flags);
                continue;
            }
            if id == 0 {
                if let Some(accepting) = &self.accepting {
                    accepting.clear();
                }
                continue;
            }
            if flags & WRITE != 0 {
                self.flush(id, &out)?;
            }
            let hangup = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
            if flags & (READ | hangup) != 0 {
                self.readable(py, id, &out)?;
            }
        }
        self.settle_fresh();
        self.report_gone(&out)?;
        Ok(out)
    }

    /// The deadlines due are acted on. Returns as [`Hub::poll`].
    fn expire<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.armed = None;
        let now = Instant::now();
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            self.due(id, now);
        }
        let out = PyList::empty(py);
        self.report_gone(&out)?;
        Ok(out)
    }

    /// Acts on what [`Hub::poll`] or [`Hub::expire`] returned: a request gets its
    /// exchange and task ([`Hub::begin`]), the others go to the request's exchange; the
    /// listener's shutting and a WebSocket's handover go to the worker.
    fn dispatch(slf: &Bound<'_, Self>, events: &Bound<'_, PyList>) -> PyResult<()> {
        let py = slf.py();
        for event in events.iter() {
            let event = event.cast_into::<PyTuple>()?;
            let kind: u8 = event.get_item(0)?.extract()?;
            match kind {
                REQUEST => {
                    Hub::begin(
                        slf,
                        event.get_item(1)?.extract()?,
                        event.get_item(2)?.cast_into()?,
                        event.get_item(3)?,
                        event.get_item(4)?.extract()?,
                    )?;
                }
                SHUT => {
                    let worker = slf.borrow().worker.clone_ref(py);
                    let worker = worker.bind(py);
                    worker.setattr(pyo3::intern!(py, "stopping"), true)?;
                    worker.call_method0(pyo3::intern!(py, "retire"))?;
                }
                http::UPGRADE => {
                    let worker = slf.borrow().worker.clone_ref(py);
                    let args = event.get_slice(1, event.len());
                    worker
                        .bind(py)
                        .call_method1(pyo3::intern!(py, "upgrade"), args)?;
                }
                _ => {
                    let id: u64 = event.get_item(1)?.extract()?;
                    let exchange = slf.borrow().exchanges.get(&id).map(|e| e.clone_ref(py));
                    let Some(exchange) = exchange else {
                        continue;
                    };
                    let mut exchange = exchange.bind(py).borrow_mut();
                    match kind {
                        BODY => exchange.feed(
                            py,
                            event.get_item(2)?.cast_into()?,
                            event.get_item(3)?.extract()?,
                        )?,
                        DRAINED => exchange.drained(py)?,
                        _ => exchange.lost(py)?, // ABORT, GONE
                    }
                }
            }
        }
        Ok(())
    }

    /// A request came: its exchange (`server.py`'s `Exchange`), and its task, which the
    /// worker's `tasks` keeps to its end (the loop keeps only a weak reference to a task).
    fn begin(
        slf: &Bound<'_, Self>,
        id: u64,
        scope: Bound<'_, PyDict>,
        body: Bound<'_, PyAny>,
        complete: bool,
    ) -> PyResult<()> {
        let py = slf.py();
        let (worker, kind, state, tasks, event_loop) = {
            let hub = slf.borrow();
            (
                hub.worker.clone_ref(py),
                hub.exchange.clone_ref(py),
                hub.state.clone_ref(py),
                hub.tasks.clone_ref(py),
                hub.event_loop.clone_ref(py),
            )
        };
        let state = state.bind(py);
        if !state.is_empty() {
            scope.set_item(pyo3::intern!(py, "state"), state.copy()?)?;
        }
        let exchange = kind.bind(py).call1((slf, id, body, complete))?;
        let coroutine = exchange.call_method1(pyo3::intern!(py, "run"), (&worker, scope))?;
        let task = event_loop
            .bind(py)
            .call_method1(pyo3::intern!(py, "create_task"), (coroutine,))?;
        let exchange = exchange.cast_into::<Exchange>()?;
        exchange.borrow_mut().task = Some(task.clone().unbind());
        tasks.bind(py).set_item(task, py.None())?;
        slf.borrow_mut().exchanges.insert(id, exchange.unbind());
        Ok(())
    }

    /// Takes the accept thread's new sockets.
    fn adopt_queued(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let Some(accepting) = &self.accepting else {
            return Ok(());
        };
        for (id, fd) in accepting.take() {
            if fd == CLOSED {
                out.append((SHUT, 0))?;
                self.stopping = true;
                continue;
            }
            self.adopt(py, id, fd);
        }
        Ok(())
    }

    /// Takes the ring's new sockets into the set, and reads each at once when `out` is
    /// given (else the set says when it is readable).
    fn adopt_ring(&mut self, py: Python<'_>, out: Option<&Bound<'_, PyList>>) -> PyResult<()> {
        let Some(ring) = &mut self.ring else {
            return Ok(());
        };
        for (id, fd) in ring.take(self.kept) {
            if fd == CLOSED {
                if let Some(out) = out {
                    out.append((SHUT, 0))?;
                }
                self.stopping = true;
                continue;
            }
            self.adopt(py, id, fd);
            ctl(&self.epoll, libc::EPOLL_CTL_ADD, fd, READ, id);
            if let Some(out) = out {
                self.readable(py, id, out)?;
            }
        }
        Ok(())
    }

    /// A new socket becomes connection `id`.
    fn adopt(&mut self, py: Python<'_>, id: u64, fd: RawFd) {
        // SAFETY: the accept handed the new descriptor over; the slot owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let fcgi = self.wire(py, &fd);
        self.slots.insert(
            id,
            Slot {
                fd,
                fcgi,
                out: Vec::new(),
                sent: 0,
                watching: READ,
                paused: false,
                lingering: false,
                closing: false,
                shut_after: false,
                pressed: false,
                deferred: false,
                got_any: false,
                kept: false,
                read_by: None,
                idle_by: None,
                linger_by: None,
                send_by: None,
                send_timer: None,
            },
        );
        self.fresh.push(id);
    }

    /// The connections adopted in this call: the clock runs for one whose request is not
    /// all there (nginx writes it as it connects: usually it is); a retiring worker's
    /// closes or idles out.
    fn settle_fresh(&mut self) {
        for id in std::mem::take(&mut self.fresh) {
            let Some(slot) = self.slots.get_mut(&id) else {
                continue;
            };
            if slot.fcgi.is_http() {
                self.schedule_http(id);
                if self.retiring {
                    self.retire_one(id);
                }
                continue;
            }
            if let Some(timeout) = self.read_timeout
                && slot.read_by.is_none()
                && (!slot.got_any || slot.fcgi.reading())
            {
                let at = Instant::now() + timeout;
                slot.read_by = Some(at);
                self.timers.push(Reverse((at, id)));
            }
            if self.retiring {
                self.retire_one(id);
            }
        }
    }

    /// Reads what connection `id` holds and decodes it.
    fn readable(&mut self, py: Python<'_>, id: u64, out: &Bound<'_, PyList>) -> PyResult<()> {
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(());
        };
        if slot.fcgi.is_http() {
            return self.readable_http(py, id, out);
        }
        if slot.lingering {
            let (_, end) = conn::read_all(slot.fd.as_raw_fd());
            if end != 0 {
                self.finish(id);
            }
            return Ok(());
        }
        let (data, end) = conn::read_all(slot.fd.as_raw_fd());
        if !data.is_empty() {
            slot.got_any = true;
            slot.idle_by = None;
            let events = match slot.fcgi.events(py, &data) {
                Ok(events) => events,
                Err(err) => {
                    eprintln!("closing a FastCGI connection: {}", err.value(py));
                    self.finish(id);
                    return Ok(());
                }
            };
            for event in events {
                match event {
                    Decoded::Request(scope, body, complete) => {
                        out.append((REQUEST, id, scope, PyBytes::new(py, &body), complete))?
                    }
                    Decoded::Body(body, complete) => {
                        out.append((BODY, id, PyBytes::new(py, &body), complete))?
                    }
                    Decoded::Abort => out.append((ABORT, id))?,
                    Decoded::Reply(records) => {
                        if !self.write(id, &records) {
                            return Ok(());
                        }
                    }
                }
            }
            let Some(slot) = self.slots.get_mut(&id) else {
                return Ok(());
            };
            // The clock runs while a request's records are awaited (not while a kept
            // connection idles between requests, which costs a descriptor, not a worker).
            if slot.fcgi.reading() {
                if let Some(timeout) = self.read_timeout
                    && slot.read_by.is_none()
                {
                    let at = Instant::now() + timeout;
                    slot.read_by = Some(at);
                    self.timers.push(Reverse((at, id)));
                }
            } else {
                slot.read_by = None;
                if self.retiring && !slot.fcgi.in_hand() {
                    // Records that were no request (a management record, an abort).
                    self.retire_one(id);
                }
            }
        }
        if end < 0 {
            if let Some(slot) = self.slots.get(&id)
                && !slot.lingering
            {
                if let Some(reason) = slot.fcgi.closed() {
                    eprintln!("closing a FastCGI connection: {reason}");
                }
                self.close(id, false);
            }
        } else if end > 0 {
            self.finish(id);
        }
        Ok(())
    }

    /// Writes `data` on connection `id` (sealed first over TLS), keeping what the socket
    /// does not take; false when the connection is gone (it is then closed).
    fn write(&mut self, id: u64, data: &[u8]) -> bool {
        self.sealed(id, data, Hub::put)
    }

    /// Hands `data` for connection `id`, sealed first over TLS, to `then` ([`Hub::put`] or
    /// [`Hub::hold`]).
    fn sealed(&mut self, id: u64, data: &[u8], then: fn(&mut Hub, u64, &[u8]) -> bool) -> bool {
        match self
            .slots
            .get_mut(&id)
            .and_then(|slot| slot.fcgi.seal(data))
        {
            Some(sealed) => then(self, id, &sealed),
            None => then(self, id, data),
        }
    }

    /// Writes `data` on connection `id` as it is, as [`Hub::write`] does.
    fn put(&mut self, id: u64, data: &[u8]) -> bool {
        let Some(slot) = self.slots.get_mut(&id) else {
            return false;
        };
        if data.is_empty() {
            return true;
        }
        if slot.pending() > 0 {
            slot.out.extend_from_slice(data);
            return true;
        }
        match send(slot.fd.as_raw_fd(), data) {
            Ok(n) if n == data.len() => true,
            Ok(n) => {
                slot.out.clear();
                slot.sent = 0;
                slot.out.extend_from_slice(&data[n..]);
                watch(&self.epoll, id, slot);
                self.pressed_http(id);
                true
            }
            Err(_) => {
                self.finish(id);
                false
            }
        }
    }

    /// Writes the app's `data` on connection `id` at the end of the loop's turn
    /// ([`Hub::on_turn_end`]), or at once when the worker retires ([`Hub::hold`] says
    /// when else); false when the connection is gone.
    fn write_deferred(&mut self, py: Python<'_>, id: u64, data: &[u8]) -> PyResult<bool> {
        let Some(turn_end) = self.turn_end.as_ref().filter(|_| !self.retiring) else {
            return Ok(self.write(id, data));
        };
        let turn_end = turn_end.clone_ref(py);
        let written = self.sealed(id, data, Hub::hold);
        if !self.deferred.is_empty() && !self.turn_scheduled {
            self.event_loop
                .bind(py)
                .call_method1(pyo3::intern!(py, "call_soon"), (turn_end,))?;
            self.turn_scheduled = true;
        }
        Ok(written)
    }

    /// [`Hub::put`]'s twin for the app's responses: `data` waits in connection `id`'s
    /// buffer for the turn's end, unless the socket has not taken what was written before
    /// (then it goes behind that, as `put` does), or the turn has held over [`WRITE_LOW`]
    /// for the connection (then it all goes at once). False when the connection is gone.
    fn hold(&mut self, id: u64, data: &[u8]) -> bool {
        let Some(slot) = self.slots.get_mut(&id) else {
            return false;
        };
        if slot.pending() > 0 && !slot.deferred {
            return self.put(id, data);
        }
        if data.is_empty() {
            return true;
        }
        if slot.pending() == 0 {
            slot.out.clear();
            slot.sent = 0;
        }
        slot.out.extend_from_slice(data);
        if !slot.deferred {
            slot.deferred = true;
            self.deferred.push(id);
        }
        slot.pending() <= WRITE_LOW || self.send_held(id)
    }

    /// Sends every deferred response.
    fn send_deferred(&mut self) {
        for id in std::mem::take(&mut self.deferred) {
            self.send_held(id);
        }
    }

    /// Sends what connection `id` deferred; what the socket does not take waits for the
    /// set's WRITE. False when the connection is gone (it is then closed).
    fn send_held(&mut self, id: u64) -> bool {
        let Some(slot) = self.slots.get_mut(&id) else {
            return false;
        };
        if !slot.deferred {
            return true;
        }
        slot.deferred = false;
        match send(slot.fd.as_raw_fd(), &slot.out[slot.sent..]) {
            Ok(n) => slot.sent += n,
            Err(_) => {
                self.finish(id);
                return false;
            }
        }
        if slot.pending() > 0 {
            watch(&self.epoll, id, slot);
            self.pressed_http(id);
        } else {
            self.all_sent(id);
        }
        true
    }

    /// Connection `id` has sent all it had: its buffer empties, and it closes when it was
    /// closing, or says it is done (`shutdown`) when it lingers. False when it closed.
    fn all_sent(&mut self, id: u64) -> bool {
        let Some(slot) = self.slots.get_mut(&id) else {
            return false;
        };
        slot.out.clear();
        slot.sent = 0;
        slot.send_by = None;
        if slot.closing {
            self.finish(id);
            return false;
        }
        if slot.shut_after {
            slot.shut_after = false;
            shut(&slot.fd);
        }
        watch(&self.epoll, id, slot);
        true
    }

    /// Connection `id` is writable: what it kept goes out.
    fn flush(&mut self, id: u64, out: &Bound<'_, PyList>) -> PyResult<()> {
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(());
        };
        if slot.pending() == 0 {
            return Ok(());
        }
        match send(slot.fd.as_raw_fd(), &slot.out[slot.sent..]) {
            Ok(n) => {
                slot.sent += n;
                if n > 0 && slot.send_by.is_some() {
                    slot.send_by = self.send_timeout.map(|timeout| Instant::now() + timeout);
                }
            }
            Err(_) => {
                self.finish(id);
                return Ok(());
            }
        }
        if slot.pending() == 0 && !self.all_sent(id) {
            return Ok(());
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(());
        };
        if slot.pressed && slot.pending() <= WRITE_LOW {
            slot.pressed = false;
            out.append((DRAINED, id))?;
        }
        if slot.pending() <= WRITE_LOW && slot.fcgi.is_http() {
            self.drained_http(id);
        }
        Ok(())
    }

    /// The request on `id` ended (`verdict` from [`FastCgi::done`]): the connection goes
    /// on or closes.
    fn ended(&mut self, py: Python<'_>, id: u64, verdict: u8) -> u8 {
        if verdict == RETIRE {
            // The accepts stop before the connection closes: nginx, seeing its kept
            // connection close, connects again at once, and that connection must wait in
            // the listener's backlog for the next worker, not reach this one's accept.
            if let Some(accepting) = &mut self.accepting {
                accepting.stop(py);
            }
            if let Some(ring) = &mut self.ring {
                ring.stop();
                // A connection the cancel met joins the set (served: its request is sent).
                let _ = self.adopt_ring(py, None);
            }
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            return LOST;
        };
        if verdict != KEEP || self.retiring {
            self.close(id, true);
            return if verdict == RETIRE { RETIRED } else { SENT };
        }
        if !slot.kept {
            slot.kept = true;
            self.kept += 1;
        }
        if slot.fcgi.is_http() {
            self.next_http(id);
        } else if slot.paused {
            // A body the app left unread paused reading: what is left of it is dropped
            // now, and the next request must be read.
            slot.paused = false;
            watch(&self.epoll, id, slot);
        }
        SENT
    }

    /// Closes `id` once what was written has gone; `linger`: when body is still arriving,
    /// say we are done (`shutdown(SHUT_WR)`) and drop what still comes until nginx closes
    /// (bounded by [`LINGER`]): a close with body unread would reset the connection under
    /// the response.
    fn close(&mut self, id: u64, linger: bool) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.closing || slot.lingering {
            return;
        }
        self.close_notify(id);
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if linger && slot.fcgi.body_unread() {
            slot.lingering = true;
            slot.paused = false;
            if slot.pending() == 0 {
                shut(&slot.fd);
            } else {
                slot.shut_after = true;
            }
            let at = Instant::now() + LINGER;
            slot.linger_by = Some(at);
            self.timers.push(Reverse((at, id)));
            watch(&self.epoll, id, slot);
        } else if slot.pending() > 0 {
            slot.closing = true;
            // A deferred response goes out at the turn's end, and the connection closes
            // then: the set need not hear of it.
            if !slot.deferred {
                watch(&self.epoll, id, slot);
            }
        } else {
            self.finish(id);
        }
    }

    /// Closes `id` now. A request in hand is booked as cut short and the loop told.
    fn finish(&mut self, id: u64) {
        let Some(mut slot) = self.slots.remove(&id) else {
            return;
        };
        if slot.kept {
            self.kept -= 1;
        }
        // The close would take the socket out of the set by itself, but measured without
        // this DEL a new connection each cost more (FastAPI 0.95x, the bare app 0.88x the
        // req/s behind nginx, session 20; why is not known).
        ctl(&self.epoll, libc::EPOLL_CTL_DEL, slot.fd.as_raw_fd(), 0, id);
        if slot.fcgi.in_hand() || slot.pressed {
            slot.fcgi.gone();
            self.gone.push(id);
        }
        if let Some(accepting) = &self.accepting {
            accepting.released();
        }
    }

    fn retire_one(&mut self, id: u64) {
        let stopping = self.stopping;
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.closing || slot.lingering || slot.fcgi.in_hand() {
            return;
        }
        if stopping {
            self.close(id, true);
        } else if slot.fcgi.is_http() {
            self.retire_http(id);
        } else if slot.idle_by.is_none() && !slot.fcgi.reading() {
            let at = Instant::now() + RETIRE_IDLE;
            slot.idle_by = Some(at);
            self.timers.push(Reverse((at, id)));
        }
    }

    /// A deadline of `id` may be due.
    fn due(&mut self, id: u64, now: Instant) {
        let read_timeout = self.read_timeout;
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.fcgi.is_http() {
            return self.due_http(id, now);
        }
        if slot.linger_by.is_some_and(|at| at <= now) {
            self.finish(id);
            return;
        }
        if slot.read_by.is_some_and(|at| at <= now) {
            slot.read_by = None;
            if !(slot.lingering || slot.closing) {
                if slot.paused {
                    // The app has not taken the body that came: the wait is the app's,
                    // not the client's.
                    if let Some(timeout) = read_timeout {
                        let at = now + timeout;
                        slot.read_by = Some(at);
                        self.timers.push(Reverse((at, id)));
                    }
                } else if slot.fcgi.reading() || !slot.got_any {
                    let (what, received) = slot.fcgi.waiting();
                    let secs = read_timeout.map_or(0.0, |t| t.as_secs_f64());
                    eprintln!(
                        "dropped a connection: {what} did not arrive within request_read_timeout ({secs}s); {received} bytes received"
                    );
                    self.finish(id);
                    return;
                }
            }
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.idle_by.is_some_and(|at| at <= now) {
            slot.idle_by = None;
            if !slot.fcgi.in_hand() && !slot.fcgi.reading() {
                self.close(id, true);
            }
        }
    }

    fn rebuild_timers(&mut self) {
        for slot in self.slots.values_mut() {
            slot.send_timer = slot.send_by;
        }
        self.timers = self
            .slots
            .iter()
            .flat_map(|(id, slot)| {
                [slot.read_by, slot.idle_by, slot.linger_by, slot.send_by]
                    .into_iter()
                    .flatten()
                    .map(move |at| Reverse((at, *id)))
            })
            .collect();
        // `armed` stays: the loop's timer is still due then, and a deadline kept by the
        // rebuild is never earlier than the earliest one before it. Forgetting it made the
        // loop cancel and make a timer at each rebuild (one request in about 130 on
        // keep-alive connections).
    }

    fn report_gone(&mut self, out: &Bound<'_, PyList>) -> PyResult<()> {
        for id in self.gone.drain(..) {
            out.append((GONE, id))?;
        }
        Ok(())
    }
}

/// Sets what the set watches `id`'s socket for, when that changed.
fn watch(epoll: &OwnedFd, id: u64, slot: &mut Slot) {
    let wanted = slot.wanted();
    if wanted != slot.watching {
        slot.watching = wanted;
        ctl(epoll, libc::EPOLL_CTL_MOD, slot.fd.as_raw_fd(), wanted, id);
    }
}

fn ctl(epoll: &OwnedFd, op: libc::c_int, fd: RawFd, events: u32, id: u64) {
    let mut event = libc::epoll_event { events, u64: id };
    // SAFETY: an epoll_ctl on the hub's set and a descriptor it owns; the event is read
    // only during the call.
    unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut event) };
}

/// Sends what it can of `data` without blocking: the bytes sent (0 when the socket's
/// buffer is full), or the errno. A peer that is gone is an error (EPIPE), not a SIGPIPE.
fn send(fd: RawFd, data: &[u8]) -> Result<usize, i32> {
    loop {
        // SAFETY: send reads `data.len()` bytes of a live slice.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        match std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
        {
            libc::EINTR => continue,
            libc::EAGAIN => return Ok(0),
            errno => return Err(errno),
        }
    }
}

/// Our end says it will send nothing more: nginx reads the response to its end while
/// what it still sends is read and dropped.
fn shut(fd: &OwnedFd) {
    // SAFETY: shutdown on a descriptor the slot owns; an error (already gone) is of no
    // consequence.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
}
