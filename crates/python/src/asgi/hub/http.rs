//! The hub's HTTP/1.1 connections (`protocol = "http"`): the same set, reads, writes,
//! backpressure and lingering close as FastCGI's (`hub.rs`), with the framing of
//! [`Http`] (`asgi/http.rs`, on drover-worker's sans-I/O `Incoming`) and what HTTP adds:
//!
//! - one clock at a time per connection: `keepalive_timeout` while it idles between
//!   requests (closed without a word), `request_read_timeout` (60 s when that is off) while
//!   a head or a body is arriving (dropped, with a log line), none while the app has the
//!   request; and beside it, while written bytes wait unsent, `send_timeout` (the client
//!   took nothing of them that long: dropped, with a log line);
//! - a refused head (or a chunked body past `max_request_body`) answered, logged, closed;
//! - pipelining: a request at a time, the next one taken from the buffer once the one in
//!   hand is answered, through the set's [`KICK`] descriptor (the answer is written in the
//!   app's `send()`, which returns no events); reading stops while more than
//!   [`PIPELINE_HIGH`] is buffered behind the request in hand, and the next request waits
//!   while the client has not read the answers past [`WRITE_HIGH`];
//! - a WebSocket handshake hands the socket over to asyncio (`http.py`'s `WsConn`), with
//!   the head's bytes, what followed them and what the hub had not written yet;
//! - TLS (`certfile`): a [`Session`] per connection between the socket and [`Http`]
//!   (drover-worker's, which the WSGI loop drives too): what is read is decrypted before
//!   the framing sees it, what is written sealed before it joins the slot's unsent bytes
//!   (the backpressure counts records), the handshake goes on in the reads, under the
//!   `request_read_timeout` clock; a client whose bytes are not TLS gets rustls's alert
//!   and the close. A WebSocket over TLS keeps its session here: asyncio gets one end of
//!   a socketpair, and the hub pumps plaintext between it and the client (`bridge.rs`).
//!
//! Python sees the same tuples as over FastCGI, plus [`UPGRADE`].

use std::cmp::Reverse;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::time::{Duration, Instant};

use drover_worker::tls::Session;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::bridge::Bridge;
use super::{BODY, Hub, READ, REQUEST, Slot, WRITE_HIGH, ctl, watch};
use crate::asgi::conn::{Decoded, FastCgi};
use crate::asgi::http::{self, Event, Http};

/// `(7, fd, scope, head, rest, unsent)`: a WebSocket handshake; the socket is Python's
/// from here on.
pub(super) const UPGRADE: u8 = 7;
/// The event id of the set's eventfd, written when a connection has a pipelined request
/// buffered and no byte will come to say so.
pub(super) const KICK: u64 = u64::MAX;
/// Bytes buffered behind the request in hand past which the socket is not read.
const PIPELINE_HIGH: usize = 64 << 10;
/// How long a head or body may take when `request_read_timeout` is off.
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection accepted just before the worker retired waits for its request.
const RETIRE_IDLE: Duration = Duration::from_secs(1);

/// A connection's protocol: FastCGI from nginx, or HTTP/1.1 from the client itself,
/// over TLS when the pool has `certfile`.
pub(super) enum Wire {
    Fcgi(FastCgi),
    Http(Http, Option<Box<Session>>),
}

impl Wire {
    pub(super) fn is_http(&self) -> bool {
        matches!(self, Wire::Http(..))
    }

