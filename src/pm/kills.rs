//! The kills that wait for something, as a pure state machine: a drover-php worker asked
//! for its stack (SIGUSR1) is killed at its stack's end line or [`STACK_WAIT`] after the
//! decision, whichever comes first; a Python worker asked to abort its request is killed
//! `terminate_grace` later only if still in that same request. The master signals and
//! logs (`master::pool::kill`); here is only when.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use drover_proto::zygote::{StackLine, parse_frame};

use super::{Action, Awaited};

/// How long a kill waits for a drover-php worker's stack. It is checked on the master's
/// tick (100 ms), so a worker that cannot answer is killed at most 300 ms after the
/// decision; one that answers, at its stack's end line.
pub const STACK_WAIT: Duration = Duration::from_millis(200);

/// The kills waiting for something: a drover-php worker's stack (sent SIGUSR1), or a
/// Python worker's abort (sent SIGUSR1, given `terminate_grace`).
#[derive(Debug, Default)]
pub struct PendingKills {
    /// When each was asked for its stack, and how many of its frames were logged.
    asked: HashMap<Pid, Pending>,
    /// The aborts: the request each was asked to end (by its start) and when it is killed
    /// if still in it.
    aborting: HashMap<Pid, Abort>,
}

#[derive(Debug)]
struct Pending {
    asked: Instant,
    frames: usize,
}

#[derive(Debug, Clone, Copy)]
struct Abort {
    /// The aborted request's start, as the scoreboard showed it.
    since: Instant,
    deadline: Instant,
}

/// What a worker's line means for its pending kill.
#[derive(Debug, PartialEq)]
pub enum KillLine<'a> {
    /// No kill waits for it, or it is no frame line: not the kill's.
    Unrelated,
    /// A frame of the stack, to log.
    Frame(&'a str),
    /// A frame past `request_slowlog_trace_depth`: neither logged nor ordinary output.
    Skipped,
    /// The stack's end: SIGKILL now.
    KillNow,
}

impl PendingKills {
    /// `pid` was asked for its stack at `now`, to be killed once it has answered.
    pub fn asked(&mut self, pid: Pid, now: Instant) {
        self.asked.insert(
            pid,
            Pending {
                asked: now,
                frames: 0,
            },
        );
    }

    /// `pid` was asked to abort its request that started at `since`; it is killed at
    /// `deadline` if still in it.
    pub fn aborting(&mut self, pid: Pid, since: Instant, deadline: Instant) {
        self.aborting.insert(pid, Abort { since, deadline });
    }

    /// A kill of `pid` waits for its stack or its abort: the policy's next decision on it
    /// is not a new kill.
    pub fn waiting(&self, pid: Pid) -> bool {
        self.asked.contains_key(&pid) || self.aborting.contains_key(&pid)
    }

    /// The aborts due at `now` whose worker is still in the aborted request
    /// (`in_request(pid, since)`): to SIGKILL. Those past their deadline are forgotten
    /// either way, and so is an abort whose worker left the request (it is exiting).
    pub fn aborts_due(
        &mut self,
        now: Instant,
        in_request: impl Fn(Pid, Instant) -> bool,
    ) -> Vec<Pid> {
        let mut due = Vec::new();
        self.aborting.retain(|&pid, abort| {
            let still = in_request(pid, abort.since);
            if still && now >= abort.deadline {
                due.push(pid);
            }
            still && now < abort.deadline
        });
        due.sort();
        due
    }

    /// A line of `pid`'s output, keeping at most `depth` frames; the end line closes the
    /// wait.
    pub fn take_line<'a>(&mut self, pid: Pid, line: &'a str, depth: usize) -> KillLine<'a> {
        let Some(pending) = self.asked.get_mut(&pid) else {
            return KillLine::Unrelated;
        };
        match parse_frame(line) {
            None => KillLine::Unrelated,
            Some(StackLine::Frame(_)) if pending.frames >= depth => KillLine::Skipped,
            Some(StackLine::Frame(frame)) => {
                pending.frames += 1;
                KillLine::Frame(frame)
            }
            Some(StackLine::End) => {
                self.asked.remove(&pid);
                KillLine::KillNow
            }
        }
    }

    /// The kills whose stack has not ended [`STACK_WAIT`] after they were asked at `now`:
    /// no longer waiting, to be killed now.
    pub fn overdue(&mut self, now: Instant) -> Vec<Pid> {
        let late: Vec<Pid> = self
            .asked
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.asked) >= STACK_WAIT)
            .map(|(&pid, _)| pid)
            .collect();
        for pid in &late {
            self.asked.remove(pid);
        }
        late
    }

    /// The tick's kills that waited long enough, after forgetting those of workers gone
    /// (`alive`): the stacks not ended [`STACK_WAIT`] after they were asked, then the
    /// aborts due whose worker is still in the aborted request (`in_request(pid, since)`).
    pub fn due(
        &mut self,
        now: Instant,
        alive: impl Fn(Pid) -> bool,
        in_request: impl Fn(Pid, Instant) -> bool,
    ) -> Vec<Action> {
        self.retain(alive);
        let stacks = self
            .overdue(now)
            .into_iter()
            .map(|pid| Action::KillAwaited {
                pid,
                awaited: Awaited::Stack,
            });
        let aborts = self
            .aborts_due(now, in_request)
            .into_iter()
            .map(|pid| Action::KillAwaited {
                pid,
                awaited: Awaited::Abort,
            });
        stacks.chain(aborts).collect()
    }

    /// Keeps only the kills of workers `alive` says are still there.
    pub fn retain(&mut self, alive: impl Fn(Pid) -> bool) {
        self.asked.retain(|&pid, _| alive(pid));
        self.aborting.retain(|&pid, _| alive(pid));
    }
}

