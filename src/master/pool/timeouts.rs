//! Requests past a limit, a part that owns its state: the requests already in the slowlog
//! ([`SlowLogged`]), the slowlog's stack dumps being received ([`Dumps`]), and
//! the `request_terminate_timeout` kills waiting for a worker's stack or its abort
//! ([`PendingKills`]). When each is due is decided in [`crate::pm`]; other parts reach
//! them through these methods only.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::slow::{DumpLine, Dumps};
use crate::pm::Action;
use crate::pm::kills::{KillLine, PendingKills};
use crate::pm::slow::{RequestView, SlowLogged};
use crate::runtime::kind::SlowStack;
use crate::slowlog::Entry;

#[derive(Default)]
pub(super) struct Timeouts {
    logged: SlowLogged,
    dumps: Dumps,
    kills: PendingKills,
}

impl Timeouts {
    /// The slowlog entries due ([`SlowLogged::due`]).
    pub fn slow_due(
        &mut self,
        limit: Option<Duration>,
        workers: &[RequestView],
        now: Instant,
    ) -> Vec<Action> {
        self.logged.due(limit, workers, now)
    }

    /// `pid` was asked for its stack (SIGUSR2) for `entry`.
    pub fn dump_asked(&mut self, pid: Pid, entry: Entry, now: Instant) {
        self.dumps.asked(pid, entry, now);
    }

    /// A line of `pid`'s output, for the kill waiting for its stack and for its slowlog
    /// dump: one stack may answer both, and each gets its frames (at most `depth`).
    pub fn stack_line<'a>(
        &mut self,
        stack: SlowStack,
        pid: Pid,
        line: &'a str,
        depth: usize,
        now: Instant,
    ) -> (KillLine<'a>, DumpLine) {
        let kill = self.kills.take_line(pid, line, depth);
        (kill, self.dumps.take_line(stack, pid, line, depth, now))
    }

    /// The dumps complete by silence at `now`, to write.
    pub fn quiet_dumps(&mut self, stack: SlowStack, now: Instant) -> Vec<Entry> {
        self.dumps.quiet(stack, now)
    }

    /// The kills due at `now` ([`PendingKills::due`]).
    pub fn kills_due(
        &mut self,
        now: Instant,
        alive: impl Fn(Pid) -> bool,
        in_request: impl Fn(Pid, Instant) -> bool,
    ) -> Vec<Action> {
        self.kills.due(now, alive, in_request)
    }

    /// A kill of `pid` waits for its stack or its abort.
    pub fn kill_waiting(&self, pid: Pid) -> bool {
        self.kills.waiting(pid)
    }

    /// `pid` was asked for its stack (SIGUSR1) before its SIGKILL.
    pub fn kill_asked(&mut self, pid: Pid, now: Instant) {
        self.kills.asked(pid, now);
    }

    /// `pid` was asked to abort its request started at `since`, by `deadline`.
    pub fn aborting(&mut self, pid: Pid, since: Instant, deadline: Instant) {
        self.kills.aborting(pid, since, deadline);
    }
}
