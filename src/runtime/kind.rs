//! The runtime interface: everything the master's pool code needs to know of a pool's
//! runtime, answered here and nowhere else (in the spirit of gunicorn's worker classes).
//! The master asks a [`Kind`]; it never looks at the configured runtime itself.
//!
//! Adding a runtime means adding a variant to [`Kind`], naming it in [`Kind::of`], and
//! answering each method below for it (the compiler points at every `match` to complete),
//! plus its launch plan in its own module ([`super::launch`]). The embedded-PHP zygote
//! ([`Kind::PhpZygote`]) answers like [`Kind::PythonZygote`] (a parent that reports its
//! workers, a scoreboard, SIGTERM that waits for the request) but for its slowlog stack.

use drover_proto::zygote::{EXIT_APP_LOAD, target_signal};
use nix::unistd::Pid;

use crate::config::{PhpRuntime, PmMode, Pool, Runtime};

/// How a pool's processes run, as the master sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A static PHP pool: one php-cgi parent per generation (`PHP_FCGI_CHILDREN` =
    /// `max_children`) forks the workers, which share its OPcache, and replaces those that
    /// exit. It says nothing: the master reads its children from /proc.
    PhpParent,
    /// A dynamic or ondemand PHP pool: the master execs each worker as its own php-cgi
    /// (`PHP_FCGI_CHILDREN=0`), so that it can resize the pool one worker at a time.
    PhpWorkers,
    /// Any FastCGI program that accepts on fd 0, one process per worker.
    Command,
    /// A Python pool: the `drover-python` zygote loads the app once and forks the workers;
    /// it reports their starts and exits on its output, and the workers write a scoreboard.
    PythonZygote,
    /// A PHP pool with `runtime = "embed"`, every pm mode: the `drover-php` zygote starts
    /// PHP once and forks the workers, which share its OPcache; the same protocol as
    /// [`Kind::PythonZygote`].
    PhpZygote,
    /// A background pool (`[program]`): copies of a long-running command, one process per
    /// copy, no socket, no requests ([`super::program`]).
    Program,
}

/// Who decides how many workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizing {
    /// The parent keeps its count by itself (php-cgi; a static pool's zygote): the master
    /// only keeps the parent alive.
    Parent,
    /// The master tells the parent how many to keep ([`set_target`]), and the parent forks
    /// up to that count.
    Target,
    /// The master execs and counts each worker.
    Master,
}

/// How the master learns whether a worker is busy and with which request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The worker writes its scoreboard slot at each request phase.
    Scoreboard,
    /// The master reads php-cgi's request globals from the worker's memory; a php-cgi
    /// build it cannot read falls back to [`Probe::Syscall`].
    PhpMemory,
    /// `/proc/PID/syscall`: a worker blocked in `accept()` on fd 0 is idle. No request
    /// details.
    Syscall,
    /// Nothing to probe: a [`Kind::Program`] copy serves no requests, so it is never busy
    /// with one (a stop signal reaches it at once, and `stop_timeout` counts from there).
    Nothing,
}

/// Where the stack of a slow request comes from, for the slowlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowStack {
    /// SIGUSR2 makes the worker write it to its stderr with Python's faulthandler; the
    /// master collects the lines tagged with its pid until they stop coming.
    Faulthandler,
    /// SIGUSR2 makes the worker write it to its stderr as `drover_proto::zygote::frame_line`s,
    /// closed by `FRAME_END` (drover-php).
    FrameLines,
    /// The master reads it from the worker's memory (php-cgi).
    Memory,
    /// No stack: the entry has the request only.
    None,
}

impl Kind {
    /// The kind of `pool`'s runtime.
    pub fn of(pool: &Pool) -> Kind {
        match (&pool.runtime, pool.pm.mode) {
            // drover-php forks every worker from one zygote, whatever the mode.
            (Runtime::Php(php), _) if matches!(php.runtime, PhpRuntime::Embed { .. }) => {
                Kind::PhpZygote
            }
            // php-cgi: a static pool shares one OPcache through one parent; dynamic and
            // ondemand pools are resized one worker at a time, which php-cgi's fixed
            // PHP_FCGI_CHILDREN cannot do.
            (Runtime::Php(_), PmMode::Static) => Kind::PhpParent,
            (Runtime::Php(_), PmMode::Dynamic | PmMode::Ondemand) => Kind::PhpWorkers,
            (Runtime::Command(_), _) => Kind::Command,
            (Runtime::Program(_), _) => Kind::Program,
            (Runtime::Python(_), _) => Kind::PythonZygote,
        }
    }

