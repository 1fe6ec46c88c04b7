//! `Http`, the Rust half of one ASGI connection on an HTTP pool (`protocol = "http"`), the
//! counterpart of [`super::conn::FastCgi`] with the same methods, so that `http.py`'s
//! protocol object drives it as `server.py`'s drives FastCGI.
//!
//! Nothing of HTTP is parsed here that the WSGI HTTP path does not parse the same way:
//! heads go through [`drover_worker::http::head::parse`] (httparse, the smuggling checks,
//! the limits with their 400/413/414/431/501, `forwarded_allow_ips`), which yields the CGI
//! params a web server would send, so the scope is built by [`super::scope::build`] as over
//! FastCGI; the bytes wait, and bodies are de-chunked, in
//! [`drover_worker::http::incoming::Incoming`], the WSGI connection's input; the response head is framed by
//! [`drover_worker::http::response::frame`] straight from the app's status and headers
//! (Content-Length, chunked, or the close; `Connection`; `Date`). What is here is the
//! event-loop driver: bytes in, whole events out, a request at a time, pipelined requests
//! kept in the buffer until the one in hand is answered. A WebSocket upgrade turns the
//! connection raw: its head and every later byte go to `http.py`, whose codec is the
//! `websockets` package.

use std::mem::ManuallyDrop;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::OnceLock;

use drover_scoreboard::now_us;
use drover_worker::http::HttpConfig;
use drover_worker::http::head::Peer;
use drover_worker::http::incoming::Incoming;
use drover_worker::http::response::{self, Ask, Body};
use drover_worker::ledger::Ticket;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use super::conn::{BODY, CLOSE, KEEP, REPLY, REQUEST, RETIRE, header_pairs};

/// Bytes to write, after which the connection closes (a refused head).
const REFUSE: u8 = 4;
/// A WebSocket handshake: `(5, scope, head)`, the head's bytes for the codec in Python.
const WEBSOCKET: u8 = 5;
/// Bytes after a WebSocket handshake, for the codec: `(6, bytes)`.
const RAW: u8 = 6;

/// The pool's HTTP settings, set once before the loop starts.
static CONFIG: OnceLock<HttpConfig> = OnceLock::new();

