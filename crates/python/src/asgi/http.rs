//! `Http`, one HTTP/1.1 connection's protocol on an ASGI pool (`protocol = "http"`): the
//! counterpart of [`super::conn::FastCgi`] with the same verbs, driven by the worker's hub
//! (`hub/http.rs`) as the hub drives FastCGI: bytes in, events out, the app's messages
//! framed into bytes.
//!
//! Nothing of HTTP is parsed here that the WSGI HTTP path does not parse the same way:
//! heads go through [`drover_worker::http::head::parse`] (httparse, the smuggling checks,
//! the limits with their 400/413/414/431/501, `forwarded_allow_ips`), which yields the CGI
//! params a web server would send, so the scope is built by [`super::scope::build`] as over
//! FastCGI; the bytes wait, and bodies are de-chunked, in
//! [`drover_worker::http::incoming::Incoming`], the WSGI connection's input; the response
//! head is framed by [`drover_worker::http::response::frame`] straight from the app's
//! status and headers (Content-Length, chunked, or the close; `Connection`; `Date`). A
//! request at a time: pipelined requests wait in the buffer until the one in hand is
//! answered. A WebSocket upgrade ends this object's part: the hub hands the socket, the
//! head's bytes and what followed them to `http.py`, whose codec is the `websockets`
//! package.

use std::mem::ManuallyDrop;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::sync::OnceLock;

use drover_scoreboard::now_us;
use drover_worker::http::HttpConfig;
use drover_worker::http::head::Peer;
use drover_worker::http::incoming::Incoming;
use drover_worker::http::response::{self, Ask, Body};
use drover_worker::ledger::Ticket;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::conn::{CLOSE, KEEP, RETIRE, header_pairs};

/// The pool's HTTP settings, set once before the loop starts.
static CONFIG: OnceLock<HttpConfig> = OnceLock::new();

/// Records the pool's HTTP settings for the connections to come.
pub fn configure(config: HttpConfig) {
    let _ = CONFIG.set(config);
}

/// The pool's HTTP settings: Some on an HTTP pool only (the hub's connections speak HTTP).
pub(super) fn config() -> Option<&'static HttpConfig> {
    CONFIG.get()
}

