//! One pool as the master runs it: its listener, its processes and workers, its backoff.
//!
//! What differs between runtimes is asked of the pool's [`Kind`] (the runtime interface).
//! With a parent (a php-cgi parent or a Python zygote) the master execs one process and
//! learns of its workers: a watched parent's by reading its children from /proc each tick
//! ([`observe`]), a reporting one's from its reports. When a parent dies its workers are
//! re-parented to the master (a child subreaper), which reaps and retires them. Without
//! one, every process the master execs is a worker.
//!
//! - [`observe`]: what each worker is doing.
//! - [`policy`]: the pool's policy applied: spawn, retire, kill.
//! - [`kill`](mod@kill): a kill's log lines, and the PHP stack it waits for.
//! - [`memory`]: the pool's memory measured, for `max_children = "auto"` and
//!   `max_pool_memory`.

mod drain;
mod kill;
mod lifecycle;
mod memory;
mod observe;
mod policy;
mod program;
mod request_id;
mod slow;
mod startup;
mod status;
mod worker;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::exit::{ExitCause, lifetime};
use super::orphans::{Known, Orphans};
use super::pidfd;
use super::spawn::{Inherited, spawn};
use crate::config::Pool;
use crate::listener::Listener;
use crate::logging::access::AccessLogFile;
use crate::pm::{self, Backoff, PolicyState, PoolLimits, Respawn};
use crate::runtime::{self, Launch, kind};
use crate::scoreboard::Scoreboard;
use drover_proto::zygote::{self, Report, WorkerExit};
pub use lifecycle::Lifecycle;
pub use memory::memory_limit;
pub use memory::start_notes as memory_notes;
use worker::{Probes, Process, Worker};

