//! gunicorn's lifecycle hooks (`[python] hooks`: a module, or a gunicorn.conf.py), the app
//! factory, and the graceful abort of a request past `request_terminate_timeout`.
//!
//! The Python half is `drover_runtime.py`, loaded once per zygote as the module `_drover`:
//! gunicorn's `import_app`, the hooks file's loading, and the `server`, `worker`, `req`,
//! `resp` objects. This half decides the moments: the zygote calls `on_starting` before the
//! app loads, `pre_fork` before each fork, `when_ready` once its first workers are forked, `child_exit` as it reaps one,
//! `on_exit` as it exits; a worker calls `post_fork` first, `post_worker_init` once its app
//! is loaded, `pre_request`/`post_request` around each request (only when the hooks file
//! defines them: no Python call per request otherwise), `worker_exit` as it ends.
//!
//! An exception in `on_starting`, `post_fork` or `post_worker_init` fails that zygote or
//! worker, as in gunicorn; in any other hook it is logged with its traceback (by the Python
//! half) and drover carries on.
//!
//! **The abort.** The master sends SIGUSR1 to a Python worker whose request ran past
//! `request_terminate_timeout`. The worker's handler for it is a Python-level one
//! (`on_terminate`): CPython runs it on the worker's main thread at the next bytecode,
//! and a `time.sleep()` or a socket wait is cut short (EINTR, then the handler, which
//! raises). It calls `worker_abort(worker)`, then raises `_drover.RequestTerminated` (a
//! `SystemExit`, as gunicorn's `sys.exit(1)`) inside the request, so that its `except` and
//! `finally` blocks and error trackers run; the WSGI layer answers 500 when the head is not
//! out, and the worker exits after the request. A signal that comes between requests (the
//! request ended just as the master decided) is ignored.

use std::ffi::CString;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PySystemExit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};

/// The Python half, compiled once per zygote.
const SOURCE: &str = include_str!("drover_runtime.py");

/// `_drover`, the Python half: loaded on first use and kept in `sys.modules`.
pub fn runtime(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let modules = py.import("sys")?.getattr("modules")?;
    if let Some(module) = modules.get_item("_drover").ok().filter(|m| !m.is_none()) {
        return Ok(module.cast_into::<PyModule>()?);
    }
    let code = CString::new(SOURCE).map_err(|e| PySystemExit::new_err(e.to_string()))?;
    let module = PyModule::from_code(py, &code, c"drover_runtime.py", c"_drover")?;
    modules.set_item("_drover", &module)?;
    Ok(module)
}

/// gunicorn's `import_app`: "module:name" or "module:factory(literal args)", called here.
pub fn import_app(py: Python<'_>, spec: &str) -> PyResult<Py<PyAny>> {
    Ok(runtime(py)?.getattr("import_app")?.call1((spec,))?.unbind())
}

/// The hooks module (if any) and the objects its functions get.
pub struct Hooks {
    object: Py<PyAny>,
    /// The file defines `pre_request` / `post_request`: only then is Python called around
    /// each request.
    pub pre_request: bool,
    pub post_request: bool,
}

impl Hooks {
    /// Loads `spec` (a module name or a .py path; None: no hooks, the abort's objects only)
    /// for the pool `pool` of `workers` workers.
    pub fn load(py: Python<'_>, spec: Option<&str>, pool: &str, workers: u32) -> PyResult<Hooks> {
        let object = runtime(py)?
            .getattr("Hooks")?
            .call1((spec, pool, workers))?;
        let has = |name: &str| -> PyResult<bool> { object.call_method1("has", (name,))?.extract() };
        Ok(Hooks {
            pre_request: has("pre_request")?,
            post_request: has("post_request")?,
            object: object.unbind(),
        })
    }

    pub fn clone_ref(&self, py: Python<'_>) -> Hooks {
        Hooks {
            object: self.object.clone_ref(py),
            pre_request: self.pre_request,
            post_request: self.post_request,
        }
    }