/// Records the pool's HTTP settings for the connections to come.
pub fn configure(config: HttpConfig) {
    let _ = CONFIG.set(config);
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

// Not `unsendable`: the object is used on the loop's thread only, but the protocol object
// that holds it sits in reference cycles, and Python's cycle collector may free it on
// whichever thread it runs, such as the thread of asgiref's `sync_to_async` (Django's sync
// views and middleware). An unsendable object freed there is leaked with a RuntimeError
// in the log; this one is plain data and drops anywhere.
#[pyclass(module = "_drover_asgi")]
pub struct Http {
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
    /// The connection is a WebSocket's: bytes go to Python as they come.
    raw: bool,
}

#[pymethods]
impl Http {
    #[new]
    fn new(mount: Py<PyString>, asgi: Py<PyDict>, fd: i32) -> Http {
        // SAFETY: `fd` is the connection's socket, owned by the transport; ManuallyDrop
        // keeps it open. A unix socket's addresses are not IP ones: None, as the WSGI path.
        let stream = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
        Http {
            mount,
            asgi,
            remote: stream.peer_addr().ok(),
            local: stream.local_addr().ok(),
            input: Incoming::new(),
            request: None,
            ended: None,
            busy: false,
            broken: false,
            raw: false,
        }
    }

    /// Takes `data`; returns events: `(0, scope, body, complete)`, `(1, body, complete)`,
    /// `(3, bytes)` to write now (100 Continue), `(4, bytes, reason)` to write before the
    /// connection closes (a refused head). A malformed body raises ValueError.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        if self.broken {
            return Ok(out);
        }
        if self.raw {
            if !data.is_empty() {
                out.append((RAW, PyBytes::new(py, data)))?;
            }
            return Ok(out);
        }
        self.input.push(data);
        if self.busy {
            if !self.input.body().ended() {
                let Some((body, complete)) = self.body_or_refusal(py, &out)? else {
                    return Ok(out);
                };
                if !body.is_empty() || complete {
                    out.append((BODY, PyBytes::new(py, &body), complete))?;
                }
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
                out.append((REFUSE, PyBytes::new(py, &bytes), refusal.reason))?;
                return Ok(out);
            }
        };
        // The scope's x-request-id header is the id every log line shows.
        super::ledger().identify(&mut head.params);
        let scope = super::scope::build(py, &head.params, self.mount.bind(py), self.asgi.bind(py))?;
        let upgrade = head.params.get("HTTP_UPGRADE");
        if head.params.get("REQUEST_METHOD") == Some(b"GET")
            && upgrade.is_some_and(|u| u.trim_ascii().eq_ignore_ascii_case(b"websocket"))
        {
            // From here on the connection is the WebSocket codec's (websockets' sans-I/O
            // protocol, in Python), which also checks the handshake.
            self.raw = true;
            self.busy = true;
            scope.set_item("type", "websocket")?;
            let https = scope
                .get_item("scheme")?
                .is_some_and(|s| s.eq("https").unwrap_or(false));
            scope.set_item("scheme", if https { "wss" } else { "ws" })?;
            scope.del_item("method")?;
            let head_bytes = PyBytes::new(py, &self.input.unread()[..head.len]);
            out.append((WEBSOCKET, scope, head_bytes))?;
            self.input.begin(&head, None);
            let rest = self.input.take_all();
            if !rest.is_empty() {
                out.append((RAW, PyBytes::new(py, &rest)))?;
            }
            return Ok(out);
        }
        self.input.begin(&head, config.max_body);
        self.busy = true;
        if head.expect_continue && !self.input.body().ended() {
            out.append((REPLY, PyBytes::new(py, b"HTTP/1.1 100 Continue\r\n\r\n")))?;
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
        let Some((body, complete)) = self.body_or_refusal(py, &out)? else {
            return Ok(out);
        };
        out.append((REQUEST, scope, PyBytes::new(py, &body), complete))?;
        Ok(out)
    }

    /// The bytes of an `http.response.body` message: the head first when `status` is
    /// given, the body framed as the head says, the last chunk when `more` is false.
    #[pyo3(signature = (status, headers, body, more))]
    fn respond<'py>(
        &mut self,
        py: Python<'py>,
        status: Option<u16>,
        headers: Option<Bound<'py, PyAny>>,
        body: &[u8],
        more: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let Some(request) = &mut self.request else {
            return Err(PyRuntimeError::new_err("no request in hand"));
        };
        let mut out = Vec::new();
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
        Ok(PyBytes::new(py, &out))
    }

    /// The app failed: a 500 when no head went out, else the connection closes with the
    /// response cut short (a chunked one without its last chunk, so the client knows).
    fn fail<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let Some(request) = &mut self.request else {
            return Ok(PyBytes::new(py, b""));
        };
        let mut out = Vec::new();
        if request.status.is_none() {
            out = response::refusal(500, "the app failed");
            request.status = Some(500);
        }
        request.cut = true;
        self.ended = self.request.take();
        Ok(PyBytes::new(py, &out))
    }

    /// The connection is gone with the request in hand: booked with the status sent.
    fn gone(&mut self) {
        if let Some(request) = self.request.take() {
            let _ = super::ledger().end(request.ticket, request.status, None);
        }
        self.broken = true;
    }

    /// After the response's last bytes: books the request; 0 keep the connection (feed
    /// `b""` for a pipelined request already here), 1 close it, 2 close and retire.
    fn done(&mut self) -> u8 {
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

    /// What the connection waits for (for a `request_read_timeout` line) and the bytes
    /// of it buffered.
    fn waiting(&self) -> (String, u64) {
        let buffered = self.input.unread().len() as u64;
        if self.busy {
            ("the request body".into(), self.input.body().read())
        } else {
            ("the request head".into(), buffered)
        }
    }

    /// Body of the request is still arriving: the connection lingers before it closes.
    fn body_unread(&self) -> bool {
        !self.input.body().ended()
    }

    /// Bytes received and not yet taken (pipelined requests): the reader pauses past a
    /// bound.
    fn buffered(&self) -> usize {
        self.input.unread().len()
    }
}

impl Http {
    /// The body bytes in the buffer, de-chunked, and whether the body is complete; a
    /// chunked body grown past `max_request_body` while no response head has gone out is
    /// answered 413, as a Content-Length above it is: a REFUSE event goes to `out` (booked
    /// as 413 once the connection is `gone()`), and None comes back. A body past the bound
    /// after the head, or one that breaks the chunked syntax, ends the connection
    /// (ValueError).
    fn body_or_refusal(
        &mut self,
        py: Python<'_>,
        out: &Bound<'_, PyList>,
    ) -> PyResult<Option<(Vec<u8>, bool)>> {
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
        let bytes = response::refusal(413, &err.reason);
        out.append((REFUSE, PyBytes::new(py, &bytes), err.reason))?;
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
