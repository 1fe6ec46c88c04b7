//! `start_response`, `write()` and sending the response: the head (Status + headers) goes
//! out with the first body bytes, or at the end for an empty body; a HEAD request gets
//! the head only.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use pyo3::exceptions::{PyAssertionError, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use super::Conn;
use super::headers::{check_header, check_status, encode_head};
use super::pinned::Pinned;

/// One request's response, shared by `start_response`, `write` and the server loop.
pub struct Exchange {
    pub conn: Rc<RefCell<Conn>>,
    /// Set by start_response, replaced by a call with exc_info before it is sent.
    head: RefCell<Option<Head>>,
    head_sent: Cell<bool>,
    /// The status the head went out with, for the pool's responses by class.
    sent_status: Cell<Option<u16>>,
    /// HEAD request: send no body.
    pub head_only: bool,
    /// Writing to the web server failed (it closed the connection).
    pub broken: Cell<bool>,
}

struct Head {
    status: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Exchange {
    pub fn new(conn: Rc<RefCell<Conn>>, head_only: bool) -> Exchange {
        Exchange {
            conn,
            head: RefCell::new(None),
            head_sent: Cell::new(false),
            sent_status: Cell::new(None),
            head_only,
            broken: Cell::new(false),
        }
    }

    pub fn head_sent(&self) -> bool {
        self.head_sent.get()
    }

    /// The status of the head that went out (checked by `start_response`: three digits).
    pub fn sent_status(&self) -> Option<u16> {
        self.sent_status.get()
    }

    /// Sends body bytes (the head first, if still pending).
    pub fn send(&self, data: &[u8], flush: bool) -> PyResult<()> {
        if !self.head_sent.get() {
            self.send_head()?;
        }
        if self.head_only || (data.is_empty() && !flush) {
            return Ok(());
        }
        let mut conn = self.conn.borrow_mut();
        let mut result = conn.write_stdout(data);
        if flush && result.is_ok() {
            result = conn.flush();
        }
        result.map_err(|err| self.broke(err))
    }

    pub fn send_head(&self) -> PyResult<()> {
        let head = self.head.borrow();
        let Some(head) = head.as_ref() else {
            return Err(PyAssertionError::new_err(
                "the app sent a body before calling start_response()",
            ));
        };
        let mut out = Vec::with_capacity(64 + head.headers.len() * 32);
        encode_head(&mut out, &head.status, &head.headers);
        self.head_sent.set(true);
        let code = head
            .status
            .get(..3)
            .and_then(|d| std::str::from_utf8(d).ok());
        self.sent_status.set(code.and_then(|d| d.parse().ok()));
        self.conn
            .borrow_mut()
            .write_stdout(&out)
            .map_err(|err| self.broke(err))
    }

    /// A 500 for an app that failed before its head went out.
    pub fn send_error(&self) {
        *self.head.borrow_mut() = Some(Head {
            status: b"500 Internal Server Error".to_vec(),
            headers: vec![(b"Content-Type".to_vec(), b"text/plain".to_vec())],
        });
        let _ = self.send(b"Internal Server Error\n", false);
    }

    fn broke(&self, err: std::io::Error) -> PyErr {
        self.broken.set(true);
        PyOSError::new_err(format!("the web server closed the connection: {err}"))
    }
}

#[pyclass(module = "drover")]
pub struct StartResponse {
    pub exchange: Pinned<Rc<Exchange>>,
    /// The `write` callables it returned, let go of with it ([`StartResponse::release`]).
    writes: std::sync::Mutex<Vec<Py<Write>>>,
}

impl StartResponse {
    pub fn new(exchange: Rc<Exchange>) -> StartResponse {
        StartResponse {
            exchange: Pinned::new(exchange),
            writes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The request ended: this and its `write` callables let go of the exchange (see
    /// `pinned.rs`).
    pub fn release(&mut self, py: Python<'_>) {
        self.exchange.release();
        let writes = std::mem::take(&mut *self.writes.lock().unwrap_or_else(|e| e.into_inner()));
        for write in writes {
            if let Ok(mut write) = write.bind(py).try_borrow_mut() {
                write.exchange.release();
            }
        }
    }
}

#[pymethods]
impl StartResponse {
    #[pyo3(signature = (status, headers, exc_info=None))]
    fn __call__(
        &self,
        status: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        exc_info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Write>> {
        let exchange = self.exchange.get()?;
        match exc_info.filter(|e| !e.is_none()) {
            Some(exc_info) if exchange.head_sent() => {
                // PEP 3333: too late to change the head; re-raise the app's exception.
                let value = exc_info.cast::<PyTuple>()?.get_item(1)?;
                return Err(PyErr::from_value(value));
            }
            Some(_) => {}
            None if exchange.head.borrow().is_some() => {
                return Err(PyAssertionError::new_err(
                    "start_response() called a second time without exc_info",
                ));
            }
            None => {}
        }
        let head = Head {
            status: native(status, "status")?,
            headers: header_list(headers)?,
        };
        check_status(&head.status).map_err(PyValueError::new_err)?;
        *exchange.head.borrow_mut() = Some(head);
        let write = Py::new(
            status.py(),
            Write {
                exchange: Pinned::new(exchange.clone()),
            },
        )?;
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(write.clone_ref(status.py()));
        Ok(write)
    }
}

/// The legacy `write(data)` callable returned by start_response: data goes out at once.
#[pyclass(module = "drover")]
pub struct Write {
    exchange: Pinned<Rc<Exchange>>,
}

#[pymethods]
impl Write {
    fn __call__(&self, data: &Bound<'_, PyBytes>) -> PyResult<()> {
        self.exchange.get()?.send(data.as_bytes(), true)
    }
}

/// A PEP 3333 native string as latin-1 bytes.
fn native(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    let text = value
        .cast::<PyString>()
        .map_err(|_| {
            PyTypeError::new_err(format!("{what} must be a str, not {}", type_name(value)))
        })?
        .to_cow()?;
    text.chars()
        .map(|c| {
            u8::try_from(c as u32)
                .map_err(|_| PyValueError::new_err(format!("{what} {text:?} is not latin-1")))
        })
        .collect()
}

fn header_list(headers: &Bound<'_, PyAny>) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut list = Vec::new();
    for item in headers.try_iter()? {
        let item = item?;
        let pair = item
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err("each header must be a (name, value) tuple"))?;
        if pair.len() != 2 {
            return Err(PyTypeError::new_err(
                "each header must be a (name, value) tuple",
            ));
        }
        let name = native(&pair.get_item(0)?, "header name")?;
        let value = native(&pair.get_item(1)?, "header value")?;
        check_header(&name, &value).map_err(PyValueError::new_err)?;
        list.push((name, value));
    }
    Ok(list)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}
