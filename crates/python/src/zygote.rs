//! The zygote: one per Python pool, exec'd by the master as `drover-python`. It runs no
//! tokio and no threads of its own, so that it may fork (the [`warmup`](super::warmup)
//! reader thread ends before the first fork): it initializes CPython, imports the app
//! (unless `--no-preload`), sends it the `--warmup` requests, freezes the heap for
//! copy-on-write (`gc.freeze()`),
//! then keeps `--workers` workers running, forking each while holding the GIL
//! (`PyOS_BeforeFork` / `PyOS_AfterFork_*`), and reports every start and exit to the
//! master ([`Report`]).
//!
//! Signals are blocked and taken synchronously with `sigtimedwait`: CHLD reaps; TERM, INT
//! and QUIT pass TERM on to the workers (each finishes its request) and exit. The master's
//! graceful stop SIGKILLs the zygote instead and lets the workers drain on their own.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use drover_proto::zygote::{EXIT_APP_LOAD, PythonArgs, Report, WorkerExit, target_signal};
use drover_proto::{Backoff, Respawn};
use drover_scoreboard::Scoreboard;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::worker::{self, WorkerConfig};

/// The signals the zygote takes synchronously (blocked, so that none interrupts a fork).
/// [`TARGET_SIGNAL`] carries a new worker count from the master.
fn handled() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGHUP,
    ] {
        set.add(signal);
    }
    let mut raw: libc::sigset_t = *set.as_ref();
    // SAFETY: adds a valid real-time signal number to an initialised set, which then holds
    // only valid signals.
    unsafe {
        libc::sigaddset(&mut raw, target_signal());
        SigSet::from_sigset_t_unchecked(raw)
    }
}

/// How long the zygote waits before it looks again for a free scoreboard slot.
const SLOT_WAIT: Duration = Duration::from_millis(50);

/// What woke the zygote.
enum Wake {
    Timeout,
    Child,
    Stop,
    Target(u32),
}

struct Live {
    started: Instant,
    /// Its scoreboard slot, released when it is reaped.
    slot: Option<usize>,
}

pub fn run(args: PythonArgs) -> u8 {
    let mut original = SigSet::empty();
    if let Err(err) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&handled()), Some(&mut original)) {
        eprintln!("drover-python: cannot block signals: {err}");
        return 1;
    }
    // Die with the master, passing TERM on to the workers (handled below).
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    Python::initialize();
    Python::attach(|py| {
        if let Err(err) = prepare_paths(py, &args) {
            err.print(py);
            return EXIT_APP_LOAD;
        }
        let app = if args.no_preload {
            None
        } else {
            match load_app(py, &args.app) {
                Ok(app) => Some(app),
                Err(err) => {
                    eprintln!("drover-python: cannot load the app {:?}:", args.app);
                    err.print(py);
                    return EXIT_APP_LOAD;
                }
            }
        };
        if let Some(app) = &app {
            super::warmup::run(py, app, &args.mount, &args.warmup);
        }
        if let Err(err) = freeze(py) {
            err.print(py);
        }
        let scoreboard = args.zygote.scoreboard_fd.and_then(|fd| {
            // SAFETY: the master put the pool's scoreboard at this descriptor for us alone.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            Scoreboard::from_fd(fd)
                .map_err(|err| eprintln!("drover-python: no scoreboard: {err}"))
                .ok()
        });
        let zygote = Zygote {
            args: &args,
            app,
            original,
            workers: Default::default(),
            backoff: Backoff::default(),
            target: args.zygote.workers,
            scoreboard,
            generation: 0,
        };
        zygote.serve(py)
    })
}

struct Zygote<'a> {
    args: &'a PythonArgs,
    /// The preloaded app (None with `--no-preload`: each worker imports it).
    app: Option<Py<PyAny>>,
    /// The signal mask workers restore after fork.
    original: SigSet,
    workers: std::collections::BTreeMap<Pid, Live>,
    backoff: Backoff,
    /// How many workers to keep: `--workers` at start, then what the master says.
    target: u32,
    scoreboard: Option<Scoreboard>,
    /// Counts forks, so that a slot's generation tells its successive workers apart.
    generation: u32,
}

