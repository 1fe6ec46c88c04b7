//! One request's ASGI cycle on the hub: the app's `send` and `receive`, and the state both
//! read. `server.py`'s `Exchange` subclasses this for what must stay Python (the request's
//! coroutine, `run`, and the `receive` that has to wait for body).
//!
//! An app awaits `send` twice per request and `receive` at least once when it reads a
//! body; as `async def` methods each await made a coroutine and ran a Python frame. Here
//! `send(message)` does its work when called (the hub frames it, and sends it at the
//! loop's turn's end: `Hub::on_turn_end`) and returns an awaitable that is already done
//! ([`Ready`]: its `__await__` is itself, its first `__next__` ends the iteration with the
//! result), so the await costs no frame and no Future; only when the socket is
//! [`PRESSED`] does it return the asyncio Future that
//! [`Exchange::drained`] completes. `receive()` likewise returns the message ready when the
//! body is there, and `server.py`'s `waiting()` coroutine when it must wait.
//!
//! The per-request asyncio Task stays (anyio's cancel scopes need `current_task()` to be
//! the request's own Task across all its steps).

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::hub::{Hub, LOST, PRESSED, RETIRED};

pyo3::create_exception!(
    _drover_asgi,
    ClientDisconnected,
    PyOSError,
    "send() after the client went away (ASGI 2.4)."
);

/// Request body buffered for an app that does not read it: past this, the connection stops
/// being read until the app takes what is there.
const BODY_HIGH: usize = 1 << 20;

/// An awaitable already done: awaiting it gives `value` at once (as a coroutine that
/// returns without suspending would, without its frame). Also a coroutine to
/// `asyncio.create_task` and `ensure_future` (`send`, `throw`, `close`).
#[pyclass(module = "_drover_asgi", frozen)]
pub struct Ready {
    value: Option<Py<PyAny>>,
}

/// The one `Ready` of `None`, which every `send()` that need not wait returns.
static DONE: PyOnceLock<Py<Ready>> = PyOnceLock::new();

fn done(py: Python<'_>) -> Py<PyAny> {
    DONE.get_or_init(py, || {
        Py::new(py, Ready { value: None }).expect("a Ready is allocated")
    })
    .clone_ref(py)
    .into_any()
}

impl Ready {
    fn result(&self, py: Python<'_>) -> PyErr {
        match &self.value {
            Some(value) => PyStopIteration::new_err((value.clone_ref(py),)),
            None => PyStopIteration::new_err(()),
        }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The value, as the iteration's end: `None` ends it without an exception (the
    /// interpreter's `await` takes that as `None`), anything else through StopIteration.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match &self.value {
            None => Ok(None),
            Some(_) => Err(self.result(py)),
        }
    }

    fn send(&self, py: Python<'_>, _value: &Bound<'_, PyAny>) -> PyErr {
        self.result(py)
    }

    #[pyo3(signature = (kind, value=None, _traceback=None))]
    fn throw(
        &self,
        kind: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyErr {
        match value {
            Some(value) if !value.is_none() => PyErr::from_value(value.clone()),
            _ => PyErr::from_value(kind.clone()),
        }
    }

    fn close(&self) {}
}

/// One request on the hub, named by `cid` (its connection's id there).
#[pyclass(module = "_drover_asgi", subclass)]
pub struct Exchange {
    /// The hub, and through it the worker and its loop.
    hub: Py<Hub>,
    #[pyo3(get)]
    cid: u64,
    /// Body received and not yet given to the app, and its size.
    body: Vec<Py<PyBytes>>,
    buffered: usize,
    body_done: bool,
    /// The app has had all the body.
    delivered: bool,
    /// `receive()` waits for body or the end (`server.py`'s `waiting`).
    waiter: Option<Py<PyAny>>,
    /// `send()` waits for the unsent bytes to drain.
    drain: Option<Py<PyAny>>,
    /// `http.response.start` came; its status and headers, held for the first body.
    #[pyo3(get)]
    started: bool,
    status: Option<Py<PyAny>>,
    headers: Option<Py<PyAny>>,
    /// The response ended (or failed).
    #[pyo3(get, set)]
    complete: bool,
    /// The client is gone.
    #[pyo3(get, set)]
    gone: bool,
    /// The request's task, kept by the worker to its end.
    #[pyo3(get)]
    pub(super) task: Option<Py<PyAny>>,
}

