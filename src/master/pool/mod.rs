//! One pool generation as the master runs it: its listener, its processes and workers, and
//! the parts that hold the rest of its state.
//!
//! What differs between runtimes is asked of the pool's [`Kind`] (the runtime interface).
//! With a parent (a php-cgi parent or a Python zygote) the master execs one process and
//! learns of its workers: a watched parent's by reading its children from /proc each tick
//! ([`observe`]), a reporting one's from its reports. When a parent dies its workers are
//! re-parented to the master (a child subreaper), which reaps and retires them. Without
//! one, every process the master execs is a worker.
//!
//! Every decision is computed by pure code in [`crate::pm`] from facts gathered here, as
//! [`pm::Action`]s, and carried out by one executor ([`execute`]) on processes and
//! sockets. `PoolRun` is its identity and parts that own their state, read only through
//! their methods. Where each decision lives:
//!
//! - a tick's spawns, retires and kills (pm modes, `max_memory`, timeouts, lifetimes):
//!   [`pm::plan`], from [`policy`]; carried out by [`spawning`], [`policy`] and
//!   [`kill`](mod@kill).
//! - how a kill is carried out (its line, an abort, a PHP stack read or asked for,
//!   SIGKILL): [`pm::kill()`], from and by [`kill`](mod@kill).
//! - a slowlog entry (`request_slowlog_timeout`): [`pm::slow`], from [`slow`], which
//!   writes it.
//! - a kill that waited for a stack or an abort: [`pm::kills`], from and by
//!   [`kill`](mod@kill).
//! - sizing by memory (resize, `max_pool_memory`, a fixed pool that does not fit):
//!   [`pm::memory::tick()`], from [`memory`].
//! - an exit (back off, replace, app failed, adopt): [`pm::on_exit`], from [`reap`].
//! - a drain's start and ticks, a lingering parent: [`pm::drain()`], [`pm::drain_tick`],
//!   from [`drain`]; the master's stop: [`pm::stop`], and a failed pool's refusal of
//!   connections: [`pm::refuse`], from [`stop`].
//! - a program pool resized in place: [`pm::resize_in_place`], from and by [`program`].
//! - what the master starts itself, a zygote's count: [`pm::processes_kept`],
//!   [`pm::target_for_spawn`], from [`spawning`] and [`policy`].
//!
//! The files:
//!
//! - [`table`]: the process table (processes, workers, those gone lately, probes).
//! - [`observe`]: what each worker is doing (the facts of a tick).
//! - [`policy`]: the tick's plan ([`pm::plan`]) computed, and the steps it needs: spawn,
//!   retire, signal. [`kill`](mod@kill): a kill's facts and steps, and the PHP stack it
//!   waits for.
//! - [`reap`]: a reaped process's facts for [`pm::on_exit`]; a dead parent's workers taken
//!   over. [`reports`]: a zygote's reports, checked.
//! - [`execute`]: the one executor of every action.
//! - [`spawning`]: starting processes, held back by the [`startup`] part's backoff.
//! - [`stop`] and [`drain`]: the pool stopped or its generation retired.
//! - [`memory`]: the pool's memory measured, for `max_children = "auto"` and
//!   `max_pool_memory`. [`slow`]: the slowlog's entries and stack dumps.
//! - parts, each in its own file with private fields: [`table::Table`], [`life::Life`]
//!   ([`Lifecycle`], [`startup::Startup`], [`pm::Linger`]), [`handed::Handed`],
//!   [`watch::Watch`], [`sizing::Sizing`] (the plan's limits and memory, a zygote's count,
//!   [`memory::MemoryWatch`]), [`timeouts::Timeouts`] (the slowlog's and the kills'
//!   state), [`status::Counters`].

mod drain;
mod execute;
mod handed;
mod kill;
mod life;
mod lifecycle;
mod memory;
mod observe;
mod policy;
mod program;
mod reap;
mod recent;
mod reports;
mod request_id;
mod sizing;
mod slow;
mod spawning;
mod startup;
mod status;
mod stop;
mod table;
mod timeouts;
mod watch;
mod worker;

use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::orphans::Known;
use crate::config::Pool;
use crate::listener::Listener;
use crate::pm::{self, PoolLimits};
use crate::runtime::{self, Launch, kind};
pub use lifecycle::Lifecycle;
pub use memory::start_notes as memory_notes;
pub(super) use reap::own_children;

