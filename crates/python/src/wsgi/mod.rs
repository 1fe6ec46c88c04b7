//! PEP 3333 on top of a FastCGI connection: build the environ, call the app, stream what
//! it returns, and always call `close()` on it. An app error before the head is sent gives
//! the client a 500 and the log a traceback; the worker serves on.

pub mod environ;
pub mod headers;
mod input;
mod pinned;
mod response;
mod streams;

use std::cell::RefCell;
use std::rc::Rc;

use drover_fastcgi::Request;
use drover_worker::serve::Outcome;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

pub use input::Input;
use response::{Exchange, StartResponse};

use crate::hooks::Hooks;
pub use streams::{Errors, FileWrapper};

/// A worker's connection: FastCGI from a web server, or HTTP from the client.
pub type Conn = drover_worker::exchange::Exchange;

/// A loaded app and what every request's environ shares.
pub struct App {
    callable: Py<PyAny>,
    mount: String,
    /// `wsgi.*` keys that never change, copied into each environ.
    base: Py<PyDict>,
    /// The hooks, when they define `pre_request` or `post_request`.
    hooks: Option<Hooks>,
}

impl App {
    pub fn new(py: Python<'_>, callable: Py<PyAny>, mount: String) -> PyResult<App> {
        let base = PyDict::new(py);
        base.set_item("wsgi.version", (1, 0))?;
        base.set_item("wsgi.errors", Py::new(py, Errors)?)?;
        base.set_item("wsgi.multithread", false)?;
        base.set_item("wsgi.multiprocess", true)?;
        base.set_item("wsgi.run_once", false)?;
        base.set_item("wsgi.file_wrapper", py.get_type::<FileWrapper>())?;
        Ok(App {
            callable,
            mount,
            base: base.unbind(),
            hooks: None,
        })
    }

    /// The worker serves the app from several threads (`threads`): `wsgi.multithread`.
    pub fn set_multithread(&self, py: Python<'_>) -> PyResult<()> {
        self.base.bind(py).set_item("wsgi.multithread", true)
    }

    /// Calls `pre_request` and `post_request` around each request (None: no Python call).
    pub fn with_hooks(mut self, hooks: Option<Hooks>) -> App {
        self.hooks = hooks;
        self
    }

    /// Serves one request on `conn`, to its end; also returns the status the response went
    /// out with (None when no head was sent: the client went away first).
    pub fn handle(
        &self,
        py: Python<'_>,
        conn: &Rc<RefCell<Conn>>,
        request: Request,
    ) -> (Outcome, Option<u16>) {
        let head_only = request.params.get("REQUEST_METHOD") == Some(b"HEAD");
        let keep_conn = request.keep_conn;
        let exchange = Rc::new(Exchange::new(conn.clone(), head_only));
        // The objects that reach the app, let go of when the request ends (`pinned.rs`).
        let mut input = None;
        let mut start_response = None;
        let environ = self.environ(py, conn, &request, &mut input);
        let served = environ
            .as_ref()
            .map_err(|e| e.clone_ref(py))
            .and_then(|environ| {
                if let Some(hooks) = self.hooks.as_ref().filter(|h| h.pre_request) {
                    hooks.pre_request(py, environ);
                }
                self.call(py, environ, &exchange, &mut start_response)
            });
        let failed = match served {
            Ok(()) => false,
            Err(err) => {
                if !exchange.broken.get() {
                    err.display(py);
                    if !exchange.head_sent() {
                        exchange.send_error();
                    }
                }
                true
            }
        };
        if let Some(mut input) = input
            .as_ref()
            .and_then(|i| i.bind(py).try_borrow_mut().ok())
        {
            input.release();
        }
        if let Some(mut start) = start_response
            .as_ref()
            .and_then(|s| s.bind(py).try_borrow_mut().ok())
        {
            start.release(py);
        }
        let status = exchange.sent_status();
        if let (Some(hooks), Ok(environ)) =
            (self.hooks.as_ref().filter(|h| h.post_request), &environ)
        {
            hooks.post_request(py, environ, status);
        }
        if exchange.broken.get() {
            return (Outcome { keep: false }, status);
        }
        // On a kept connection the next request's read skips what is left instead.
        if !keep_conn {
            shed_arrived_body(conn);
        }
        // A failure after the head went out cannot be told to the client but by cutting the
        // response short: end the request with a non-zero status and close the connection.
        let finished = conn
            .borrow_mut()
            .finish(u32::from(failed && exchange.head_sent()));
        let outcome = Outcome {
            keep: matches!(finished, Ok(true)) && !(failed && exchange.head_sent()),
        };
        (outcome, status)
    }

