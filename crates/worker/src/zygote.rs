//! The zygote's fork loop, for every forked-worker runtime: it keeps `--workers` workers
//! running (then as many as the master's [`target_signal`] says), forks each through the
//! runtime's [`Runtime::fork_worker`], gives it a scoreboard slot and its draw of
//! `max_requests`, and reports every start and exit to the master ([`Report`]).
//!
//! The zygote runs no threads of its own, so that it may fork. Signals are blocked
//! ([`block_signals`], before the language runtime starts) and taken synchronously with
//! `sigtimedwait`: CHLD reaps; TERM, INT and QUIT pass TERM on to the workers (each
//! finishes its request), reap them as they go, and exit. The master's graceful stop and
//! reload SIGKILL a zygote instead and let the workers drain on their own, unless the
//! pool has Python hooks: that zygote gets TERM, so that `child_exit` and `on_exit` run.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use drover_proto::zygote::{
    EXIT_APP_LOAD, Report, WorkerExit, ZygoteArgs, reap_any, target_signal,
};
use drover_proto::{Backoff, Respawn};
use drover_scoreboard::Scoreboard;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::unistd::Pid;

use crate::access::AccessLog;
use crate::serve::{Board, WorkerConfig};

/// What a runtime plugs into the fork loop: how it forks a worker.
pub trait Runtime {
    /// Forks one worker. The implementation does the fork (Python brackets it with
    /// `PyOS_BeforeFork` / `PyOS_AfterFork_*`), and in the worker restores `mask` (the
    /// signal mask the zygote had before blocking), runs the worker (typically
    /// [`crate::serve::run`]), flushes what it must and `_exit`s with its code:
    /// [`become_worker`] does all but the flush. Returns the worker's pid in the zygote.
    fn fork_worker(
        &mut self,
        config: WorkerConfig,
        board: Option<Board<'_>>,
        mask: &SigSet,
    ) -> nix::Result<Pid>;

    /// The zygote forked its first workers (as many as it keeps), once in its life
    /// (Python: gunicorn's `when_ready` hook). Default: nothing.
    fn ready(&mut self) {}

    /// The zygote reaped its worker `pid` (Python: gunicorn's `child_exit` hook). Default:
    /// nothing.
    fn reaped(&mut self, _pid: Pid, _exit: WorkerExit) {}

    /// Runs the zygote's blocking signal wait (Python releases the GIL around it, which is
    /// why `f` must be `Send`). Default: f().
    fn blocking<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        f()
    }
}

/// The signals the zygote takes synchronously (blocked, so that none interrupts a fork).
/// [`target_signal`] carries a new worker count from the master.
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

/// Blocks the zygote's signals; call first thing in main, before starting the language
/// runtime (its threads, if any, inherit the mask). Also asks for SIGTERM when the master
/// dies, which [`serve`] passes on to the workers (the master asked for it before the exec
/// already; this keeps a zygote started by hand, `drover-php` run from a shell, the same),
/// and, unless `args.dumpable` (`process_dumpable`), makes the zygote non-dumpable, as
/// php-fpm's `process.dumpable = no` does: the zygote runs as the pool's user, and a
/// dumpable one would let any process of that user (the app's own code) attach to it with
/// ptrace, read its memory or make it write forged reports; its workers inherit the
/// setting across fork. Returns the mask for [`serve`] to hand to each worker: the
/// original one without the [`target_signal`], which the master blocks for the zygote
/// alone (no worker takes it, and whatever a worker's app starts would inherit it).
pub fn block_signals(args: &ZygoteArgs) -> nix::Result<SigSet> {
    if !args.dumpable {
        // SAFETY: prctl with constant arguments.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) } != 0 {
            return Err(nix::Error::last());
        }
    }
    let mut original = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&handled()), Some(&mut original))?;
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    ZYGOTE.store(std::process::id() as i32, Ordering::Relaxed);
    Ok(without_target(original))
}

/// `mask` without the [`target_signal`].
fn without_target(mask: SigSet) -> SigSet {
    let mut raw: libc::sigset_t = *mask.as_ref();
    // SAFETY: removes a valid real-time signal number from an initialised set.
    unsafe {
        libc::sigdelset(&mut raw, target_signal());
        SigSet::from_sigset_t_unchecked(raw)
    }
}

