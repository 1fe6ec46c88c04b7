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
//!   `bind`: the listeners and first generations; `reaping`: children's exits handed to
//!   their pools; `readiness`: READY=1, STATUS=, drained generations let go; `stopping`:
//!   `shutdown_delay`, the graceful stop, SIGKILL; `logs`: the pools' output lines;
//!   `signals`, `output`, `spawn`, `exit`, `limits`: the thin shells around the kernel.

mod bind;
mod control;
mod exit;
mod limits;
mod logs;
mod orphans;
mod output;
mod pidfd;
mod pool;
mod pools;
mod readiness;
mod reaping;
mod reload;
mod shed;
mod signals;
mod sockets;
mod spawn;
mod stopping;
mod totals;

pub use pool::memory_notes;

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::listener::Listener;
use crate::logging::{self, ErrorLog};
use crate::pm::EmergencyRestart;
use crate::runtime::php::sample::Sampler;
use crate::systemd;
use bind::{listen, new_generation};
use output::Output;
use pool::PoolRun;
use pools::Pools;
use reaping::release_freed_memory;
use signals::Command;

/// How often the master looks at its workers between events.
const TICK: Duration = Duration::from_millis(100);
/// How often dynamic and ondemand pools are resized (php-fpm's rhythm).
const MAINTENANCE: Duration = Duration::from_secs(1);

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
    emergency: EmergencyRestart,
    /// What the loop waits on besides signals and the tick.
    inbox: Inbox,
    /// What systemd and the pid file are told.
    notify: Notify,
    /// What a new generation is made with.
    generations: Generations,
    /// Reads php-cgi workers' state; knows each php-cgi binary once parsed.
    sampler: Sampler,
    /// The control and status sockets being served (dropping one closes and removes it).
    sockets: sockets::Sockets,
    /// The master's children that no pool started (orphans of the apps, or of a PID
    /// namespace drover is the init of).
    orphans: orphans::Orphans,
    /// `queue_timeout`: each pool's listen queue as the tick samples it (`shed`).
    queues: shed::Queues,
    /// A pool's app failed to load and `exit_on_app_failure` stopped drover for it.
    app_failed: bool,
}

/// The channels the master's loop reads, with the senders new pools are given.
struct Inbox {
    lines: mpsc::UnboundedReceiver<Output>,
    /// Where new pools' output readers send their lines.
    lines_tx: mpsc::UnboundedSender<Output>,
    /// ondemand pools whose listener has a new connection (by generation id).
    wakes: mpsc::UnboundedReceiver<u64>,
    wakes_tx: mpsc::UnboundedSender<u64>,
    /// Requests from the control socket and the pools' status listeners.
    control: mpsc::Receiver<crate::control::Envelope>,
}

/// What the master tells the outside about itself: systemd's `READY=1`, `RELOADING=1`,
/// watchdog and `STATUS=`, and the pid file.
struct Notify {
    /// Every pool was up once: `READY=1` was sent.
    ready: bool,
    /// A reload is rolling: logged once every new generation is up.
    reloading: bool,
    /// systemd's watchdog, when the unit sets `WatchdogSec=`.
    watchdog: Option<systemd::Watchdog>,
    /// `STATUS=` kept current with the workers' activity, under systemd.
    status_line: Option<systemd::StatusLine>,
    pid_file: Option<PathBuf>,
}

/// What a new generation is made with besides its configuration.
struct Generations {
    /// Gives each pool generation its id (output lines name it).
    next_id: u64,
    /// The sockets systemd passed, by pool name. Held here for drover's whole life, so that
    /// a pool removed by a reload leaves its socket open and one added back takes it again.
    inherited: Inherited,
    /// Live changes (`drover ctl set`, `workers`) per pool, in order, until the next reload.
    live: std::collections::HashMap<String, Vec<(String, String)>>,
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
                Some(output) = self.inbox.lines.recv() => self.on_output(output),
                Some(id) = self.inbox.wakes.recv() => {
                    if self.phase.serves() {
                        let now = Instant::now();
                        if let Some(pool) = self.pools.live_by_id_mut(id) {
                            pool.observe(now, &mut self.sampler);
                            let waiting = pool.connections_waiting();
                            pool.apply_policy(now, false, waiting);
                        }
                    }
                }
                Some((request, reply)) = self.inbox.control.recv() => {
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
                self.tick(now, maintenance_due);
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

    /// The loop's tick (every [`TICK`]; `maintenance_due` every [`MAINTENANCE`]): each
    /// pool observed and its decisions carried out (the kills that waited, the slowlog,
    /// then its drain, its plan or its stop), then the master's own housekeeping.
    fn tick(&mut self, now: Instant, maintenance_due: bool) {
        let mut app_failed = false;
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
        self.exit_on_app_failure(app_failed);
        self.shed(now);
        self.retire_replaced(now);
        self.observe_orphans();
        self.refuse_stopped();
        self.forget_drained();
        if let Some(watchdog) = &mut self.notify.watchdog {
            watchdog.tick(now);
        }
        if maintenance_due {
            self.tell_activity(now);
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

    /// A reload (or a live change) is rolling pools: systemd hears `RELOADING=1` now, and
    /// [`check_ready`](Self::check_ready) sends `READY=1` once the new generations are up.
    fn begin_reload(&mut self) {
        if !self.notify.reloading {
            systemd::reloading();
        }
        self.notify.reloading = true;
    }
}

/// Writes the master's pid to `path` whole: to a temporary file beside it, then renamed
/// over it, so a reader (systemd's `PIDFile=`, a monitor, a reload's check) never sees the
/// file empty or half written.
fn write_pid_file(path: &std::path::Path) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, format!("{}\n", std::process::id()))
        .and_then(|()| std::fs::rename(&temporary, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
}
