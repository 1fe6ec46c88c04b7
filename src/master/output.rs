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

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixCredentials, recvmsg,
    setsockopt, socketpair, sockopt,
};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

/// A line longer than this is cut and logged in pieces (php-fpm's `log_limit` is 1024).
const MAX_LINE: usize = 8192;

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
/// read by a task that sends each line to `lines`.
pub fn capture(pool: u64, lines: mpsc::UnboundedSender<OutputLine>) -> io::Result<OwnedFd> {
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
    let reader =
        unsafe { AsyncFd::register(reader) }.map_err(|e| io::Error::other(e.to_string()))?;
    tokio::spawn(read_lines(pool, reader, lines));
    Ok(writer)
}

async fn read_lines(pool: u64, reader: AsyncFd<OwnedFd>, lines: mpsc::UnboundedSender<OutputLine>) {
    let mut pending: HashMap<Pid, Vec<u8>> = HashMap::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let Ok(mut ready) = reader.readable().await else {
            return;
        };
        match ready.try_io(|fd| receive(fd.get_ref(), &mut buf).map_err(io::Error::from)) {
            // Every writer is gone (the pool generation was dropped): nothing more to read.
            Ok(Ok((0, _))) => return,
            Ok(Ok((n, pid))) => {
                let at_us = crate::scoreboard::now_us();
                let bytes = pending.entry(pid).or_default();
                bytes.extend_from_slice(&buf[..n]);
                for line in split_lines(bytes) {
                    let output = OutputLine {
                        pool,
                        pid,
                        line,
                        at_us,
                    };
                    if lines.send(output).is_err() {
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
/// last line in place.
fn split_lines(bytes: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    loop {
        let end = match bytes.iter().position(|&b| b == b'\n') {
            Some(i) if i <= MAX_LINE => i,
            _ if bytes.len() > MAX_LINE => MAX_LINE,
            _ => break,
        };
        let line: Vec<u8> = bytes.drain(..end).collect();
        if bytes.first() == Some(&b'\n') {
            bytes.remove(0);
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_lines_come_out_partial_ones_stay() {
        let mut bytes = b"one\ntwo\r\nthr".to_vec();
        assert_eq!(split_lines(&mut bytes), [&b"one"[..], b"two\r"]);
        assert_eq!(bytes, b"thr");
        bytes.extend_from_slice(b"ee\n");
        assert_eq!(split_lines(&mut bytes), [b"three"]);
        assert!(bytes.is_empty());
    }

    #[test]
    fn text_drops_a_carriage_return_and_replaces_bad_bytes() {
        let line = |bytes: &[u8]| OutputLine {
            pool: 1,
            pid: Pid::from_raw(1),
            line: bytes.to_vec(),
            at_us: 0,
        };
        assert_eq!(line(b"two\r").text(), "two");
        assert_eq!(line(b"a\xffb").text(), "a\u{fffd}b");
    }

    #[test]
    fn an_overlong_line_is_cut_into_pieces() {
        let mut bytes = vec![b'x'; MAX_LINE * 2 + 10];
        let lines = split_lines(&mut bytes);
        assert_eq!(lines.len(), 2);
        assert_eq!(bytes.len(), 10);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lines_are_tagged_with_the_writers_pid() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let writer = capture(3, tx).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo hello; echo world >&2"])
            .stdout(std::process::Stdio::from(writer.try_clone().unwrap()))
            .stderr(std::process::Stdio::from(writer.try_clone().unwrap()))
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let first = rx.recv().await.unwrap();
        let second = rx.recv().await.unwrap();
        assert_eq!(
            (first.pool, first.pid, first.line.as_slice()),
            (3, pid, &b"hello"[..])
        );
        assert_eq!((second.pid, second.line.as_slice()), (pid, &b"world"[..]));
        child.wait().unwrap();
    }
}
