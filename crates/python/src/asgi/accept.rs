//! The ASGI worker's accepts on a thread of their own that blocks in `accept()` on fd 0,
//! where io_uring is not to be had (`ring.rs` accepts on the loop's thread otherwise).
//!
//! The event loop cannot accept on the pool's listener itself: asyncio and uvloop make a
//! listening socket non-blocking, and O_NONBLOCK belongs to the open file that every
//! worker of the pool (and of the next generation, perhaps a WSGI one, or php-cgi after a
//! reload) shares, whose blocking `accept()` would then fail with EAGAIN. A thread in a
//! blocking `accept()` also takes part in the kernel's one-waiter-per-connection handoff,
//! where an epoll on a shared listener wakes every worker for each connection.
//!
//! The thread hands each new socket to the hub (`hub.rs`) through a queue and the hub's
//! epoll set, which the socket joins from this thread: the loop wakes when the socket has
//! bytes, not for the accept; the listener's end comes through a pipe in the set. It never
//! touches Python. To stop it (the worker retires), the loop sets a flag and interrupts
//! `accept()` with its signal (`wake_signal`), repeated until the thread has left: a signal
//! sent just before the thread enters `accept()` would be lost.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::prelude::*;

/// The marker `take()` returns when the master shut the listener down (the pool stops).
pub const CLOSED: RawFd = -1;

/// The signal that interrupts the thread's `accept()` (SIGRTMIN and SIGRTMIN+1 are the
/// zygote's).
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

extern "C" fn on_wake(_: libc::c_int) {}

/// What the thread and the loop share.
struct Shared {
    /// The sockets accepted, each with its connection's id, not yet taken by the loop.
    queue: Mutex<VecDeque<(u64, RawFd)>>,
    stop: AtomicBool,
    /// Connections accepted and not yet closed by the loop ([`Accepting::released`]).
    open: AtomicUsize,
    /// The pipe's write end: one byte for [`CLOSED`].
    notify: OwnedFd,
    /// The epoll set (the hub's) each accepted socket joins, its id as the event's data.
    epoll: RawFd,
    /// The last id given to a connection (ids are never reused; 0 is the pipe's).
    ids: AtomicU64,
}

/// The accept thread and its queue, for the hub (`hub.rs`), whose epoll set each new socket
/// joins straight from this thread.
pub(super) struct Accepting {
    shared: Arc<Shared>,
    /// The pipe's read end, which the loop watches.
    ready: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl Accepting {
    /// Starts the thread; each socket accepted joins `epoll` for reading.
    pub(super) fn start(epoll: RawFd) -> PyResult<Accepting> {
        let (ready, notify) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(|err| pyo3::exceptions::PyOSError::new_err(err.to_string()))?;
        // SAFETY: a handler that does nothing, for a signal only this thread is sent; no
        // SA_RESTART, so that accept() returns EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_wake as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(wake_signal(), &action, std::ptr::null_mut());
        }
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            notify,
            epoll,
            ids: AtomicU64::new(0),
        });
        let allowed = drover_worker::serve::allowed_clients();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("accept".into())
            .spawn(move || accept_loop(&theirs, &allowed))
            .map_err(|err| pyo3::exceptions::PyOSError::new_err(err.to_string()))?;
        Ok(Accepting {
            shared,
            ready,
            thread: Some(thread),
        })
    }

    /// The pipe's read end.
    pub(super) fn fileno(&self) -> RawFd {
        self.ready.as_raw_fd()
    }

    /// The sockets accepted since the last call, with their ids (and [`CLOSED`] when the
    /// listener is gone).
    pub(super) fn take(&self) -> Vec<(u64, RawFd)> {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.is_empty() {
            return Vec::new();
        }
        queue.drain(..).collect()
    }

    /// Empties the pipe.
    pub(super) fn clear(&self) {
        // A short read emptied the pipe: no second read() to hear EAGAIN.
        let mut buf = [0u8; 64];
        while matches!(nix::unistd::read(&self.ready, &mut buf), Ok(n) if n == buf.len()) {}
    }

    /// The loop closed one of the connections this thread handed over.
    pub(super) fn released(&self) {
        let _ = self
            .shared
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Stops accepting; returns once the thread has left. Sockets it accepted meanwhile
    /// are still in `take()`.
    pub(super) fn stop(&mut self, py: Python<'_>) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        let handle = thread.as_pthread_t();
        py.detach(|| {
            while !thread.is_finished() {
                // SAFETY: the thread has not been joined, so its pthread_t is valid.
                unsafe { libc::pthread_kill(handle, wake_signal()) };
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = thread.join();
        });
    }
}

fn accept_loop(shared: &Shared, allowed: &[IpAddr]) {
    // Only WAKE reaches this thread: SIGTERM and SIGUSR2 are the loop's (Python's handler
    // and faulthandler run on the main thread).
    let mut raw: libc::sigset_t = *nix::sys::signal::SigSet::all().as_ref();
    // SAFETY: removes a valid signal number from an initialised set, which then holds
    // only valid signals.
    let only_wake = unsafe {
        libc::sigdelset(&mut raw, wake_signal());
        nix::sys::signal::SigSet::from_sigset_t_unchecked(raw)
    };
    let _ = only_wake.thread_set_mask();
    while !shared.stop.load(Ordering::Acquire) {
        spread_pause(shared.open.load(Ordering::Relaxed));
        // SAFETY: accept4 on fd 0, the pool's listening socket; null address pointers are
        // allowed. The new descriptor is ours.
        let fd = unsafe {
            libc::accept4(
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR | libc::ECONNABORTED) => continue,
                Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                    eprintln!("accept failed: {err}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                // EINVAL: the master shut the listener down, the pool is stopping.
                Some(libc::EINVAL) => {}
                _ => eprintln!("accept failed: {err}"),
            }
            hand_over(shared, CLOSED);
            return;
        }
        super::ledger().connection();
        // SAFETY: accept4 succeeded: a new descriptor nothing else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        if !allowed.is_empty() && !peer_allowed(&socket, allowed) {
            continue;
        }
        shared.open.fetch_add(1, Ordering::Relaxed);
        hand_over(shared, std::os::fd::IntoRawFd::into_raw_fd(socket));
    }
}