#[cfg(test)]
mod tests {
    use drover_proto::zygote::{FRAME_END, frame_line};

    use super::*;

    const PID: Pid = Pid::from_raw(42);

    fn frame(frame: &str) -> String {
        frame_line(frame).trim_end().to_owned()
    }

    #[test]
    fn a_kill_logs_its_frames_and_kills_at_the_end_line() {
        let (mut kills, t0) = (PendingKills::default(), Instant::now());
        assert_eq!(
            kills.take_line(PID, &frame("f() a.php:1"), 2),
            KillLine::Unrelated
        );
        kills.asked(PID, t0);
        assert!(kills.waiting(PID));
        assert_eq!(kills.take_line(PID, "a notice", 2), KillLine::Unrelated);
        let other = Pid::from_raw(43);
        assert_eq!(
            kills.take_line(other, &frame("g() b.php:2"), 2),
            KillLine::Unrelated
        );
        let frames = [
            "sleep() /srv/stuck.php:3",
            "stuck() /srv/stuck.php:3",
            "{main}() /srv/stuck.php:9",
        ];
        let lines: Vec<String> = frames.iter().map(|f| frame(f)).collect();
        // request_slowlog_trace_depth frames, innermost first.
        assert_eq!(
            kills.take_line(PID, &lines[0], 2),
            KillLine::Frame(frames[0])
        );
        assert_eq!(
            kills.take_line(PID, &lines[1], 2),
            KillLine::Frame(frames[1])
        );
        assert_eq!(kills.take_line(PID, &lines[2], 2), KillLine::Skipped);
        assert_eq!(
            kills.take_line(PID, FRAME_END.trim_end(), 2),
            KillLine::KillNow
        );
        // Killed: nothing more waits, nor is killed again.
        assert!(!kills.waiting(PID));
        assert_eq!(
            kills.take_line(PID, FRAME_END.trim_end(), 2),
            KillLine::Unrelated
        );
        assert!(kills.overdue(t0 + STACK_WAIT * 10).is_empty());
    }

    #[test]
    fn a_worker_that_does_not_answer_is_killed_after_the_wait() {
        let (mut kills, t0) = (PendingKills::default(), Instant::now());
        kills.asked(PID, t0);
        assert!(kills.overdue(t0 + STACK_WAIT / 2).is_empty());
        // Frames coming do not extend the wait.
        let line = frame("f() a.php:1");
        assert_eq!(
            kills.take_line(PID, &line, 20),
            KillLine::Frame("f() a.php:1")
        );
        assert_eq!(kills.overdue(t0 + STACK_WAIT), [PID]);
        assert!(!kills.waiting(PID));
        assert!(kills.overdue(t0 + STACK_WAIT * 2).is_empty());
        // Its end line, too late, kills nothing more.
        assert_eq!(
            kills.take_line(PID, FRAME_END.trim_end(), 20),
            KillLine::Unrelated
        );
    }

    #[test]
    fn an_abort_kills_only_a_worker_still_in_the_aborted_request_after_the_grace() {
        let (mut kills, t0) = (PendingKills::default(), Instant::now());
        let grace = Duration::from_secs(1);
        let (stuck, done, next) = (PID, Pid::from_raw(43), Pid::from_raw(44));
        for pid in [stuck, done, next] {
            kills.aborting(pid, t0, t0 + grace);
            assert!(kills.waiting(pid), "a second kill decision must wait");
        }
        // `stuck` is in its request, `done` has left it (exiting), `next` serves another.
        let in_request = |pid: Pid, since: Instant| {
            pid == stuck && since == t0 || pid == next && since == t0 + grace / 2
        };
        assert!(kills.aborts_due(t0 + grace / 2, in_request).is_empty());
        assert!(kills.waiting(stuck));
        assert!(!kills.waiting(done) && !kills.waiting(next));
        assert_eq!(kills.aborts_due(t0 + grace, in_request), [stuck]);
        assert!(!kills.waiting(stuck), "killed once");
        assert!(kills.aborts_due(t0 + grace * 2, in_request).is_empty());
    }

    #[test]
    fn a_tick_kills_the_late_stacks_then_the_aborts_due_and_forgets_the_gone() {
        let (mut kills, t0) = (PendingKills::default(), Instant::now());
        let (gone, silent, stuck) = (Pid::from_raw(41), PID, Pid::from_raw(43));
        kills.asked(gone, t0);
        kills.asked(silent, t0);
        kills.aborting(stuck, t0, t0 + STACK_WAIT);
        let alive = |pid: Pid| pid != gone;
        let in_request = |_: Pid, since: Instant| since == t0;
        assert_eq!(kills.due(t0, alive, in_request), []);
        assert!(!kills.waiting(gone));
        assert_eq!(
            kills.due(t0 + STACK_WAIT, alive, in_request),
            [
                Action::KillAwaited {
                    pid: silent,
                    awaited: Awaited::Stack
                },
                Action::KillAwaited {
                    pid: stuck,
                    awaited: Awaited::Abort
                }
            ]
        );
        assert_eq!(kills.due(t0 + STACK_WAIT * 2, alive, in_request), []);
    }

    #[test]
    fn a_worker_gone_before_its_stack_is_forgotten() {
        let (mut kills, t0) = (PendingKills::default(), Instant::now());
        kills.asked(PID, t0);
        kills.asked(Pid::from_raw(43), t0);
        kills.retain(|pid| pid != PID);
        assert!(!kills.waiting(PID));
        assert_eq!(kills.overdue(t0 + STACK_WAIT), [Pid::from_raw(43)]);
    }
}
