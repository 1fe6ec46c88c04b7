//! Killing a worker (`request_terminate_timeout`, `request_read_timeout`, a retirement
//! past `process_control_timeout`): the facts of its kill gathered for [`pm::kill()`],
//! which gives the steps (a line naming the worker and its request, then an abort, a PHP
//! stack read or asked for, SIGKILL), and each step carried out for the executor. A
//! drover-php worker asked for its stack with SIGUSR1 writes the frame lines the slowlog
//! asks for with SIGUSR2, then waits for its SIGKILL instead of going on with the script;
//! its frame lines are logged as they come, and SIGKILL follows its end line, or
//! [`STACK_WAIT`] after the decision when the worker does not answer: the stack never
//! delays the kill by more than that. A slowlog dump in flight for the same worker gets the
//! same lines (see [`super::slow`]). A Python worker asked to abort (SIGUSR1) raises
//! inside the request, answers 500 if it can and exits; SIGKILL follows `terminate_grace`
//! later only if it is still in that same request ([`crate::pm::kills::PendingKills`]).

use std::time::Instant;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::PoolRun;
use crate::pm::kills::{KillLine, STACK_WAIT};
use crate::pm::{self, Awaited, KillFacts, KillStack, KillStep, Reason};
use crate::runtime::kind::SlowStack;

impl PoolRun {
    /// [`crate::pm::Action::Kill`]: `pid`'s kill for `reason`, in the steps
    /// [`pm::kill()`] gives for its runtime.
    pub(super) fn kill_worker(&mut self, pid: Pid, reason: &Reason, now: Instant) {
        let stack = match self.launch.kind.slow_stack() {
            SlowStack::Memory => KillStack::Read,
            SlowStack::FrameLines => KillStack::Asked,
            // A Python worker's faulthandler dump is the slowlog's; its kill is an abort.
            SlowStack::Faulthandler | SlowStack::None => KillStack::None,
        };
        let facts = KillFacts {
            since: self.table.worker(pid).map(|w| w.state.since),
            pending: self.timeouts.kill_waiting(pid),
            aborts_request: self.launch.kind.aborts_request(),
            stack,
            terminate_grace: self.config.terminate_grace,
        };
        let steps = pm::kill(pid, reason, &facts, now);
        self.execute(steps, now, None);
    }

    /// [`crate::pm::Action::KillStep`]: one step of a kill carried out.
    pub(super) fn kill_step(&mut self, step: KillStep, now: Instant) {
        match step {
            KillStep::Killing { pid, reason } => self.killing(pid, &reason),
            KillStep::AskAbort {
                pid,
                since,
                deadline,
            } => self.ask_abort(pid, since, deadline),
            KillStep::LogStack(pid) => self.log_stack(pid),
            KillStep::AskStack(pid) => self.ask_stack(pid, now),
            KillStep::KillNow(pid) => {
                self.signal_worker(pid, Signal::SIGKILL);
            }
        }
    }

    /// [`KillStep::Killing`]: the kill's line, with the worker's request, and the
    /// worker marked killed: its exit is this kill's, counted by the policy under the
    /// kill's cause, and it is retiring.
    fn killing(&mut self, pid: Pid, reason: &Reason) {
        let Some(worker) = self.table.worker_mut(pid) else {
            return;
        };
        worker.killed = true;
        let request = worker
            .state
            .request
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        tracing::warn!(
            "pool {}: killing worker {pid}: {reason}{request}",
            self.config.name
        );
        self.table.process_retiring(pid);
    }

    /// [`KillStep::AskAbort`]: SIGUSR1 asks `pid` to abort its request started at
    /// `since`, killed at `deadline` if still in it; SIGKILL at once if it cannot be asked.
    fn ask_abort(&mut self, pid: Pid, since: Instant, deadline: Instant) {
        if !self.signal_worker(pid, Signal::SIGUSR1) {
            self.signal_worker(pid, Signal::SIGKILL);
            return;
        }
        tracing::info!(
            "pool {}: worker {pid}: asked to abort the request (SIGUSR1); SIGKILL in \
             {} (terminate_grace) if it is still in it",
            self.config.name,
            humantime::format_duration(self.config.terminate_grace)
        );
        self.timeouts.aborting(pid, since, deadline);
    }

    /// [`KillStep::LogStack`]: `pid`'s PHP stack, read from its memory, a line a
    /// frame under its kill's line.
    fn log_stack(&self, pid: Pid) {
        let depth = self.config.request_slowlog_trace_depth as usize;
        if let Some(stack) = self.php_stack(pid, depth) {
            for frame in stack.to_string().lines() {
                self.log_frame(pid, frame);
            }
        }
    }

    /// [`KillStep::AskStack`]: SIGUSR1 asks `pid` for its stack, its SIGKILL
    /// waiting for it; SIGKILL at once if it cannot be asked.
    fn ask_stack(&mut self, pid: Pid, now: Instant) {
        if self.signal_worker(pid, Signal::SIGUSR1) {
            self.timeouts.kill_asked(pid, now);
        } else {
            self.signal_worker(pid, Signal::SIGKILL);
        }
    }

    /// Sends `signal` to the worker `pid` through its handle; false if it is no worker of
    /// this pool, or gone.
    pub(super) fn signal_worker(&self, pid: Pid, signal: Signal) -> bool {
        self.table
            .worker(pid)
            .is_some_and(|worker| worker.signal(signal).is_ok())
    }

    /// The kills that waited, due at `now` ([`crate::pm::kills::PendingKills::due`]): the
    /// workers whose stack did not come in time, and those still in the request they were
    /// asked to abort `terminate_grace` ago (each tick).
    pub fn check_kills(&mut self, now: Instant) {
        let table = &self.table;
        let alive = |pid: Pid| table.has_worker(pid);
        let in_request = |pid: Pid, since: Instant| {
            table
                .worker(pid)
                .is_some_and(|w| w.state.busy && w.state.since == since)
        };
        let actions = self.timeouts.kills_due(now, alive, in_request);
        self.execute(actions, now, None);
    }

    /// [`crate::pm::Action::KillAwaited`]: SIGKILL to `pid`, whose kill waited for
    /// `awaited`, with the line that says why now.
    pub(super) fn kill_awaited(&self, pid: Pid, awaited: Awaited) {
        match awaited {
            Awaited::Stack => tracing::debug!(
                "pool {}: worker {pid}: no stack within {STACK_WAIT:?}, killed without it",
                self.config.name
            ),
            Awaited::Abort => tracing::warn!(
                "pool {}: worker {pid}: still in the request {} after it was asked to abort \
                 it (terminate_grace); SIGKILL",
                self.config.name,
                humantime::format_duration(self.config.terminate_grace)
            ),
        }
        self.signal_worker(pid, Signal::SIGKILL);
    }

    /// What a line of `pid`'s output meant for the kill waiting for its stack
    /// ([`crate::pm::kills::PendingKills::take_line`]), done: true when it was part of the
    /// stack (logged as a frame of the kill, not as output).
    pub(super) fn on_kill_line(&self, pid: Pid, line: KillLine<'_>) -> bool {
        match line {
            KillLine::Unrelated => false,
            KillLine::Frame(frame) => {
                self.log_frame(pid, frame);
                true
            }
            KillLine::Skipped => true,
            KillLine::KillNow => {
                self.signal_worker(pid, Signal::SIGKILL);
                true
            }
        }
    }

    /// One frame of a killed worker's stack, under its `killing worker` line.
    fn log_frame(&self, pid: Pid, frame: &str) {
        tracing::warn!("pool {}: worker {pid}:   {frame}", self.config.name);
    }
}