/// The zygote's pid, set by [`block_signals`]: a worker compares its parent with it.
static ZYGOTE: AtomicI32 = AtomicI32::new(0);

/// The worker's side of [`Runtime::fork_worker`], after the runtime's own after-fork
/// hooks: asks for SIGTERM when the zygote dies (a fork does not keep the zygote's death
/// signal) and ends at once if the zygote died before that, restores `mask`, runs `worker`
/// (which flushes what it must before it returns) and ends the process with its exit
/// code, without the zygote's destructors and exit handlers (the zygote's state is not the
/// worker's to tear down).
pub fn become_worker(mask: &SigSet, worker: impl FnOnce() -> i32) -> ! {
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let zygote = ZYGOTE.load(Ordering::Relaxed);
    if zygote != 0 && nix::unistd::getppid().as_raw() != zygote {
        // SAFETY: ends the forked worker without running the zygote's destructors.
        unsafe { libc::_exit(0) }
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(mask), None);
    let code = worker();
    // SAFETY: ends the forked worker without running the zygote's destructors.
    unsafe { libc::_exit(code) }
}

/// How long the zygote waits before it looks again for a free scoreboard slot.
const SLOT_WAIT: Duration = Duration::from_millis(50);

/// How long a stopping zygote waits for its workers to finish their requests before it
/// kills them (the master's own bound, `process_control_timeout`, is usually shorter).
const STOP_WAIT: Duration = Duration::from_secs(60);

/// After SIGKILL, how long a stopping zygote waits to reap its workers.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// Keeps `args.workers` workers (then what the master's target signal says), forks through
/// `runtime`, draws each worker's `max_requests`, claims and releases scoreboard slots (the
/// scoreboard at `args.scoreboard_fd`, taken over: call this once), reports starts and
/// exits, backs off, and returns the zygote's exit code: 0 on TERM, INT or QUIT after
/// passing TERM to the workers, [`EXIT_APP_LOAD`] when a worker exits with it. `label`
/// fills [`WorkerConfig::label`]; `mask` is what [`block_signals`] returned.
pub fn serve<R: Runtime>(runtime: &mut R, args: &ZygoteArgs, label: &str, mask: SigSet) -> u8 {
    let scoreboard = args.scoreboard_fd.and_then(|fd| {
        // SAFETY: the master put the pool's scoreboard at this descriptor for us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Scoreboard::from_fd(fd)
            .map_err(|err| eprintln!("{}: no scoreboard: {err}", program()))
            .ok()
    });
    let access_log = match AccessLog::open(args) {
        Ok(log) => log,
        Err(err) => {
            let path = args
                .access_log
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            eprintln!(
                "{}: cannot open access_log {}: {err}",
                program(),
                path.display()
            );
            return 1;
        }
    };
    let http = match crate::http::config(args) {
        Ok(http) => http,
        Err(err) => {
            eprintln!("{}: {err}", program());
            return 1;
        }
    };
    Zygote {
        runtime,
        access_log,
        http,
        args,
        label,
        mask,
        workers: Default::default(),
        backoff: Backoff::default(),
        target: args.workers,
        scoreboard,
        generation: 0,
        ready: false,
    }
    .serve()
}

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

struct Zygote<'a, R> {
    runtime: &'a mut R,
    /// The access log, opened once; each worker gets its own handle on the same file.
    access_log: Option<AccessLog>,
    /// An HTTP pool's settings (its TLS config built once); each worker gets a copy.
    http: Option<crate::http::HttpConfig>,
    args: &'a ZygoteArgs,
    label: &'a str,
    /// The signal mask workers restore after fork.
    mask: SigSet,
    workers: std::collections::BTreeMap<Pid, Live>,
    backoff: Backoff,
    /// How many workers to keep: `--workers` at start, then what the master says.
    target: u32,
    scoreboard: Option<Scoreboard>,
    /// Counts forks, so that a slot's generation tells its successive workers apart.
    generation: u32,
    /// [`Runtime::ready`] was called.
    ready: bool,
}

