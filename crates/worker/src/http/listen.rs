//! An HTTP worker's loop. The listener (fd 0) and every connection the worker holds between
//! requests sit in one epoll set; a readable connection's bytes are read without waiting
//! and parsed, and only a complete head makes the worker busy: it runs the request (and any
//! pipelined behind it), then puts the connection back in the set. An idle kept connection
//! is closed after `keepalive_timeout`, a head that does not complete within
//! `request_read_timeout` too; neither ever blocks the worker.
//!
//! The listener is registered with EPOLLEXCLUSIVE, so a connection wakes one idle worker,
//! not all; the listener is non-blocking, so a worker that loses the race to another's
//! accept just goes back to waiting.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use drover_fastcgi::Request;
use drover_scoreboard::now_us;

use crate::ledger::Ledger;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use super::head::{Head, Peer, Refusal};
use super::{DEFAULT_HEAD_TIMEOUT, HttpConfig, HttpConn};
use crate::exchange::{Exchange, Protocol};
use crate::serve::{Conn, Handler, Worker, peer_allowed};
use crate::socket::{AcceptFailed, accept, accept_failed};

/// The listener's token in the epoll set; connections count up from 0.
const LISTENER: u64 = u64::MAX;

/// The sweep for expired connections runs at most this often: each run walks every held
/// connection, and with thousands of them each expiring at its own time, a sweep per
/// deadline would cost more than the connections. A deadline may pass by this much.
const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// A connection between requests.
struct Held {
    conn: Conn,
    remote: Option<SocketAddr>,
    local: Option<SocketAddr>,
    /// When it is closed if no complete head has come.
    deadline: Instant,
    /// When the first bytes of the head being read came (None: idle, nothing yet).
    started: Option<(Instant, u64)>,
    /// A complete head whose body is still coming: the app runs once it is here (or
    /// [`super::conn::BODY_AHEAD`] of it is).
    waiting: Option<Head>,
}

/// The worker's epoll set and the connections it holds.
struct Set<'c> {
    epoll: Epoll,
    held: HashMap<u64, Held>,
    next_token: u64,
    /// No deadline comes before this: the sweep for expired connections waits till then.
    next_sweep: Instant,
    /// When the sweep last ran ([`SWEEP_EVERY`]).
    last_sweep: Instant,
    http: &'c HttpConfig,
    /// How long a head may take from its first byte (or a new connection's accept).
    head_timeout: Duration,
}

/// Runs the worker's HTTP loop to its end; returns its exit code.
pub(crate) fn serve<H: Handler>(
    worker: &mut Worker<'_, H>,
    http: &HttpConfig,
    allowed: &[IpAddr],
) -> i32 {
    let mut set = match Set::new(http, worker.config.request_read_timeout) {
        Ok(set) => set,
        Err(err) => {
            eprintln!("cannot watch the listener: {err}");
            return 1;
        }
    };
    let mut events = vec![EpollEvent::empty(); 64];
    while !worker.done() {
        let timeout = set.timeout();
        let epoll = &set.epoll;
        let ready = worker.handler.blocking(|| epoll.wait(&mut events, timeout));
        let ready = match ready {
            Ok(n) => n,
            Err(Errno::EINTR) => 0,
            Err(err) => {
                eprintln!("epoll_wait failed: {err}");
                return 1;
            }
        };
        for event in &events[..ready] {
            if event.data() == LISTENER {
                match set.accept(allowed, worker.ledger) {
                    Ok(Some(token)) => set.readable(worker, token),
                    Ok(None) => {}
                    // Unlike the blocking loop, an unknown error does not end the worker:
                    // its held connections are still served.
                    Err(err) => match accept_failed(&err) {
                        AcceptFailed::Closed => return 0,
                        AcceptFailed::Again | AcceptFailed::Starved | AcceptFailed::Failed => {}
                    },
                }
            } else {
                set.readable(worker, event.data());
            }
            if worker.done() {
                break;
            }
        }
        set.sweep(Instant::now());
    }
    // Idle connections are closed as the worker exits; a client that sends on one now
    // sees the close and retries (a kept connection may close at any time between
    // requests).
    0
}

