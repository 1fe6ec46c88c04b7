//! Lines a child process writes, collected by reader threads so tests can wait on them.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Log(Arc<(Mutex<Lines>, Condvar)>);

#[derive(Default)]
struct Lines {
    lines: Vec<String>,
    /// Streams still open; at 0 no further line can arrive.
    open: usize,
}

impl Log {
    /// Starts `command` with no stdin and its stdout and stderr collected, interleaved as
    /// they arrive, into a new log.
    ///
    /// A binary the test has just copied (`Drover::spawn_reachable`) may still be open for
    /// writing in a child another test's thread forked meanwhile, until that child execs:
    /// exec fails with ETXTBSY for that moment, so it is tried again, for at most a second.
    pub fn spawn(command: &mut Command) -> (Child, Log) {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut tries = 0;
        let mut child = loop {
            match command.spawn() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                    tries += 1;
                    thread::sleep(Duration::from_millis(20));
                }
                spawned => break spawned.unwrap_or_else(|e| panic!("spawn {command:?}: {e}")),
            }
        };
        let log = Log::default();
        log.collect(child.stdout.take().unwrap());
        log.collect(child.stderr.take().unwrap());
        (child, log)
    }

    /// Collects `stream` line by line until it closes.
    pub fn collect(&self, stream: impl Read + Send + 'static) {
        self.0.0.lock().unwrap().open += 1;
        let log = self.clone();
        thread::spawn(move || {
            for line in BufReader::new(stream).split(b'\n') {
                let Ok(line) = line else { break };
                let (lines, added) = &*log.0;
                lines
                    .lock()
                    .unwrap()
                    .lines
                    .push(String::from_utf8_lossy(&line).into_owned());
                added.notify_all();
            }
            let (lines, added) = &*log.0;
            lines.lock().unwrap().open -= 1;
            added.notify_all();
        });
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.0.lock().unwrap().lines.clone()
    }

    pub fn text(&self) -> String {
        self.lines().join("\n")
    }

    pub fn len(&self) -> usize {
        self.0.0.lock().unwrap().lines.len()
    }

    /// Waits up to `timeout` for every collected stream to close.
    pub fn wait_closed(&self, timeout: Duration) {
        let (lines, added) = &*self.0;
        let guard = lines.lock().unwrap();
        let (guard, _) = added
            .wait_timeout_while(guard, timeout, |l| l.open > 0)
            .unwrap();
        assert_eq!(guard.open, 0, "output still open after {timeout:?}");
    }

    /// The first line containing `needle`, waiting up to `timeout` for it.
    pub fn wait_for_line(&self, needle: &str, timeout: Duration) -> String {
        self.wait_for(0, needle, |l| l.contains(needle), timeout)
    }

    /// The first line from index `from` on that matches, waiting up to `timeout`. Fails at
    /// once when the streams have closed (the process exited) without such a line.
    pub fn wait_for(
        &self,
        from: usize,
        what: &str,
        matches: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> String {
        let mut found = self.wait_for_lines(from, what, matches, 1, timeout);
        found.remove(0)
    }

    /// The first `n` lines from index `from` on that match, waiting up to `timeout` for
    /// them. Fails at once when the streams have closed with fewer.
    pub fn wait_for_lines(
        &self,
        from: usize,
        what: &str,
        matches: impl Fn(&str) -> bool,
        n: usize,
        timeout: Duration,
    ) -> Vec<String> {
        let start = Instant::now();
        let deadline = start + timeout;
        let (lines, added) = &*self.0;
        let mut guard = lines.lock().unwrap();
        loop {
            let found: Vec<String> = guard
                .lines
                .iter()
                .skip(from)
                .filter(|l| matches(l))
                .take(n)
                .cloned()
                .collect();
            if found.len() == n {
                return found;
            }
            let now = Instant::now();
            if guard.open == 0 || now >= deadline {
                let why = if guard.open == 0 {
                    "the process closed its output"
                } else {
                    "timed out"
                };
                let all = guard.lines.join("\n");
                // Unlocked first: a panic holding the lock would poison it for the readers.
                drop(guard);
                panic!(
                    "{} of {n} log lines matching {what:?} ({why} after {:.1?}); the log:\n{all}",
                    found.len(),
                    start.elapsed(),
                );
            }
            guard = added.wait_timeout(guard, deadline - now).unwrap().0;
        }
    }
}

/// A process started with [`Log::spawn`] (a `drover serve`), killed with what it started on
/// drop unless it has already exited.
pub struct Spawned {
    pub child: Child,
    pub log: Log,
}

impl Spawned {
    pub fn new(command: &mut Command) -> Spawned {
        let (child, log) = Log::spawn(command);
        Spawned { child, log }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            super::proc::kill_tree(self.child.id() as i32);
            let _ = self.child.wait();
        }
    }
}