impl Zygote<'_> {
    fn serve(mut self, py: Python<'_>) -> u8 {
        let mut hold_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if hold_until.is_none_or(|until| now >= until) {
                hold_until = None;
                while self.workers.len() < self.target as usize {
                    let slot = self.scoreboard.as_ref().and_then(Scoreboard::free_slot);
                    if self.scoreboard.is_some() && slot.is_none() {
                        // A worker without a slot would be invisible to the master (never
                        // busy, never counted, never killed): wait for one to free up (the
                        // master frees those of a dead zygote's workers as it reaps them).
                        hold_until = Some(now + SLOT_WAIT);
                        break;
                    }
                    self.generation = self.generation.wrapping_add(1);
                    match self.fork_worker(py, slot) {
                        Ok(pid) => {
                            if let (Some(board), Some(slot)) = (&self.scoreboard, slot) {
                                board.slot(slot).claim(pid, self.generation);
                            }
                            self.workers.insert(
                                pid,
                                Live {
                                    started: Instant::now(),
                                    slot,
                                },
                            );
                            report(Report::Started { pid });
                        }
                        Err(err) => {
                            eprintln!("drover-python: fork failed: {err}");
                            hold_until = Some(now + Duration::from_secs(1));
                            break;
                        }
                    }
                }
            }
            let timeout = hold_until.map(|until| until.saturating_duration_since(now));
            match py.detach(|| wait_signal(timeout)) {
                Wake::Child | Wake::Timeout => {}
                Wake::Target(target) => self.target = target,
                Wake::Stop => {
                    for &pid in self.workers.keys() {
                        let _ = kill(pid, Signal::SIGTERM);
                    }
                    return 0;
                }
            }
            match self.reap() {
                Reaped::AppFailed => {
                    for &pid in self.workers.keys() {
                        let _ = kill(pid, Signal::SIGTERM);
                    }
                    return EXIT_APP_LOAD;
                }
                Reaped::Hold(delay) => hold_until = Some(Instant::now() + delay),
                Reaped::Fine => {}
            }
        }
    }

    fn reap(&mut self) -> Reaped {
        let mut outcome = Reaped::Fine;
        loop {
            let status = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return outcome,
                Ok(status) => status,
            };
            let Some(pid) = status.pid() else { continue };
            let Some(live) = self.workers.remove(&pid) else {
                continue;
            };
            if let (Some(board), Some(slot)) = (&self.scoreboard, live.slot) {
                board.slot(slot).release();
            }
            let lived = live.started.elapsed();
            if let Some(exit) = WorkerExit::from_status(status) {
                report(Report::Exited { pid, exit, lived });
            }
            if matches!(status, WaitStatus::Exited(_, code) if code == i32::from(EXIT_APP_LOAD)) {
                return Reaped::AppFailed;
            }
            // A worker that exits 0 was done (max_requests, SIGTERM, listener closed): not a
            // failed start, however short its life.
            let clean = matches!(status, WaitStatus::Exited(_, 0));
            if let Respawn::After { delay, .. } = self.backoff.on_exit(lived, clean) {
                outcome = Reaped::Hold(delay);
            }
        }
    }

    fn fork_worker(&self, py: Python<'_>, slot: Option<usize>) -> nix::Result<Pid> {
        let limit = drover_proto::max_requests(
            self.args.zygote.max_requests,
            self.args.zygote.max_requests_jitter,
            |jitter| rand::random_range(0..=jitter),
        );
        let config = WorkerConfig {
            app: self.args.app.clone(),
            mount: self.args.mount.clone(),
            max_requests: limit,
            generation: self.generation,
            max_memory: self.args.zygote.max_memory,
            request_read_timeout: self
                .args
                .zygote
                .request_read_timeout_ms
                .map(Duration::from_millis),
        };
        let slot = self
            .scoreboard
            .as_ref()
            .zip(slot)
            .map(|(board, i)| board.slot(i));
        // SAFETY: fork while holding the GIL, bracketed by CPython's own fork hooks, from a
        // process with no other threads.
        unsafe { pyo3::ffi::PyOS_BeforeFork() };
        // SAFETY: as above: no other thread can hold a lock the child would inherit.
        match unsafe { libc::fork() } {
            -1 => {
                // SAFETY: closes PyOS_BeforeFork's bracket, in the process that opened it.
                unsafe { pyo3::ffi::PyOS_AfterFork_Parent() };
                Err(nix::Error::last())
            }
            0 => {
                // SAFETY: the child's side of the bracket, first thing after the fork.
                unsafe { pyo3::ffi::PyOS_AfterFork_Child() };
                let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.original), None);
                let code = worker::run(
                    py,
                    self.app.as_ref().map(|app| app.clone_ref(py)),
                    config,
                    slot,
                );
                flush_python_stdio(py);
                // SAFETY: ends the forked worker without running the zygote's destructors.
                unsafe { libc::_exit(code) }
            }
            pid => {
                // SAFETY: closes PyOS_BeforeFork's bracket, in the process that opened it.
                unsafe { pyo3::ffi::PyOS_AfterFork_Parent() };
                Ok(Pid::from_raw(pid))
            }
        }
    }
}

enum Reaped {
    Fine,
    /// Workers die at start-up: wait before forking again.
    Hold(Duration),
    /// A worker could not import the app (`--no-preload`): stop the pool.
    AppFailed,
}

/// Waits for one of [`handled`], up to `timeout` (forever when `None`).
fn wait_signal(timeout: Option<Duration>) -> Wake {
    let set = handled();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: a zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid signal set, out-parameter and optional timespec.
    let signo = unsafe { libc::sigtimedwait(set.as_ref(), &mut info, ts_ptr) };
    match signo {
        n if n < 0 => Wake::Timeout,
        libc::SIGCHLD => Wake::Child,
        n if n == target_signal() => {
            // SAFETY: the signal was sent with sigqueue, so si_value is set.
            Wake::Target(unsafe { info.si_value() }.sival_ptr as usize as u32)
        }
        _ => Wake::Stop,
    }
}

fn report(report: Report) {
    // One write per report, so that lines never interleave with a worker's output.
    let _ = std::io::stderr().write_all(report.encode().as_bytes());
}

/// `python_path` first on sys.path, then the working directory (as gunicorn does), and the
/// virtualenv's site-packages.
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
        for dir in site_packages(venv) {
            site.call_method1("addsitedir", (dir,))?;
        }
    }
    Ok(())
}

fn site_packages(venv: &Path) -> Vec<String> {
    let pattern = venv.join("lib/python*/site-packages");
    glob::glob(&pattern.to_string_lossy())
        .map(|paths| paths.flatten().map(|p| p.display().to_string()).collect())
        .unwrap_or_default()
}

/// Imports "package.module:callable" (the callable may be dotted: "app:server.wsgi").
pub fn load_app(py: Python<'_>, spec: &str) -> PyResult<Py<PyAny>> {
    let (module, callable) = spec.split_once(':').unwrap_or((spec, "application"));
    let mut object = py.import(module)?.into_any();
    for name in callable.split('.') {
        object = object.getattr(name)?;
    }
    if !object.is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{spec} is not callable"
        )));
    }
    Ok(object.unbind())
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
