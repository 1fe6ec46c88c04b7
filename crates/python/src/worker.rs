//! One Python worker: the WSGI app as the [`Handler`] of `drover_worker`'s worker loop,
//! which accepts, reads FastCGI, keeps the scoreboard and decides when the worker stops.
//!
//! What is Python's own: the import of the app in the worker when it was not preloaded,
//! the hooks of a worker's life (`post_fork`, `post_worker_init`, `worker_exit`) and the
//! abort of a request past `request_terminate_timeout` ([`hooks`]),
//! `faulthandler` on SIGUSR2 for the slowlog, and the GIL, released while the worker waits
//! for a connection or for the next request on a kept one.
//!
//! With `interface = "asgi"` the worker runs an event loop instead ([`crate::asgi`]), after
//! the same start (`post_fork`, the app, faulthandler, `post_worker_init`).

use drover_fastcgi::Request;
use drover_proto::zygote::{EXIT_APP_LOAD, Interface};
use drover_worker::ledger;
use drover_worker::serve::{self, Board, Conn, Handler, Outcome, WorkerConfig};
use pyo3::prelude::*;
use std::sync::Arc;

use super::hooks::{self, Hooks};
use super::wsgi::App;

/// Runs the worker to its end; returns its exit code. `app` is the preloaded app (None
/// with `no_preload`: the worker imports `spec` itself). An ASGI app runs on an event
/// loop ([`crate::asgi`]), a WSGI app in the blocking worker loop, on `threads` threads
/// when more than 1 ([`drover_worker::threads`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the worker's whole configuration, passed on once"
)]
pub fn run(
    py: Python<'_>,
    app: Option<Py<PyAny>>,
    hooks: Hooks,
    spec: &str,
    mount: &str,
    interface: Interface,
    threads: u32,
    config: WorkerConfig,
    board: Option<Board<'_>>,
) -> i32 {
    if interface == Interface::Asgi {
        return run_asgi(py, app, hooks, spec, mount, config, board);
    }
    let age = config.generation;
    let mut worker = Wsgi {
        py,
        preloaded: app,
        hooks,
        age,
        spec,
        mount,
        app: None,
        status: None,
    };
    let code = if threads > 1 {
        drover_worker::threads::run(&mut worker, |wsgi| wsgi.threads(threads), config, board)
    } else {
        serve::run(&mut worker, config, board)
    };
    if worker.app.is_some() {
        worker.hooks.logged(py, "worker_exit");
    }
    code
}

/// The ASGI worker: the blocking loop's start (death signal, slot, `post_fork`, the app,
/// faulthandler, `post_worker_init`), then the event loop, then `worker_exit`.
fn run_asgi(
    py: Python<'_>,
    app: Option<Py<PyAny>>,
    hooks: Hooks,
    spec: &str,
    mount: &str,
    mut config: WorkerConfig,
    board: Option<Board<'_>>,
) -> i32 {
    serve::install_signals();
    crate::asgi::open_ledger(&mut config, board);
    let failed = |err: PyErr, what: &str| {
        eprintln!("{what}:");
        err.display(py);
        i32::from(EXIT_APP_LOAD)
    };
    // pre_request and post_request take a WSGI environ: a hooks file that defines them is
    // refused for an ASGI app rather than silently not called.
    if hooks.pre_request || hooks.post_request {
        eprintln!(
            "the hooks file defines pre_request or post_request, which take a WSGI environ: \
             they cannot run for an ASGI app (interface = \"asgi\"); remove them"
        );
        return i32::from(EXIT_APP_LOAD);
    }
    if let Err(err) = hooks.fatal(py, "post_fork", (config.generation,)) {
        return failed(err, "the post_fork hook raised");
    }
    let app = match app {
        Some(app) => app,
        None => match hooks::import_app(py, spec) {
            Ok(app) => app,
            Err(err) => return failed(err, &format!("cannot load the app {spec:?}")),
        },
    };
    register_faulthandler(py);
    if let Err(err) = hooks.fatal(py, "post_worker_init", ()) {
        return failed(err, "the post_worker_init hook raised");
    }
    let code = crate::asgi::run(py, app, mount, &config);
    hooks.logged(py, "worker_exit");
    code
}

/// The master asks for a slow request's stack with SIGUSR2: faulthandler writes it to
/// stderr (the pool's output socket) without stopping the request.
fn register_faulthandler(py: Python<'_>) {
    let registered = py.import("faulthandler").and_then(|faulthandler| {
        let stderr = py.import("sys")?.getattr("stderr")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("file", stderr)?;
        kwargs.set_item("all_threads", true)?;
        faulthandler.call_method("register", (libc::SIGUSR2,), Some(&kwargs))
    });
    if let Err(err) = registered {
        err.display(py);
    }
}

