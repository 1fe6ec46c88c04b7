//! `FastCgi`, one ASGI connection's protocol, which the hub (`hub.rs`) drives:
//! [`FastCgi::events`] decodes the bytes read into events (a request comes with its scope
//! already built), [`FastCgi::frame`] frames the app's response, `done()` ends the request
//! (END_REQUEST is in the last frame), books it and says whether the connection goes on.
//! One request at a time: nginx does not multiplex FastCGI connections.
//!
//! The records are decoded by [`drover_fastcgi::Decoder`], the core the blocking workers'
//! `Connection` drives too; this is its event-loop driver: it keeps the bytes of a header
//! cut by a read until the next one, and builds each request's scope.

use drover_fastcgi::{Decoder, Event, Limits, Phase, ProtocolError, Request};
use drover_scoreboard::now_us;
use drover_worker::ledger::Ticket;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::encode;

/// What `done()` tells the connection (`Http`'s too).
pub(super) const KEEP: u8 = 0;
pub(super) const CLOSE: u8 = 1;
pub(super) const RETIRE: u8 = 2;

/// One `recv()` of [`read_all`], and what one call reads at most (as asyncio's
/// transports, so that a flood of body on one connection leaves the loop to the others).
const PUMP_READ: usize = 64 << 10;
const PUMP_MAX: usize = 256 << 10;

/// The request in hand.
struct InHand {
    id: u16,
    keep: bool,
    head_only: bool,
    ticket: Ticket,
    /// The status of the head sent, once sent.
    status: Option<u16>,
    /// The response failed after its head went out: the connection must close.
    cut: bool,
}

pub struct FastCgi {
    decoder: Decoder,
    /// Bytes received and not yet decoded: part of a header.
    pending: Vec<u8>,
    /// Bytes received since the request in hand (or the connection) began, for the log
    /// line of a `request_read_timeout`.
    received: u64,
    mount: Py<PyString>,
    asgi: Py<PyDict>,
    request: Option<InHand>,
    /// The last request's verdict, for `done()`.
    ended: Option<InHand>,
}

impl FastCgi {
    pub(super) fn new(mount: Py<PyString>, asgi: Py<PyDict>) -> FastCgi {
        FastCgi {
            decoder: Decoder::new(Limits::default()),
            pending: Vec::new(),
            received: 0,
            mount,
            asgi,
            request: None,
            ended: None,
        }
    }

    /// The connection is gone with the request in hand: it is booked with the status sent,
    /// if any. Nothing is written.
    pub(super) fn gone(&mut self) {
        if let Some(mut request) = self.request.take() {
            request.cut = true;
            let _ = super::ledger().end(request.ticket, request.status, None);
        }
    }

    /// Why the web server's end of the connection (EOF) cuts a record or a request short,
    /// for the log; None when it came between requests.
    pub(super) fn closed(&self) -> Option<String> {
        let leftover = self.pending.len();
        self.decoder.at_eof(leftover).map(|err| err.to_string())
    }

    /// After the request's last records: books it and says what the connection does next:
    /// 0 keep it for the next request, 1 close it, 2 close it and retire the worker.
    pub(super) fn done(&mut self) -> u8 {
        let Some(request) = self.ended.take() else {
            return CLOSE;
        };
        let retire = super::ledger().end(request.ticket, request.status, None);
        match (retire, request.keep && !request.cut) {
            (true, _) => RETIRE,
            (false, true) => KEEP,
            (false, false) => CLOSE,
        }
    }

    /// Whether a request is being read (`request_read_timeout` runs).
    pub(super) fn reading(&self) -> bool {
        // Between requests, a record begun (its header, or part of it) is being read too.
        let between = !self.decoder.running() && !self.decoder.body_unread();
        let begun = !self.pending.is_empty() || self.decoder.in_record();
        self.decoder.reading() || (between && begun)
    }

    /// What the connection waits for (for a `request_read_timeout` line): the text and the
    /// bytes received so far.
    pub(super) fn waiting(&self) -> (String, u64) {
        let what = match self.decoder.phase() {
            Phase::Idle => "its first record (BEGIN_REQUEST)".to_string(),
            Phase::Params(id) => format!("the params of request {id}"),
            Phase::Stdin(id) => format!("the body of request {id}"),
        };
        (what, self.received)
    }