/// What the bytes that came make for the hub.
pub(super) enum Event<'py> {
    /// A request: its scope, the body that came with it, whether that is all.
    Request(Bound<'py, PyDict>, Vec<u8>, bool),
    /// More of its body, and whether that is all.
    Body(Vec<u8>, bool),
    /// Bytes to write at once (`100 Continue`).
    Reply(Vec<u8>),
    /// Bytes to write before the connection closes (a refused head, or a chunked body
    /// past `max_request_body`), and why, for the log.
    Refuse(Vec<u8>, String),
    /// A WebSocket handshake: its scope, the head's bytes, and what followed them.
    Upgrade(Bound<'py, PyDict>, Vec<u8>, Vec<u8>),
}

struct InHand {
    ask: Ask,
    ticket: Ticket,
    status: Option<u16>,
    /// How the response body goes out, once its head is sent.
    framing: Option<Body>,
    keep: bool,
    cut: bool,
}

pub(super) struct Http {
    mount: Py<PyString>,
    asgi: Py<PyDict>,
    remote: Option<SocketAddr>,
    local: Option<SocketAddr>,
    /// The bytes received and not taken (a pipelined request's head may be here), and the
    /// body of the request in hand, decoded.
    input: Incoming,
    request: Option<InHand>,
    ended: Option<InHand>,
    /// A request is in hand or answered and not yet `done()`: heads wait in the buffer.
    busy: bool,
    broken: bool,
    /// The connection is TLS (`certfile`): its requests say `https` (`wss`).
    tls: bool,
    /// The connection's next request waits until the client has read what was written
    /// (the hub's `next_http`): a client that pipelines without reading would otherwise
    /// have every answer buffered in the worker.
    pub(super) held: bool,
}

impl Http {
    /// The connection on `fd`, its addresses read once. A unix socket's are not IP ones:
    /// None, as on the WSGI path. `tls`: the hub decrypts what it feeds.
    pub(super) fn new(
        mount: Py<PyString>,
        asgi: Py<PyDict>,
        fd: BorrowedFd<'_>,
        tls: bool,
    ) -> Http {
        // SAFETY: `fd` is the connection's socket, owned by the hub's slot; ManuallyDrop
        // keeps it open.
        let stream = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd.as_raw_fd()) });
        let (remote, local) = (stream.peer_addr().ok(), stream.local_addr().ok());
        Http {
            mount,
            asgi,
            remote,
            local,
            input: Incoming::new(),
            request: None,
            ended: None,
            busy: false,
            broken: false,
            tls,
            held: false,
        }
    }

    /// Who the client is, for a log line.
    pub(super) fn from(&self) -> String {
        self.remote
            .map_or_else(|| "a unix socket client".into(), |a| a.ip().to_string())
    }

    /// Takes `data` (empty: looks again at what is buffered, after a response); returns
    /// the events. A malformed body is an error: the connection must end.
    pub(super) fn events<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Vec<Event<'py>>> {
        let mut out = Vec::new();
        if self.broken {
            return Ok(out);
        }
        self.input.push(data);
        if self.busy {
            if !self.input.body().ended()
                && let Some((body, complete)) = self.body_or_refusal(&mut out)?
                && (!body.is_empty() || complete)
            {
                out.push(Event::Body(body, complete));
            }
            return Ok(out);
        }
        let Some(config) = CONFIG.get() else {
            return Err(PyRuntimeError::new_err("the HTTP settings are not set"));
        };
        let peer = Peer {
            remote: self.remote,
            local: self.local,
            trusted: &config.trusted,
            max_body: config.max_body,
        };
        let mut head = match self.input.head(&peer) {
            Ok(None) => return Ok(out),
            Ok(Some(head)) => head,
            Err(refusal) => {
                self.broken = true;
                let bytes = response::refusal(refusal.status, &refusal.reason);
                out.push(Event::Refuse(bytes, refusal.reason));
                return Ok(out);
            }
        };
        if self.tls {
            drover_worker::tls::mark_https(&mut head.params);
        }
        // The scope's x-request-id header is the id every log line shows.
        super::ledger().identify(&mut head.params);
        let scope = super::scope::build(py, &head.params, self.mount.bind(py), self.asgi.bind(py))?;
        let upgrade = head.params.get("HTTP_UPGRADE");
        if head.params.get("REQUEST_METHOD") == Some(b"GET")
            && upgrade.is_some_and(|u| u.trim_ascii().eq_ignore_ascii_case(b"websocket"))
        {
            // From here on the connection is the WebSocket codec's (websockets' sans-I/O
            // protocol, in Python), which also checks the handshake.
            self.broken = true;
            self.busy = true;
            scope.set_item("type", "websocket")?;
            let https = scope
                .get_item("scheme")?
                .is_some_and(|s| s.eq("https").unwrap_or(false));
            scope.set_item("scheme", if https { "wss" } else { "ws" })?;
            scope.del_item("method")?;
            let head_bytes = self.input.unread()[..head.len].to_vec();
            self.input.begin(&head, None);
            let rest = self.input.take_all();
            out.push(Event::Upgrade(scope, head_bytes, rest));
            return Ok(out);
        }
        self.input.begin(&head, config.max_body);
        self.busy = true;
        if head.expect_continue && !self.input.body().ended() {
            out.push(Event::Reply(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()));
        }
        let ask = Ask {
            minor: head.minor,
            keep_alive: head.keep_alive,
            head_method: head.head_method,
        };
        self.request = Some(InHand {
            ask,
            ticket: super::ledger().begin(&head.params, None, now_us()),
            status: None,
            framing: None,
            keep: head.keep_alive,
            cut: false,
        });
        if let Some((body, complete)) = self.body_or_refusal(&mut out)? {
            out.push(Event::Request(scope, body, complete));
        }
        Ok(out)
    }

    /// Appends to `out` the bytes of an `http.response.body` message: the head first when
    /// `status` is given, the body framed as the head says, the last chunk when `more` is
    /// false.
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
        match (status, request.status) {
            (Some(status), None) => {
                let pairs = header_pairs(headers)?;
                let borrowed = pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
                // The whole response is here when `more` is false: it gets a
                // Content-Length, not chunks.
                let whole = (!more).then_some(body.len() as u64);
                let framed = response::frame(status, borrowed, request.ask, whole)
                    .map_err(PyValueError::new_err)?;
                request.ticket.keep_head(&framed.head);
                out.extend_from_slice(&framed.head);
                request.status = Some(status);
                request.framing = Some(framed.body);
                request.keep = framed.keep;
            }
            (None, Some(_)) => {}
            (Some(_), Some(_)) => {
                return Err(PyRuntimeError::new_err(
                    "the response head was sent already",
                ));
            }
            (None, None) => return Err(PyRuntimeError::new_err("no response head")),
        }
        match request.framing {
            Some(Body::None) | None => {}
            Some(Body::Chunked) => {
                if !body.is_empty() {
                    out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
                    out.extend_from_slice(body);
                    out.extend_from_slice(b"\r\n");
                }
                if !more {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
            }
            Some(Body::Length(_) | Body::Close) => out.extend_from_slice(body),
        }
        if !more {
            self.ended = self.request.take();
        }
        Ok(())
    }

    /// The app failed: a 500 when no head went out, else the connection closes with the
    /// response cut short (a chunked one without its last chunk, so the client knows).
    pub(super) fn fail_into(&mut self, out: &mut Vec<u8>) {
        let Some(request) = &mut self.request else {
            return;
        };
        if request.status.is_none() {
            out.extend_from_slice(&response::refusal(500, "the app failed"));
            request.status = Some(500);
        }
        request.cut = true;
        self.ended = self.request.take();
    }

    /// The connection is gone with the request in hand: booked with the status sent.
    pub(super) fn gone(&mut self) {
        if let Some(request) = self.request.take() {
            let _ = super::ledger().end(request.ticket, request.status, None);
        }
        self.broken = true;
    }

    /// After the response's last bytes: books the request; [`KEEP`] the connection (a
    /// pipelined request may be buffered: `events(b"")`), [`CLOSE`] it, [`RETIRE`] close
    /// and retire.
    pub(super) fn done(&mut self) -> u8 {
        let Some(request) = self.ended.take() else {
            return CLOSE;
        };
        self.busy = false;
        let retire = super::ledger().end(request.ticket, request.status, None);
        // Body the app did not read would be taken for the next head: close instead.
        let keep = request.keep && !request.cut && self.input.body().ended();
        if !keep {
            self.broken = true;
        }
        match (retire, keep) {
            (true, _) => RETIRE,
            (false, true) => KEEP,
            (false, false) => CLOSE,
        }
    }

    /// A request is in hand: the app has it and has not finished its response.
    pub(super) fn in_hand(&self) -> bool {
        self.request.is_some()
    }

    /// A request is arriving: part of a head is buffered, or the body of the request in
    /// hand is still coming. The client's clock (`request_read_timeout`) runs.
    pub(super) fn reading(&self) -> bool {
        if self.broken {
            return false;
        }
        if self.busy {
            self.request.is_some() && !self.input.body().ended()
        } else {
            !self.input.unread().is_empty()
        }
    }

    /// Between requests, nothing buffered: the `keepalive_timeout` clock runs.
    pub(super) fn idle(&self) -> bool {
        !self.busy && !self.broken && self.input.unread().is_empty()
    }

    /// What the connection waits for (for a `request_read_timeout` line) and the bytes
    /// of it buffered.
    pub(super) fn waiting(&self) -> (String, u64) {
        let buffered = self.input.unread().len() as u64;
        if self.busy {
            ("the request body".into(), self.input.body().read())
        } else {
            ("the request head".into(), buffered)
        }
    }

    /// Body of the request is still arriving: the connection lingers before it closes.
    pub(super) fn body_unread(&self) -> bool {
        !self.input.body().ended()
    }

    /// The request in hand is read whole, and more bytes are buffered behind it than
    /// `bound` (pipelined requests): the hub stops reading the socket.
    pub(super) fn piled(&self, bound: usize) -> bool {
        self.busy && self.input.body().ended() && self.input.unread().len() > bound
    }

    /// Bytes received and not yet taken (pipelined requests).
    pub(super) fn buffered(&self) -> usize {
        self.input.unread().len()
    }

    /// The body bytes in the buffer, de-chunked, and whether the body is complete; a
    /// chunked body grown past `max_request_body` while no response head has gone out is
    /// answered 413, as a Content-Length above it is: a Refuse event goes to `out` (booked
    /// as 413 once the connection is `gone()`), and None comes back. A body past the bound
    /// after the head, or one that breaks the chunked syntax, ends the connection (the
    /// error).
    fn body_or_refusal(&mut self, out: &mut Vec<Event<'_>>) -> PyResult<Option<(Vec<u8>, bool)>> {
        let mut body = Vec::new();
        let err = match self.input.take_body(&mut body) {
            Ok(complete) => return Ok(Some((body, complete))),
            Err(err) => err,
        };
        let head_sent = self.request.as_ref().is_none_or(|r| r.status.is_some());
        if err.status != 413 || head_sent {
            return Err(self.bad_body(&err.reason));
        }
        if let Some(request) = &mut self.request {
            request.status = Some(413);
        }
        self.broken = true;
        let bytes = response::refusal(413, &err.reason);
        out.push(Event::Refuse(bytes, err.reason));
        Ok(None)
    }

    fn bad_body(&mut self, why: &str) -> PyErr {
        self.broken = true;
        if let Some(request) = &mut self.request {
            request.cut = true;
        }
        PyValueError::new_err(why.to_string())
    }
}

/// Small writes go out at once (asyncio's transports set this on every TCP connection);
/// on a unix socket the call fails, harmlessly.
pub(super) fn no_delay(fd: BorrowedFd<'_>) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads an int from a live local for the duration of the call.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}