impl<'c> Set<'c> {
    fn new(http: &'c HttpConfig, read_timeout: Option<Duration>) -> io::Result<Set<'c>> {
        // SAFETY: fd 0 is the pool's listener for the worker's whole life; the borrow does
        // not outlive this call.
        let listener = unsafe { BorrowedFd::borrow_raw(0) };
        // Shared with every worker of the pool (one file description): all of them run
        // this loop. A FastCGI worker finding it non-blocking after a reload clears it.
        nix::fcntl::fcntl(
            listener,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        epoll.add(
            listener,
            EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLEXCLUSIVE, LISTENER),
        )?;
        Ok(Set {
            epoll,
            held: HashMap::new(),
            next_token: 0,
            next_sweep: Instant::now() + Duration::from_secs(3600),
            last_sweep: Instant::now(),
            http,
            head_timeout: read_timeout.unwrap_or(DEFAULT_HEAD_TIMEOUT),
        })
    }

    /// How long epoll may wait: until the next sweep is due.
    fn timeout(&self) -> EpollTimeout {
        let due = self.next_sweep.max(self.last_sweep + SWEEP_EVERY);
        let left = due.saturating_duration_since(Instant::now());
        // Rounded up, so that the sweep does not run just short of the deadline and spin.
        EpollTimeout::try_from(left + Duration::from_millis(1)).unwrap_or(EpollTimeout::MAX)
    }

    /// Accepts one connection (one per wake-up: the others are left to the other workers)
    /// and adds it to the set. Ok(None): it was refused; an error is [`accept`]'s (`EAGAIN`
    /// when another worker took it), for [`accept_failed`].
    fn accept(&mut self, allowed: &[IpAddr], ledger: &Ledger<'_>) -> io::Result<Option<u64>> {
        // Not SOCK_NONBLOCK: reads never wait anyway (MSG_DONTWAIT), and a response is
        // written with blocking writes.
        let mut socket = accept()?;
        ledger.connection();
        if !allowed.is_empty() && !peer_allowed(&socket, allowed) {
            return Ok(None);
        }
        // A client that reads nothing of its response frees the worker after this.
        socket.set_send_timeout(self.http.send_timeout)?;
        let Some(fd) = socket.as_fd() else {
            return Ok(None);
        };
        // Responses are written whole or flushed on purpose: Nagle would only delay them.
        let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::TcpNoDelay, &true);
        let (remote, local) = addresses(fd);
        let token = self.next_token;
        self.next_token += 1;
        self.epoll.add(
            fd,
            EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP, token),
        )?;
        socket.set_wait(false);
        if let Some(tls) = &self.http.tls {
            socket.start_tls(tls)?;
        }
        let conn = Rc::new(RefCell::new(Exchange::http(HttpConn::new(socket))));
        let deadline = Instant::now() + self.head_timeout;
        self.hold(
            token,
            Held {
                conn,
                remote,
                local,
                deadline,
                started: None,
                waiting: None,
            },
        );
        Ok(Some(token))
    }

    fn hold(&mut self, token: u64, held: Held) {
        self.next_sweep = self.next_sweep.min(held.deadline);
        self.held.insert(token, held);
    }

    /// Reads what came on a held connection; a complete head is served at once.
    fn readable<H: Handler>(&mut self, worker: &mut Worker<'_, H>, token: u64) {
        let Some(mut held) = self.held.remove(&token) else {
            return;
        };
        let filled = with_http(&held.conn, HttpConn::fill);
        let gone = match filled {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => err.kind() != io::ErrorKind::WouldBlock,
        };
        if gone {
            if held.waiting.is_some() {
                eprintln!(
                    "dropped a connection from {}: the client closed the connection before the end of the body",
                    from(&held)
                );
            }
            return self.close(worker, held);
        }
        if held.started.is_none() && with_http(&held.conn, |c| c.has_input()) {
            let now = Instant::now();
            held.started = Some((now, now_us()));
            held.deadline = now + self.head_timeout;
        }
        let head = match held.waiting.take() {
            Some(head) => Ok(Some(head)),
            None => self.head(&held),
        };
        match head.and_then(|head| match head {
            Some(head) => self.body_ahead(&mut held, head),
            None => Ok(None),
        }) {
            Ok(Some(head)) => self.serve(worker, token, held, head),
            Ok(None) => self.hold(token, held),
            Err(()) => self.close(worker, held),
        }
    }

    /// The head back if its body is here (all of it, or as much as is read ahead), to run
    /// now; None: the body is still coming, and the head waits in `held` (a client waiting
    /// for `100 Continue` gets it now). Err: a chunked body broke its syntax (answered 400
    /// and logged); the connection ends.
    fn body_ahead(&self, held: &mut Held, head: Head) -> Result<Option<Head>, ()> {
        let ready = with_http(&held.conn, |c| match c.body_here() {
            Ok(true) => Ok(true),
            Ok(false) => c.send_continue().map(|()| false).map_err(|_| ()),
            Err(reason) => {
                eprintln!("refused a request from {}: {reason} (400)", from(held));
                c.refuse(&Refusal {
                    status: 400,
                    reason,
                });
                Err(())
            }
        })?;
        if ready {
            return Ok(Some(head));
        }
        held.waiting = Some(head);
        Ok(None)
    }

    /// The next complete head on `held`, if one is here. Err: refused (answered and
    /// logged); the connection ends.
    fn head(&self, held: &Held) -> Result<Option<Head>, ()> {
        let peer = Peer {
            remote: held.remote,
            local: held.local,
            trusted: &self.http.trusted,
            max_body: self.http.max_body,
        };
        let tls = self.http.tls.is_some();
        with_http(&held.conn, |c| match c.next_head(&peer) {
            Ok(Some(mut head)) if tls => {
                crate::tls::mark_https(&mut head.params);
                Ok(Some(head))
            }
            Ok(head) => Ok(head),
            Err(refusal) => {
                eprintln!(
                    "refused a request from {}: {} ({})",
                    from(held),
                    refusal.reason,
                    refusal.status
                );
                c.refuse(&refusal);
                Err(())
            }
        })
    }

    /// Runs the request whose head is complete, then those pipelined behind it; holds the
    /// connection again if it is kept.
    fn serve<H: Handler>(
        &mut self,
        worker: &mut Worker<'_, H>,
        token: u64,
        mut held: Held,
        mut head: Head,
    ) {
        loop {
            let start_us = held.started.map_or_else(now_us, |(_, us)| us);
            // request_read_timeout bounds the whole read: what the body may still take
            // is what the head and the body read ahead left of it.
            let since = held.started.map_or(Duration::ZERO, |(at, _)| at.elapsed());
            let budget = worker
                .config
                .request_read_timeout
                .map(|t| t.saturating_sub(since));
            {
                let mut conn = held.conn.borrow_mut();
                let socket = conn.get_mut();
                socket.set_wait(true);
                socket.start_request(budget);
            }
            let request = Request {
                id: 1,
                keep_conn: head.keep_alive,
                params: head.params,
            };
            let keep = worker.run_request(&held.conn, request, start_us);
            let closed = with_http(&held.conn, |c| {
                c.end_request();
                c.get_mut().set_wait(false);
                c.closed()
            });
            if !keep || closed || worker.done() {
                return self.close(worker, held);
            }
            held.started = None;
            if with_http(&held.conn, |c| c.has_input()) {
                let now = Instant::now();
                held.started = Some((now, now_us()));
            }
            match self.head(&held) {
                Ok(Some(next)) => match self.body_ahead(&mut held, next) {
                    Ok(Some(next)) => head = next,
                    Ok(None) => break,
                    Err(()) => return self.close(worker, held),
                },
                Ok(None) => break,
                Err(()) => return self.close(worker, held),
            }
        }
        held.deadline = match held.started {
            Some((at, _)) => at + self.head_timeout,
            None => Instant::now() + self.http.keepalive_timeout,
        };
        self.hold(token, held);
    }

    fn close<H: Handler>(&mut self, worker: &Worker<'_, H>, held: Held) {
        if let Some(fd) = held.conn.borrow().get_ref().as_fd() {
            let _ = self.epoll.delete(fd);
        }
        worker.close(&held.conn);
    }

    /// Closes the connections past their deadline: idle ones silently (a kept connection
    /// may close at any time between requests), a head that did not complete with a log
    /// line.
    fn sweep(&mut self, now: Instant) {
        if now < self.next_sweep || now < self.last_sweep + SWEEP_EVERY {
            return;
        }
        self.last_sweep = now;
        let expired: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, held)| held.deadline <= now)
            .map(|(token, _)| *token)
            .collect();
        for token in expired {
            let Some(held) = self.held.remove(&token) else {
                continue;
            };
            if held.started.is_none() && with_http(&held.conn, |c| c.get_ref().handshaking()) {
                eprintln!(
                    "dropped a connection from {}: its TLS handshake did not complete within {:?}",
                    from(&held),
                    self.head_timeout
                );
            }
            if let Some((since, _)) = held.started {
                let received = with_http(&held.conn, |c| c.get_ref().received());
                let what = if held.waiting.is_some() {
                    "body"
                } else {
                    "head"
                };
                eprintln!(
                    "dropped a connection: its request {what} did not arrive within {:?} ({:.1} s, {received} bytes received)",
                    self.head_timeout,
                    since.elapsed().as_secs_f64()
                );
            }
            if let Some(fd) = held.conn.borrow().get_ref().as_fd() {
                let _ = self.epoll.delete(fd);
            }
            let mut conn = held.conn.borrow_mut();
            conn.get_mut().close();
        }
        self.next_sweep = self
            .held
            .values()
            .map(|held| held.deadline)
            .min()
            .unwrap_or(now + Duration::from_secs(3600));
    }
}

