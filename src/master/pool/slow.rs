//! The slowlog's executor: a request running longer than `request_slowlog_timeout` gets one
//! entry, header and stack (which requests, and when, is [`crate::pm::slow`]'s decision).
//! A php-cgi worker's PHP stack is read from its memory at once; a zygote's worker is
//! asked for its stack with SIGUSR2, and the lines that come back tagged with its pid are
//! collected into the entry instead of the error log: a Python worker's faulthandler dump,
//! complete once the worker is quiet, or a drover-php worker's frame lines, complete at
//! their end line. A `request_terminate_timeout` kill may await the same drover-php dump
//! (see [`kill`](mod@super::kill)): its frame lines go to both.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use drover_proto::zygote::{REPORT_MARK, StackLine, parse_frame};

use super::PoolRun;
use crate::pm::slow::RequestView;
use crate::runtime::kind::SlowStack;
use crate::slowlog::{self, Entry};

/// A Python stack dump is complete when its worker has been quiet this long.
const DUMP_QUIET: Duration = Duration::from_millis(150);

/// A drover-php dump ends with its end line; one that has not ended after this long without
/// a line (a worker that cannot answer) is written with the frames it has.
const FRAMES_QUIET: Duration = Duration::from_secs(1);

/// The stack dumps being received, one per worker: the entry and when its last line came
/// (or the signal was sent).
#[derive(Default)]
pub struct Dumps {
    dumps: HashMap<Pid, (Entry, Instant)>,
}

impl PoolRun {
    /// The slowlog's tick: the requests that just became slow get their entries
    /// ([`crate::pm::slow::SlowLogged`] decides, [`PoolRun::slow_log`] writes or asks for the
    /// stack); the dumps that went quiet are written.
    pub fn check_slow(&mut self, now: Instant) {
        let limit = self
            .config
            .request_slowlog_timeout
            .filter(|_| self.config.slowlog.is_some());
        let workers: Vec<RequestView> = self
            .table
            .workers()
            .map(|(pid, w)| RequestView {
                pid,
                busy: w.state.busy,
                since: w.state.since,
                killed: w.killed,
            })
            .collect();
        let actions = self.timeouts.slow_due(limit, &workers, now);
        self.execute(actions, now, None);
        for entry in self
            .timeouts
            .quiet_dumps(self.launch.kind.slow_stack(), now)
        {
            self.write_slow(&entry);
        }
    }

    /// [`crate::pm::Action::SlowLog`]: the entry of `pid`'s request, `elapsed` long, written at
    /// once with the stack read from its memory (php-cgi) or none, or written once the
    /// stack it is asked for (SIGUSR2) has come.
    pub(super) fn slow_log(&mut self, pid: Pid, elapsed: Duration, now: Instant) {
        let Some(worker) = self.table.worker(pid) else {
            return;
        };
        let request = worker.state.request.clone().unwrap_or_default();
        let mut entry = Entry {
            time: SystemTime::now(),
            pool: self.config.name.clone(),
            pid: pid.as_raw(),
            method: request.method,
            uri: request.uri,
            query: request.query,
            script: request.script,
            request_id: request.request_id,
            elapsed,
            frames: Vec::new(),
        };
        self.counters.slow_requests += 1;
        match self.launch.kind.slow_stack() {
            SlowStack::Faulthandler | SlowStack::FrameLines => {
                if self.signal_worker(pid, Signal::SIGUSR2) {
                    self.timeouts.dump_asked(pid, entry, now);
                }
            }
            SlowStack::Memory => {
                let depth = self.config.request_slowlog_trace_depth as usize;
                if let Some(stack) = self.php_stack(pid, depth) {
                    entry.frames = stack.to_string().lines().map(str::to_owned).collect();
                }
                self.write_slow(&entry);
            }
            SlowStack::None => self.write_slow(&entry),
        }
    }

    /// A line from a worker whose stack dump is awaited, by the slowlog or by a kill (see
    /// [`kill`](mod@super::kill)): kept for them (true), or not part of a dump (false: log
    /// it as usual). One dump may answer both: each gets its frames.
    pub fn on_dump_line(&mut self, pid: Pid, line: &str, now: Instant) -> bool {
        let depth = self.config.request_slowlog_trace_depth as usize;
        let stack = self.launch.kind.slow_stack();
        let (kill, dump) = self.timeouts.stack_line(stack, pid, line, depth, now);
        // The kill first: at the end line, SIGKILL goes before the entry is written.
        let killing = self.on_kill_line(pid, kill);
        match dump {
            DumpLine::Output => killing,
            DumpLine::Taken => true,
            DumpLine::Late if killing => true,
            DumpLine::Late => {
                tracing::debug!(
                    "pool {}: worker {pid}: a stack line after its slowlog entry: {}",
                    self.config.name,
                    line.trim_start_matches(REPORT_MARK)
                );
                true
            }
            DumpLine::Done(entry) => {
                self.write_slow(&entry);
                true
            }
        }
    }