    /// FastCGI's events; an HTTP connection is read by [`Hub::readable_http`] and has
    /// none here.
    pub(super) fn events<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Vec<Decoded<'py>>> {
        match self {
            Wire::Fcgi(fcgi) => fcgi.events(py, data),
            Wire::Http(..) => Ok(Vec::new()),
        }
    }

    pub(super) fn frame(
        &mut self,
        out: &mut Vec<u8>,
        status: Option<u16>,
        headers: Option<Bound<'_, PyAny>>,
        body: &[u8],
        more: bool,
    ) -> PyResult<()> {
        match self {
            Wire::Fcgi(fcgi) => fcgi.frame(out, status, headers, body, more),
            Wire::Http(http, _) => http.frame(out, status, headers, body, more),
        }
    }

    pub(super) fn fail_into(&mut self, out: &mut Vec<u8>) {
        match self {
            Wire::Fcgi(fcgi) => fcgi.fail_into(out),
            Wire::Http(http, _) => http.fail_into(out),
        }
    }

    pub(super) fn done(&mut self) -> u8 {
        match self {
            Wire::Fcgi(fcgi) => fcgi.done(),
            Wire::Http(http, _) => http.done(),
        }
    }

    pub(super) fn gone(&mut self) {
        match self {
            Wire::Fcgi(fcgi) => fcgi.gone(),
            Wire::Http(http, _) => http.gone(),
        }
    }

    pub(super) fn in_hand(&self) -> bool {
        match self {
            Wire::Fcgi(fcgi) => fcgi.in_hand(),
            Wire::Http(http, _) => http.in_hand(),
        }
    }

    pub(super) fn reading(&self) -> bool {
        match self {
            Wire::Fcgi(fcgi) => fcgi.reading(),
            Wire::Http(http, _) => http.reading(),
        }
    }

    pub(super) fn waiting(&self) -> (String, u64) {
        match self {
            Wire::Fcgi(fcgi) => fcgi.waiting(),
            Wire::Http(http, _) => http.waiting(),
        }
    }

    pub(super) fn body_unread(&self) -> bool {
        match self {
            Wire::Fcgi(fcgi) => fcgi.body_unread(),
            Wire::Http(http, _) => http.body_unread(),
        }
    }

    /// Why the peer's end (EOF) cuts something short, for the log: FastCGI's records;
    /// an HTTP client may close whenever it likes.
    pub(super) fn closed(&self) -> Option<String> {
        match self {
            Wire::Fcgi(fcgi) => fcgi.closed(),
            Wire::Http(..) => None,
        }
    }

    /// `plain` as the socket must carry it: sealed over TLS; None when it goes as it is.
    pub(super) fn seal(&mut self, plain: &[u8]) -> Option<Vec<u8>> {
        let Wire::Http(_, Some(tls)) = self else {
            return None;
        };
        let mut wire = Vec::with_capacity(plain.len() + 64);
        tls.seal(plain, &mut wire);
        Some(wire)
    }

    /// What follows a retiring worker's last response on a kept connection: FastCGI's
    /// `NOT_KEPT` record; nothing over HTTP (the connection closes after it).
    pub(super) fn not_kept(&self) -> &'static [u8] {
        match self {
            Wire::Fcgi(_) => super::NOT_KEPT,
            Wire::Http(..) => b"",
        }
    }
}

/// The hub's part for HTTP: the eventfd behind [`KICK`] and the connections it is for.
pub(super) struct Side {
    kick: OwnedFd,
    ready: Vec<u64>,
    /// The WebSockets over TLS, by connection id (`bridge.rs`).
    pub(super) bridges: std::collections::HashMap<u64, Bridge>,
}

impl Side {
    /// On an HTTP pool, the eventfd, added to `epoll`; None over FastCGI.
    pub(super) fn new(epoll: &OwnedFd) -> PyResult<Option<Side>> {
        if http::config().is_none() {
            return Ok(None);
        }
        // SAFETY: eventfd makes a new descriptor, which the OwnedFd then owns.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let kick = unsafe { OwnedFd::from_raw_fd(raw) };
        ctl(epoll, libc::EPOLL_CTL_ADD, kick.as_raw_fd(), READ, KICK);
        Ok(Some(Side {
            kick,
            ready: Vec::new(),
            bridges: std::collections::HashMap::new(),
        }))
    }

