//! The slowlog: a request running longer than `request_slowlog_timeout` gets one entry,
//! header and stack. A php-cgi worker's PHP stack is read from its memory at once; a
//! zygote's worker is asked for its stack with SIGUSR2, and the lines that come back tagged
//! with its pid are collected into the entry instead of the error log: a Python worker's
//! faulthandler dump, complete once the worker is quiet, or a drover-php worker's frame
//! lines, complete at their end line.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use drover_proto::zygote::{StackLine, parse_frame};

use super::PoolRun;
use crate::runtime::kind::SlowStack;
use crate::slowlog::{self, Entry};

/// A Python stack dump is complete when its worker has been quiet this long.
const DUMP_QUIET: Duration = Duration::from_millis(150);

/// A drover-php dump ends with its end line; one that has not ended after this long without
/// a line (a worker that cannot answer) is written with the frames it has.
const FRAMES_QUIET: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct SlowRequests {
    /// The request (by its start) already logged for each worker: one entry per request.
    logged: HashMap<Pid, Instant>,
    /// Stack dumps being received: the entry and when its last line came (or the signal
    /// was sent).
    dumps: HashMap<Pid, (Entry, Instant)>,
}

impl PoolRun {
    /// Finds requests that just became slow and logs them; finishes the dumps that went
    /// quiet.
    pub fn check_slow(&mut self, now: Instant) {
        let (Some(limit), Some(_)) = (self.config.request_slowlog_timeout, &self.config.slowlog)
        else {
            return;
        };
        self.slow
            .logged
            .retain(|pid, _| self.workers.contains_key(pid));
        let slow: Vec<(Pid, Entry)> = self
            .workers
            .iter()
            .filter(|(pid, w)| {
                w.state.busy
                    && now.saturating_duration_since(w.state.since) > limit
                    && self.slow.logged.get(pid) != Some(&w.state.since)
            })
            .map(|(&pid, w)| {
                let request = w.state.request.clone().unwrap_or_default();
                let entry = Entry {
                    time: SystemTime::now(),
                    pool: self.config.name.clone(),
                    pid: pid.as_raw(),
                    method: request.method,
                    uri: request.uri,
                    query: request.query,
                    script: request.script,
                    elapsed: now.saturating_duration_since(w.state.since),
                    frames: Vec::new(),
                };
                (pid, entry)
            })
            .collect();
        for (pid, mut entry) in slow {
            if let Some(worker) = self.workers.get(&pid) {
                self.slow.logged.insert(pid, worker.state.since);
            }
            self.counters.slow_requests += 1;
            match self.launch.kind.slow_stack() {
                SlowStack::Faulthandler | SlowStack::FrameLines => {
                    if kill(pid, Signal::SIGUSR2).is_ok() {
                        self.slow.dumps.insert(pid, (entry, now));
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
        let quiet = match self.launch.kind.slow_stack() {
            SlowStack::FrameLines => FRAMES_QUIET,
            _ => DUMP_QUIET,
        };
        let done: Vec<Pid> = self
            .slow
            .dumps
            .iter()
            .filter(|(_, (_, last))| now.saturating_duration_since(*last) >= quiet)
            .map(|(&pid, _)| pid)
            .collect();
        for pid in done {
            if let Some((entry, _)) = self.slow.dumps.remove(&pid) {
                self.write_slow(&entry);
            }
        }
    }

    /// A line from a worker whose stack dump is awaited: kept for the slowlog (true), or
    /// not part of a dump (false: log it as usual).
    pub fn on_dump_line(&mut self, pid: Pid, line: &str, now: Instant) -> bool {
        match self.launch.kind.slow_stack() {
            SlowStack::Faulthandler => self.on_faulthandler_line(pid, line, now),
            SlowStack::FrameLines => self.on_frame_line(pid, line, now),
            SlowStack::Memory | SlowStack::None => false,
        }
    }

    fn on_faulthandler_line(&mut self, pid: Pid, line: &str, now: Instant) -> bool {
        let depth = self.config.request_slowlog_trace_depth as usize;
        let Some((entry, last)) = self.slow.dumps.get_mut(&pid) else {
            return false;
        };
        if !slowlog::is_faulthandler_line(line) {
            return false;
        }
        *last = now;
        if let Some(frame) = slowlog::python_frame(line)
            && entry.frames.len() < depth
        {
            entry.frames.push(frame);
        }
        true
    }

    /// A drover-php frame line is never ordinary output: one that comes after its entry was
    /// written (the worker answered too late) is dropped.
    fn on_frame_line(&mut self, pid: Pid, line: &str, now: Instant) -> bool {
        let Some(frame) = parse_frame(line) else {
            return false;
        };
        let depth = self.config.request_slowlog_trace_depth as usize;
        match (frame, self.slow.dumps.get_mut(&pid)) {
            (StackLine::Frame(frame), Some((entry, last))) => {
                *last = now;
                if entry.frames.len() < depth {
                    entry.frames.push(frame.to_owned());
                }
            }
            (StackLine::End, Some(_)) => {
                if let Some((entry, _)) = self.slow.dumps.remove(&pid) {
                    self.write_slow(&entry);
                }
            }
            (_, None) => tracing::debug!(
                "pool {}: worker {pid}: a stack line after its slowlog entry: {}",
                self.config.name,
                line.trim_start_matches(drover_proto::zygote::REPORT_MARK)
            ),
        }
        true
    }

    fn write_slow(&self, entry: &Entry) {
        let Some(path) = &self.config.slowlog else {
            return;
        };
        tracing::warn!(
            "pool {}: worker {}: slow request, {:.1}s: {} {} (entry in {})",
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
