//! One Python worker: the WSGI app as the [`Handler`] of `drover_worker`'s worker loop,
//! which accepts, reads FastCGI, keeps the scoreboard and decides when the worker stops.
//!
//! What is Python's own: the import of the app in the worker when it was not preloaded,
//! the hooks of a worker's life (`post_fork`, `post_worker_init`, `worker_exit`) and the
//! abort of a request past `request_terminate_timeout` ([`hooks`]),
//! `faulthandler` on SIGUSR2 for the slowlog, and the GIL, released while the worker waits
//! for a connection or for the next request on a kept one.

use drover_fastcgi::Request;
use drover_proto::zygote::EXIT_APP_LOAD;
use drover_worker::serve::{self, Board, Conn, Handler, Outcome, WorkerConfig};
use pyo3::prelude::*;

use super::hooks::{self, Hooks};
use super::wsgi::App;
use super::zygote;

/// Runs the worker to its end; returns its exit code. `app` is the preloaded app (None
/// with `--no-preload`: the worker imports `spec` itself).
pub fn run(
    py: Python<'_>,
    app: Option<Py<PyAny>>,
    hooks: Hooks,
    spec: &str,
    mount: &str,
    config: WorkerConfig,
    board: Option<Board<'_>>,
) -> i32 {
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
    let code = serve::run(&mut worker, config, board);
    if worker.app.is_some() {
        worker.hooks.logged(py, "worker_exit");
    }
    code
}

/// The WSGI app behind a worker's loop.
struct Wsgi<'a> {
    py: Python<'a>,
    /// The app the zygote loaded, taken by [`Handler::start`].
    preloaded: Option<Py<PyAny>>,
    hooks: Hooks,
    /// The zygote's fork count when it forked this worker: gunicorn's `worker.age`.
    age: u32,
    /// "package.module:callable", for `--no-preload`.
    spec: &'a str,
    mount: &'a str,
    /// Set by [`Handler::start`], before the first request.
    app: Option<App>,
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
            None => match zygote::load_app(py, self.spec) {
                Ok(app) => app,
                Err(err) => return failed(err, &format!("cannot load the app {:?}", self.spec)),
            },
        };
        // The master asks for a slow request's stack with SIGUSR2: faulthandler writes it to
        // stderr (the pool's output socket) without stopping the request.
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
        if let Err(err) = hooks::install_abort(py, &self.hooks) {
            err.display(py);
        }
        let request_hooks =
            (self.hooks.pre_request || self.hooks.post_request).then(|| self.hooks.clone_ref(py));
        match App::new(py, callable, self.mount.to_string()) {
            Ok(app) => self.app = Some(app.with_hooks(request_hooks)),
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
            serve::retire();
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
