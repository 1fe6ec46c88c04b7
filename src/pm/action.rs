//! The actions a pool's decisions come to, and why a worker goes ([`Reason`]): what the
//! pure code of this module answers and the master's executor carries out.

use std::fmt;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

/// What the executor (`master::pool`) does, in the order given: the one answer of every
/// decision of a pool, whether a tick's plan ([`super::plan`]), how a kill is carried out
/// ([`super::kill()`]), an exit's meaning ([`super::on_exit`]), the start or a tick of a
/// drain ([`super::drain`], [`super::drain_tick`]), the master's stop ([`super::stop`]), a
/// failed pool's refusal ([`super::refuse`]), a program pool resized in place
/// ([`super::resize_in_place`]), the slowlog ([`super::slow::SlowLogged`]), a kill that
/// waited ([`super::kills::PendingKills`]) or sizing by memory ([`super::memory::tick()`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start this many workers.
    Spawn(u32),
    /// Ask the worker to exit after its current request.
    Retire { pid: Pid, reason: Reason },
    /// Kill it: the steps its runtime's facts give ([`super::kill()`]).
    Kill { pid: Pid, reason: Reason },
    /// One step of a kill, as [`super::kill()`] gives them.
    KillStep(KillStep),
    /// Log "pool NAME reached max_children (N)"; emitted once per episode, already counted.
    MaxChildrenReached { max_children: u32 },
    /// Take over the workers the dead parent forked (the master is their subreaper now),
    /// retiring them (`retire`: after a crash a new parent brings a full set) or letting
    /// them finish with their generation.
    AdoptWorkers { retire: bool },
    /// The app failed to load: the pool is stopped until a reload.
    AppFailed,
    /// A start-up failure: hold spawning back as the backoff says.
    BackOff,
    /// Replace the worker now if the pool's mode replaces at once ([`super::replacements`]).
    Replace,
    /// The generation drains: it is no longer replaced nor resized, its listener no longer
    /// watched (ondemand).
    Drain,
    /// Send the parents (php-cgi, drover-php, a Python zygote) away: they serve nothing and
    /// would replace the workers that exit.
    StopParents,
    /// Every worker is to exit after its current request.
    RetireAll,
    /// No next generation shares the listener: it stops taking connections (queued ones
    /// are still served).
    CloseListener,
    /// SIGTERM to the retiring workers it cannot interrupt in a request now (a worker
    /// whose SIGTERM waits for the request at once, others once seen idle).
    SignalRetiring,
    /// SIGKILL to the parents asked to stop that outlived their workers by the retire
    /// timeout (a zygote's `on_exit` hook that hangs).
    KillLingeringParents,
    /// The master stops: the generation spawns and replaces nothing more, and ondemand's
    /// watch of the listener ends.
    Stop,
    /// A request ran past `request_slowlog_timeout`: its slowlog entry, with the worker's
    /// stack as its runtime gives it.
    SlowLog { pid: Pid, elapsed: Duration },
    /// SIGKILL now a worker whose kill waited (its line is logged already): for its PHP
    /// stack, which did not come in time, or for its abort, past `terminate_grace` in the
    /// same request.
    KillAwaited { pid: Pid, awaited: Awaited },
    /// Sizing by memory worked out the live `max_children`; `changed`: not the last one, so
    /// it is logged.
    Resize {
        size: super::memory::AutoSize,
        changed: bool,
    },
    /// A fixed `max_children` whose measured workers would not fit: warned about once.
    Overcommitted(String),
    /// The pool is stopped (its app failed) and nothing else serves its socket: its
    /// listener is shut down so that connections are refused at once, until a reload.
    Refuse,
    /// A program's copy above its pool's new `max_children`, stopped in place: it is
    /// retiring from now, its line says why.
    StopSurplus { pid: Pid, max_children: u32 },
}

/// One step of a kill ([`Action::KillStep`]), in the order [`super::kill()`] gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillStep {
    /// Its log line (the worker, the reason, its request), and the worker marked killed:
    /// its exit is the kill's, counted under the kill's cause.
    Killing { pid: Pid, reason: Reason },
    /// Ask the worker to abort its request that started at `since` (SIGUSR1); SIGKILL at
    /// `deadline` if it is still in it ([`super::kills::PendingKills`]). A worker that
    /// cannot be signalled gets its SIGKILL at once.
    AskAbort {
        pid: Pid,
        since: Instant,
        deadline: Instant,
    },
    /// Read the worker's PHP stack from its memory and log it, a line a frame, under its
    /// kill's line.
    LogStack(Pid),
    /// Ask the worker for its stack (SIGUSR1); SIGKILL at its end line or
    /// [`super::kills::STACK_WAIT`] later ([`super::kills::PendingKills`]). A worker that
    /// cannot be signalled gets its SIGKILL at once.
    AskStack(Pid),
    /// SIGKILL to the worker now (its line is logged already).
    KillNow(Pid),
}

/// What a kill waited for before its SIGKILL ([`Action::KillAwaited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// A drover-php worker's stack, not ended within [`super::kills::STACK_WAIT`].
    Stack,
    /// A Python worker's abort, still in the same request after `terminate_grace`.
    Abort,
}

/// Why a worker is retired or killed; `Display` is the cause for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    MaxSpare {
        idle: u32,
        max_spare: u32,
    },
    IdleTimeout {
        idle: Duration,
        limit: Duration,
    },
    MaxMemory {
        rss: u64,
        limit: u64,
    },
    /// A program's copy ran past its lifetime (`max_lifetime` and its jitter).
    MaxLifetime {
        lived: Duration,
        limit: Duration,
    },
    Terminate {
        elapsed: Duration,
        limit: Duration,
    },
    /// Still waiting for its client's request past `request_read_timeout`.
    ReadTimeout {
        waited: Duration,
        limit: Duration,
    },
    /// Asked to retire, out of any request, and still there after `process_control_timeout`
    /// (a program's `stop_timeout`: `key` names which).
    RetireTimeout {
        waited: Duration,
        limit: Duration,
        key: &'static str,
    },
    /// The largest idle worker of a pool above `max_pool_memory` or its memory-sized cap.
    PoolMemory(super::memory::Over),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        match *self {
            Reason::MaxSpare { idle, max_spare } => {
                write!(
                    f,
                    "{idle} idle workers, above max_spare_servers ({max_spare})"
                )
            }
            Reason::IdleTimeout { idle, limit } => {
                write!(
                    f,
                    "idle for {idle:.1?}, past process_idle_timeout ({limit:?})"
                )
            }
            Reason::MaxMemory { rss, limit } => {
                write!(
                    f,
                    "resident memory {:.1} MiB, above max_memory ({:.1} MiB)",
                    mib(rss),
                    mib(limit)
                )
            }
            Reason::MaxLifetime { lived, limit } => {
                write!(
                    f,
                    "running for {lived:.1?}, past its lifetime ({limit:.1?}, max_lifetime with its jitter)"
                )
            }
            Reason::Terminate { elapsed, limit } => {
                write!(
                    f,
                    "request running for {elapsed:.1?}, past request_terminate_timeout ({limit:?})"
                )
            }
            Reason::ReadTimeout { waited, limit } => {
                write!(
                    f,
                    "waited {waited:.1?} for its client to send the request, past request_read_timeout ({limit:?})"
                )
            }
            Reason::RetireTimeout { waited, limit, key } => {
                write!(
                    f,
                    "still there {waited:.1?} after retiring, past {key} ({limit:?})"
                )
            }
            Reason::PoolMemory(over) => super::memory::describe(f, over),
        }
    }
}