pub struct PoolRun {
    /// This generation's id (a reload starts a new generation of a changed pool).
    pub id: u64,
    pub config: Pool,
    /// Shared by the generations of one pool during a reload.
    pub listener: Rc<Listener>,
    /// The write end of the pool's output socket, given to every process as fds 1 and 2.
    output: OwnedFd,
    /// How this generation's processes are started, resolved when it was created: a spawn
    /// looks nothing up. Its `kind` (the runtime interface) is the only source of runtime
    /// differences here.
    launch: Launch,
    /// The processes the master exec'd, its own children: signalled by pid (and a
    /// parent's process group by its pid), which no other process can take before the
    /// master reaps them, and only its loop reaps.
    processes: BTreeMap<Pid, Process>,
    /// Every worker, each verified and held by a handle ([`super::pidfd`]): signalled
    /// through it only, never by a pid a pool process named.
    workers: BTreeMap<Pid, Worker>,
    backoff: Backoff,
    /// After a start-up failure: no spawn before this.
    hold_until: Option<Instant>,
    /// The start-up failures, the master's and a zygote's, for the status page.
    startup: startup::StartupFailures,
    /// Starting, serving, failed, stopping or draining ([`Lifecycle`]).
    lifecycle: Lifecycle,
    limits: PoolLimits,
    policy: PolicyState,
    /// Python pools: written by the workers, read by `observe`.
    scoreboard: Option<Scoreboard>,
    /// `access_log`, opened by the master for this generation's zygote (see
    /// [`crate::logging::access`]).
    access_log: Option<AccessLogFile>,
    /// `certfile`: the sealed memfd holding what the master read of the certificate and
    /// key, passed to this generation's zygotes at `TLS_FD`.
    tls: Option<OwnedFd>,
    /// Python dynamic and ondemand pools: the worker count the zygote was given.
    desired: u32,
    probes: Probes,
    slow: slow::SlowRequests,
    /// request_terminate_timeout kills waiting for the worker's stack (drover-php).
    kills: kill::PendingKills,
    /// A reload's new generation: the id of the one it replaces, retired once this one is up.
    pub replaces: Option<u64>,
    /// Processes that exited lately, with their role: their last output lines may be read
    /// after they were reaped, and must still be tagged right.
    exited: Vec<(Pid, &'static str, Instant)>,
    /// Workers a zygote reported started that were gone before the master could verify
    /// them (a crash at once, reaped by the zygote first), with that zygote and when: their
    /// exit report, which follows, is still counted (a crash loop must reach the emergency
    /// restart). Bounded; kept 5 s. Nothing is ever signalled from this list.
    vanished: Vec<(Pid, Pid, Instant)>,
    /// When the app failed to load: the message waits a moment for the traceback lines.
    failed_at: Option<Instant>,
    /// Draining or stopping: since when a parent asked to stop with TERM has had no
    /// worker left ([`PoolRun::kill_lingering_parent`]).
    parent_alone_since: Option<Instant>,
    /// When this generation started (status: start time, start since).
    born: Instant,
    /// What the status page counts since the generation started.
    counters: status::Counters,
    /// ondemand: the task watching the listener (see `watch_listener`), stopped on drop.
    watcher: Option<tokio::task::AbortHandle>,
    /// The zygote said its runtime is started ([`Report::Ready`]), so that an ondemand pool
    /// is ready only once a request would find PHP or the app loaded; true from the start
    /// for runtimes whose parent does not report.
    runtime_ready: bool,
    /// What sizing by memory measured ([`memory`]).
    memory: memory::MemoryWatch,
}

/// How many vanished workers ([`PoolRun::vanished`]) a generation remembers at most.
const VANISHED_MAX: usize = 64;

impl PoolRun {
    /// Ends the ondemand listener watch: the pool takes no new work.
    pub(super) fn stop_watching(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
    }
}

impl Drop for PoolRun {
    fn drop(&mut self) {
        self.stop_watching();
    }
}

/// What the master learns from one reaped pid.
pub enum Reaped {
    NotOurs,
    Exit { crash: bool },
}

impl PoolRun {
    pub fn new(
        id: u64,
        config: Pool,
        listener: Rc<Listener>,
        output: OwnedFd,
        process_control_timeout: Duration,
    ) -> Result<PoolRun, runtime::RuntimeError> {
        let launch = runtime::launch(&config, 0)?;
        launch.direct.log(&config.name);
        let scoreboard = match launch.kind.scoreboard_slots(config.pm.max_children) {
            Some(slots) => Some(
                Scoreboard::create(&config.name, slots)
                    .map_err(|e| runtime::RuntimeError::Scoreboard(e.to_string()))?,
            ),
            None => None,
        };
        let access_log = match &config.access_log {
            Some(path) => Some(AccessLogFile::open(path).map_err(|err| {
                runtime::RuntimeError::AccessLog(format!("{}: {err}", path.display()))
            })?),
            None => None,
        };
        // The certificate and key the master read at load, for this generation's zygotes.
        let tls = match config.http.as_ref().and_then(|http| http.tls.as_ref()) {
            Some(tls) => Some(
                tls.material
                    .memfd()
                    .map_err(|e| runtime::RuntimeError::Tls(e.to_string()))?,
            ),
            None => None,
        };
        Ok(PoolRun {
            access_log,
            tls,
            runtime_ready: !launch.kind.parent_reports(),
            memory: memory::MemoryWatch::default(),
            id,
            replaces: None,
            exited: Vec::new(),
            vanished: Vec::new(),
            failed_at: None,
            parent_alone_since: None,
            born: Instant::now(),
            counters: status::Counters::default(),
            watcher: None,
            limits: PoolLimits::new(&config, process_control_timeout),
            desired: pm::initial_workers(&config.pm),
            config,
            listener,
            output,
            launch,
            processes: BTreeMap::new(),
            workers: BTreeMap::new(),
            backoff: Backoff::default(),
            hold_until: None,
            startup: startup::StartupFailures::default(),
            lifecycle: Lifecycle::Starting,
            policy: PolicyState::default(),
            scoreboard,
            probes: Probes::default(),
            slow: slow::SlowRequests::default(),
            kills: kill::PendingKills::default(),
        })
    }