    /// Whether body of the last request is still arriving (the app answered without
    /// reading it all): the connection must linger before it closes.
    pub(super) fn body_unread(&self) -> bool {
        self.decoder.body_open() || self.decoder.body_unread()
    }

    /// Decodes `data` into events, each request's scope built and its ticket taken. A
    /// protocol error: the connection must close.
    pub(super) fn events<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Vec<Decoded<'py>>> {
        let events = self
            .decode(data)
            .map_err(|err: ProtocolError| PyValueError::new_err(err.to_string()))?;
        let mut out = Vec::with_capacity(events.len());
        let mut events = events.into_iter().peekable();
        while let Some(event) = events.next() {
            out.push(match event {
                Got::Request(Request {
                    id,
                    keep_conn: keep,
                    mut params,
                }) => {
                    // The scope's x-request-id header is the id every log line shows.
                    super::ledger().identify(&mut params);
                    let scope =
                        super::scope::build(py, &params, self.mount.bind(py), self.asgi.bind(py))?;
                    let (body, complete) = body_after(&mut events);
                    let head_only = params.get("REQUEST_METHOD") == Some(b"HEAD");
                    self.request = Some(InHand {
                        id,
                        keep,
                        head_only,
                        ticket: super::ledger().begin(&params, None, now_us()),
                        status: None,
                        cut: false,
                    });
                    Decoded::Request(scope, body, complete)
                }
                Got::Body(mut body) => {
                    let (more, complete) = body_after(&mut events);
                    body.extend_from_slice(&more);
                    Decoded::Body(body, complete)
                }
                Got::BodyEnd => Decoded::Body(Vec::new(), true),
                Got::Abort => Decoded::Abort,
                Got::Reply(records) => Decoded::Reply(records),
            });
        }
        Ok(out)
    }

    /// The records of an `http.response.body` message, appended to `out`: the head first
    /// when `status` is given (the `http.response.start` held until now, so that a small
    /// response is one write), the body (none for HEAD), and the request's end when `more`
    /// is false.
    pub(super) fn frame(
        &mut self,
        out: &mut Vec<u8>,
        status: Option<u16>,
        headers: Option<Bound<'_, PyAny>>,
        body: &[u8],
        more: bool,
    ) -> PyResult<()> {
        let Some(request) = &mut self.request else {
            return Err(PyRuntimeError::new_err("no request in hand"));
        };
        let mut head = Vec::new();
        match (status, request.status) {
            (Some(status), None) => {
                let pairs = header_pairs(headers)?;
                let borrowed = pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
                encode::head(&mut head, status, borrowed).map_err(PyValueError::new_err)?;
                request.ticket.keep_head(&head);
                request.status = Some(status);
            }
            (None, Some(_)) => {}
            (Some(_), Some(_)) => {
                return Err(PyRuntimeError::new_err(
                    "the response head was sent already",
                ));
            }
            (None, None) => return Err(PyRuntimeError::new_err("no response head")),
        }
        let body = if request.head_only { &b""[..] } else { body };
        encode::stdout(out, request.id, &head, body);
        if !more {
            encode::end(out, request.id, 0);
            self.end();
        }
        Ok(())
    }

    /// The app failed (raised, or returned without finishing its response): a 500 when no
    /// head went out, else the request ends with app status 1 and the connection closes
    /// (all nginx can do then is cut the response short); the records appended to `out`.
    pub(super) fn fail_into(&mut self, out: &mut Vec<u8>) {
        let Some(request) = &mut self.request else {
            return;
        };
        if request.status.is_none() {
            let mut head = Vec::new();
            let headers: [(&[u8], &[u8]); 1] = [(b"content-type", b"text/plain; charset=utf-8")];
            let _ = encode::head(&mut head, 500, headers);
            request.ticket.keep_head(&head);
            encode::stdout(out, request.id, &head, b"Internal Server Error\n");
            request.status = Some(500);
            encode::end(out, request.id, 0);
        } else {
            request.cut = true;
            encode::end(out, request.id, 1);
        }
        self.end();
    }

    /// Whether a request is in hand (begun, not yet answered).
    pub(super) fn in_hand(&self) -> bool {
        self.request.is_some()
    }

    /// The request in hand is answered: the decoder takes the next one.
    fn end(&mut self) {
        self.ended = self.request.take();
        self.decoder.finish();
        self.received = 0;
    }

    /// Decodes what `data` completes, the bytes of a cut header kept for the next call.
    fn decode(&mut self, data: &[u8]) -> Result<Vec<Got>, ProtocolError> {
        self.received += data.len() as u64;
        let mut events = Vec::new();
        // The common case, a read that holds whole headers, is decoded in place.
        if self.pending.is_empty() {
            let used = self.decoder.decode_all(data, |e| got(&mut events, e))?;
            self.pending.extend_from_slice(&data[used..]);
        } else {
            self.pending.extend_from_slice(data);
            let used = self
                .decoder
                .decode_all(&self.pending, |e| got(&mut events, e))?;
            self.pending.drain(..used);
        }
        Ok(events)
    }
}