/// Who sent a refused request, for its log line.
fn from(held: &Held) -> String {
    held.remote
        .map_or_else(|| "a unix socket client".into(), |a| a.ip().to_string())
}

/// Runs `f` on the HTTP connection inside `conn` (a held connection is always one).
fn with_http<T>(conn: &Conn, f: impl FnOnce(&mut HttpConn) -> T) -> T {
    match conn.borrow_mut().protocol_mut() {
        Protocol::Http(http) => f(http),
        Protocol::FastCgi(_) => unreachable!("the HTTP loop holds only HTTP connections"),
    }
}

/// The peer's and the local address of a TCP connection (None for a unix socket).
fn addresses(fd: BorrowedFd<'_>) -> (Option<SocketAddr>, Option<SocketAddr>) {
    use nix::sys::socket::{SockaddrStorage, getpeername, getsockname};
    let fd = fd.as_raw_fd();
    let convert = |addr: Option<SockaddrStorage>| {
        let addr = addr?;
        match (addr.as_sockaddr_in(), addr.as_sockaddr_in6()) {
            (Some(v4), _) => Some(SocketAddr::from((v4.ip(), v4.port()))),
            (_, Some(v6)) => Some(SocketAddr::from((v6.ip(), v6.port()))),
            _ => None,
        }
    };
    (
        convert(getpeername::<SockaddrStorage>(fd).ok()),
        convert(getsockname::<SockaddrStorage>(fd).ok()),
    )
}
