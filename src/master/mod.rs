//! The supervisor. [`run`] binds every listener, starts every pool, and loops:
//! wait for a signal, a worker's output line or the tick → reap → on the tick, observe the
//! workers and apply each pool's policy (spawn, retire, kill; resize once a second) →
//! keep parents alive → check readiness and the stop deadline.
//!
//! The loop runs on a current-thread tokio runtime; the master never forks except to
//! exec (`spawn`).
//!
//! - `pool`: one generation of a pool, its lifecycle and its policy; `pools`: every
//!   generation, and which one of a pool serves, is pending, is newest; `reload`: roll
//!   generations on HUP, USR2 and `drover ctl`; `sockets`: the control and `status_listen`
//!   servers and the global keys a reload applies; `control`: answers the control socket;
//!   `signals`, `output`, `spawn`, `exit`, `limits`: the thin shells around the kernel.

mod control;
mod exit;
mod limits;
mod orphans;
mod output;
mod pidfd;
mod pool;
mod pools;
mod reload;
mod shed;
mod signals;
mod sockets;
mod spawn;
mod totals;

pub use pool::memory_limit;
pub use pool::memory_notes;

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use drover_proto::zygote::{REPORT_MARK, reap_any};
use futures_util::StreamExt;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::config::{Config, LogFormat};
use crate::listener::Listener;
use crate::logging::{self, ErrorLog};
use crate::pm::EmergencyRestart;
use crate::runtime::php::sample::Sampler;
use crate::systemd;
use exit::ExitCause;
use output::{Output, OutputLine};
use pool::{PoolRun, Reaped, own_children};
use pools::Pools;
use signals::Command;

/// How often the master looks at its workers between events.
const TICK: Duration = Duration::from_millis(100);
/// How often dynamic and ondemand pools are resized (php-fpm's rhythm).
const MAINTENANCE: Duration = Duration::from_secs(1);
/// After SIGKILL, how long to wait for the last reaps before exiting anyway.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// Which phase the master is in; a later phase overrides an earlier one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Running,
    /// TERM or QUIT with a `shutdown_delay`: `/readyz` answers 503, the pools serve on as
    /// in `Running` until `until`, then the graceful stop (`timeout`) begins.
    Delaying {
        until: Instant,
        timeout: Duration,
    },
    /// Waiting for in-flight requests until the deadline, then SIGKILL.
    Stopping {
        deadline: Instant,
        killed: bool,
    },
}

/// Runs the master until a stop signal, with a valid configuration.
/// The master's exit code when a pool's app failed to load and `exit_on_app_failure` is
/// set: gunicorn's `WORKER_BOOT_ERROR`.
pub const EXIT_APP_FAILURE: u8 = 3;

