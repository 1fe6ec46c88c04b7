//! The ASGI worker's accepts on its loop's own thread, through io_uring: one
//! `IORING_OP_ACCEPT` in flight on fd 0, whose completion the hub sees through the ring's
//! descriptor in its epoll set (`hub.rs`), re-armed after each.
//!
//! The listener is shared with every worker of the pool and of the next generation and
//! must stay blocking (`accept.rs` says why), so the loop cannot `accept4` on it from its
//! epoll. io_uring can: it tries the accept without blocking whatever the file's flags,
//! and otherwise waits in the listener's queue through its internal poll, exclusively
//! (since Linux 5.19), so that one worker wakes per connection, as with the blocking
//! `accept()` of [`super::accept`]'s thread. The accept then runs on the worker's own
//! thread (io_uring's task work), with no thread to wake and no hand-off: what the thread
//! cost a new connection (its wake-up, `epoll_ctl` from another thread, the queue's lock),
//! about 38 µs of the 100 µs a new connection cost more than a kept one.
//!
//! The spread of kept connections over the workers (`accept.rs`'s `spread_pause`) is kept:
//! a worker that holds connections links a timeout ahead of its next accept.
//!
//! Where io_uring is not there (a kernel without it or older than 5.19,
//! `kernel.io_uring_disabled`, a seccomp filter that refuses `io_uring_setup`), the hub
//! starts the accept thread instead
//! ([`Ring::new`] fails). `DROVER_ASGI_ACCEPT_THREAD` (internal, for the tests of that path)
//! makes it fail on purpose.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{IoUring, opcode, squeue, types};

use super::accept::{CLOSED, peer_allowed, spread};

/// Set in a worker's environment, the hub accepts on its thread even when io_uring works:
/// internal, for the tests of the fallback.
pub(super) const FORCE_THREAD: &str = "DROVER_ASGI_ACCEPT_THREAD";

/// The requests' `user_data`.
const ACCEPT: u64 = 1;
const PAUSE: u64 = 2;
const CANCEL: u64 = 3;

/// The most connections one [`Ring::take`] accepts: a worker that took a burst serves it
/// while the pool's other workers take the next.
const ACCEPTS_AT_ONCE: usize = 16;

/// After an accept failed for want of descriptors or memory, how long before the next.
const BACKOFF: Duration = Duration::from_millis(100);

/// How many times [`Ring::stop`] asks the kernel to cancel, 10 ms apart, before it gives up
/// (then the ring's close cancels what is left).
const CANCEL_TRIES: u32 = 500;

pub(super) struct Ring {
    ring: IoUring,
    /// An accept is in flight (perhaps behind its pause).
    armed: bool,
    /// No more accepts: the worker retires, or the listener is shut.
    stopped: bool,
    /// The pause's length, which the kernel reads when the request is submitted.
    pause: types::Timespec,
    /// `listen_allowed_clients`.
    allowed: Vec<IpAddr>,
    /// The last id given to a connection (never reused; never 0).
    ids: u64,
    /// What came, for the hub: each new socket with its id, or [`CLOSED`].
    came: Vec<(u64, RawFd)>,
}

impl Ring {
    /// Sets up the ring (8 entries: an accept, its pause, two cancels); fails where
    /// io_uring is not to be had.
    pub(super) fn new() -> io::Result<Ring> {
        if std::env::var_os(FORCE_THREAD).is_some() {
            return Err(io::Error::other(format!("{FORCE_THREAD} is set")));
        }
        if let Some(release) = too_old() {
            return Err(io::Error::other(format!(
                "Linux {release} wakes every worker for each connection; 5.19 wakes one"
            )));
        }
        Ok(Ring {
            ring: IoUring::new(8)?,
            armed: false,
            stopped: false,
            pause: types::Timespec::new(),
            allowed: drover_worker::serve::allowed_clients(),
            ids: 0,
            came: Vec::new(),
        })
    }