#[pymethods]
impl Exchange {
    /// Made by the hub (`Hub::begin`); `body` what came with the request, `done` whether
    /// that is all of it.
    #[new]
    fn new(hub: &Bound<'_, Hub>, cid: u64, body: Bound<'_, PyBytes>, done: bool) -> Self {
        let buffered = body.as_bytes().len();
        Exchange {
            hub: hub.clone().unbind(),
            cid,
            body: if buffered > 0 {
                vec![body.unbind()]
            } else {
                Vec::new()
            },
            buffered,
            body_done: done,
            delivered: false,
            waiter: None,
            drain: None,
            started: false,
            status: None,
            headers: None,
            complete: false,
            gone: false,
            task: None,
        }
    }

    /// The app's `send`: `http.response.start` is held, each `http.response.body` framed
    /// at once (and sent at the turn's end, `Hub::on_turn_end`). Returns an awaitable:
    /// done, or the Future to wait on while the socket is pressed.
    fn send(slf: &Bound<'_, Self>, message: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let kind = message.get_item(pyo3::intern!(py, "type"))?;
        let kind_str = kind
            .cast::<PyString>()
            .ok()
            .map(|s| s.to_cow())
            .transpose()?;
        match kind_str.as_deref() {
            Some("http.response.body") => {}
            Some("http.response.start") => {
                let mut this = slf.borrow_mut();
                if this.started {
                    return Err(PyRuntimeError::new_err("http.response.start sent twice"));
                }
                if this.gone {
                    return Err(ClientDisconnected::new_err("the client went away"));
                }
                let status = message.get_item(pyo3::intern!(py, "status"))?;
                let headers = get(message, pyo3::intern!(py, "headers"))?;
                this.started = true;
                this.status = Some(status.unbind());
                this.headers = headers.map(Bound::unbind);
                return Ok(done(py));
            }
            _ => {
                return Err(PyRuntimeError::new_err(format!(
                    "unexpected ASGI message {} for an HTTP request",
                    kind.repr()?
                )));
            }
        }
        let said = {
            let mut this = slf.borrow_mut();
            if !this.started || this.complete {
                return Err(PyRuntimeError::new_err(if !this.started {
                    "http.response.body before http.response.start"
                } else {
                    "http.response.body after the response ended"
                }));
            }
            if this.gone {
                return Err(ClientDisconnected::new_err("the client went away"));
            }
            let more: bool = match get(message, pyo3::intern!(py, "more_body"))? {
                Some(more) => more.extract()?,
                None => false,
            };
            let body = get(message, pyo3::intern!(py, "body"))?;
            let body: &[u8] = match &body {
                Some(body) => body.extract()?,
                None => b"",
            };
            let status: Option<u16> = match &this.status {
                Some(status) => Some(status.bind(py).extract()?),
                None => None,
            };
            let headers = this.headers.as_ref().map(|h| h.bind(py).clone());
            let said = this
                .hub
                .bind(py)
                .borrow_mut()
                .respond(py, this.cid, status, headers, body, more)?;
            this.status = None;
            if more {
                if said == PRESSED {
                    let drain = this.future(py)?;
                    this.drain = Some(drain.clone_ref(py));
                    return Ok(drain);
                } else if said == LOST {
                    this.gone = true;
                }
                return Ok(done(py));
            }
            this.complete = true;
            said
        };
        // The response is complete (its END_REQUEST written, the hub has forgotten the
        // request): a receive() that waits hears the disconnect, the timer follows the hub.
        let hub = {
            let mut this = slf.borrow_mut();
            this.wake(py)?;
            this.hub.clone_ref(py)
        };
        let hub = hub.bind(py);
        if said == RETIRED {
            let worker = hub.borrow().worker.clone_ref(py);
            worker.bind(py).call_method0(pyo3::intern!(py, "retire"))?;
        }
        Hub::settle(hub)?;
        Ok(done(py))
    }

    /// The request's task ended: the worker's `tasks` lets it go, and a retiring worker
    /// looks whether it is done (`Worker.task_done`, for a request).
    fn finished(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        let (tasks, worker) = {
            let hub = self.hub.bind(py).borrow();
            let retiring = hub.is_retiring().then(|| hub.worker.clone_ref(py));
            (hub.tasks.clone_ref(py), retiring)
        };
        tasks
            .bind(py)
            .call_method1(pyo3::intern!(py, "pop"), (task, py.None()))?;
        if let Some(worker) = worker {
            worker
                .bind(py)
                .call_method0(pyo3::intern!(py, "check_done"))?;
        }
        Ok(())
    }