    /// The request's environ, its `wsgi.input` reading the body from `conn`.
    fn environ<'py>(
        &self,
        py: Python<'py>,
        conn: &Rc<RefCell<Conn>>,
        request: &Request,
        input: &mut Option<Py<Input>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let environ = self.base.bind(py).copy()?;
        environ::fill(py, &environ, &request.params, &self.mount)?;
        let content_length = request
            .params
            .get("CONTENT_LENGTH")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok());
        let made = Py::new(py, Input::new(conn.clone(), content_length))?;
        environ.set_item("wsgi.input", made.clone_ref(py))?;
        *input = Some(made);
        Ok(environ)
    }

    fn call(
        &self,
        py: Python<'_>,
        environ: &Bound<'_, PyDict>,
        exchange: &Rc<Exchange>,
        made: &mut Option<Py<StartResponse>>,
    ) -> PyResult<()> {
        let start_response = Py::new(py, StartResponse::new(exchange.clone()))?;
        *made = Some(start_response.clone_ref(py));
        let result = self.callable.bind(py).call1((environ, start_response))?;
        let sent = send_body(exchange, &result);
        // PEP 3333: close() is called whatever happened, also when the client went away. A
        // plain list or tuple (the common `return [body]`) has none: looking it up would
        // build and drop an AttributeError for every request.
        let plain =
            result.is_exact_instance_of::<PyList>() || result.is_exact_instance_of::<PyTuple>();
        let closed = if plain {
            Ok(())
        } else {
            match result.getattr_opt("close") {
                Ok(Some(close)) => close.call0().map(drop),
                Ok(None) => Ok(()),
                Err(err) => Err(err),
            }
        };
        sent.and(closed)
    }
}

/// What has already arrived of a body the app did not read, at most this much, is read
/// before the response ends; the rest is left to the worker's lingering close.
const SHED_NOW_MAX: usize = 64 * 1024;

/// Reads and drops what has already arrived of the body the app left unread, without
/// waiting for more. Mostly only the stream's closing empty record is left, and it is here
/// already: the connection then closes plainly. A body still on its way is not waited
/// for: the web server stops sending it once it has the response, so waiting here would
/// hang both until a timeout. The worker closes such a connection with a lingering close.
fn shed_arrived_body(conn: &Rc<RefCell<Conn>>) {
    let mut conn = conn.borrow_mut();
    conn.get_mut().set_wait(false);
    conn.discard_stdin(SHED_NOW_MAX);
    conn.get_mut().set_wait(true);
}

fn send_body(exchange: &Exchange, result: &Bound<'_, PyAny>) -> PyResult<()> {
    // A list or tuple is complete already: its chunks go out in one write at the end. Any
    // other iterable may be a stream: each chunk is flushed as the app yields it.
    let complete = result.is_instance_of::<PyList>() || result.is_instance_of::<PyTuple>();
    for chunk in result.try_iter()? {
        let chunk = chunk?;
        let bytes = chunk.cast::<PyBytes>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "the app yielded {}, not bytes",
                chunk
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let data = bytes.as_bytes();
        // PEP 3333: the head waits for the first non-empty chunk (until then, exc_info may
        // still replace it).
        if data.is_empty() {
            continue;
        }
        exchange.send(data, !complete)?;
    }
    if !exchange.head_sent() {
        exchange.send_head()?;
    }
    Ok(())
}