    /// The ring's descriptor: readable when a completion is there.
    pub(super) fn fileno(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    /// Puts the next accept in flight, `pause` from now.
    pub(super) fn arm(&mut self, pause: Duration) {
        if self.armed || self.stopped {
            return;
        }
        self.pause = types::Timespec::from(pause);
        let accept = opcode::Accept::new(types::Fd(0), std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK)
            .build()
            .user_data(ACCEPT);
        let timeout = opcode::Timeout::new(&self.pause)
            .flags(types::TimeoutFlags::ETIME_SUCCESS)
            .build()
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
            .user_data(PAUSE);
        let mut queue = self.ring.submission();
        // SAFETY: the accept's address pointers are null (allowed); the timeout's timespec
        // is `self.pause`, which outlives the submission below, where the kernel copies it.
        let pushed = unsafe {
            (pause.is_zero() || queue.push(&timeout).is_ok()) && queue.push(&accept).is_ok()
        };
        drop(queue);
        if !pushed {
            // Cannot be: the queue is empty between calls.
            eprintln!("cannot queue an accept on the ring");
            return;
        }
        match self.ring.submit() {
            Ok(_) => self.armed = true,
            Err(err) => eprintln!("cannot submit an accept on the ring: {err}"),
        }
    }

    /// Takes what the ring completed, and arms the next accept, paused for a worker that
    /// holds `open` kept connections (a new one is not counted: nginx's default wiring
    /// keeps none, and its connections must not wait): the sockets accepted, each with
    /// its id, and [`CLOSED`] when the listener is gone.
    ///
    /// An accept submitted while a connection waits in the listener's queue completes in
    /// the submit: that one is taken too, and the next accept armed, up to
    /// [`ACCEPTS_AT_ONCE`]. So the connections nginx opened while the worker ran its app
    /// are taken in one wake, their requests begun in one turn and their responses sent
    /// together at its end (`Hub::on_turn_end`); one a wake, each cost the loop a turn of
    /// its own.
    pub(super) fn take(&mut self, open: usize) -> Vec<(u64, RawFd)> {
        self.reap();
        let pause = spread(open);
        for _ in 0..ACCEPTS_AT_ONCE {
            self.arm(pause);
            if !self.armed || !pause.is_zero() {
                break;
            }
            self.reap();
            if self.armed {
                break;
            }
        }
        self.arm(pause);
        std::mem::take(&mut self.came)
    }

    /// Stops accepting: the accept in flight is cancelled. A connection it took while the
    /// cancel went in is in the next [`Ring::take`], to be served: nginx sent its request
    /// already.
    pub(super) fn stop(&mut self) {
        self.stopped = true;
        self.reap();
        let mut tries = 0;
        while self.armed && tries < CANCEL_TRIES {
            tries += 1;
            // The pause first: an accept still behind it is in no table the cancel of
            // ACCEPT searches, and fails with the pause's cancel.
            let pause = opcode::AsyncCancel::new(PAUSE).build().user_data(CANCEL);
            let accept = opcode::AsyncCancel::new(ACCEPT).build().user_data(CANCEL);
            let mut queue = self.ring.submission();
            // SAFETY: the cancels point at no memory of ours. The queue has room: it is
            // empty between calls, and holds 8.
            unsafe {
                let _ = queue.push(&pause);
                let _ = queue.push(&accept);
            }
            drop(queue);
            // Bounded: a pause that expired just now has its accept issued only by the
            // task work this wait runs, and the next round cancels it.
            let wait = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&wait);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(err) if matches!(err.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
                Err(err) => {
                    eprintln!("cannot cancel the ring's accept: {err}");
                    break;
                }
            }
            self.reap();
        }
    }

    /// Reads the completions.
    fn reap(&mut self) {
        let results: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|cqe| (cqe.user_data(), cqe.result()))
            .collect();
        // A pause's or a cancel's result says nothing the accept's does not.
        for (what, result) in results {
            if what == ACCEPT {
                self.armed = false;
                self.accepted(result);
            }
        }
    }

    /// One accept's result, as the accept thread's loop treats it.
    fn accepted(&mut self, result: i32) {
        if result >= 0 {
            super::ledger().connection();
            // SAFETY: the accept succeeded: a new descriptor nothing else owns.
            let socket = unsafe { OwnedFd::from_raw_fd(result) };
            if !self.allowed.is_empty() && !peer_allowed(&socket, &self.allowed) {
                return;
            }
            self.ids += 1;
            self.came.push((self.ids, socket.into_raw_fd()));
            return;
        }
        let err = io::Error::from_raw_os_error(-result);
        match -result {
            libc::ECANCELED | libc::EINTR | libc::ECONNABORTED => {}
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => {
                eprintln!("accept failed: {err}");
                self.arm(BACKOFF);
            }
            errno => {
                // EINVAL: the master shut the listener down, the pool is stopping.
                if errno != libc::EINVAL {
                    eprintln!("accept failed: {err}");
                }
                self.stopped = true;
                self.came.push((0, CLOSED));
            }
        }
    }
}

/// The kernel's release, when it is older than 5.19: its io_uring accept waits on the
/// listener without `EPOLLEXCLUSIVE` (every worker would wake for each connection), and
/// before 5.5 has no accept at all. None when it is recent enough, or cannot be read.
fn too_old() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim().to_string();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    ((major, minor) < (5, 19)).then_some(release)
}
