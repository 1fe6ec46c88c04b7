//! What the master knows of each process of a pool: the processes it exec'd, the workers
//! (exec'd, or forked by a parent), each worker's state as last observed, and the handles
//! that sample php-cgi workers.

use std::collections::HashMap;
use std::time::Instant;

use nix::unistd::Pid;

use crate::master::pidfd::Pidfd;
use crate::runtime::php::sample;

/// A process the master exec'd: a worker, or a php-cgi parent of workers.
#[derive(Debug)]
pub struct Process {
    pub started: Instant,
    /// The master asked it to exit: its exit is not a failure.
    pub retiring: bool,
}

/// A worker: exec'd by the master, or forked by a php-cgi parent or a zygote.
#[derive(Debug)]
pub struct Worker {
    pub started: Instant,
    /// The php-cgi parent or zygote that forked it; None when the master exec'd it.
    pub parent: Option<Pid>,
    /// Its parent is gone: the master is its parent now and has asked it to finish.
    pub orphan: bool,
    /// When the policy asked it to retire.
    pub retiring: Option<Instant>,
    /// SIGTERM was sent for the retirement.
    pub signalled: bool,
    pub state: Observed,
    /// Its syscall count at the last tick (php-cgi and commands), to see activity.
    pub syscalls: Option<u64>,
    /// The master killed it (a timeout): its exit is that kill's, counted by the policy
    /// under its cause, neither a crash nor a recycle.
    pub killed: bool,
    /// It was seen past its start (in a request, or waiting in accept()): its death is no
    /// start-up failure. Only for the workers the master execs; a zygote decides for its
    /// own from their scoreboard slots.
    pub served: bool,
    /// The handle taken when the master verified it: every signal to it goes through this
    /// ([`Worker::signal`]), never through its pid.
    handle: Pidfd,
}

impl Worker {
    pub fn new(now: Instant, parent: Option<Pid>, handle: Pidfd) -> Worker {
        Worker {
            handle,
            killed: false,
            served: false,
            started: now,
            parent,
            orphan: false,
            retiring: None,
            signalled: false,
            state: Observed::new(now),
            syscalls: None,
        }
    }
}

impl Worker {
    /// Sends `signal` to this worker, and to no other process that may have its pid now.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> std::io::Result<()> {
        self.handle.signal(signal)
    }

    /// It has not been reaped yet (by its parent, or by the master).
    pub fn alive(&self) -> bool {
        self.handle.alive()
    }
}

/// The request a worker is serving, for log lines and status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestInfo {
    pub method: String,
    pub uri: String,
    pub query: String,
    pub script: String,
    /// Empty when unknown (php-cgi's workers, which drover only samples).
    pub request_id: String,
}

impl RequestInfo {
    /// A request as a worker's slot or memory tells it: input from the pool's user, whose
    /// strings (the URI nginx decoded, with a `%0A` now a line break) are kept as a log
    /// line may show them ([`drover_proto::log_text`]), so that neither the slow and kill
    /// lines, the slowlog nor the status can be given a line of the client's choosing.
    pub fn untrusted(method: &str, uri: &str, query: &str, script: &str, id: &str) -> RequestInfo {
        let shown = |text: &str| drover_proto::log_text(text).into_owned();
        RequestInfo {
            method: shown(method),
            uri: shown(uri),
            query: shown(query),
            script: shown(script),
            request_id: shown(id),
        }
    }
}

impl std::fmt::Display for RequestInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.uri)?;
        if !self.query.is_empty() {
            write!(f, "?{}", self.query)?;
        }
        if !self.script.is_empty() {
            write!(f, " (script {})", self.script)?;
        }
        if !self.request_id.is_empty() {
            write!(f, " request_id={}", self.request_id)?;
        }
        Ok(())
    }
}

/// A worker's state as last observed.
#[derive(Debug, Clone)]
pub struct Observed {
    pub busy: bool,
    /// Request start when busy, idle since otherwise.
    pub since: Instant,
    pub request: Option<RequestInfo>,
    pub rss: Option<u64>,
    /// Waiting for the client to send its request (php-cgi), since `since`.
    pub reading: Option<Reading>,
    /// The request in hand was waited for first: `since` is the wait's start, kept while
    /// the script runs so that the wait counts toward request_terminate_timeout.
    pub waited: bool,
}

/// A php-cgi worker's wait for one connection's request. The wait is that connection's
/// (a new socket inode starts a new one, so back-to-back short requests never add up), and
/// it ends when the worker writes: on a kept connection (`fastcgi_keep_conn`) a response
/// went out and the worker now waits for the next request, which is nginx's idle time, not
/// a slow client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub inode: u64,
    /// The worker's write syscalls when the wait began.
    pub writes: u64,
}

impl Observed {
    pub fn new(now: Instant) -> Observed {
        Observed {
            busy: false,
            since: now,
            request: None,
            rss: None,
            reading: None,
            waited: false,
        }
    }

    pub fn set_busy(&mut self, busy: bool, now: Instant) {
        if busy != self.busy {
            self.busy = busy;
            self.since = now;
        }
        if !busy {
            self.request = None;
            self.waited = false;
        }
    }
}

/// Per pool: php-cgi workers being sampled, and whether sampling fell back to /proc.
#[derive(Default)]
pub struct Probes {
    pub php: HashMap<Pid, sample::Worker>,
    /// The php-cgi build cannot be read: busy/idle comes from /proc/PID/syscall (said once).
    pub fallback: bool,
}