    /// Calls the moment `name` (a method of `_drover.Hooks`) and returns the hook's
    /// exception: for `on_starting`, `post_fork` and `post_worker_init`, which fail their
    /// process.
    pub fn fatal<'py, A: pyo3::call::PyCallArgs<'py>>(
        &self,
        py: Python<'py>,
        name: &str,
        args: A,
    ) -> PyResult<()> {
        self.object.bind(py).call_method1(name, args).map(drop)
    }

    /// `child_exit(server, worker)` for the worker `pid`, the `age`-th forked.
    pub fn child_exit(&self, py: Python<'_>, pid: i32, age: u32) {
        if let Err(err) = self.object.bind(py).call_method1("child_exit", (pid, age)) {
            err.display(py);
        }
    }

    /// A moment whose exception is only logged (by the Python half; what is left, when the
    /// logging itself failed, is printed here).
    pub fn logged(&self, py: Python<'_>, name: &str) {
        if let Err(err) = self.object.bind(py).call_method0(name) {
            err.display(py);
        }
    }

    /// `pre_request(worker, req)`, before the app gets `environ`.
    pub fn pre_request(&self, py: Python<'_>, environ: &Bound<'_, PyDict>) {
        if let Err(err) = self.object.bind(py).call_method1("pre_request", (environ,)) {
            err.display(py);
        }
    }

    /// `post_request(worker, req, environ, resp)`, once the response is out (or failed).
    pub fn post_request(&self, py: Python<'_>, environ: &Bound<'_, PyDict>, status: Option<u16>) {
        if let Err(err) = self
            .object
            .bind(py)
            .call_method1("post_request", (environ, status))
        {
            err.display(py);
        }
    }

    /// This worker's hooks answer the abort from now on ([`install_abort`]).
    fn for_abort(&self, py: Python<'_>) {
        let _ = WORKER_HOOKS.set(self.object.clone_ref(py));
    }
}

/// True while the app runs a request: SIGUSR1 raises only then.
static IN_REQUEST: AtomicBool = AtomicBool::new(false);
/// The request in hand was aborted: the worker exits after it.
static ABORTED: AtomicBool = AtomicBool::new(false);
/// The worker's [`Hooks`], for `worker_abort`.
static WORKER_HOOKS: OnceLock<Py<PyAny>> = OnceLock::new();

/// Installs the worker's SIGUSR1 handler (`on_terminate`); `hooks` give `worker_abort`.
pub fn install_abort(py: Python<'_>, hooks: &Hooks) -> PyResult<()> {
    hooks.for_abort(py);
    let handler = wrap_pyfunction!(on_terminate, py)?;
    py.import("signal")?
        .call_method1("signal", (libc::SIGUSR1, handler))?;
    Ok(())
}

/// The request starts: a SIGUSR1 that arrived before (for a request that has ended) is run
/// now, and ignored; from here on one raises.
pub fn begin_request(py: Python<'_>) {
    let _ = py.check_signals();
    IN_REQUEST.store(true, Ordering::Relaxed);
}

/// The request ended; true when it was aborted (the worker must go).
pub fn end_request() -> bool {
    IN_REQUEST.store(false, Ordering::Relaxed);
    ABORTED.load(Ordering::Relaxed)
}

/// The Python-level SIGUSR1 handler: `worker_abort(worker)`, then raise
/// `RequestTerminated` inside the request. Once per request.
#[pyfunction]
fn on_terminate(py: Python<'_>, _signum: i32, _frame: Bound<'_, PyAny>) -> PyResult<()> {
    if !IN_REQUEST.swap(false, Ordering::Relaxed) {
        return Ok(());
    }
    ABORTED.store(true, Ordering::Relaxed);
    let raised = WORKER_HOOKS
        .get()
        .map(|hooks| hooks.bind(py).call_method0("worker_abort"));
    match raised {
        Some(Ok(exception)) => Err(PyErr::from_value(exception)),
        Some(Err(err)) => Err(err),
        None => Err(PySystemExit::new_err(
            "drover: the request ran past request_terminate_timeout",
        )),
    }
}
