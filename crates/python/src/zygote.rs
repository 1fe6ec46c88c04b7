//! The Python zygote: one per Python pool, exec'd by the master as `drover-python`. It runs
//! no tokio and no threads of its own, so that it may fork (the [`warmup`](super::warmup)
//! reader thread ends before the first fork): it blocks its signals, initializes CPython,
//! loads the hooks and calls `on_starting` ([`super::hooks`]), imports the app (unless
//! `no_preload` in its terms; a factory is called here), sends it the `warmup` requests, freezes the
//! heap for copy-on-write (`gc.freeze()`), then hands over to `drover_worker`'s fork loop
//! ([`drover_worker::zygote::serve`]), forking each worker while holding the GIL
//! (`PyOS_BeforeFork` / `PyOS_AfterFork_*`).

use std::collections::HashMap;
use std::path::Path;

use drover_proto::zygote::{EXIT_APP_LOAD, Interface, PythonArgs, WorkerExit};
use drover_worker::serve::{Board, WorkerConfig};
use drover_worker::zygote::{self, Runtime};
use nix::sys::signal::SigSet;
use nix::unistd::Pid;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::hooks::{self, Hooks};
use super::worker;

/// Runs the zygote of the pool `args` describes to its end; returns its exit code.
pub fn run(args: PythonArgs) -> u8 {
    let original = match zygote::block_signals(&args.zygote) {
        Ok(original) => original,
        Err(err) => {
            eprintln!("drover-python: cannot block signals: {err}");
            return 1;
        }
    };
    super::interpreter::start();
    Python::attach(|py| {
        if let Err(err) = prepare_paths(py, &args) {
            err.print(py);
            return EXIT_APP_LOAD;
        }
        let hooks = match start_hooks(py, &args) {
            Ok(hooks) => hooks,
            Err(err) => {
                err.display(py);
                return EXIT_APP_LOAD;
            }
        };
        let app = if args.no_preload {
            None
        } else {
            match hooks::import_app(py, &args.app) {
                Ok(app) => Some(app),
                Err(err) => {
                    eprintln!("drover-python: cannot load the app {:?}:", args.app);
                    err.display(py);
                    return EXIT_APP_LOAD;
                }
            }
        };
        if let Some(app) = &app {
            super::warmup::run(py, app, &args.mount, &args.warmup);
        }
        if args.interface == Interface::Asgi {
            crate::asgi::preload(py);
            crate::asgi::configure_websockets(args.ws_max_size);
        }
        if let Err(err) = freeze(py) {
            err.print(py);
        }
        let mut runtime = Zygote {
            py,
            args: &args,
            app,
            hooks,
            ages: HashMap::new(),
        };
        let code = zygote::serve(&mut runtime, &args.zygote, &args.app, original);
        runtime.hooks.logged(py, "on_exit");
        flush_python_stdio(py);
        code
    })
}

/// Loads the hooks (`--hooks`; without it, only the objects the abort needs) and calls
/// `on_starting(server)`, before the app loads; an exception in either fails the zygote.
fn start_hooks(py: Python<'_>, args: &PythonArgs) -> PyResult<Hooks> {
    let spec = args.hooks.as_deref();
    let hooks =
        Hooks::load(py, spec, &args.zygote.pool, args.zygote.workers).inspect_err(|_| {
            eprintln!(
                "drover-python: cannot load the hooks {:?}:",
                spec.unwrap_or_default()
            )
        })?;
    hooks
        .fatal(py, "on_starting", ())
        .inspect_err(|_| eprintln!("drover-python: the on_starting hook raised:"))?;
    Ok(hooks)
}

/// The Python zygote as the fork loop sees it: how it forks a worker.
struct Zygote<'a> {
    py: Python<'a>,
    args: &'a PythonArgs,
    /// The preloaded app (None with `no_preload`: each worker imports it).
    app: Option<Py<PyAny>>,
    hooks: Hooks,
    /// Each live worker's `age` (the fork count when it was forked), for `child_exit`.
    ages: HashMap<Pid, u32>,
}