    /// For a `[program]` pool: the user its copies run as and the signal that stops them,
    /// for what an exited copy leaves behind ([`super::orphans::Left`]).
    pub fn program_user(&self) -> Option<(nix::unistd::Uid, Signal)> {
        (self.launch.kind == kind::Kind::Program).then(|| {
            let uid = match &self.launch.spec.credentials {
                Some(credentials) => credentials.uid,
                None => nix::unistd::Uid::effective(),
            };
            (uid, self.launch.stop_signal)
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Workers serving now (not orphaned, not retiring).
    pub fn workers(&self) -> usize {
        self.workers
            .values()
            .filter(|w| !w.orphan && w.retiring.is_none())
            .count()
    }

    /// The app failed to load: this generation runs nothing.
    pub fn failed(&self) -> bool {
        self.lifecycle.failed()
    }

    /// Its listener was shut down because the pool is stopped (see [`PoolRun::refuse`]).
    pub fn refusing(&self) -> bool {
        self.lifecycle.refusing()
    }

    /// The pool is stopped and nothing else serves its socket: shuts the listener down, so
    /// that connections are refused at once (nginx answers 502) until a reload binds a new
    /// one.
    pub fn refuse(&mut self) {
        if self.lifecycle.refusing() {
            return;
        }
        self.lifecycle = self.lifecycle.refused();
        self.stop_watching();
        match self.listener.shut_down() {
            Ok(()) if self.listener.inherited => tracing::warn!(
                "pool {}: stopped; connections wait on systemd's socket {} until a reload",
                self.name(),
                self.listener.addr
            ),
            Ok(()) => tracing::warn!(
                "pool {}: refusing connections on {} until a reload",
                self.name(),
                self.listener.addr
            ),
            Err(err) => {
                tracing::error!("pool {}: cannot shut down the listener: {err}", self.name())
            }
        }
    }

    /// Running the workers it starts with, its runtime started (an ondemand pool starts
    /// none), or stopped for good: nothing more to wait for.
    pub fn settled(&self) -> bool {
        self.lifecycle.failed()
            || (self.runtime_ready
                && self.workers() >= pm::initial_workers(&self.config.pm) as usize)
    }

    /// Whether this generation can take a request now, for `/readyz`.
    pub fn readiness(&self) -> crate::control::health::PoolState {
        crate::control::health::pool_state(
            self.lifecycle.failed(),
            self.runtime_ready,
            self.workers(),
            self.config.pm.mode == crate::config::PmMode::Ondemand,
        )
    }

    /// Every pid of this pool still alive (for stop).
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty() && self.workers.is_empty()
    }

    /// ondemand: a task that sends this generation's id to `wakes` whenever a connection
    /// arrives on the listener, so that the master spawns at once instead of on its next
    /// tick (epoll on a copy of the listening socket: the master never accepts).
    pub fn watch_listener(&mut self, wakes: &tokio::sync::mpsc::UnboundedSender<u64>) {
        if self.config.pm.mode != crate::config::PmMode::Ondemand {
            return;
        }
        let Ok(fd) = self.listener.dup() else { return };
        // SAFETY: the OwnedFd stays open, and the same descriptor, for the AsyncFd's life.
        let Ok(watched) = (unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }) else {
            return;
        };
        let (id, wakes) = (self.id, wakes.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok(mut ready) = watched.readable().await else {
                    return;
                };
                // A listener shut down (stop, drain) stays "readable" for good: nothing more
                // to watch, and waking on it would spin.
                if ready.ready().is_read_closed() || wakes.send(id).is_err() {
                    return;
                }
                // Edge-triggered: the next wake is the next arrival.
                ready.clear_ready();
            }
        });
        self.watcher = Some(task.abort_handle());
    }