    /// Makes the set readable, for a poll.
    fn kick(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes of a live local to the side's eventfd; a full counter
        // (EAGAIN) still leaves it readable.
        unsafe { libc::write(self.kick.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

impl Hub {
    /// The protocol of a connection just accepted on `fd`.
    pub(super) fn wire(&self, py: Python<'_>, fd: &OwnedFd) -> Wire {
        let (mount, asgi) = (self.mount.clone_ref(py), self.asgi.clone_ref(py));
        if self.http.is_none() {
            return Wire::Fcgi(FastCgi::new(mount, asgi));
        }
        http::no_delay(fd.as_fd());
        let Some(config) = http::config().and_then(|c| c.tls.as_ref()) else {
            return Wire::Http(Http::new(mount, asgi, fd.as_fd(), false), None);
        };
        let mut framing = Http::new(mount, asgi, fd.as_fd(), true);
        match Session::new(config) {
            Ok(tls) => Wire::Http(framing, Some(Box::new(tls))),
            Err(err) => {
                // Never plain HTTP on the TLS port: the connection idles out unanswered.
                eprintln!("cannot start a TLS session: {err}");
                framing.gone();
                Wire::Http(framing, None)
            }
        }
    }

    /// Over TLS, the close_notify alert goes out ahead of a close (a client reading a
    /// response to the connection's end takes a close without it as a truncation).
    pub(super) fn close_notify(&mut self, id: u64) {
        let Some(Slot {
            fcgi: Wire::Http(_, Some(tls)),
            ..
        }) = self.slots.get_mut(&id)
        else {
            return;
        };
        let mut wire = Vec::new();
        tls.close_notify(&mut wire);
        self.put(id, &wire);
    }

    /// Reads what HTTP connection `id` holds and acts on it.
    pub(super) fn readable_http(
        &mut self,
        py: Python<'_>,
        id: u64,
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(());
        };
        let (data, mut end) = crate::asgi::conn::read_all(slot.fd.as_raw_fd());
        if slot.lingering {
            if end != 0 {
                self.finish(id);
            }
            return Ok(());
        }
        let mut opened = Vec::new();
        let data = match &mut slot.fcgi {
            Wire::Http(_, Some(tls)) if !data.is_empty() => {
                let mut wire = Vec::new();
                let result = tls.open(&data, &mut opened, &mut wire);
                if let Ok(seen) = result
                    && seen.closed
                {
                    end = -1;
                }
                // Not TLS, or broken: rustls's alert (in `wire`), then the close.
                let failed = result.is_err();
                if !self.put(id, &wire) {
                    return Ok(());
                }
                if failed {
                    self.close(id, false);
                    return Ok(());
                }
                &opened
            }
            _ => &data,
        };
        if !data.is_empty() {
            let Some(slot) = self.slots.get_mut(&id) else {
                return Ok(());
            };
            slot.got_any = true;
            slot.idle_by = None;
            self.feed_http(py, id, data, out)?;
        } else if !self.slots.get(&id).is_some_and(|s| s.fcgi.in_hand()) {
            // Handshake records only: the clock follows where the connection stands.
            self.schedule_http(id);
        }
        if end < 0 {
            if self.slots.get(&id).is_some_and(|slot| !slot.lingering) {
                self.close(id, false);
            }
        } else if end > 0 {
            self.finish(id);
        }
        Ok(())
    }

    /// Feeds `data` (empty: what is buffered) to connection `id`'s framing and acts on
    /// the events.
    fn feed_http(
        &mut self,
        py: Python<'_>,
        id: u64,
        data: &[u8],
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let Some(Slot {
            fcgi: Wire::Http(http, _),
            ..
        }) = self.slots.get_mut(&id)
        else {
            return Ok(());
        };
        let events = match http.events(py, data) {
            Ok(events) => events,
            Err(err) => {
                eprintln!("closing an HTTP connection: {}", err.value(py));
                self.finish(id);
                return Ok(());
            }
        };
        for event in events {
            match event {
                Event::Request(scope, body, complete) => {
                    out.append((REQUEST, id, scope, PyBytes::new(py, &body), complete))?
                }
                Event::Body(body, complete) => {
                    out.append((BODY, id, PyBytes::new(py, &body), complete))?
                }
                Event::Reply(bytes) => {
                    if !self.write(id, &bytes) {
                        return Ok(());
                    }
                }
                Event::Refuse(bytes, reason) => {
                    eprintln!("refused an HTTP request: {reason}");
                    self.refuse(id, &bytes);
                    return Ok(());
                }
                Event::Upgrade(scope, head, rest) => {
                    return self.upgrade(py, id, scope, &head, &rest, out);
                }
            }
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            return Ok(());
        };
        if let Wire::Http(http, _) = &slot.fcgi
            && http.piled(PIPELINE_HIGH)
        {
            slot.paused = true;
            watch(&self.epoll, id, slot);
        }
        self.schedule_http(id);
        Ok(())
    }

    /// A refused head, or a chunked body past `max_request_body`: the app's request (if
    /// any) sees the client gone, the refusal is written, the connection closes.
    fn refuse(&mut self, id: u64, bytes: &[u8]) {
        if let Some(slot) = self.slots.get_mut(&id)
            && slot.fcgi.in_hand()
        {
            slot.fcgi.gone();
            self.gone.push(id);
        }
        if self.write(id, bytes) {
            self.close(id, true);
        }
    }

    /// A WebSocket handshake on `id`: the socket leaves the set for asyncio's transport
    /// (`http.py`), which has the `websockets` codec. The acceptor still counts it until
    /// Python's [`Hub::release`].
    fn upgrade(
        &mut self,
        py: Python<'_>,
        id: u64,
        scope: Bound<'_, PyDict>,
        head: &[u8],
        rest: &[u8],
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let Some(mut slot) = self.slots.remove(&id) else {
            return Ok(());
        };
        let tls = match &mut slot.fcgi {
            Wire::Http(_, tls) => tls.take(),
            Wire::Fcgi(_) => None,
        };
        let (fd, unsent) = match tls {
            Some(tls) => match Bridge::start(self, id, slot, tls) {
                Ok(fd) => (fd, PyBytes::new(py, b"")),
                Err(err) => {
                    eprintln!("cannot serve a WebSocket over TLS: {err}");
                    if let Some(accepting) = &self.accepting {
                        accepting.released();
                    }
                    return Ok(());
                }
            },
            None => {
                ctl(&self.epoll, libc::EPOLL_CTL_DEL, slot.fd.as_raw_fd(), 0, id);
                let unsent = PyBytes::new(py, &slot.out[slot.sent..]);
                (slot.fd.into_raw_fd(), unsent)
            }
        };
        out.append((
            UPGRADE,
            fd,
            scope,
            PyBytes::new(py, head),
            PyBytes::new(py, rest),
            unsent,
        ))?;
        Ok(())
    }

    /// Sets connection `id`'s one clock from where it stands.
    pub(super) fn schedule_http(&mut self, id: u64) {
        let read = self.read_timeout.unwrap_or(HEAD_TIMEOUT);
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let Wire::Http(http, tls) = &slot.fcgi else {
            return;
        };
        if slot.lingering || slot.closing || http.held {
            return;
        }
        let handshaking = tls.as_ref().is_some_and(|tls| tls.handshaking());
        if handshaking {
            // request_read_timeout covers the handshake, then the head, from the connect.
            slot.idle_by = None;
            if slot.read_by.is_none() {
                let at = Instant::now() + read;
                slot.read_by = Some(at);
                self.timers.push(Reverse((at, id)));
            }
        } else if http.idle() {
            slot.read_by = None;
            if slot.idle_by.is_none()
                && let Some(config) = http::config()
            {
                let at = Instant::now() + config.keepalive_timeout;
                slot.idle_by = Some(at);
                self.timers.push(Reverse((at, id)));
            }
        } else if http.reading() {
            slot.idle_by = None;
            if slot.read_by.is_none() {
                let at = Instant::now() + read;
                slot.read_by = Some(at);
                self.timers.push(Reverse((at, id)));
            }
        } else {
            slot.read_by = None;
            slot.idle_by = None;
        }
    }

    /// The response on `id` ended and the connection is kept: the next request, when
    /// one is buffered, is taken at the next poll ([`KICK`]), unless the client has not
    /// read what was written (then once it has, [`Hub::drained_http`]).
    pub(super) fn next_http(&mut self, id: u64) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let pending = slot.pending();
        let Wire::Http(http, _) = &mut slot.fcgi else {
            return;
        };
        if pending > WRITE_HIGH {
            http.held = true;
            slot.paused = true;
            slot.read_by = None;
            slot.idle_by = None;
            watch(&self.epoll, id, slot);
            return;
        }
        let buffered = http.buffered() > 0;
        slot.paused = false;
        watch(&self.epoll, id, slot);
        if buffered {
            if let Some(side) = &mut self.http {
                side.ready.push(id);
                side.kick();
            }
        } else {
            self.schedule_http(id);
        }
    }

    /// The client read what held connection `id`'s next request back.
    pub(super) fn drained_http(&mut self, id: u64) {
        if let Some(Slot {
            fcgi: Wire::Http(http, _),
            ..
        }) = self.slots.get_mut(&id)
            && http.held
            && !http.in_hand()
        {
            http.held = false;
            self.next_http(id);
        }
    }

    /// The eventfd was written: the connections with a pipelined request take it.
    pub(super) fn kicked(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let Some(side) = &mut self.http else {
            return Ok(());
        };
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a live local from the side's eventfd.
        unsafe { libc::read(side.kick.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        for id in std::mem::take(&mut side.ready) {
            let idle = self.slots.get(&id).is_some_and(|slot| {
                !(slot.lingering || slot.closing || slot.fcgi.in_hand())
                    && matches!(&slot.fcgi, Wire::Http(http, _) if !http.held)
            });
            if idle {
                self.feed_http(py, id, b"", out)?;
            }
        }
        Ok(())
    }

    /// The socket of HTTP connection `id` did not take all that was written: the
    /// `send_timeout` clock starts, unless it runs already.
    pub(super) fn pressed_http(&mut self, id: u64) {
        let Some(timeout) = self.send_timeout else {
            return;
        };
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.send_by.is_some() || slot.pending() == 0 {
            return;
        }
        let now = Instant::now();
        let at = now + timeout;
        slot.send_by = Some(at);
        // A timer of an earlier press still in the heap comes due first and pushes this.
        if slot.send_timer.is_none_or(|timer| timer <= now) {
            slot.send_timer = Some(at);
            self.timers.push(Reverse((at, id)));
        }
        // The press came in the app's `send()`, after which the loop arms no timer (it
        // does after a poll): when the loop's timer is not due before this deadline, the
        // eventfd makes a poll, which arms it. Nothing may come on the socket to do it.
        if self.armed.is_none_or(|armed| armed > at)
            && let Some(side) = &self.http
        {
            side.kick();
        }
    }

    /// A deadline of HTTP connection `id` may be due.
    pub(super) fn due_http(&mut self, id: u64, now: Instant) {
        let read = self.read_timeout.unwrap_or(HEAD_TIMEOUT);
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.linger_by.is_some_and(|at| at <= now) {
            self.finish(id);
            return;
        }
        if let Some(at) = slot.send_by {
            if at <= now {
                // The client took nothing of the response for the whole send_timeout
                // (each write it took part of moved `send_by` on).
                eprintln!(
                    "dropped a connection: the client read nothing of the response for {:?} (send_timeout), {} bytes unsent",
                    self.send_timeout.unwrap_or_default(),
                    slot.pending()
                );
                self.finish(id);
                return;
            }
            if slot.send_timer.is_none_or(|timer| timer <= now) {
                slot.send_timer = Some(at);
                self.timers.push(Reverse((at, id)));
            }
        }
        let Wire::Http(http, tls) = &slot.fcgi else {
            return;
        };
        if slot.read_by.is_some_and(|at| at <= now) {
            slot.read_by = None;
            if !(slot.lingering || slot.closing) {
                if slot.paused && !http.held {
                    // The app has not taken the body that came: the wait is the app's,
                    // not the client's.
                    let at = now + read;
                    slot.read_by = Some(at);
                    self.timers.push(Reverse((at, id)));
                } else if tls.as_ref().is_some_and(|tls| tls.handshaking()) {
                    eprintln!(
                        "dropped a connection from {}: its TLS handshake did not complete within {read:?}",
                        http.from()
                    );
                    self.finish(id);
                    return;
                } else if http.reading() {
                    let (what, received) = http.waiting();
                    eprintln!(
                        "dropped a connection: {what} did not arrive within {}s; {received} bytes received",
                        read.as_secs_f64()
                    );
                    self.finish(id);
                    return;
                }
            }
        }
        if slot.idle_by.is_some_and(|at| at <= now) {
            slot.idle_by = None;
            if http.idle() && !http.held && !(slot.lingering || slot.closing) {
                self.close(id, true);
            }
        }
    }

    /// The worker retires: an HTTP connection between requests closes at once (a client
    /// retries an idempotent request on a kept connection that closes, RFC 9112 9.3.1);
    /// one accepted just before, with nothing received yet, waits [`RETIRE_IDLE`] for its
    /// request.
    pub(super) fn retire_http(&mut self, id: u64) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.got_any {
            self.close(id, true);
        } else if slot
            .idle_by
            .is_none_or(|at| at > Instant::now() + RETIRE_IDLE)
        {
            let at = Instant::now() + RETIRE_IDLE;
            slot.idle_by = Some(at);
            self.timers.push(Reverse((at, id)));
        }
    }
}