    fn write_slow(&self, entry: &Entry) {
        let Some(path) = &self.config.slowlog else {
            return;
        };
        let id = match entry.request_id.as_str() {
            "" => String::new(),
            id => format!(" request_id={id}"),
        };
        tracing::warn!(
            "pool {}: worker {}: slow request, {:.1}s: {} {}{id} (entry in {})",
            self.config.name,
            entry.pid,
            entry.elapsed.as_secs_f64(),
            entry.method,
            entry.uri,
            path.display()
        );
        if let Err(err) = slowlog::append(path, entry, self.config.slowlog_json) {
            tracing::error!(
                "pool {}: cannot write the slowlog {}: {err}",
                self.config.name,
                path.display()
            );
        }
    }
}

/// What a worker's line meant for its stack dump.
#[derive(Debug, PartialEq)]
pub(super) enum DumpLine {
    /// Not part of a dump: ordinary output, for the error log.
    Output,
    /// Part of the dump being received.
    Taken,
    /// A drover-php frame line for a dump already written (the worker answered too late):
    /// never ordinary output, but not kept.
    Late,
    /// The dump's end: its entry is complete (boxed: an entry is large, the other
    /// variants carry nothing).
    Done(Box<Entry>),
}

impl Dumps {
    /// `pid` was sent SIGUSR2 for `entry`'s stack at `now`.
    pub(super) fn asked(&mut self, pid: Pid, entry: Entry, now: Instant) {
        self.dumps.insert(pid, (entry, now));
    }

    /// Takes a line of `pid`'s output into its dump, keeping at most `depth` frames.
    pub(super) fn take_line(
        &mut self,
        stack: SlowStack,
        pid: Pid,
        line: &str,
        depth: usize,
        now: Instant,
    ) -> DumpLine {
        match stack {
            SlowStack::Faulthandler => {
                let Some((entry, last)) = self.dumps.get_mut(&pid) else {
                    return DumpLine::Output;
                };
                if !slowlog::is_faulthandler_line(line) {
                    return DumpLine::Output;
                }
                *last = now;
                if let Some(frame) = slowlog::python_frame(line)
                    && entry.frames.len() < depth
                {
                    entry.frames.push(frame);
                }
                DumpLine::Taken
            }
            SlowStack::FrameLines => match (parse_frame(line), self.dumps.get_mut(&pid)) {
                (None, _) => DumpLine::Output,
                (Some(_), None) => DumpLine::Late,
                (Some(StackLine::Frame(frame)), Some((entry, last))) => {
                    *last = now;
                    if entry.frames.len() < depth {
                        entry.frames.push(frame.to_owned());
                    }
                    DumpLine::Taken
                }
                (Some(StackLine::End), Some(_)) => match self.dumps.remove(&pid) {
                    Some((entry, _)) => DumpLine::Done(Box::new(entry)),
                    None => DumpLine::Late,
                },
            },
            SlowStack::Memory | SlowStack::None => DumpLine::Output,
        }
    }