impl<R: Runtime> Zygote<'_, R> {
    fn serve(mut self) -> u8 {
        // The runtime started before the zygote came here: an ondemand pool, which forks
        // nothing yet, is ready for its first request from now on.
        report(Report::Ready);
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
                    match self.fork_worker(slot) {
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
                            eprintln!("{}: fork failed: {err}", program());
                            hold_until = Some(now + Duration::from_secs(1));
                            break;
                        }
                    }
                }
            }
            if !self.ready && self.workers.len() >= self.target as usize {
                self.ready = true;
                self.runtime.ready();
            }
            let timeout = hold_until.map(|until| until.saturating_duration_since(now));
            let wake = self.runtime.blocking(|| wait_signal(timeout));
            match settle(wake, || wait_signal(Some(Duration::ZERO))) {
                Settled::Stop => return self.stop(),
                Settled::Go { target } => self.target = target.unwrap_or(self.target),
            }
            match self.reap() {
                Reaped::AppFailed => {
                    self.terminate_workers();
                    return EXIT_APP_LOAD;
                }
                Reaped::Hold(delay) => hold_until = Some(Instant::now() + delay),
                Reaped::Fine => {}
            }
        }
    }

    /// TERM, INT or QUIT: the workers are asked to finish their requests and exit, and the
    /// zygote reaps them as they go (Python: `child_exit` for each) before it returns, so
    /// that what runs at its exit (`on_exit`) runs after its workers' ends. Bounded by
    /// [`STOP_WAIT`]; workers still there then are killed. (The master ends a zygote
    /// without hooks with SIGKILL, and this does not run.)
    fn stop(&mut self) -> u8 {
        self.terminate_workers();
        let deadline = Instant::now() + STOP_WAIT;
        while !self.workers.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                for &pid in self.workers.keys() {
                    let _ = kill(pid, Signal::SIGKILL);
                }
                // Killed: reaped below as soon as they are gone.
                let _ = self.runtime.blocking(|| wait_signal(Some(KILL_WAIT)));
                self.reap();
                break;
            }
            // CHLD, or another stop signal (already stopping), or the bound.
            let _ = self.runtime.blocking(|| wait_signal(Some(left)));
            self.reap();
        }
        0
    }

    fn terminate_workers(&self) {
        for &pid in self.workers.keys() {
            let _ = kill(pid, Signal::SIGTERM);
        }
    }

    fn reap(&mut self) -> Reaped {
        let mut outcome = Reaped::Fine;
        loop {
            let Ok(Some((pid, exit))) = reap_any() else {
                return outcome;
            };
            let Some(exit) = exit else { continue };
            let Some(live) = self.workers.remove(&pid) else {
                continue;
            };
            let mut served = false;
            if let (Some(board), Some(slot)) = (&self.scoreboard, live.slot) {
                served = board.slot(slot).reached_a_request();
                board.slot(slot).release();
            }
            let lived = live.started.elapsed();
            report(Report::Exited { pid, exit, lived });
            self.runtime.reaped(pid, exit);
            if exit == WorkerExit::Code(i32::from(EXIT_APP_LOAD)) {
                return Reaped::AppFailed;
            }
            // A worker that exits 0 was done (max_requests, SIGTERM, listener closed), and
            // one that died after it took a request died of that request (an uncaught
            // exception in worker mode, a segfault): neither is a failed start, however
            // short its life, so that no client can make the pool wait by sending requests
            // that fail.
            let clean = exit == WorkerExit::Code(0);
            if let Respawn::After { delay, failures } = self.backoff.on_exit(lived, clean || served)
            {
                report(Report::Holding {
                    pid,
                    delay,
                    failures,
                });
                outcome = Reaped::Hold(delay);
            }
        }
    }

    fn fork_worker(&mut self, slot: Option<usize>) -> nix::Result<Pid> {
        let limit = drover_proto::max_requests(
            self.args.max_requests,
            self.args.max_requests_jitter,
            |jitter| rand::random_range(0..=jitter),
        );
        let config = WorkerConfig {
            label: self.label.to_string(),
            max_requests: limit,
            generation: self.generation,
            max_memory: self.args.max_memory,
            request_read_timeout: self.args.request_read_timeout_ms.map(Duration::from_millis),
            access_log: self
                .access_log
                .as_ref()
                .map(AccessLog::try_clone)
                .transpose()
                .map_err(|err| {
                    nix::errno::Errno::from_raw(err.raw_os_error().unwrap_or(libc::EIO))
                })?,
            http: self.http.clone(),
            builtin: crate::builtin::Builtin::from_args(self.args),
        };
        let board = self.scoreboard.as_ref().zip(slot).map(|(board, i)| Board {
            slot: board.slot(i),
            pool: board.pool(),
        });
        self.runtime.fork_worker(config, board, &self.mask)
    }
}