/// Runs the master to its end; returns its exit code: 0, or [`EXIT_APP_FAILURE`].
pub fn run(config: Config) -> anyhow::Result<u8> {
    // First, while drover is single-threaded: it edits the environment.
    let passed = systemd::take_listen_fds();
    let global = &config.global;
    let log = logging::init(&global.error_log, global.log_level, global.log_format)
        .with_context(|| format!("cannot open error_log {:?}", config.global.error_log))?;
    crate::runtime::php::embed::log_if_unusable();
    match limits::raise() {
        Ok((was, now)) if now > was => {
            tracing::info!("open files: the limit raised from {was} to {now} (the hard limit)")
        }
        Ok(_) => {}
        Err(err) => tracing::warn!("open files: cannot raise the limit: {err}"),
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let passed = passed.context("socket activation")?;
    runtime.block_on(async { Master::bind(config, log, passed)?.serve().await })
}

struct Master {
    config: Config,
    log: ErrorLog,
    pools: Pools,
    phase: Phase,
    ready: bool,
    emergency: EmergencyRestart,
    lines: mpsc::UnboundedReceiver<Output>,
    /// Where new pools' output readers send their lines.
    lines_tx: mpsc::UnboundedSender<Output>,
    pid_file: Option<PathBuf>,
    /// Reads php-cgi workers' state; knows each php-cgi binary once parsed.
    sampler: Sampler,
    /// Gives each pool generation its id (output lines name it).
    next_id: u64,
    /// A reload is rolling: logged once every new generation is up.
    reloading: bool,
    /// systemd's watchdog, when the unit sets `WatchdogSec=`.
    watchdog: Option<systemd::Watchdog>,
    /// `STATUS=` kept current with the workers' activity, under systemd.
    status_line: Option<systemd::StatusLine>,
    /// Live changes (`drover ctl set`, `workers`) per pool, in order, until the next reload.
    live: std::collections::HashMap<String, Vec<(String, String)>>,
    /// ondemand pools whose listener has a new connection (by generation id).
    wakes: mpsc::UnboundedReceiver<u64>,
    wakes_tx: mpsc::UnboundedSender<u64>,
    /// Requests from the control socket and the pools' status listeners.
    control: mpsc::Receiver<crate::control::Envelope>,
    /// The control and status sockets being served (dropping one closes and removes it).
    sockets: sockets::Sockets,
    /// The sockets systemd passed, by pool name. Held here for drover's whole life, so that
    /// a pool removed by a reload leaves its socket open and one added back takes it again.
    inherited: Inherited,
    /// The master's children that no pool started (orphans of the apps, or of a PID
    /// namespace drover is the init of).
    orphans: orphans::Orphans,
    /// `queue_timeout`: each pool's listen queue as the tick samples it (`shed`).
    queues: shed::Queues,
    /// A pool's app failed to load and `exit_on_app_failure` stopped drover for it.
    app_failed: bool,
}

/// The sockets systemd passed, by the name of the pool that takes each.
type Inherited = std::collections::HashMap<String, Rc<Listener>>;

impl Phase {
    /// The pools serve and follow their policy: running, or within `shutdown_delay`.
    fn serves(self) -> bool {
        matches!(self, Phase::Running | Phase::Delaying { .. })
    }
}

impl Master {
    /// Binds every listener and prepares every pool; spawns nothing yet. Any error here
    /// stops drover before a single worker runs.
    fn bind(
        config: Config,
        log: ErrorLog,
        passed: Vec<(std::os::fd::OwnedFd, String)>,
    ) -> anyhow::Result<Master> {
        // Workers orphaned by a dying php-cgi parent come to us, so that we reap them and a
        // stop waits for their last request.
        nix::sys::prctl::set_child_subreaper(true).context("PR_SET_CHILD_SUBREAPER")?;
        let inherited = adopt_passed(&config.pools, passed)?;
        let (tx, lines) = mpsc::unbounded_channel();
        let mut pools = Pools::default();
        let mut next_id = 0;
        for pool in &config.pools {
            if !nix::unistd::Uid::effective().is_root()
                && (pool.user.is_some() || pool.group.is_some())
            {
                tracing::warn!(
                    "pool {}: user and group are ignored: drover is not running as root",
                    pool.name
                );
            }
            let listener = listen(pool, &inherited)
                .with_context(|| format!("pool {}: cannot listen", pool.name))?;
            next_id += 1;
            let run = new_generation(
                next_id,
                pool,
                listener,
                &tx,
                config.global.process_control_timeout,
            )?;
            pools.push(run);
        }
        let (wakes_tx, wakes) = mpsc::unbounded_channel();
        for pool in pools.iter_mut() {
            pool.watch_listener(&wakes_tx);
        }
        let (to_master, control) = crate::control::channel();
        let sockets = sockets::Sockets::start(&config.global, &config.pools, to_master)?;
        let pid_file = config.global.pid_file.clone();
        if let Some(path) = &pid_file {
            std::fs::write(path, format!("{}\n", std::process::id()))
                .with_context(|| format!("cannot write pid_file {}", path.display()))?;
        }
        let emergency = EmergencyRestart::new(
            config.global.emergency_restart_threshold,
            config.global.emergency_restart_interval,
        );
        Ok(Master {
            config,
            log,
            pools,
            phase: Phase::Running,
            ready: false,
            emergency,
            lines,
            lines_tx: tx,
            pid_file,
            sampler: Sampler::new(),
            next_id,
            reloading: false,
            watchdog: systemd::Watchdog::from_env(),
            status_line: systemd::notifying().then(systemd::StatusLine::default),
            control,
            sockets,
            wakes,
            wakes_tx,
            live: Default::default(),
            inherited,
            orphans: Default::default(),
            app_failed: false,
            queues: Default::default(),
        })
    }

    async fn serve(&mut self) -> anyhow::Result<u8> {
        let raw: Vec<i32> = signals::HANDLED.iter().map(|&s| s as i32).collect();
        let mut signals =
            signal_hook_tokio::Signals::new(raw).context("installing signal handlers")?;
        let tally = signals::Tally::register().context("installing signal handlers")?;
        crate::control::health::watch_stop().context("installing signal handlers")?;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(
            "drover {} starting {} pools",
            env!("CARGO_PKG_VERSION"),
            self.pools.len()
        );
        let mut ticked = false;
        let mut app_failed = false;
        let mut last_maintenance = Instant::now();
        loop {
            tokio::select! {
                Some(raw) = signals.next() => {
                    match Signal::try_from(raw).ok().and_then(signals::command) {
                        Some(Command::Resize) => self.resize_static_pools(tally.take()),
                        Some(command) => self.on_command(command),
                        None => {}
                    }
                }
                Some(output) = self.lines.recv() => self.on_output(output),
                Some(id) = self.wakes.recv() => {
                    if self.phase.serves() {
                        let now = Instant::now();
                        if let Some(pool) = self.pools.live_by_id_mut(id) {
                            pool.observe(now, &mut self.sampler);
                            let waiting = pool.connections_waiting();
                            pool.apply_policy(now, false, waiting);
                        }
                    }
                }
                Some((request, reply)) = self.control.recv() => {
                    let answer = self.on_control(request);
                    let _ = reply.send(answer);
                }
                _ = tick.tick() => ticked = true,
            }
            let now = Instant::now();
            self.reap(now);
            if ticked {
                ticked = false;
                let maintenance_due = now.duration_since(last_maintenance) >= MAINTENANCE;
                if maintenance_due {
                    last_maintenance = now;
                }
                for pool in self.pools.iter_mut() {
                    pool.observe(now, &mut self.sampler);
                    pool.check_kills(now);
                    pool.check_slow(now);
                    app_failed |= pool.after_output(now);
                    if pool.draining() {
                        pool.drain_tick(now);
                    } else if self.phase.serves() {
                        let waiting = pool.connections_waiting();
                        pool.apply_policy(now, maintenance_due, waiting);
                    } else {
                        pool.stop_tick(now);
                    }
                }
                self.exit_on_app_failure(std::mem::take(&mut app_failed));
                self.shed(now);
                self.retire_replaced(now);
                self.observe_orphans();
                self.refuse_stopped();
                self.forget_drained();
                if let Some(watchdog) = &mut self.watchdog {
                    watchdog.tick(now);
                }
                if maintenance_due {
                    self.tell_activity(now);
                }
            }
            if self.phase.serves() {
                for pool in self.pools.live_mut() {
                    pool.maintain(now);
                }
                self.check_ready();
                self.end_delay(now);
            } else if self.advance_stop(now) {
                break;
            }
        }
        self.take_last_output().await;
        self.finish();
        Ok(if self.app_failed { EXIT_APP_FAILURE } else { 0 })
    }

    /// With `exit_on_app_failure`, a pool whose app failed to load (`failed`) stops drover,
    /// which then exits [`EXIT_APP_FAILURE`].
    fn exit_on_app_failure(&mut self, failed: bool) {
        if !failed || !self.config.global.exit_on_app_failure || !self.phase.serves() {
            return;
        }
        self.app_failed = true;
        tracing::error!("stopping: a pool's app failed to load (exit_on_app_failure); exit 3");
        self.stop(self.config.global.process_control_timeout, "graceful");
    }

    /// Lines the last workers wrote just before they exited may still wait in the pools'
    /// output sockets, their readers not yet run: a few short waits let the readers take
    /// them (the loop's own wake-ups no longer come), until a wait brings nothing. Bounded
    /// by 100 ms.
    async fn take_last_output(&mut self) {
        for round in 0..20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let mut any = false;
            while let Ok(output) = self.lines.try_recv() {
                self.on_output(output);
                any = true;
            }
            if !any && round > 0 {
                break;
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Reap => {}
            Command::StopGraceful => self.stop_after_delay(),
            Command::StopFast => self.stop(Duration::ZERO, "fast"),
            Command::Reload => {
                if let Err(message) = self.reload(None, true) {
                    tracing::error!("reload refused, the running configuration stays: {message}");
                }
            }
            // Taken with its count in `serve`.
            Command::Resize => {}
            Command::ReopenLogs => self.reopen_logs(),
        }
    }

    /// USR1: reopens the error log by its path, and gives a new generation to every pool
    /// whose access log was moved (the master opens a pool's access log for its zygote,
    /// which cannot reopen it: [`crate::logging::access`]). The slowlogs need nothing:
    /// each entry opens its file.
    fn reopen_logs(&mut self) {
        match self.log.file.reopen() {
            Ok(()) => tracing::info!("error log reopened"),
            Err(err) => tracing::error!("cannot reopen the error log: {err}"),
        }
        if !self.phase.serves() {
            return;
        }
        let mut names: Vec<String> = self.pools.live().map(|p| p.config.name.clone()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let Some(i) = self.pools.newest_of(&name) else {
                continue;
            };
            let Some(path) = self.pools[i].moved_access_log() else {
                continue;
            };
            tracing::info!(
                "pool {name}: access_log {} was moved: a new generation writes to a new file",
                path.display()
            );
            let config = self.pools[i].config.clone();
            if let Err(err) = self.roll(i, &config) {
                tracing::error!("pool {name}: {err}; its workers keep the old access log");
            }
        }
    }

    /// TERM and QUIT: the graceful stop, after `shutdown_delay` when it is set. A second
    /// one within the delay cuts it short (as a second stop signal can only make a stop
    /// sooner).
    fn stop_after_delay(&mut self) {
        let timeout = self.config.global.process_control_timeout;
        let delay = self.config.global.shutdown_delay;
        crate::control::health::mark_stopping();
        match self.phase {
            Phase::Running if !delay.is_zero() => {
                tracing::info!(
                    "stopping: graceful after shutdown_delay {} (readyz answers 503; the pools serve on)",
                    humantime::format_duration(delay)
                );
                systemd::stopping();
                self.phase = Phase::Delaying {
                    until: Instant::now() + delay,
                    timeout,
                };
            }
            Phase::Delaying { .. } => {
                tracing::info!("stopping: a second stop signal ends shutdown_delay now");
                self.stop(timeout, "graceful");
            }
            _ => self.stop(timeout, "graceful"),
        }
    }

    /// Within `shutdown_delay`: once it has run out, the graceful stop begins.
    fn end_delay(&mut self, now: Instant) {
        if let Phase::Delaying { until, timeout } = self.phase
            && now >= until
        {
            self.stop(timeout, "graceful, shutdown_delay over");
        }
    }

    fn stop(&mut self, timeout: Duration, how: &str) {
        let deadline = Instant::now() + timeout;
        crate::control::health::mark_stopping();
        match self.phase {
            // A second stop signal can only make the stop sooner.
            Phase::Stopping {
                deadline: current, ..
            } if current <= deadline => {}
            Phase::Stopping { killed, .. } => self.phase = Phase::Stopping { deadline, killed },
            Phase::Running | Phase::Delaying { .. } => {
                tracing::info!(
                    "stopping: {how} (timeout {})",
                    humantime::format_duration(timeout)
                );
                if self.phase == Phase::Running {
                    systemd::stopping();
                }
                for pool in self.pools.iter_mut() {
                    pool.stop_accepting();
                }
                self.phase = Phase::Stopping {
                    deadline,
                    killed: false,
                };
            }
        }
    }

    /// True when every process is gone (or the grace after SIGKILL ran out).
    fn advance_stop(&mut self, now: Instant) -> bool {
        let Phase::Stopping { deadline, killed } = self.phase else {
            return false;
        };
        // Done when no child is left at all: that includes workers a dying php-cgi parent
        // forked after the last look and handed to us.
        let children = own_children();
        let pools_empty = self.pools.iter().all(PoolRun::is_empty);
        if pools_empty && children.is_empty() {
            return true;
        }
        if pools_empty && !killed {
            // What is left are orphans of the apps (or of the namespace, as PID 1).
            self.orphans.terminate(&children);
        }
        if !killed && now >= deadline {
            tracing::warn!("stopping: timeout reached; killing what is left");
            for pool in self.pools.iter_mut() {
                pool.kill_all();
            }
            for pid in children {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            }
            self.phase = Phase::Stopping {
                deadline: now + KILL_GRACE,
                killed: true,
            };
        } else if killed && now >= deadline {
            tracing::error!("stopping: some processes could not be reaped; exiting anyway");
            return true;
        }
        false
    }

    fn reap(&mut self, now: Instant) {
        loop {
            let (pid, cause) = match reap_any() {
                Ok(Some((pid, Some(exit)))) => (pid, ExitCause::from_exit(exit)),
                // Stopped or continued: not an end.
                Ok(Some((_, None))) => continue,
                Ok(None) => return,
                Err(err) => {
                    tracing::error!("waitpid: {err}");
                    return;
                }
            };
            if self.orphans.reaped(pid) {
                tracing::debug!("reaped orphan {pid} ({cause}), not started by drover");
                continue;
            }
            let orphans = &self.orphans;
            let mut program = None;
            let owner = self
                .pools
                .iter_mut()
                .map(|pool| {
                    let reaped = pool.on_reaped(pid, cause, now, orphans);
                    if !matches!(reaped, Reaped::NotOurs) {
                        program = pool
                            .program_user()
                            .map(|user| (pool.name().to_owned(), user));
                    }
                    reaped
                })
                .find(|r| !matches!(r, Reaped::NotOurs));
            if let Some((pool, (uid, signal))) = program {
                self.orphans.copy_exited(&pool, pid, uid, signal, now);
            }
            match owner {
                Some(Reaped::Exit { crash: true }) if self.emergency.on_crash(now) => {
                    self.emergency_restart()
                }
                Some(_) => {}
                None => tracing::debug!("reaped process {pid} ({cause}), not a worker"),
            }
        }
    }

    /// Takes note of the master's children that no pool started ([`orphans`]), so that
    /// none is ever taken for a worker.
    fn observe_orphans(&mut self) {
        let children = own_children();
        let pools = &self.pools;
        let known = |pid| {
            pools
                .iter()
                .map(|pool| pool.knows(pid))
                .find(|known| *known != orphans::Known::Unknown)
                .unwrap_or(orphans::Known::Unknown)
        };
        let new = self.orphans.observe(&children, known, orphans::group_of);
        self.orphans
            .settle(&new, Instant::now(), orphans::uid_of, orphans::comm_of);
    }

    fn emergency_restart(&mut self) {
        tracing::error!(
            "emergency restart: {} workers crashed (SIGSEGV/SIGBUS) within {}; restarting every pool",
            self.config.global.emergency_restart_threshold,
            humantime::format_duration(self.config.global.emergency_restart_interval)
        );
        for pool in self.pools.iter_mut() {
            pool.retire_all();
        }
    }

    /// A reload (or a live change) is rolling pools: systemd hears `RELOADING=1` now, and
    /// [`check_ready`](Self::check_ready) sends `READY=1` once the new generations are up.
    fn begin_reload(&mut self) {
        if !self.reloading {
            systemd::reloading();
        }
        self.reloading = true;
    }

    fn check_ready(&mut self) {
        let current = || self.pools.live();
        // Up, and the old generations it replaces retired ([`Master::retire_replaced`]):
        // the count then is of the pools as configured, not of two generations of one.
        let done = |p: &PoolRun| p.settled() && p.replaces.is_none();
        if (self.ready && !self.reloading) || !current().all(done) {
            return;
        }
        let workers: usize = current().map(PoolRun::workers).sum();
        let status = format!("ready: {} pools, {workers} workers", current().count());
        if self.reloading {
            self.reloading = false;
            tracing::info!("reload done: {status}");
            systemd::ready(&status);
            // The reload ran the configuration's parser again.
            crate::resident::release_code();
            // "ready: ..." replaced the activity line: send it again on the next tick,
            // even on an idle host where it has not changed.
            if let Some(line) = &mut self.status_line {
                line.overwritten();
            }
            return;
        }
        self.ready = true;
        tracing::info!("{status}");
        systemd::ready(&status);
        // What starting ran once need not stay mapped.
        crate::resident::release_code();
    }

    /// Under systemd, once ready and not reloading (`STATUS=` then says "ready" or
    /// nothing new): the workers' activity as the status pages count it, when it changed.
    fn tell_activity(&mut self, now: Instant) {
        let Some(line) = &mut self.status_line else {
            return;
        };
        if !self.ready || self.reloading || self.phase != Phase::Running {
            return;
        }
        let mut activity = systemd::Activity::default();
        for status in self
            .pools
            .serving()
            .map(|pool| self.pools.status_of(pool, now))
        {
            activity.active += status.active_processes;
            activity.idle += status.idle_processes;
            activity.slow += status.slow_requests;
            if let Some(accepted) = status.accepted_conn {
                *activity.requests.get_or_insert(0) += accepted;
            }
        }
        line.tick(now, activity);
    }

    /// Drops generations that finished draining (their listener closes with the last one),
    /// and removes the socket file of a unix listener no generation left uses.
    fn forget_drained(&mut self) {
        let gone = self.pools.take_drained();
        if gone.is_empty() {
            return;
        }
        for pool in &gone {
            // A later generation may listen at the same address (the same listener, or a
            // new one bound there): its file stays.
            if !self.pools.listens_at(&pool.listener.addr) {
                pool.listener.unlink();
            }
        }
        drop(gone);
        release_freed_memory();
    }

    fn on_output(&mut self, output: Output) {
        match output {
            Output::Line(line) => self.log_output(line),
            Output::Dropped { pool, lines } => {
                if let Some(index) = self.pools.position_of_id(pool) {
                    tracing::warn!(
                        "pool {}: {lines} lines of output dropped: it wrote faster than the log takes them",
                        self.pools[index].name()
                    );
                }
            }
        }
    }

    fn log_output(&mut self, output: OutputLine) {
        let Some(index) = self.pools.position_of_id(output.pool) else {
            return;
        };
        let pool = &mut self.pools[index];
        let now = Instant::now();
        let line = output.text();
        if pool.on_dump_line(output.pid, &line, now) {
            return;
        }
        match pool.on_report(output.pid, &line, now) {
            Some(Reaped::Exit { crash: true }) => {
                if self.emergency.on_crash(now) {
                    self.emergency_restart();
                }
                return;
            }
            Some(_) => return,
            None => {}
        }
        let pool = &self.pools[index];
        let role = pool.role(output.pid).unwrap_or("worker");
        let pid = output.pid;
        // A report line nobody took is drover's, never the app's: it is not passed on.
        if !pool.config.decorate_workers_output && !line.starts_with(REPORT_MARK) {
            if tracing::enabled!(tracing::Level::INFO)
                && let Err(err) = self.log.file.write_line(&output.line)
            {
                tracing::debug!(
                    "pool {}: {role} {pid}: cannot pass on a line: {err}",
                    pool.name()
                );
            }
        } else if self.config.global.log_format == LogFormat::Json {
            // The request's id as a field of its own, for log pipelines. Text lines keep
            // their `pool www: worker 1234: ` prefix as it was: scripts and alerts match it.
            match pool.request_id_of_output(pid, output.at_us) {
                Some(id) => {
                    tracing::info!(
                        pool = pool.name(),
                        pid = pid.as_raw(),
                        role,
                        request_id = id,
                        "{line}"
                    );
                }
                None => tracing::info!(pool = pool.name(), pid = pid.as_raw(), role, "{line}"),
            }
        } else {
            tracing::info!("pool {}: {role} {pid}: {line}", pool.name());
        }
    }

    fn finish(&mut self) {
        for pool in self.pools.iter() {
            pool.listener.unlink();
        }
        if let Some(path) = &self.pid_file {
            let _ = std::fs::remove_file(path);
        }
        tracing::info!("stopped");
    }
}

/// Gives the memory freed by a reload or a dropped generation back to the system: a large
/// configuration loaded once would otherwise stay in the master's heap for good.
fn release_freed_memory() {
    // SAFETY: malloc_trim only walks glibc's own heap; it takes no pointer from us.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Binds `pool`'s listener and logs it (at start, and for a new or moved pool on reload),
/// or takes the socket systemd passed for it.
fn listen(
    pool: &crate::config::Pool,
    inherited: &Inherited,
) -> Result<Rc<Listener>, crate::listener::ListenError> {
    if let Some(listener) = inherited.get(&pool.name) {
        if listener.addr != pool.listen {
            return Err(crate::listener::ListenError::InheritedElsewhere {
                wanted: pool.listen.clone(),
                inherited: listener.addr.clone(),
            });
        }
        return Ok(listener.clone());
    }
    let listener = Listener::bind(pool)?;
    // A [program] pool has no socket: its start line says what it runs, not this.
    if listener.addr != crate::config::ListenAddr::NoSocket {
        tracing::info!(
            "pool {}: listening on {} (backlog {})",
            pool.name,
            listener.addr,
            pool.listen_backlog
        );
    }
    Ok(Rc::new(listener))
}

/// Gives each socket systemd passed to the pool of its name, checked against the pool's
/// `listen`. A socket no pool takes, or one that is not what its pool's `listen` says,
/// stops drover: nginx and the `.socket` unit would disagree on where the pool is.
fn adopt_passed(
    pools: &[crate::config::Pool],
    passed: Vec<(std::os::fd::OwnedFd, String)>,
) -> anyhow::Result<Inherited> {
    use std::os::fd::AsRawFd;
    let mut inherited = Inherited::new();
    let mut errors = Vec::new();
    for (fd, name) in passed {
        let raw = fd.as_raw_fd();
        let Some(pool) = pools.iter().find(|p| p.name == name) else {
            errors.push(format!(
                "systemd passed socket {name:?} (fd {raw}) but no pool is named {name:?} (FileDescriptorName= in the .socket unit must be a pool's name)"
            ));
            continue;
        };
        match crate::listener::inherited::adopt(fd, &name, &pool.listen) {
            Ok(listener) => {
                tracing::info!(
                    "pool {name}: listening on {} (fd {raw}, passed by systemd)",
                    listener.addr
                );
                inherited.insert(name, Rc::new(listener));
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    if !errors.is_empty() {
        anyhow::bail!("socket activation: {}", errors.join("; "));
    }
    Ok(inherited)
}

/// A pool's new generation on `listener`, with its own output socket.
fn new_generation(
    id: u64,
    pool: &crate::config::Pool,
    listener: Rc<Listener>,
    lines: &mpsc::UnboundedSender<Output>,
    process_control_timeout: Duration,
) -> anyhow::Result<PoolRun> {
    let output = output::capture(id, lines.clone()).context("creating the output socket")?;
    PoolRun::new(id, pool.clone(), listener, output, process_control_timeout)
        .map_err(|e| anyhow::anyhow!("pool {}: {e}", pool.name))
}