/// The WSGI app behind a worker's loop.
struct Wsgi<'a> {
    py: Python<'a>,
    /// The app the zygote loaded, taken by [`Handler::start`].
    preloaded: Option<Py<PyAny>>,
    hooks: Hooks,
    /// The zygote's fork count when it forked this worker: gunicorn's `worker.age`.
    age: u32,
    /// "package.module:callable", for `no_preload`.
    spec: &'a str,
    mount: &'a str,
    /// Set by [`Handler::start`], before the first request; shared with the worker's
    /// threads, if it has several.
    app: Option<Arc<App>>,
    /// The last response's status, for [`Handler::response_status`].
    status: Option<u16>,
}

impl Handler for Wsgi<'_> {
    fn start(&mut self) -> Result<(), i32> {
        let py = self.py;
        // gunicorn fails a worker whose post_fork or post_worker_init raises, and stops.
        let failed = |err: PyErr, what: &str| {
            eprintln!("{what}:");
            err.display(py);
            Err(i32::from(EXIT_APP_LOAD))
        };
        if let Err(err) = self.hooks.fatal(py, "post_fork", (self.age,)) {
            return failed(err, "the post_fork hook raised");
        }
        let callable = match self.preloaded.take() {
            Some(app) => app,
            None => match hooks::import_app(py, self.spec) {
                Ok(app) => app,
                Err(err) => return failed(err, &format!("cannot load the app {:?}", self.spec)),
            },
        };
        register_faulthandler(py);
        if let Err(err) = hooks::install_abort(py, &self.hooks) {
            err.display(py);
        }
        let request_hooks =
            (self.hooks.pre_request || self.hooks.post_request).then(|| self.hooks.clone_ref(py));
        match App::new(py, callable, self.mount.to_string()) {
            Ok(app) => self.app = Some(Arc::new(app.with_hooks(request_hooks))),
            Err(err) => {
                err.display(py);
                return Err(1);
            }
        }
        if let Err(err) = self.hooks.fatal(py, "post_worker_init", ()) {
            return failed(err, "the post_worker_init hook raised");
        }
        Ok(())
    }

    fn handle(&mut self, conn: &Conn, request: Request) -> Outcome {
        let Some(app) = &self.app else {
            unreachable!("serve::run calls handle only after start succeeded, which sets the app")
        };
        hooks::begin_request(self.py);
        let (outcome, status) = app.handle(self.py, conn, request);
        if hooks::end_request() {
            // Aborted past request_terminate_timeout: the worker goes, as gunicorn's does.
            ledger::retire();
        }
        self.status = status;
        outcome
    }

    fn response_status(&self) -> Option<u16> {
        self.status
    }

    fn blocking<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.py.detach(f)
    }
}

impl Wsgi<'_> {
    /// The handlers of a worker's `n` threads, sharing the app [`Handler::start`] loaded,
    /// which now tells the app it may be called from several threads at once.
    fn threads(&mut self, n: u32) -> Vec<WsgiThread> {
        let Some(app) = &self.app else {
            unreachable!("threads::run asks for the threads only after start succeeded")
        };
        if let Err(err) = app.set_multithread(self.py) {
            err.display(self.py);
        }
        (0..n)
            .map(|_| WsgiThread {
                app: app.clone(),
                status: None,
            })
            .collect()
    }
}

/// The WSGI app behind one of a worker's threads (`threads` above 1). It holds no GIL
/// token: it takes the GIL for each request (cheaply: [`Handler::thread`] keeps the thread
/// attached) and gives it up around every wait.
///
/// A request past `request_terminate_timeout` is not aborted from inside: Python runs
/// signal handlers in the main thread only, which serves nothing here. The master kills
/// the worker after `terminate_grace` instead.
struct WsgiThread {
    app: Arc<App>,
    /// The last response's status, for [`Handler::response_status`].
    status: Option<u16>,
}

impl Handler for WsgiThread {
    fn handle(&mut self, conn: &Conn, request: Request) -> Outcome {
        let (outcome, status) = Python::attach(|py| self.app.handle(py, conn, request));
        self.status = status;
        outcome
    }

    fn response_status(&self) -> Option<u16> {
        self.status
    }

    fn blocking<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        Python::attach(|py| py.detach(f))
    }

    fn thread<T>(f: impl FnOnce() -> T) -> T {
        Python::attach(|_| f())
    }
}