enum Reaped {
    Fine,
    /// Workers die at start-up: wait before forking again.
    Hold(Duration),
    /// A worker could not load the app (Python's `--no-preload`): stop the pool.
    AppFailed,
}

/// What the signals pending at a wake ask for, taken together.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    /// Go on, with the latest target if one came.
    Go {
        target: Option<u32>,
    },
    Stop,
}

/// Folds `wake` and every signal still pending (`pending`, which answers
/// [`Wake::Timeout`] once there is none) into what they ask, before the next fork. The
/// master lowers the target before it retires a spare worker, but a zygote that runs late
/// finds the worker's SIGCHLD and the new target pending together, and SIGCHLD comes first:
/// forking on the first alone would replace the spare the master just retired.
fn settle(mut wake: Wake, mut pending: impl FnMut() -> Wake) -> Settled {
    let mut target = None;
    loop {
        match wake {
            Wake::Child | Wake::Timeout => {}
            Wake::Target(n) => target = Some(n),
            Wake::Stop => return Settled::Stop,
        }
        wake = match pending() {
            Wake::Timeout => return Settled::Go { target },
            next => next,
        };
    }
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

/// The zygote's program name (`drover-python`, `drover-php`), for its own log lines.
fn program() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .and_then(|arg0| std::path::Path::new(arg0).file_name())
        .map_or_else(
            || "drover zygote".to_string(),
            |name| name.to_string_lossy().into_owned(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zygote_takes_its_stop_signals_and_the_target_signal() {
        let set = handled();
        for signal in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGQUIT] {
            assert!(set.contains(signal), "{signal}");
        }
        // SAFETY: reads a membership bit of an initialised set.
        let target = unsafe { libc::sigismember(set.as_ref(), target_signal()) };
        assert_eq!(target, 1);
        assert!(
            !set.contains(Signal::SIGUSR2),
            "the slowlog's signal is a worker's"
        );
        assert!(
            !set.contains(Signal::SIGUSR1),
            "a kill's stack signal is a drover-php worker's"
        );
    }

    /// Wakes handed out one by one, then [`Wake::Timeout`] (nothing more pending).
    fn pending(wakes: Vec<Wake>) -> impl FnMut() -> Wake {
        let mut wakes = wakes.into_iter();
        move || wakes.next().unwrap_or(Wake::Timeout)
    }

    #[test]
    fn a_target_pending_with_a_workers_exit_is_seen_before_the_next_fork() {
        let settled = settle(Wake::Child, pending(vec![Wake::Target(5)]));
        assert_eq!(settled, Settled::Go { target: Some(5) });
        let latest = settle(
            Wake::Target(7),
            pending(vec![Wake::Child, Wake::Target(6), Wake::Child]),
        );
        assert_eq!(latest, Settled::Go { target: Some(6) });
        assert_eq!(
            settle(Wake::Timeout, pending(vec![])),
            Settled::Go { target: None }
        );
        let stop = settle(Wake::Child, pending(vec![Wake::Target(2), Wake::Stop]));
        assert_eq!(stop, Settled::Stop);
    }

    #[test]
    fn a_wait_without_a_signal_times_out() {
        let started = Instant::now();
        assert!(matches!(
            wait_signal(Some(Duration::from_millis(20))),
            Wake::Timeout
        ));
        assert!(started.elapsed() >= Duration::from_millis(15));
    }
}