    /// Whether the master execs one parent that forks the workers (else each process the
    /// master execs is a worker).
    pub fn has_parent(self) -> bool {
        match self {
            Kind::PhpParent | Kind::PythonZygote | Kind::PhpZygote => true,
            Kind::PhpWorkers | Kind::Command | Kind::Program => false,
        }
    }

    /// The runtime's name, as `[php]`, `[python]` or `[command]` names it (the status's
    /// `runtime`).
    pub fn runtime_name(self) -> &'static str {
        match self {
            Kind::PhpParent | Kind::PhpWorkers | Kind::PhpZygote => "php",
            Kind::PythonZygote => "python",
            Kind::Command => "command",
            Kind::Program => "program",
        }
    }

    /// What the master calls the processes it execs, in the log.
    pub fn process_role(self) -> &'static str {
        match self {
            Kind::PhpParent => "php-cgi parent",
            Kind::PythonZygote => "python zygote",
            Kind::PhpZygote => "php zygote",
            Kind::PhpWorkers | Kind::Command | Kind::Program => "worker",
        }
    }

    /// Whether the parent reports its workers' starts and exits, and a worker's own
    /// retirement, on the output socket (`drover_proto::zygote::Report`). A parent that
    /// does not is watched instead ([`Kind::watches_parent`]).
    pub fn parent_reports(self) -> bool {
        match self {
            Kind::PythonZygote | Kind::PhpZygote => true,
            Kind::PhpParent | Kind::PhpWorkers | Kind::Command | Kind::Program => false,
        }
    }

    /// Whether the master finds the parent's workers by reading its children from /proc
    /// on every tick, and their exits by their absence there.
    pub fn watches_parent(self) -> bool {
        match self {
            Kind::PhpParent => true,
            Kind::PythonZygote
            | Kind::PhpZygote
            | Kind::PhpWorkers
            | Kind::Command
            | Kind::Program => false,
        }
    }

    /// Whether one request limit (`max_requests`, drawn by the master) holds for every
    /// worker of one parent: php-cgi reads `PHP_FCGI_MAX_REQUESTS` once. A zygote draws
    /// each worker's limit itself.
    pub fn limit_per_parent(self) -> bool {
        match self {
            Kind::PhpParent => true,
            Kind::PythonZygote
            | Kind::PhpZygote
            | Kind::PhpWorkers
            | Kind::Command
            | Kind::Program => false,
        }
    }

    /// Whether a parent's exit `code` says that the app cannot load: the pool then waits
    /// for a reload instead of restarting it in a loop.
    pub fn app_failed(self, code: i32) -> bool {
        match self {
            Kind::PythonZygote | Kind::PhpZygote => code == i32::from(EXIT_APP_LOAD),
            Kind::PhpParent | Kind::PhpWorkers | Kind::Command | Kind::Program => false,
        }
    }

    /// Who keeps the worker count of a pool in `mode`.
    pub fn sizing(self, mode: PmMode) -> Sizing {
        match self {
            Kind::PhpParent => Sizing::Parent,
            Kind::PythonZygote | Kind::PhpZygote if mode == PmMode::Static => Sizing::Parent,
            Kind::PythonZygote | Kind::PhpZygote => Sizing::Target,
            Kind::PhpWorkers | Kind::Command | Kind::Program => Sizing::Master,
        }
    }

    /// The scoreboard slots a pool of `max_children` needs, if its workers write one.
    pub fn scoreboard_slots(self, max_children: u32) -> Option<usize> {
        match self {
            // Twice max_children: when a zygote dies, its workers keep their slots until
            // they finish their requests, and its successor's workers need slots meanwhile.
            Kind::PythonZygote | Kind::PhpZygote => Some(2 * max_children as usize),
            Kind::PhpParent | Kind::PhpWorkers | Kind::Command | Kind::Program => None,
        }
    }

    pub fn probe(self) -> Probe {
        match self {
            Kind::PythonZygote | Kind::PhpZygote => Probe::Scoreboard,
            Kind::PhpParent | Kind::PhpWorkers => Probe::PhpMemory,
            Kind::Command => Probe::Syscall,
            Kind::Program => Probe::Nothing,
        }
    }

    /// Whether SIGTERM lets a busy worker finish its request (a zygote's worker), so that
    /// it can be retired at any time. php-cgi's SIGTERM cuts sleep() and I/O short, and a
    /// command's is unknown: those get it only once seen idle. A program's copy has no
    /// request: it gets its stop signal at once, and finishes its job on it or not.
    pub fn sigterm_waits_for_request(self) -> bool {
        match self {
            Kind::PythonZygote | Kind::PhpZygote | Kind::Program => true,
            Kind::PhpParent | Kind::PhpWorkers | Kind::Command => false,
        }
    }

    /// A `request_terminate_timeout` kill first asks the worker to abort the request
    /// (SIGUSR1 raises inside it), and SIGKILLs after `terminate_grace` only if it is
    /// still in it: Python. Others are killed at once.
    pub fn aborts_request(self) -> bool {
        matches!(self, Kind::PythonZygote)
    }

    pub fn slow_stack(self) -> SlowStack {
        match self {
            Kind::PythonZygote => SlowStack::Faulthandler,
            Kind::PhpZygote => SlowStack::FrameLines,
            Kind::PhpParent | Kind::PhpWorkers => SlowStack::Memory,
            Kind::Command | Kind::Program => SlowStack::None,
        }
    }
}