impl Runtime for Zygote<'_> {
    fn fork_worker(
        &mut self,
        config: WorkerConfig,
        board: Option<Board<'_>>,
        mask: &SigSet,
    ) -> nix::Result<Pid> {
        let py = self.py;
        let age = config.generation;
        if let Err(err) = self.hooks.fatal(py, "pre_fork", (age,)) {
            err.display(py);
        }
        flush_python_stdio(py);
        // SAFETY: fork while holding the GIL, bracketed by CPython's own fork hooks, from a
        // process with no other threads.
        unsafe { pyo3::ffi::PyOS_BeforeFork() };
        // SAFETY: as above: no other thread can hold a lock the worker would inherit.
        match unsafe { libc::fork() } {
            -1 => {
                // SAFETY: closes PyOS_BeforeFork's bracket, in the process that opened it.
                unsafe { pyo3::ffi::PyOS_AfterFork_Parent() };
                Err(nix::Error::last())
            }
            0 => {
                // SAFETY: the worker's side of the bracket, first thing after the fork.
                unsafe { pyo3::ffi::PyOS_AfterFork_Child() };
                zygote::become_worker(mask, || {
                    let app = self.app.as_ref().map(|app| app.clone_ref(py));
                    let hooks = self.hooks.clone_ref(py);
                    let code = worker::run(
                        py,
                        app,
                        hooks,
                        &self.args.app,
                        &self.args.mount,
                        self.args.interface,
                        self.args.threads,
                        config,
                        board,
                    );
                    flush_python_stdio(py);
                    code
                })
            }
            pid => {
                // SAFETY: closes PyOS_BeforeFork's bracket, in the process that opened it.
                unsafe { pyo3::ffi::PyOS_AfterFork_Parent() };
                let pid = Pid::from_raw(pid);
                self.ages.insert(pid, age);
                Ok(pid)
            }
        }
    }

    fn ready(&mut self) {
        self.hooks.logged(self.py, "when_ready");
        flush_python_stdio(self.py);
    }

    fn reaped(&mut self, pid: Pid, _exit: WorkerExit) {
        let age = self.ages.remove(&pid).unwrap_or_default();
        self.hooks.child_exit(self.py, pid.as_raw(), age);
        flush_python_stdio(self.py);
    }

    fn blocking<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.py.detach(f)
    }
}

/// `python_path` first on sys.path, then the working directory (as gunicorn does), and the
/// virtualenv's site-packages before the interpreter's own.
fn prepare_paths(py: Python<'_>, args: &PythonArgs) -> PyResult<()> {
    let sys = py.import("sys")?;
    let path = sys.getattr("path")?.cast_into::<PyList>()?;
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    path.insert(0, cwd)?;
    for dir in args.python_path.iter().rev() {
        path.insert(0, dir.display().to_string())?;
    }
    sys.setattr("argv", vec!["drover"])?;
    if let Some(venv) = &args.virtualenv {
        let site = py.import("site")?;
        let before = path.len();
        for dir in site_packages(venv) {
            site.call_method1("addsitedir", (dir,))?;
        }
        virtualenv_first(&site, &path, before)?;
    }
    Ok(())
}

/// `addsitedir` appends, after the embedded interpreter's own site-packages; a virtualenv's
/// `python` finds the virtualenv's packages first (a version pinned there wins over the
/// base's). So what it added (`path[before..]`, with what its `.pth` files add) moves in
/// front of the interpreter's site-packages, user site included.
fn virtualenv_first(
    site: &Bound<'_, PyModule>,
    path: &Bound<'_, PyList>,
    before: usize,
) -> PyResult<()> {
    let added = path.get_slice(before, path.len());
    let mut own: Vec<String> = site.call_method0("getsitepackages")?.extract()?;
    own.push(site.call_method0("getusersitepackages")?.extract()?);
    let first_own = (0..before).find(|&i| {
        path.get_item(i)
            .and_then(|entry| entry.extract::<String>())
            .is_ok_and(|entry| own.contains(&entry))
    });
    let Some(at) = first_own.filter(|_| !added.is_empty()) else {
        return Ok(());
    };
    path.del_slice(before, path.len())?;
    for (offset, entry) in added.iter().enumerate() {
        path.insert(at + offset, entry)?;
    }
    Ok(())
}

fn site_packages(venv: &Path) -> Vec<String> {
    let pattern = venv.join("lib/python*/site-packages");
    glob::glob(&pattern.to_string_lossy())
        .map(|paths| paths.flatten().map(|p| p.display().to_string()).collect())
        .unwrap_or_default()
}

/// Collects once, then moves every object to the permanent generation, so that the
/// workers' collections never touch (and so never copy) the pages of the loaded app.
fn freeze(py: Python<'_>) -> PyResult<()> {
    let gc = py.import("gc")?;
    gc.call_method0("collect")?;
    gc.call_method0("freeze")?;
    Ok(())
}

pub fn flush_python_stdio(py: Python<'_>) {
    if let Ok(sys) = py.import("sys") {
        for name in ["stdout", "stderr"] {
            if let Ok(stream) = sys.getattr(name) {
                let _ = stream.call_method0("flush");
            }
        }
    }
}