    /// The app's `receive`: the message, ready, when there is one; else `waiting()`'s
    /// coroutine (`server.py`), which waits for it.
    fn receive(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let message = slf.borrow_mut().take(py)?;
        match message {
            Some(message) => Ok(Py::new(
                py,
                Ready {
                    value: Some(message.into_any()),
                },
            )?
            .into_any()),
            None => Ok(slf.call_method0(pyo3::intern!(py, "waiting"))?.unbind()),
        }
    }

    /// The next message for `receive`, or None when it must wait ([`Exchange::wait`]).
    fn take(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        if self.gone {
            return disconnect(py).map(Some);
        }
        if !self.delivered {
            if self.body.is_empty() && !self.body_done {
                return Ok(None);
            }
            let chunks = std::mem::take(&mut self.body);
            let body = if chunks.len() == 1 {
                chunks.into_iter().next().expect("one chunk")
            } else {
                let mut joined = Vec::with_capacity(self.buffered);
                for chunk in &chunks {
                    joined.extend_from_slice(chunk.as_bytes(py));
                }
                PyBytes::new(py, &joined).unbind()
            };
            if self.buffered > BODY_HIGH {
                self.hub.bind(py).borrow_mut().resume(self.cid);
            }
            self.buffered = 0;
            self.delivered = self.body_done;
            let message = PyDict::new(py);
            message.set_item(pyo3::intern!(py, "type"), pyo3::intern!(py, "http.request"))?;
            message.set_item(pyo3::intern!(py, "body"), body)?;
            message.set_item(pyo3::intern!(py, "more_body"), !self.body_done)?;
            return Ok(Some(message.unbind()));
        }
        if self.complete {
            return disconnect(py).map(Some);
        }
        Ok(None)
    }

    /// The Future `waiting()` awaits until body comes, the response ends or the client goes.
    fn wait(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let waiter = self.future(py)?;
        self.waiter = Some(waiter.clone_ref(py));
        Ok(waiter)
    }

    /// A `receive()` that waits looks again.
    fn wake(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(waiter) = self.waiter.take() {
            resolve(py, waiter)?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.hub)?;
        for chunk in &self.body {
            visit.call(chunk)?;
        }
        for held in [
            &self.waiter,
            &self.drain,
            &self.status,
            &self.headers,
            &self.task,
        ]
        .into_iter()
        .flatten()
        {
            visit.call(held)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.body.clear();
        self.waiter = None;
        self.drain = None;
        self.status = None;
        self.headers = None;
        self.task = None;
    }
}

impl Exchange {
    /// A new Future of the worker's loop, for a `send()` or `receive()` that waits.
    fn future(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let event_loop = self.hub.bind(py).borrow().event_loop.clone_ref(py);
        Ok(event_loop
            .bind(py)
            .call_method0(pyo3::intern!(py, "create_future"))?
            .unbind())
    }

    /// More of the body came (`done`: all of it).
    pub(super) fn feed(
        &mut self,
        py: Python<'_>,
        body: Bound<'_, PyBytes>,
        done: bool,
    ) -> PyResult<()> {
        let size = body.as_bytes().len();
        if size > 0 {
            self.body.push(body.unbind());
            self.buffered += size;
            if self.buffered > BODY_HIGH {
                self.hub.bind(py).borrow_mut().pause(self.cid);
            }
        }
        if done {
            self.body_done = true;
        }
        self.wake(py)
    }

    /// The unsent bytes drained: a `send()` that waits goes on.
    pub(super) fn drained(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(drain) = self.drain.take() {
            resolve(py, drain)?;
        }
        Ok(())
    }

    /// The client is gone (nginx aborted the request, or the connection closed).
    pub(super) fn lost(&mut self, py: Python<'_>) -> PyResult<()> {
        self.gone = true;
        self.wake(py)?;
        self.drained(py)
    }
}

/// `message.get(key)`, without the call when the message is a dict.
fn get<'py>(
    message: &Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Ok(dict) = message.cast::<PyDict>() {
        return dict.get_item(key);
    }
    let got = message.call_method1(pyo3::intern!(message.py(), "get"), (key,))?;
    Ok((!got.is_none()).then_some(got))
}

fn disconnect(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let message = PyDict::new(py);
    message.set_item(
        pyo3::intern!(py, "type"),
        pyo3::intern!(py, "http.disconnect"),
    )?;
    Ok(message.unbind())
}

/// Completes a Future with None unless it is done (cancelled) already.
fn resolve(py: Python<'_>, future: Py<PyAny>) -> PyResult<()> {
    let future = future.bind(py);
    if !future
        .call_method0(pyo3::intern!(py, "done"))?
        .is_truthy()?
    {
        future.call_method1(pyo3::intern!(py, "set_result"), (py.None(),))?;
    }
    Ok(())
}
