//! Killing a worker (`request_terminate_timeout`, `request_read_timeout`, a retirement
//! past `process_control_timeout`): one log line naming the worker and its request, then
//! SIGKILL. A `request_terminate_timeout` kill of a PHP worker logs its stack in between,
//! one line a frame, innermost first: php-cgi's is read from the worker's memory at once;
//! a drover-php worker is asked for it with SIGUSR1 (it writes the frame lines the slowlog
//! asks for with SIGUSR2, then waits for its SIGKILL instead of going on with the script),
//! its frame lines are logged as they come, and SIGKILL follows its end line, or
//! [`STACK_WAIT`] after the decision when the worker does not answer: the stack never
//! delays the kill by more than that. A slowlog dump in flight for the same worker gets the
//! same lines (see [`super::slow`]).
//!
//! A Python worker's `request_terminate_timeout` kill is an abort first, as gunicorn's
//! timeout is: SIGUSR1 makes the worker raise inside the request (so its `except` and
//! `finally` blocks, the `worker_abort` hook and error trackers run), answer 500 if it can
//! and exit; SIGKILL follows `terminate_grace` later only if the worker is still in that
//! same request.

use std::time::Instant;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::PoolRun;
use crate::pm::kills::{KillLine, STACK_WAIT};
use crate::pm::{Awaited, Reason};
use crate::runtime::kind::SlowStack;

impl PoolRun {
    /// Logs why `pid` is killed and kills it; a `request_terminate_timeout` kill logs the
    /// PHP stack first, and waits for it from a drover-php worker (see [`PendingKills`]).
    pub(super) fn kill_worker(&mut self, pid: Pid, reason: &Reason, now: Instant) {
        // The policy does not decide twice on a worker killed and not yet reaped; neither
        // is one whose stack is awaited killed twice.
        let Some(worker) = self
            .table
            .worker_mut(pid)
            .filter(|_| !self.timeouts.kill_waiting(pid))
        else {
            return;
        };
        // Its exit is this kill's, counted by the policy under the kill's cause.
        worker.killed = true;
        let since = worker.state.since;
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
        let grace = self.config.terminate_grace;
        if matches!(reason, Reason::Terminate { .. })
            && self.launch.kind.aborts_request()
            && !grace.is_zero()
            && self.signal_worker(pid, Signal::SIGUSR1)
        {
            tracing::info!(
                "pool {}: worker {pid}: asked to abort the request (SIGUSR1); SIGKILL in \
                 {} (terminate_grace) if it is still in it",
                self.config.name,
                humantime::format_duration(grace)
            );
            self.timeouts.aborting(pid, since, now + grace);
            return;
        }
        if matches!(reason, Reason::Terminate { .. }) {
            let depth = self.config.request_slowlog_trace_depth as usize;
            match self.launch.kind.slow_stack() {
                SlowStack::Memory => {
                    if let Some(stack) = self.php_stack(pid, depth) {
                        for frame in stack.to_string().lines() {
                            self.log_frame(pid, frame);
                        }
                    }
                }
                SlowStack::FrameLines => {
                    if self.signal_worker(pid, Signal::SIGUSR1) {
                        self.timeouts.kill_asked(pid, now);
                        return;
                    }
                }
                SlowStack::Faulthandler | SlowStack::None => {}
            }
        }
        self.signal_worker(pid, Signal::SIGKILL);
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

    /// A line of `pid`'s output while its kill waits for its stack: true when it was part
    /// of the stack (logged as a frame of the kill, not as output).
    pub(super) fn on_kill_line(&mut self, pid: Pid, line: &str) -> bool {
        let depth = self.config.request_slowlog_trace_depth as usize;
        match self.timeouts.kill_line(pid, line, depth) {
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