    /// The dumps complete by silence at `now`: a faulthandler dump once its worker is quiet,
    /// a drover-php dump that never ended once its worker is quiet for longer.
    pub(super) fn quiet(&mut self, stack: SlowStack, now: Instant) -> Vec<Entry> {
        let quiet = match stack {
            SlowStack::FrameLines => FRAMES_QUIET,
            _ => DUMP_QUIET,
        };
        let done: Vec<Pid> = self
            .dumps
            .iter()
            .filter(|(_, (_, last))| now.saturating_duration_since(*last) >= quiet)
            .map(|(&pid, _)| pid)
            .collect();
        done.into_iter()
            .filter_map(|pid| self.dumps.remove(&pid))
            .map(|(entry, _)| entry)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use drover_proto::zygote::{FRAME_END, frame_line};

    use super::*;

    fn entry() -> Entry {
        Entry {
            time: SystemTime::UNIX_EPOCH,
            pool: "www".into(),
            pid: 42,
            method: "GET".into(),
            uri: "/slow.php".into(),
            query: String::new(),
            script: "/srv/slow.php".into(),
            request_id: String::new(),
            elapsed: Duration::from_secs(3),
            frames: Vec::new(),
        }
    }

    const PID: Pid = Pid::from_raw(42);

    #[test]
    fn a_php_dump_is_complete_at_its_end_line() {
        let (mut slow, t0) = (Dumps::default(), Instant::now());
        slow.asked(PID, entry(), t0);
        let take =
            |slow: &mut Dumps, line: &str| slow.take_line(SlowStack::FrameLines, PID, line, 2, t0);
        assert_eq!(take(&mut slow, "a notice from the app"), DumpLine::Output);
        for frame in [
            "usleep() (internal)",
            "level3() /srv/slow.php:2",
            "{main}() /srv/slow.php:5",
        ] {
            assert_eq!(
                take(&mut slow, frame_line(frame).trim_end()),
                DumpLine::Taken
            );
        }
        let DumpLine::Done(done) = take(&mut slow, FRAME_END.trim_end()) else {
            panic!("not done")
        };
        // request_slowlog_trace_depth frames, innermost first.
        assert_eq!(
            done.frames,
            ["usleep() (internal)", "level3() /srv/slow.php:2"]
        );
        // Once written, its lines are neither kept nor logged.
        assert_eq!(take(&mut slow, FRAME_END.trim_end()), DumpLine::Late);
        assert_eq!(take(&mut slow, "after"), DumpLine::Output);
    }

    #[test]
    fn a_php_dump_that_never_ends_is_written_after_a_quiet_second() {
        let (mut slow, t0) = (Dumps::default(), Instant::now());
        slow.asked(PID, entry(), t0);
        let line = frame_line("level3() /srv/slow.php:2");
        slow.take_line(SlowStack::FrameLines, PID, &line, 20, t0);
        let stack = SlowStack::FrameLines;
        assert!(slow.quiet(stack, t0 + DUMP_QUIET).is_empty());
        let done = slow.quiet(stack, t0 + FRAMES_QUIET);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].frames, ["level3() /srv/slow.php:2"]);
    }

    #[test]
    fn a_slowlog_dump_and_a_kill_awaiting_one_worker_both_get_its_frames() {
        use crate::pm::kills::{KillLine, PendingKills};
        let (mut slow, mut kills, t0) = (Dumps::default(), PendingKills::default(), Instant::now());
        slow.asked(PID, entry(), t0);
        kills.asked(PID, t0);
        let stack = SlowStack::FrameLines;
        let frames = ["sleep() /srv/slow.php:2", "{main}() /srv/slow.php:5"];
        for frame in frames {
            let line = frame_line(frame);
            assert_eq!(kills.take_line(PID, &line, 20), KillLine::Frame(frame));
            assert_eq!(slow.take_line(stack, PID, &line, 20, t0), DumpLine::Taken);
        }
        let end = FRAME_END.trim_end();
        assert_eq!(kills.take_line(PID, end, 20), KillLine::KillNow);
        let DumpLine::Done(done) = slow.take_line(stack, PID, end, 20, t0) else {
            panic!("not done")
        };
        assert_eq!(done.frames, frames);
        // A second dump (the kill's own signal, answered after the slowlog's): neither
        // ordinary output nor kept.
        let line = frame_line(frames[0]);
        assert_eq!(kills.take_line(PID, &line, 20), KillLine::Unrelated);
        assert_eq!(slow.take_line(stack, PID, &line, 20, t0), DumpLine::Late);
    }

    #[test]
    fn a_python_dump_is_complete_once_quiet() {
        let (mut slow, t0) = (Dumps::default(), Instant::now());
        slow.asked(PID, entry(), t0);
        let stack = SlowStack::Faulthandler;
        let line = "  File \"/app/slow.py\", line 12 in level3";
        assert_eq!(slow.take_line(stack, PID, line, 20, t0), DumpLine::Taken);
        // A frame line is not faulthandler's.
        let frame = frame_line("f() a.php:1");
        assert_eq!(slow.take_line(stack, PID, &frame, 20, t0), DumpLine::Output);
        let done = slow.quiet(stack, t0 + DUMP_QUIET);
        assert_eq!(done[0].frames, ["level3() /app/slow.py:12"]);
    }
}
