//! Capturing workers' stdout and stderr line by line, tagged with the pid that wrote it.
//!
//! Every process of a pool gets the same unix stream socket as fds 1 and 2. The master
//! reads the other end with SO_PASSCRED set, so the kernel attaches the writer's pid to
//! each read and never merges bytes from two writers into one read. That tags a line with
//! the php-cgi *worker* that wrote it, which a shared pipe could not.
//!
//! A line is kept as the bytes the worker wrote (without its newline): a pool with
//! `decorate_workers_output = false` passes it on unchanged; [`OutputLine::text`] is what
//! drover reads and logs otherwise.
//!
//! **Memory stays bounded whatever a pool writes.** The readers run beside the master's
//! loop, which logs the lines they send it; a pool that writes faster than the log can
//! take them would otherwise pile its lines up in the master (a WSGI app printing in a loop
//! took a root master to 1.7 GiB). Each pool generation may have at most [`QUOTA`] bytes of
//! lines waiting to be logged: past it, its reader drops lines and counts them, and once
//! the log has caught up it sends [`Output::Dropped`] with the count, logged as a warning
//! (journald's "Suppressed N messages" under its rate limit). The quota is per pool, so a
//! pool that floods loses only its own lines, and another pool's wait behind it in the
//! channel is bounded by one quota's worth. The workers' writes never block on the master:
//! a pool that logs too much keeps serving.
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixCredentials, recvmsg,
    setsockopt, socketpair, sockopt,
};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

/// A line longer than this is cut and logged in pieces (php-fpm's `log_limit` is 1024).
const MAX_LINE: usize = 8192;

/// The bytes of one pool generation's lines that may wait for the log at once (each line
/// counted with [`OVERHEAD`]): about 10,000 lines of 100 bytes, or 128 of [`MAX_LINE`].
pub const QUOTA: usize = 1 << 20;

/// What a waiting line costs beside its bytes (the struct, the channel's slot).
const OVERHEAD: usize = 64;

/// How often a reader that dropped lines looks whether the log caught up, while its
/// socket is quiet: the count is logged within this once the flood stops.
const RECHECK: Duration = Duration::from_millis(50);

/// What a pool's output reader sends the master.
#[derive(Debug)]
pub enum Output {
    Line(OutputLine),
    /// The reader dropped this many of the pool's lines: its quota of waiting lines was
    /// full ([`QUOTA`]).
    Dropped {
        pool: u64,
        lines: u64,
    },
}

/// One line a worker wrote, without its newline.
#[derive(Debug)]
pub struct OutputLine {
    /// The pool generation's id.
    pub pool: u64,
    pub pid: Pid,
    /// The bytes as written, without the newline.
    pub line: Vec<u8>,
    /// CLOCK_MONOTONIC µs when the master read it: which request of the worker's it is
    /// from ([`crate::scoreboard::SlotView::request_id_at`]).
    pub at_us: u64,
    /// This line's share of its pool's [`QUOTA`], given back when the line is dropped
    /// (logged).
    _held: Held,
}

/// Bytes of a pool's quota that a waiting line holds; released on drop.
#[derive(Debug)]
struct Held {
    waiting: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.waiting.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// One pool generation's quota: the bytes of its lines sent and not yet logged.
#[derive(Debug, Clone)]
struct Quota {
    waiting: Arc<AtomicUsize>,
    limit: usize,
}

impl Quota {
    fn new(limit: usize) -> Quota {
        Quota {
            waiting: Arc::new(AtomicUsize::new(0)),
            limit,
        }
    }

    /// Takes room for a line of `len` bytes, or `None` when the quota is full. The reader
    /// is the only one that adds, so a check then an add cannot overshoot.
    fn take(&self, len: usize) -> Option<Held> {
        let bytes = len + OVERHEAD;
        if self.waiting.load(Ordering::Relaxed) + bytes > self.limit {
            return None;
        }
        self.waiting.fetch_add(bytes, Ordering::Relaxed);
        Some(Held {
            waiting: Arc::clone(&self.waiting),
            bytes,
        })
    }

    /// At most half the quota waits.
    fn drained(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) <= self.limit / 2
    }
}

impl OutputLine {
    /// The line as text: invalid UTF-8 replaced, a trailing `\r` (a CRLF line) dropped.
    pub fn text(&self) -> Cow<'_, str> {
        let text = String::from_utf8_lossy(&self.line);
        match text {
            Cow::Borrowed(s) => Cow::Borrowed(s.trim_end_matches('\r')),
            Cow::Owned(s) => Cow::Owned(s.trim_end_matches('\r').to_owned()),
        }
    }
}

/// Creates a pool's output socket. Returns the end to give to workers; the other end is
/// read by a task that sends each line to `lines`, within the pool's [`QUOTA`].
pub fn capture(pool: u64, lines: mpsc::UnboundedSender<Output>) -> io::Result<OwnedFd> {
    capture_within(pool, lines, QUOTA)
}