    /// ondemand: whether a connection waits on the listener (it is readable) while no worker
    /// is idle to take it. Other modes: not asked.
    pub fn connections_waiting(&self) -> Option<u32> {
        if self.config.pm.mode != crate::config::PmMode::Ondemand {
            return None;
        }
        if let Some(waiting) = self.listen_queue() {
            return Some(waiting);
        }
        let mut fds = [nix::poll::PollFd::new(
            self.listener.fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap_or(0);
        Some(u32::from(ready > 0))
    }

    /// A start-up failure holds spawning back until its backoff ends.
    fn holding(&mut self, now: Instant) -> bool {
        if self.hold_until.is_some_and(|until| now < until) {
            return true;
        }
        self.hold_until = None;
        false
    }

    /// Keeps the parent (php-cgi or zygote) running; starts exec'd workers the first time.
    /// Later spawns of exec'd workers are the policy's ([`policy`]).
    pub fn maintain(&mut self, now: Instant) {
        if !self.lifecycle.spawns() || self.holding(now) {
            return;
        }
        let wanted = if self.launch.kind.has_parent() {
            1
        } else if self.lifecycle == Lifecycle::Starting {
            pm::initial_workers(&self.config.pm) as usize
        } else {
            return;
        };
        self.lifecycle = self.lifecycle.spawned();
        let running = self.processes.values().filter(|p| !p.retiring).count();
        for _ in running..wanted {
            if !self.spawn_one(now) {
                break;
            }
        }
    }

    fn spawn_one(&mut self, now: Instant) -> bool {
        let limit = pm::max_requests(
            self.config.pm.max_requests,
            self.config.pm.max_requests_jitter,
            |jitter| rand::random_range(0..=jitter),
        );
        let inherited = Inherited {
            scoreboard: self.scoreboard.as_ref().map(|board| board.fd()),
            access_log: self.access_log.as_ref().map(AccessLogFile::fd),
            tls: self.tls.as_ref().map(AsFd::as_fd),
        };
        let spec = self.launch.spec(limit);
        let result = self
            .listener
            .dup()
            .map_err(|e| e.to_string())
            .and_then(|fd0| {
                // Every zygote takes the target signal (a static one never gets it).
                let zygote = self.launch.kind.parent_reports();
                spawn(&spec, fd0, &self.output, inherited, zygote)
                    .map_err(|e| format!("cannot start {}: {e}", spec.program.display()))
            });
        match result {
            Ok(pid) => {
                self.processes.insert(
                    pid,
                    Process {
                        started: now,
                        retiring: false,
                    },
                );
                let role = self.launch.kind.process_role();
                let workers = starting_workers(&self.config.pm);
                if !self.launch.kind.has_parent() {
                    // Its own child, not reaped: the handle cannot miss.
                    match pidfd::child_of(pid, Pid::this()) {
                        Ok(handle) => {
                            self.workers.insert(pid, Worker::new(now, None, handle));
                            tracing::info!("pool {}: worker {pid} started", self.name());
                        }
                        Err(err) => tracing::error!(
                            "pool {}: worker {pid} started, but no handle on it ({err}); \
                             it is reaped and not signalled",
                            self.name()
                        ),
                    }
                } else if self.launch.kind.limit_per_parent() {
                    tracing::info!(
                        "pool {}: {role} {pid} started ({workers}, max_requests {limit})",
                        self.name()
                    );
                } else {
                    // The parent draws each worker's limit itself.
                    tracing::info!("pool {}: {role} {pid} started ({workers})", self.name());
                }
                if self.launch.kind.sizing(self.config.pm.mode) == kind::Sizing::Target {
                    // A new parent starts with the initial count.
                    self.desired = pm::initial_workers(&self.config.pm);
                }
                true
            }
            Err(reason) => {
                self.hold(now, Duration::ZERO, &reason);
                false
            }
        }
    }

    /// A worker exec'd by the master exited on its own: a dynamic pool replaces it now
    /// ([`pm::replacements`]), unless a start-up failure holds spawning back, or the pool is
    /// stopping or draining.
    fn replace_at_once(&mut self, now: Instant) {
        if !self.lifecycle.spawns() || self.holding(now) {
            return;
        }
        let total = u32::try_from(self.processes.len()).unwrap_or(u32::MAX);
        for _ in 0..pm::replacements(&self.limits.pm, 1, total) {
            if !self.spawn_one(now) {
                break;
            }
        }
    }

    /// Records a start-up failure and holds spawning back as the backoff says.
    fn hold(&mut self, now: Instant, lived: Duration, reason: &str) {
        if let Respawn::After { delay, failures } = self.backoff.on_exit(lived, false) {
            tracing::error!(
                "pool {}: failed to start ({reason}); retrying in {}s ({failures} failure{} in a row)",
                self.name(),
                delay.as_secs(),
                if failures == 1 { "" } else { "s" }
            );
            self.hold_until = Some(now + delay);
            self.startup.record(now, delay, reason.to_owned());
        }
    }

    /// The zygote `from` holds its forks back after its worker `pid` failed to start.
    fn on_holding(&mut self, from: Pid, pid: Pid, delay: Duration, failures: u32, now: Instant) {
        let cause = self.startup.cause_of(pid);
        tracing::error!(
            "pool {}: failed to start ({cause}); zygote {from} forks again in {} ({failures} \
             failure{} in a row)",
            self.name(),
            lifetime(delay),
            if failures == 1 { "" } else { "s" }
        );
        self.startup.record(now, delay, cause);
    }

    /// Handles one reaped pid if it belongs to this pool; `orphans`: the master's children
    /// known not to be workers, which a dead parent's adoption skips.
    pub fn on_reaped(
        &mut self,
        pid: Pid,
        cause: ExitCause,
        now: Instant,
        orphans: &Orphans,
    ) -> Reaped {
        if let Some(process) = self.processes.remove(&pid) {
            let lived = now.duration_since(process.started);
            if let Some(worker) = self.workers.remove(&pid) {
                // An exec'd worker.
                self.log_worker_exit(pid, &worker, cause, now);
                // A clean exit (max_requests reached) is no start-up failure, however short,
                // nor a death after the worker was seen past its start (a request's fault);
                // but a program's copy is meant to keep running: one that exits at once,
                // whatever its code, is in a crash loop.
                let program = self.launch.kind == kind::Kind::Program;
                if !process.retiring && !worker.served && (cause != ExitCause::Code(0) || program) {
                    self.hold(
                        now,
                        lived,
                        &format!("worker {pid} exited {cause} after {}", lifetime(lived)),
                    );
                }
                if !process.retiring {
                    self.replace_at_once(now);
                }
                return Reaped::Exit {
                    crash: cause.is_crash(),
                };
            }
            let what = self.launch.kind.process_role();
            // A zygote on the copy of libphp bound directly that died before any request:
            // the next one runs the linked libphp, at once (the launch says it once).
            let exit = format!("{what} {pid} exited {cause} after {}", lifetime(lived));
            let served = self.workers.values().any(|worker| worker.served);
            if !process.retiring && self.launch.fall_back(&self.config.name, served, &exit) {
                self.adopt_workers_of(pid, now, orphans);
                self.orphan_workers_of(pid, true);
                self.exited.push((pid, what, now));
                return Reaped::Exit {
                    crash: cause.is_crash(),
                };
            }
            if process.retiring {
                tracing::info!(
                    "pool {}: {what} {pid} exited {cause} after {}",
                    self.name(),
                    lifetime(lived)
                );
            } else {
                tracing::warn!(
                    "pool {}: {what} {pid} exited {cause} after {}",
                    self.name(),
                    lifetime(lived)
                );
            }
            self.adopt_workers_of(pid, now, orphans);
            self.orphan_workers_of(pid, !process.retiring);
            self.exited.push((pid, what, now));
            if matches!(cause, ExitCause::Code(code) if self.launch.kind.app_failed(code)) {
                self.lifecycle = self.lifecycle.app_failed();
                self.failed_at = Some(now);
            } else if !process.retiring {
                let reason = format!("{what} {pid} exited {cause} after {}", lifetime(lived));
                self.hold(now, lived, &reason);
            }
            return Reaped::Exit {
                crash: cause.is_crash(),
            };
        }
        if let Some(worker) = self.workers.remove(&pid) {
            // Reaped by the master: its zygote is gone and cannot free its slot.
            self.release_slot(pid);
            self.log_worker_exit(pid, &worker, cause, now);
            return Reaped::Exit {
                crash: cause.is_crash(),
            };
        }
        Reaped::NotOurs
    }

    /// The parent died: its workers are the master's now. After a crash a new parent
    /// brings a full set, so they are retired (`retire`); on a stop the closed listener
    /// ends them after their last request.
    fn orphan_workers_of(&mut self, parent: Pid, retire: bool) {
        let draining = self.lifecycle.draining();
        for worker in self
            .workers
            .values_mut()
            .filter(|w| w.parent == Some(parent))
        {
            worker.orphan = true;
            if retire {
                let _ = worker.signal(Signal::SIGTERM);
            } else if draining {
                // Retired with its generation: SIGTERM once it is seen idle.
                worker.retiring.get_or_insert(Instant::now());
            }
        }
    }

    fn log_worker_exit(&mut self, pid: Pid, worker: &Worker, cause: ExitCause, now: Instant) {
        // A worker the master killed was counted by the policy, under the kill's cause
        // (`request_terminate_timeout`: terminate): its SIGKILL, or the exit of a Python
        // worker that ended its aborted request, is neither a crash nor a recycle.
        if worker.retiring.is_none() && !worker.orphan && !worker.killed {
            match cause {
                ExitCause::Code(0) => self.counters.clean_exits += 1,
                ExitCause::SeenByParent => {}
                _ => self.counters.crash_exits += 1,
            }
        }
        if worker.retiring.is_some() && self.lifecycle == Lifecycle::Draining && !worker.killed {
            self.counters.reload_exits += 1;
        }
        let lived = lifetime(now.duration_since(worker.started));
        let level_warn = !matches!(cause, ExitCause::Code(0) | ExitCause::SeenByParent)
            && !worker.orphan
            && !worker.killed
            && worker.retiring.is_none();
        if level_warn {
            tracing::warn!(
                "pool {}: worker {pid} exited {cause} after {lived}",
                self.name()
            );
        } else {
            tracing::info!(
                "pool {}: worker {pid} exited {cause} after {lived}",
                self.name()
            );
        }
    }

    /// Graceful stop: no new connection reaches the pool, every worker finishes what it
    /// has. A php-cgi parent is killed first (it serves nothing, and would replace the
    /// workers that exit); then the listener is shut down for reading: connections already
    /// queued on a unix socket are still accepted and served, new ones are refused, and a
    /// worker whose accept() then fails exits on its own, as php-fpm's children do when
    /// they close the listener on SIGQUIT. No signal interrupts a running request (a
    /// SIGTERM would cut php-cgi's sleep() and I/O short).
    pub fn stop_accepting(&mut self) {
        self.lifecycle = self.lifecycle.stop();
        self.stop_watching();
        self.kill_parent();
        if let Err(err) = self.listener.shut_down() {
            tracing::error!("pool {}: cannot shut down the listener: {err}", self.name());
        }
        // A program's copies have no listener to see closed: they are asked to stop.
        if self.launch.kind == kind::Kind::Program {
            let now = Instant::now();
            for worker in self.workers.values_mut() {
                worker.retiring.get_or_insert(now);
            }
            self.signal_retiring();
        }
    }

    /// A tick while drover stops: a program's copies that outlive their `stop_timeout`
    /// are killed (other pools' workers finish their requests within the stop's deadline).
    pub fn stop_tick(&mut self, now: Instant) {
        if self.launch.kind == kind::Kind::Program {
            self.drain_tick(now);
        }
    }

    /// A php-cgi parent or zygote goes at once, before its workers are retired: it serves
    /// nothing itself and would replace the workers that exit. SIGKILL makes its end quick;
    /// the master loop reaps it (never waiting), and then adopts every worker it had forked,
    /// seen or not ([`PoolRun::on_reaped`]).
    ///
    /// A Python zygote with hooks gets TERM instead: it asks its workers to finish, reaps
    /// each (`child_exit`), then runs `on_exit` and exits; the workers drain as they would
    /// without it. [`PoolRun::drain_tick`] kills it if it is still there
    /// `process_control_timeout` after its last worker (an `on_exit` that hangs).
    pub(super) fn kill_parent(&mut self) {
        if !self.launch.kind.has_parent() {
            return;
        }
        let signal = self.launch.parent_stop;
        for (&pid, process) in &mut self.processes {
            process.retiring = true;
            let _ = kill(pid, signal);
        }
    }

    /// A parent asked to stop with TERM ([`PoolRun::kill_parent`]) that outlives its
    /// workers by `process_control_timeout` is killed.
    pub(super) fn kill_lingering_parent(&mut self, now: Instant) {
        if !self.workers.is_empty() {
            self.parent_alone_since = None;
            return;
        }
        let since = *self.parent_alone_since.get_or_insert(now);
        if now.duration_since(since) < self.limits.retire_timeout {
            return;
        }
        for (&pid, process) in &self.processes {
            if process.retiring {
                tracing::warn!(
                    "pool {}: zygote {pid} still there {:?} after its last worker; killing it",
                    self.config.name,
                    self.limits.retire_timeout
                );
                let _ = kill(pid, Signal::SIGKILL);
            }
        }
    }

    /// Frees the scoreboard slot of `pid`, an orphaned Python worker the master reaped.
    fn release_slot(&self, pid: Pid) {
        let Some(board) = &self.scoreboard else {
            return;
        };
        if let Some(view) = board.snapshot().into_iter().find(|v| v.pid == pid) {
            // Safe to write: its worker is reaped and its zygote dead, and a new zygote
            // only claims free slots.
            board.slot(view.slot).release();
        }
    }

    /// The parent `parent` is gone: every worker it forked is the master's child now (the
    /// master is a child subreaper), including those it forked since the last look, which
    /// the pool has not seen. They are found by their process group (the parent leads its
    /// own, and its workers stay in it) and tracked as orphans: retired like the rest of the
    /// generation when it is draining or stopping, so that none keeps serving unseen. The
    /// app's own orphans in the group, seen while the parent ran, are not taken.
    fn adopt_workers_of(&mut self, parent: Pid, now: Instant, orphans: &Orphans) {
        for pid in own_children_in_group(parent) {
            if self.workers.contains_key(&pid) || orphans.is_stranger(pid) {
                continue;
            }
            // The master's own child, not reaped: the handle cannot miss.
            let Ok(handle) = pidfd::child_of(pid, Pid::this()) else {
                continue;
            };
            tracing::info!(
                "pool {}: worker {pid} of {} {parent} adopted",
                self.name(),
                self.launch.kind.process_role()
            );
            let mut worker = Worker::new(now, Some(parent), handle);
            // Until the next tick samples it: a worker in accept() is idle, one doing
            // anything else may be serving, and must not get a SIGTERM mid-request.
            worker.state.busy = runtime::php::sample::idle_by_syscall(pid) != Some(true);
            self.workers.insert(pid, worker);
        }
    }

    /// Asks every process to finish (SIGTERM: php-cgi passes it to its workers). Their
    /// exits are expected, and replaced.
    pub fn retire_all(&mut self) {
        for (&pid, process) in &mut self.processes {
            process.retiring = true;
            let _ = kill(pid, Signal::SIGTERM);
        }
        for worker in self.workers.values() {
            let _ = worker.signal(Signal::SIGTERM);
        }
    }

    /// USR1: this generation's access log, when its path no longer names the file the
    /// workers write to (logrotate renamed or removed it). Then the pool needs a new
    /// generation, which opens a fresh file at the path ([`crate::logging::access`]).
    pub fn moved_access_log(&self) -> Option<&std::path::Path> {
        self.access_log
            .as_ref()
            .filter(|log| log.moved())
            .map(AccessLogFile::path)
    }

    /// SIGKILL to every process group and worker of the pool.
    pub fn kill_all(&mut self) {
        for (&pid, process) in &mut self.processes {
            process.retiring = true;
            let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        }
        for worker in self.workers.values() {
            let _ = worker.signal(Signal::SIGKILL);
        }
    }

    /// A line from the zygote that reports a worker's start or exit (`Some`: it was a report,
    /// with the exit's nature). `None` for any other line, or one from another process:
    /// only the zygote's reports are trusted, and not blindly (see [`PoolRun::on_started`]
    /// and [`PoolRun::on_exited`]).
    pub fn on_report(&mut self, from: Pid, line: &str, now: Instant) -> Option<Reaped> {
        if !self.launch.kind.parent_reports() {
            return None;
        }
        // A Python worker that recycles itself for max_memory says why.
        if let (Some(worker), Some(reason)) =
            (self.workers.get_mut(&from), zygote::parse_retiring(line))
        {
            worker.retiring.get_or_insert(now);
            self.policy.counters.retired_max_memory += 1;
            tracing::info!(
                "pool {}: retiring worker {from}: {}",
                self.config.name,
                printable(reason, 200)
            );
            return Some(Reaped::NotOurs);
        }
        // A zygote's last lines may be read after it was reaped: they still count.
        let zygote = self.processes.contains_key(&from)
            || self.exited.iter().any(|(pid, _, _)| *pid == from);
        if !zygote {
            return None;
        }
        match Report::parse(line) {
            Some(Report::Ready) => self.runtime_ready = true,
            Some(Report::Started { pid }) => self.on_started(from, pid, now),
            Some(Report::Exited { pid, exit, lived }) => {
                self.startup.exited(pid, ExitCause::from_exit(exit), lived);
                return Some(self.on_exited(from, pid, exit, now));
            }
            Some(Report::Holding {
                pid,
                delay,
                failures,
            }) => self.on_holding(from, pid, delay, failures, now),
            None => return None,
        }
        Some(Reaped::NotOurs)
    }

    /// The zygote `from` says it forked `pid`. Believed only if `pid` is its child now
    /// ([`pidfd::child_of`]): a zygote runs as the pool's user, and the app's code may have
    /// made it write the line (with ptrace, when `process_dumpable` allows it) to have the
    /// root master retire or kill a process of its choosing. The worker is then held by a
    /// handle on that very process.
    fn on_started(&mut self, from: Pid, pid: Pid, now: Instant) {
        if !self.processes.contains_key(&from) {
            // Its zygote is gone: the worker was adopted when the zygote was reaped.
            return;
        }
        if self.workers.contains_key(&pid) {
            tracing::warn!(
                "pool {}: zygote {from} reported a worker started, pid {pid}: refused, \
                 already a worker",
                self.config.name
            );
            return;
        }
        match pidfd::child_of(pid, from) {
            Ok(handle) => {
                tracing::info!("pool {}: worker {pid} started", self.config.name);
                self.workers
                    .insert(pid, Worker::new(now, Some(from), handle));
            }
            // A worker that died at once, reaped by its zygote before the master looked:
            // its exit report follows, and is counted then (`vanished`).
            Err(pidfd::Refused::Gone) => {
                tracing::info!(
                    "pool {}: zygote {from} reported a worker started, pid {pid}: gone before \
                     the master could check it",
                    self.config.name
                );
                if self.vanished.len() >= VANISHED_MAX {
                    self.vanished.remove(0);
                }
                self.vanished.push((pid, from, now));
            }
            Err(err) => tracing::error!(
                "pool {}: zygote {from} reported a worker started, pid {pid}: refused, not a \
                 child of the zygote ({err}); the pool's code may be forging reports",
                self.config.name
            ),
        }
    }

    /// The zygote `from` says its worker `pid` exited. Believed only for a worker of that
    /// zygote that the master verified and that is indeed gone: a zygote cannot make the
    /// master forget a running worker, nor count exits of processes that were never its.
    fn on_exited(&mut self, from: Pid, pid: Pid, exit: WorkerExit, now: Instant) -> Reaped {
        let cause = ExitCause::from_exit(exit);
        let known = self
            .workers
            .get(&pid)
            .map(|w| (w.parent == Some(from), w.alive()));
        match known {
            Some((true, false)) => {}
            Some((true, true)) => {
                tracing::warn!(
                    "pool {}: zygote {from} reported worker {pid} exited {cause}, but it runs: \
                     ignored",
                    self.config.name
                );
                return Reaped::NotOurs;
            }
            _ => {
                if let Some(at) = self
                    .vanished
                    .iter()
                    .position(|&(p, zygote, _)| p == pid && zygote == from)
                {
                    self.vanished.remove(at);
                    return self.vanished_exit(pid, cause);
                }
                tracing::info!(
                    "pool {}: zygote {from} reported pid {pid} exited {cause}: ignored, not \
                     a worker of that zygote",
                    self.config.name
                );
                return Reaped::NotOurs;
            }
        }
        let Some(worker) = self.workers.remove(&pid) else {
            return Reaped::NotOurs;
        };
        self.log_worker_exit(pid, &worker, cause, now);
        Reaped::Exit {
            crash: cause.is_crash(),
        }
    }

    /// The exit of a worker that was gone before the master saw it run: counted as any
    /// worker's exit, so that a worker crashing at its start is a crash in the status and
    /// for the emergency restart. The pool's code could forge such a pair of reports, but
    /// it can crash its own workers at will anyway: it gains nothing.
    fn vanished_exit(&mut self, pid: Pid, cause: ExitCause) -> Reaped {
        match cause {
            ExitCause::Code(0) => self.counters.clean_exits += 1,
            ExitCause::SeenByParent => {}
            _ => self.counters.crash_exits += 1,
        }
        tracing::warn!(
            "pool {}: worker {pid} exited {cause} at its start",
            self.name()
        );
        Reaped::Exit {
            crash: cause.is_crash(),
        }
    }

    /// Housekeeping after the processes' last output had time to arrive: forgets the roles
    /// of processes gone a while, and says that the app failed to load once its traceback
    /// is in the log. True when it said so now.
    pub fn after_output(&mut self, now: Instant) -> bool {
        const LATE: Duration = Duration::from_millis(300);
        self.exited
            .retain(|(_, _, at)| now.saturating_duration_since(*at) < Duration::from_secs(5));
        self.vanished
            .retain(|(_, _, at)| now.saturating_duration_since(*at) < Duration::from_secs(5));
        if self
            .failed_at
            .is_some_and(|at| now.saturating_duration_since(at) >= LATE)
        {
            self.failed_at = None;
            tracing::error!(
                "pool {}: the app failed to load (traceback above); the pool is stopped until a reload",
                self.name()
            );
            return true;
        }
        false
    }

    /// What `pid` is to this generation, for telling its processes from orphans.
    pub fn knows(&self, pid: Pid) -> Known {
        let worker = self.workers.contains_key(&pid);
        if self.processes.contains_key(&pid) && !worker && self.launch.kind.has_parent() {
            Known::Parent {
                running: super::orphans::running(pid),
            }
        } else if worker || self.processes.contains_key(&pid) {
            Known::Pool
        } else {
            Known::Unknown
        }
    }

    /// The role of a pid in this pool, for tagging its output.
    pub fn role(&self, pid: Pid) -> Option<&'static str> {
        if let Some((_, role, _)) = self.exited.iter().find(|(p, _, _)| *p == pid) {
            return Some(role);
        }
        if self.processes.contains_key(&pid) {
            Some(self.launch.kind.process_role())
        } else if self.workers.contains_key(&pid) {
            Some("worker")
        } else {
            None
        }
    }
}

/// `text` from a pool process, for a log line: at most `max` characters, control
/// characters (a terminal's escapes) as `?`.
fn printable(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The master's own children, forked from any of its threads (workers handed over by a
/// dead php-cgi parent or zygote included).
pub(super) fn own_children() -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|s| s.parse().ok())
                .map(Pid::from_raw)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The master's children in process group `group`.
fn own_children_in_group(group: Pid) -> Vec<Pid> {
    own_children()
        .into_iter()
        .filter(|&pid| nix::unistd::getpgid(Some(pid)) == Ok(group))
        .collect()
}

/// What a new parent (php-cgi, a zygote) starts with, for its start line: what the pm mode
/// starts, not `max_children` (a dynamic pool starts `start_servers`, an ondemand one none).
fn starting_workers(pm: &crate::config::Pm) -> String {
    match (pm::initial_workers(pm), pm.mode) {
        (0, crate::config::PmMode::Ondemand) => "no workers until a connection waits".into(),
        (1, _) => "1 worker".into(),
        (n, _) => format!("{n} workers"),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Pm, PmMode};

    #[test]
    fn a_start_line_counts_what_the_mode_starts() {
        let pm = |mode, max_children, start_servers| Pm {
            mode,
            max_children,
            start_servers,
            min_spare_servers: 1,
            max_spare_servers: 3,
            max_spawn_rate: 32,
            process_idle_timeout: std::time::Duration::from_secs(10),
            max_requests: 0,
            max_requests_jitter: 0,
            max_memory: None,
            memory: Default::default(),
        };
        let line = |pm: &Pm| super::starting_workers(pm);
        assert_eq!(line(&pm(PmMode::Static, 4, 0)), "4 workers");
        assert_eq!(line(&pm(PmMode::Dynamic, 4, 2)), "2 workers");
        assert_eq!(line(&pm(PmMode::Dynamic, 4, 1)), "1 worker");
        assert_eq!(
            line(&pm(PmMode::Ondemand, 4, 0)),
            "no workers until a connection waits"
        );
    }
}