/// Spreads kept connections over the pool's workers. Every worker's thread waits in
/// `accept()`, and the kernel wakes one per connection; but a thread that is running takes
/// what is queued before a woken one is scheduled, so on a burst of connects (a load
/// balancer's or wrk's pool) the workers that happen to run took them all, and kept them:
/// 2 of 4 workers held all of wrk's 50 connections, the other two idle. A worker that
/// holds connections therefore waits a little before each accept, longer the more it
/// holds, which leaves the next ones to less busy workers; with one or two connections
/// open (nginx without upstream keepalive) the pause is tens of microseconds.
fn spread_pause(open: usize) {
    if open > 0 {
        std::thread::sleep(spread(open));
    }
}

/// The pause before an accept for a worker that holds `open` connections (zero for none).
pub(super) fn spread(open: usize) -> Duration {
    Duration::from_micros((open as u64 * SPREAD_STEP_US).min(SPREAD_MAX_US))
}

/// The pause before an accept per connection the worker holds, and its cap.
const SPREAD_STEP_US: u64 = 50;
const SPREAD_MAX_US: u64 = 2_000;

fn hand_over(shared: &Shared, fd: RawFd) {
    if fd != CLOSED {
        // Queued before it joins the set: the loop, which reads the set and then the
        // queue, knows every id an event names.
        let id = shared.ids.fetch_add(1, Ordering::Relaxed) + 1;
        shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((id, fd));
        let mut event = libc::epoll_event {
            events: super::hub::READ,
            u64: id,
        };
        // SAFETY: adds an open descriptor to an epoll set the hub keeps open while this
        // thread runs (it stops the thread before it closes the set).
        unsafe { libc::epoll_ctl(shared.epoll, libc::EPOLL_CTL_ADD, fd, &mut event) };
        return;
    }
    shared
        .queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back((0, fd));
    let _ = nix::unistd::write(&shared.notify, b"!");
}

/// A TCP client outside the list is refused (closed, and logged); a unix socket has no
/// address to check.
pub(super) fn peer_allowed(socket: &OwnedFd, allowed: &[IpAddr]) -> bool {
    use nix::sys::socket::{SockaddrStorage, getpeername};
    let Ok(peer) = getpeername::<SockaddrStorage>(socket.as_raw_fd()) else {
        return true;
    };
    let ip: IpAddr = if let Some(v4) = peer.as_sockaddr_in() {
        v4.ip().into()
    } else if let Some(v6) = peer.as_sockaddr_in6() {
        v6.ip().into()
    } else {
        return true;
    };
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    if allowed.contains(&ip) {
        return true;
    }
    eprintln!("refused a connection from {ip}: not in listen_allowed_clients");
    false
}