fn capture_within(
    pool: u64,
    lines: mpsc::UnboundedSender<Output>,
    quota: usize,
) -> io::Result<OwnedFd> {
    let (reader, writer) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
    )?;
    setsockopt(&reader, sockopt::PassCred, &true)?;
    // The workers' end must block: a worker's write to stderr may not fail with EAGAIN.
    let flags = nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) - nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    // SAFETY: an OwnedFd always returns the descriptor it owns, open until it is dropped
    // together with the AsyncFd.
    let fd = unsafe { AsyncFd::register(reader) }.map_err(|e| io::Error::other(e.to_string()))?;
    let reader = Reader {
        pool,
        lines,
        quota: Quota::new(quota),
        dropped: 0,
    };
    tokio::spawn(reader.run(fd));
    Ok(writer)
}

/// A pool generation's output reader: splits what its workers write into lines and sends
/// them on, within its quota.
struct Reader {
    pool: u64,
    lines: mpsc::UnboundedSender<Output>,
    quota: Quota,
    /// Lines dropped since the last [`Output::Dropped`].
    dropped: u64,
}

impl Reader {
    async fn run(mut self, fd: AsyncFd<OwnedFd>) {
        let mut pending: HashMap<Pid, Vec<u8>> = HashMap::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let ready = if self.dropped == 0 {
                fd.readable().await
            } else {
                // Quiet after a flood: say what was dropped as soon as the log has room.
                match tokio::time::timeout(RECHECK, fd.readable()).await {
                    Ok(ready) => ready,
                    Err(_elapsed) => {
                        if !self.tell_dropped() {
                            return;
                        }
                        continue;
                    }
                }
            };
            let Ok(mut ready) = ready else {
                return;
            };
            match ready.try_io(|fd| receive(fd.get_ref(), &mut buf).map_err(io::Error::from)) {
                // Every writer is gone (the pool generation was dropped): nothing more to read.
                Ok(Ok((0, _))) => {
                    if self.dropped > 0 {
                        let (pool, lines) = (self.pool, self.dropped);
                        let _ = self.lines.send(Output::Dropped { pool, lines });
                    }
                    return;
                }
                Ok(Ok((n, pid))) => {
                    let at_us = crate::scoreboard::now_us();
                    let bytes = pending.entry(pid).or_default();
                    bytes.extend_from_slice(&buf[..n]);
                    for line in split_lines(bytes) {
                        if !self.send(pid, line, at_us) {
                            return;
                        }
                    }
                    if bytes.is_empty() {
                        pending.remove(&pid);
                    }
                }
                Ok(Err(err)) => {
                    tracing::warn!("reading worker output: {err}");
                    return;
                }
                Err(_would_block) => continue,
            }
        }
    }

    /// Sends `line`, or counts it dropped when the quota is full. False once the master
    /// is gone.
    fn send(&mut self, pid: Pid, line: Vec<u8>, at_us: u64) -> bool {
        // Once it drops, a reader goes on dropping until the log has taken half the quota:
        // a flood gives one count per half a quota of lines logged, not one per line.
        if self.dropped > 0 && !self.quota.drained() {
            self.dropped += 1;
            return true;
        }
        if !self.tell_dropped() {
            return false;
        }
        let Some(held) = self.quota.take(line.len()) else {
            self.dropped += 1;
            return true;
        };
        let output = OutputLine {
            pool: self.pool,
            pid,
            line,
            at_us,
            _held: held,
        };
        self.lines.send(Output::Line(output)).is_ok()
    }

    /// Sends the count of dropped lines, if any and once the log has taken half the quota,
    /// so that it is logged in its place among the lines. False once the master is gone.
    fn tell_dropped(&mut self) -> bool {
        if self.dropped == 0 || !self.quota.drained() {
            return true;
        }
        let lines = std::mem::take(&mut self.dropped);
        self.lines
            .send(Output::Dropped {
                pool: self.pool,
                lines,
            })
            .is_ok()
    }
}

fn receive(fd: &OwnedFd, buf: &mut [u8]) -> nix::Result<(usize, Pid)> {
    let mut cmsg = nix::cmsg_space!(UnixCredentials);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        fd.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let pid = msg
        .cmsgs()?
        .find_map(|c| match c {
            ControlMessageOwned::ScmCredentials(cred) => Some(Pid::from_raw(cred.pid())),
            _ => None,
        })
        .unwrap_or(Pid::from_raw(0));
    Ok((msg.bytes, pid))
}

/// Takes every complete line (and over-long pieces) out of `bytes`, leaving the partial
/// last line in place. The rest is moved to the front once, not once per line: a read of
/// many short lines costs its length, not its length times its lines.
fn split_lines(bytes: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    let mut start = 0;
    loop {
        let rest = &bytes[start..];
        let (end, skip) = match rest.iter().take(MAX_LINE + 1).position(|&b| b == b'\n') {
            Some(i) => (i, 1),
            None if rest.len() > MAX_LINE => (MAX_LINE, 0),
            None => break,
        };
        lines.push(rest[..end].to_vec());
        start += end + skip;
    }
    bytes.drain(..start);
    lines
}

#[cfg(test)]
mod tests;