/// What `fd` holds, read without blocking (at most [`PUMP_MAX`] bytes), and how the
/// socket stands: 0 open, -1 at its end, else the errno of the failed read.
pub(super) fn read_all(fd: i32) -> (Vec<u8>, i32) {
    let mut data = Vec::new();
    let end = loop {
        match super::link::recv_into(fd, &mut data, PUMP_READ) {
            Ok(0) => break -1,
            // A short read emptied the socket: no second recv() to hear EAGAIN.
            Ok(n) if n < PUMP_READ || data.len() >= PUMP_MAX => break 0,
            Ok(_) => {}
            Err(libc::EAGAIN) => break 0,
            Err(errno) => break errno,
        }
    };
    (data, end)
}

/// An event for the loop: a request (its scope, the body that came with it, whether that
/// is all), more body, nginx's abort, records to write at once.
pub(super) enum Decoded<'py> {
    Request(Bound<'py, PyDict>, Vec<u8>, bool),
    Body(Vec<u8>, bool),
    Abort,
    Reply(Vec<u8>),
}

/// An event, its bytes owned: consecutive body slices joined, and so are replies.
enum Got {
    Request(Request),
    Body(Vec<u8>),
    BodyEnd,
    Abort,
    /// Records to write at once.
    Reply(Vec<u8>),
}

fn got(events: &mut Vec<Got>, event: Event<'_>) {
    let owned = match event {
        Event::Request(request) => Got::Request(request),
        Event::Stdin(data) => {
            if let Some(Got::Body(body)) = events.last_mut() {
                body.extend_from_slice(data);
                return;
            }
            Got::Body(data.to_vec())
        }
        Event::StdinEnd => Got::BodyEnd,
        Event::Abort => Got::Abort,
        Event::Reply(reply) => {
            if let Some(Got::Reply(records)) = events.last_mut() {
                reply.encode(records);
                return;
            }
            let mut records = Vec::new();
            reply.encode(&mut records);
            Got::Reply(records)
        }
    };
    events.push(owned);
}

/// The body that follows in the same feed: its bytes, and whether it is complete.
fn body_after(events: &mut std::iter::Peekable<impl Iterator<Item = Got>>) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        match events.peek() {
            Some(Got::Body(_)) => {
                if let Some(Got::Body(more)) = events.next() {
                    body.extend_from_slice(&more);
                }
            }
            Some(Got::BodyEnd) => {
                events.next();
                return (body, true);
            }
            _ => return (body, false),
        }
    }
}

/// The `headers` of `http.response.start`: an iterable of (name, value) byte pairs.
pub(super) fn header_pairs(
    headers: Option<Bound<'_, PyAny>>,
) -> PyResult<Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)>> {
    let Some(headers) = headers else {
        return Ok(Vec::new());
    };
    let mut pairs = Vec::new();
    for item in headers.try_iter()? {
        let item = item?;
        let bytes = |i: usize| -> PyResult<Bound<'_, PyBytes>> {
            item.get_item(i)?
                .cast_into::<PyBytes>()
                .map_err(|_| PyTypeError::new_err("ASGI header names and values must be bytes"))
        };
        pairs.push((bytes(0)?, bytes(1)?));
    }
    Ok(pairs)
}