pub struct PoolRun {
    /// This generation's id (a reload starts a new generation of a changed pool).
    pub id: u64,
    /// A reload's new generation: the id of the one it replaces, retired once this one is up.
    pub replaces: Option<u64>,
    pub config: Pool,
    /// Shared by the generations of one pool during a reload.
    pub listener: Rc<Listener>,
    /// How this generation's processes are started, resolved when it was created: a spawn
    /// looks nothing up. Its `kind` (the runtime interface) is the only source of runtime
    /// differences here.
    launch: Launch,
    /// Its processes and workers, and those gone lately.
    table: table::Table,
    /// Where it is in its life, and when it starts again or lets a parent go.
    life: life::Life,
    /// What every process is handed: output, scoreboard, access log, TLS material.
    handed: handed::Handed,
    /// ondemand: the task watching the listener, stopped on drop.
    watch: watch::Watch,
    /// What the tick's plan reads and remembers, the count a zygote was told, and what
    /// sizing by memory measured.
    sizing: sizing::Sizing,
    /// Requests past a limit: the slowlog's and `request_terminate_timeout`'s.
    timeouts: timeouts::Timeouts,
    /// What the status page counts since the generation started.
    counters: status::Counters,
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
        let handed = handed::Handed::open(&config, launch.kind, output)?;
        let runtime_ready = !launch.kind.parent_reports();
        Ok(PoolRun {
            id,
            replaces: None,
            counters: status::Counters::new(Instant::now()),
            sizing: sizing::Sizing::new(
                limits(&config, process_control_timeout),
                pm::initial_workers(&config.pm),
            ),
            config,
            listener,
            launch,
            table: table::Table::default(),
            life: life::Life::new(runtime_ready),
            handed,
            watch: watch::Watch::default(),
            timeouts: timeouts::Timeouts::default(),
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
        self.table.serving()
    }

    /// The app failed to load: this generation runs nothing.
    pub fn failed(&self) -> bool {
        self.life.lifecycle().failed()
    }

    /// Its listener was shut down because the pool is stopped (see [`PoolRun::refuse`]).
    pub fn refusing(&self) -> bool {
        self.life.lifecycle().refusing()
    }

    /// Running the workers it starts with, its runtime started (an ondemand pool starts
    /// none), or stopped for good: nothing more to wait for.
    pub fn settled(&self) -> bool {
        self.life.lifecycle().failed()
            || (self.life.startup().runtime_ready()
                && self.workers() >= pm::initial_workers(&self.config.pm) as usize)
    }

    /// Whether this generation can take a request now, for `/readyz`.
    pub fn readiness(&self) -> crate::control::health::PoolState {
        crate::control::health::pool_state(
            self.life.lifecycle().failed(),
            self.life.startup().runtime_ready(),
            self.workers(),
            self.config.pm.mode == crate::config::PmMode::Ondemand,
        )
    }

    /// USR1: this generation's access log, when its path no longer names the file the
    /// workers write to (logrotate renamed or removed it). Then the pool needs a new
    /// generation, which opens a fresh file at the path ([`crate::logging::access`]).
    pub fn moved_access_log(&self) -> Option<&std::path::Path> {
        self.handed.moved_access_log()
    }

    /// Every pid of this pool still alive (for stop).
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// What `pid` is to this generation, for telling its processes from orphans.
    pub fn knows(&self, pid: Pid) -> Known {
        self.table.knows(pid, self.launch.kind.has_parent())
    }

    /// The role of a pid in this pool, for tagging its output.
    pub fn role(&self, pid: Pid) -> Option<&'static str> {
        self.table.role(pid, self.launch.kind.process_role())
    }
}

/// The limits `pm::plan` reads for `pool`: a program's own stop timeout and lifetime are
/// looked up here, so that the policy needs nothing of the runtimes.
fn limits(pool: &Pool, process_control_timeout: Duration) -> PoolLimits {
    let (retire_timeout, retire_timeout_key) =
        runtime::program::stop_timeout(pool, process_control_timeout);
    PoolLimits {
        pm: pool.pm.clone(),
        request_terminate_timeout: pool.request_terminate_timeout,
        request_read_timeout: pool.request_read_timeout,
        retire_timeout,
        retire_timeout_key,
        max_lifetime: runtime::program::max_lifetime(pool),
    }
}