/// Tells a parent of [`Sizing::Target`] how many workers to keep. It forks up to that
/// many; above it, it stops replacing workers that exit, and the master retires the ones it
/// chooses.
pub fn set_target(parent: Pid, workers: u32) -> nix::Result<()> {
    let value = libc::sigval {
        sival_ptr: workers as usize as *mut libc::c_void,
    };
    // SAFETY: sigqueue with a valid pid, signal number and value.
    let rc = unsafe { libc::sigqueue(parent.as_raw(), target_signal(), value) };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::Error::last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Kind; 6] = [
        Kind::PhpParent,
        Kind::PhpWorkers,
        Kind::Command,
        Kind::PythonZygote,
        Kind::PhpZygote,
        Kind::Program,
    ];

    #[test]
    fn a_parent_either_reports_or_is_watched() {
        for kind in ALL {
            if kind.has_parent() {
                assert!(kind.parent_reports() != kind.watches_parent(), "{kind:?}");
            } else {
                assert!(!kind.parent_reports() && !kind.watches_parent(), "{kind:?}");
                assert_eq!(kind.process_role(), "worker");
            }
        }
    }

    #[test]
    fn only_a_parent_keeps_or_is_told_the_count() {
        for kind in ALL {
            for mode in [PmMode::Static, PmMode::Dynamic, PmMode::Ondemand] {
                let by_master = kind.sizing(mode) == Sizing::Master;
                assert_eq!(by_master, !kind.has_parent(), "{kind:?} {mode:?}");
            }
        }
        for zygote in [Kind::PythonZygote, Kind::PhpZygote] {
            assert_eq!(zygote.sizing(PmMode::Static), Sizing::Parent);
            assert_eq!(zygote.sizing(PmMode::Dynamic), Sizing::Target);
            assert_eq!(zygote.sizing(PmMode::Ondemand), Sizing::Target);
        }
    }

    #[test]
    fn only_a_reporting_parent_says_that_the_app_cannot_load() {
        for kind in ALL {
            assert_eq!(
                kind.app_failed(i32::from(EXIT_APP_LOAD)),
                kind.parent_reports(),
                "{kind:?}"
            );
            assert!(!kind.app_failed(0));
            assert!(!kind.app_failed(1));
        }
    }

    #[test]
    fn workers_with_a_scoreboard_are_observed_through_it() {
        for kind in ALL {
            assert_eq!(
                kind.scoreboard_slots(4).is_some(),
                kind.probe() == Probe::Scoreboard
            );
        }
        assert_eq!(Kind::PythonZygote.scoreboard_slots(4), Some(8));
        assert_eq!(Kind::PhpZygote.scoreboard_slots(4), Some(8));
    }

    #[test]
    fn a_stack_asked_with_a_signal_comes_from_a_zygote_worker() {
        for kind in ALL {
            let by_signal = matches!(
                kind.slow_stack(),
                SlowStack::Faulthandler | SlowStack::FrameLines
            );
            assert_eq!(by_signal, kind.parent_reports(), "{kind:?}");
        }
        assert_eq!(Kind::PhpZygote.slow_stack(), SlowStack::FrameLines);
        assert_eq!(Kind::PhpZygote.process_role(), "php zygote");
        assert!(Kind::PhpZygote.sigterm_waits_for_request());
    }

    #[test]
    fn each_kind_names_the_runtime_table_it_comes_from() {
        let names: Vec<&str> = ALL.into_iter().map(Kind::runtime_name).collect();
        assert_eq!(names, ["php", "php", "command", "python", "php", "program"]);
    }
}
