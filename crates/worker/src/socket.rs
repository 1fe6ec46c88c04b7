//! A worker's side of one FastCGI connection: the socket [`accept`] takes from the pool's
//! listener (fd 0), with a read budget for `request_read_timeout`, a non-waiting mode for
//! shedding a body, and the lingering close of a connection left with body unread.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::tls::Session;

/// An accepted connection (unix or TCP: only read and write are needed). It can be
/// closed while the connection object lives on (see [`Socket::close`]).
pub struct Socket {
    fd: Option<OwnedFd>,
    /// How much longer reads may wait for the request being read (`request_read_timeout`
    /// less the waits so far); a read that would wait past it fails with `TimedOut`.
    /// None: no bound.
    budget: Option<Duration>,
    /// Reads take only what has arrived (`WouldBlock` when nothing has), to shed the rest
    /// of a body without waiting for it.
    wait: bool,
    /// A read ran out of `budget`.
    timed_out: bool,
    /// Bytes read since the last [`Socket::start_request`], for the log of a dropped one.
    received: u64,
    /// `send_timeout` (HTTP): a write that makes no progress this long fails with
    /// `TimedOut` (the kernel's `SO_SNDTIMEO`, set once at accept). None: writes wait.
    send_timeout: Option<Duration>,
    /// An HTTP pool with `certfile`: reads and writes go through this TLS session, and the
    /// handshake happens in the reads (see [`Socket::start_tls`]).
    tls: Option<Box<Tls>>,
}

/// A connection's TLS: the session ([`crate::tls::Session`], which the ASGI hub drives
/// too) and what this blocking driver keeps beside it.
struct Tls {
    session: Session,
    /// Plaintext opened and not yet read, from `taken` on.
    plain: Vec<u8>,
    taken: usize,
    /// The client sent close_notify: reads end once `plain` is taken.
    closed: bool,
    /// Where the socket's bytes are read before they are opened.
    scratch: Vec<u8>,
    /// Records to write, kept for the next write's.
    wire: Vec<u8>,
}

impl From<OwnedFd> for Socket {
    fn from(fd: OwnedFd) -> Socket {
        Socket {
            fd: Some(fd),
            budget: None,
            wait: true,
            timed_out: false,
            received: 0,
            send_timeout: None,
            tls: None,
        }
    }
}

/// At most this much arrived input is dropped on a close (see [`Socket::close_shedding`]);
/// a client that sends more past its request's end gets the reset it asked for.
const SHED_ON_CLOSE_MAX: usize = 64 * 1024;

/// A lingering close ends once nothing has come for this long (Apache lingers 2 s;
/// nginx's `lingering_timeout` is 5 s, but a worker here holds a whole process).
pub const LINGER_QUIET: Duration = Duration::from_secs(2);

/// How a wait for the next request on a kept connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextRequest {
    /// Bytes are there (or the web server closed: the read will tell).
    Arrived,
    Silent,
    /// A signal came in: the worker may have to stop.
    Interrupted,
}

impl Socket {
    fn fd(&self) -> io::Result<&OwnedFd> {
        self.fd
            .as_ref()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// The descriptor, while open (for epoll and socket options).
    pub fn as_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// Speaks TLS from now on (an accepted connection of a pool with `certfile`): the
    /// handshake goes on in the reads, which never wait when [`Socket::set_wait`] says so,
    /// so that a client that stops mid-handshake holds a descriptor, not the worker.
    pub fn start_tls(&mut self, config: &std::sync::Arc<rustls::ServerConfig>) -> io::Result<()> {
        self.tls = Some(Box::new(Tls {
            session: Session::new(config)?,
            plain: Vec::new(),
            taken: 0,
            closed: false,
            scratch: vec![0; 16 * 1024],
            wire: Vec::new(),
        }));
        Ok(())
    }

    /// A TLS connection whose handshake has not completed.
    pub fn handshaking(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|tls| tls.session.handshaking())
    }

    /// Decrypted bytes that no read took yet: epoll does not see them (they have left
    /// the socket), so the reader takes them before it waits.
    pub fn buffered(&mut self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|tls| tls.taken < tls.plain.len())
    }

    /// A request starts arriving: reads may wait `budget` in all for its params and body.
    pub fn start_request(&mut self, budget: Option<Duration>) {
        self.budget = budget;
        self.timed_out = false;
        self.received = 0;
    }

    /// Bounds how long a write may make no progress (`SO_SNDTIMEO`: one `setsockopt` per
    /// connection; a blocked write then returns what it sent, or `EAGAIN` if nothing).
    pub fn set_send_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        let fd = self.fd()?;
        let tv = nix::sys::time::TimeVal::new(
            timeout.as_secs() as libc::time_t,
            timeout.subsec_micros() as libc::suseconds_t,
        );
        nix::sys::socket::setsockopt(fd, nix::sys::socket::sockopt::SendTimeout, &tv)?;
        self.send_timeout = Some(timeout);
        Ok(())
    }

    /// Whether reads wait for input (false: they take only what has arrived).
    pub fn set_wait(&mut self, wait: bool) {
        self.wait = wait;
    }

    /// A read ran out of `request_read_timeout` since the last request started.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// Bytes read since the last request started.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The client's address, for a TCP connection (None: a unix socket, or closed).
    pub fn peer_ip(&self) -> Option<IpAddr> {
        use nix::sys::socket::{SockaddrStorage, getpeername};
        let peer = getpeername::<SockaddrStorage>(self.fd.as_ref()?.as_raw_fd()).ok()?;
        match (peer.as_sockaddr_in(), peer.as_sockaddr_in6()) {
            (Some(v4), _) => Some(v4.ip().into()),
            (_, Some(v6)) => Some(v6.ip().into()),
            _ => None,
        }
    }

    /// Waits up to `timeout` for the first bytes of the next request on a kept connection.
    pub fn wait_next(&self, timeout: Duration) -> io::Result<NextRequest> {
        use nix::errno::Errno;
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let fd = self.fd()?;
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => Ok(NextRequest::Silent),
            Ok(_) => Ok(NextRequest::Arrived),
            Err(Errno::EINTR) => Ok(NextRequest::Interrupted),
            Err(err) => Err(err.into()),
        }
    }

    /// Closes the socket now. The app may keep a request's objects that share the
    /// connection (Python: an environ, whose `wsgi.input` reads it) until its runtime
    /// collects them: the descriptor must not wait for that (nginx waits for the
    /// connection to close before it ends the response). Reads and writes after this fail
    /// with `NotConnected`.
    pub fn close(&mut self) {
        self.close_notify();
        self.fd = None;
    }

    /// Over TLS, tells the client the stream ends here (a client reading a response to
    /// the connection's end takes a close without it as a truncation). Never waits: on a
    /// full send buffer the alert is dropped.
    fn close_notify(&mut self) {
        let Some(mut tls) = self.tls.take() else {
            return;
        };
        let mut out = Vec::new();
        tls.session.close_notify(&mut out);
        if let Some(fd) = &self.fd
            && !out.is_empty()
        {
            let _ = nix::sys::socket::send(
                fd.as_raw_fd(),
                &out,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            );
        }
    }

    /// Closes a connection whose request has ended, after dropping what has already
    /// arrived past it, without waiting for more. A client may send bytes after a
    /// request's end (the `fastcgi-client` crate, for one, ends an empty body with two
    /// empty STDIN records); closing a TCP socket with input unread resets the
    /// connection, and the client could then lose the response it has not read yet.
    /// Costs one `recv` when nothing is there, the usual case.
    pub fn close_shedding(&mut self) {
        let was = self.wait;
        self.wait = false;
        let mut sink = Sink::new();
        let mut dropped = 0;
        while dropped < SHED_ON_CLOSE_MAX {
            match self.raw_read(sink.buf()) {
                Ok(0) | Err(_) => break,
                Ok(n) => dropped += sink.took(n),
            }
        }
        self.wait = was;
        self.close();
    }

    /// Closes a connection whose last request left body unread: shuts the sending side
    /// down first, so that the web server sees the response end now, then reads and drops
    /// what comes until the web server closes, `max_bytes` have come, `bound` has passed,
    /// or nothing has come for [`LINGER_QUIET`] (closing with input unread would reset the
    /// connection, and the web server could lose the end of the response). The quiet
    /// limit is nginx's `lingering_timeout`: a client that keeps its side open and sends
    /// nothing does not hold the worker for the whole bound.
    pub fn linger_close(&mut self, max_bytes: usize, bound: Duration) {
        // Closed already (`fastcgi_finish_request()` lingered when it ended the request).
        self.close_notify();
        let Ok(fd) = self.fd() else {
            return;
        };
        let _ = nix::sys::socket::shutdown(fd.as_raw_fd(), nix::sys::socket::Shutdown::Write);
        let deadline = Instant::now() + bound;
        self.wait = true;
        let mut sink = Sink::new();
        let mut dropped = 0;
        while dropped <= max_bytes {
            let left = deadline.saturating_duration_since(Instant::now());
            self.start_request(Some(left.min(LINGER_QUIET)));
            match self.raw_read(sink.buf()) {
                Ok(0) | Err(_) => break,
                Ok(n) => dropped += sink.took(n),
            }
        }
        self.close();
    }
}

/// Where a close reads the input it drops: a small buffer on the stack for the usual read,
/// which finds the end of the stream (or nothing) at once, and a larger one on the heap
/// once bytes do come. A 16 KiB array zeroed for every close cost about 16,000
/// instructions, twice per request of a PHP script that calls `fastcgi_finish_request()`
/// (Symfony's `Response::send()` does): 1% of a Symfony page (BENCHMARKS.md, session 8).
struct Sink {
    small: [u8; 256],
    large: Vec<u8>,
}

impl Sink {
    fn new() -> Sink {
        Sink {
            small: [0; 256],
            large: Vec::new(),
        }
    }

    fn buf(&mut self) -> &mut [u8] {
        if self.large.is_empty() {
            &mut self.small
        } else {
            &mut self.large
        }
    }

    /// Counts `n` bytes dropped, and switches to the large buffer once some have come.
    fn took(&mut self, n: usize) -> usize {
        if self.large.is_empty() {
            self.large = vec![0; 16 * 1024];
        }
        n
    }
}

/// Reads what is there without blocking, and waits (within the budget) only when nothing
/// is: under load the request is already in the socket when it is accepted, so this costs
/// one `recv` where a socket read timeout would cost a `setsockopt` per connection too.
impl Socket {
    fn raw_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use nix::errno::Errno;
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use nix::sys::socket::{MsgFlags, recv};
        loop {
            let fd = self.fd()?;
            match recv(fd.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
                Ok(n) => {
                    self.received += n as u64;
                    return Ok(n);
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) if !self.wait => return Err(io::ErrorKind::WouldBlock.into()),
                Err(Errno::EAGAIN) => {}
                Err(err) => return Err(err.into()),
            }
            let timeout = match self.budget {
                None => PollTimeout::NONE,
                Some(left) if left.is_zero() => {
                    self.timed_out = true;
                    return Err(io::ErrorKind::TimedOut.into());
                }
                // Rounded up to the next millisecond, so that the last wait does not end
                // just short of the budget and spin.
                Some(left) => PollTimeout::try_from(left + Duration::from_nanos(999_999))
                    .unwrap_or(PollTimeout::MAX),
            };
            let waited = Instant::now();
            let mut fds = [PollFd::new(self.fd()?.as_fd(), PollFlags::POLLIN)];
            let polled = poll(&mut fds, timeout);
            if let Some(left) = &mut self.budget {
                *left = left.saturating_sub(waited.elapsed());
            }
            match polled {
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }
}

impl Read for Socket {
    /// Plain: `Socket::raw_read`. Over TLS: the plaintext opened already, else the bytes
    /// that arrived (waiting as a plain read would), opened, the handshake's answers
    /// written as they are due. An alert or a broken record ends the connection
    /// (`InvalidData`, after the alert is written); the client's close is Ok(0), as on a
    /// plain socket.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(mut tls) = self.tls.take() else {
            return self.raw_read(buf);
        };
        let result = self.read_tls(&mut tls, buf);
        self.tls = Some(tls);
        result
    }
}

impl Socket {
    fn read_tls(&mut self, tls: &mut Tls, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if tls.taken < tls.plain.len() {
                let n = buf.len().min(tls.plain.len() - tls.taken);
                buf[..n].copy_from_slice(&tls.plain[tls.taken..tls.taken + n]);
                tls.taken += n;
                if tls.taken == tls.plain.len() {
                    tls.plain.clear();
                    tls.taken = 0;
                }
                return Ok(n);
            }
            if tls.closed {
                return Ok(0);
            }
            // The client closed (without close_notify: HTTP/1.1 clients do).
            let n = match self.raw_read(&mut tls.scratch)? {
                0 => return Ok(0),
                n => n,
            };
            tls.wire.clear();
            let opened = tls
                .session
                .open(&tls.scratch[..n], &mut tls.plain, &mut tls.wire);
            self.write_all_raw(&tls.wire)?;
            match opened {
                Ok(seen) => tls.closed |= seen.closed,
                Err(reason) => return Err(io::Error::new(io::ErrorKind::InvalidData, reason)),
            }
        }
    }

    /// Writes all of `data` as it is (blocking, within `send_timeout`).
    fn write_all_raw(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.raw_write(data)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => data = &data[n..],
            }
        }
        Ok(())
    }
}

impl Write for Socket {
    /// Plain: `Socket::raw_write`. Over TLS: encrypted, and written out before this
    /// returns (blocking, within `send_timeout`), as a plain write is.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(mut tls) = self.tls.take() else {
            return self.raw_write(buf);
        };
        tls.wire.clear();
        tls.session.seal(buf, &mut tls.wire);
        let written = self.write_all_raw(&tls.wire);
        self.tls = Some(tls);
        written.map(|()| buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket {
    fn raw_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.fd()?;
        loop {
            match nix::unistd::write(fd, buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                // The descriptor blocks: EAGAIN is SO_SNDTIMEO's, a client that took
                // nothing for the whole send_timeout.
                Err(nix::errno::Errno::EAGAIN) if self.send_timeout.is_some() => {
                    return Err(self.send_timed_out());
                }
                other => return other.map_err(io::Error::from),
            }
        }
    }

    fn send_timed_out(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read nothing of the response for {:?} (send_timeout)",
                self.send_timeout.unwrap_or_default()
            ),
        )
    }
}

/// Accepts the next connection on fd 0, the pool's listening socket. Blocks; a signal
/// interrupts it (`EINTR`: the handler installed by [`crate::serve::run`] has no
/// `SA_RESTART`), and it fails with `EINVAL` once the master shuts the listener down.
pub fn accept() -> io::Result<Socket> {
    // SAFETY: accept4 on fd 0, the pool's listening socket; null address pointers are
    // allowed. The returned descriptor is new and owned by us.
    let fd = unsafe {
        libc::accept4(
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 succeeded, so `fd` is a new descriptor that nothing else owns.
    Ok(Socket::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// What a failed [`accept`] means, the same for every worker loop (the blocking one in
/// [`crate::serve`] and the evented one of HTTP pools).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptFailed {
    /// Nothing to take, or nothing lost (`EINTR`, `EAGAIN`, `ECONNABORTED`: a signal,
    /// another worker took the connection, the client left first): accept again.
    Again,
    /// The master shut the listener down (`EINVAL`): the pool is stopping.
    Closed,
    /// Out of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`): logged, and
    /// waited for 100 ms so that idle connections time out first; then accept again.
    Starved,
    /// Anything else: logged; the loop decides whether it goes on.
    Failed,
}

/// Classifies (and logs, and waits on, as [`AcceptFailed`] says) a failed [`accept`].
pub fn accept_failed(err: &io::Error) -> AcceptFailed {
    match err.raw_os_error() {
        Some(libc::EINTR | libc::EAGAIN | libc::ECONNABORTED) => AcceptFailed::Again,
        Some(libc::EINVAL) => AcceptFailed::Closed,
        code => {
            eprintln!("accept failed: {err}");
            if matches!(
                code,
                Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
            ) {
                std::thread::sleep(Duration::from_millis(100));
                AcceptFailed::Starved
            } else {
                AcceptFailed::Failed
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

    /// A worker's socket and the web server's end of it.
    pub(crate) fn pair() -> (Socket, std::os::unix::net::UnixStream) {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        (Socket::from(ours), theirs.into())
    }

    #[test]
    fn a_read_past_the_budget_times_out_and_says_how_much_came() {
        let (mut socket, mut server) = pair();
        socket.start_request(Some(Duration::from_millis(30)));
        server.write_all(b"abc").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(socket.read(&mut buf).unwrap(), 3);
        let started = Instant::now();
        let err = socket.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(25));
        assert!(socket.timed_out());
        assert_eq!(socket.received(), 3);
        // The next request starts with a fresh budget and count.
        socket.start_request(None);
        assert!(!socket.timed_out());
        assert_eq!(socket.received(), 0);
    }

    #[test]
    fn without_waiting_a_read_takes_what_came_then_would_block() {
        let (mut socket, mut server) = pair();
        socket.set_wait(false);
        server.write_all(b"body").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(socket.read(&mut buf).unwrap(), 4);
        let err = socket.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(!socket.timed_out());
    }

    #[test]
    fn the_wait_for_a_next_request_tells_silence_from_arrival() {
        let (socket, mut server) = pair();
        assert_eq!(
            socket.wait_next(Duration::from_millis(10)).unwrap(),
            NextRequest::Silent
        );
        server.write_all(b"x").unwrap();
        assert_eq!(
            socket.wait_next(Duration::from_secs(5)).unwrap(),
            NextRequest::Arrived
        );
    }

    #[test]
    fn a_closed_socket_refuses_reads_and_writes() {
        let (mut socket, mut server) = pair();
        socket.close();
        assert_eq!(
            socket.read(&mut [0u8; 4]).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        assert_eq!(
            socket.write(b"x").unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        // The web server sees the end of the stream.
        assert_eq!(server.read(&mut [0u8; 4]).unwrap(), 0);
        assert_eq!(socket.peer_ip(), None);
    }

    #[test]
    fn a_lingering_close_ends_the_response_then_drops_the_unread_body() {
        let (mut socket, mut server) = pair();
        server.write_all(&[7u8; 1000]).unwrap();
        let web_server = std::thread::spawn(move || {
            // The worker's shutdown reaches us first: the response is complete...
            let mut response = Vec::new();
            server.read_to_end(&mut response).unwrap();
            // ...and the rest of the body is still taken in, then we close.
            server.write_all(&[8u8; 1000]).unwrap();
            response
        });
        socket.linger_close(64 * 1024, Duration::from_secs(5));
        assert!(socket.fd.is_none());
        assert!(web_server.join().unwrap().is_empty());
    }

    /// A body much larger than the close's first (small) buffer is dropped to its end, and
    /// the close ends there, not after LINGER_QUIET.
    #[test]
    fn a_lingering_close_drops_a_large_body_to_its_end() {
        let (mut socket, mut server) = pair();
        let web_server = std::thread::spawn(move || {
            server.write_all(&vec![7u8; 300 * 1024]).unwrap();
            let mut response = Vec::new();
            server.read_to_end(&mut response).unwrap();
            response
        });
        let started = Instant::now();
        socket.linger_close(1024 * 1024, Duration::from_secs(30));
        assert!(started.elapsed() < LINGER_QUIET, "{:?}", started.elapsed());
        assert!(socket.fd.is_none());
        assert!(web_server.join().unwrap().is_empty());
    }

    /// `fastcgi_finish_request()` lingered already: the worker loop's close after the
    /// script does nothing more.
    #[test]
    fn a_lingering_close_of_a_closed_socket_returns_at_once() {
        let (mut socket, _server) = pair();
        socket.close();
        let started = Instant::now();
        socket.linger_close(64 * 1024, Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(socket.fd.is_none());
    }

    #[test]
    fn a_lingering_close_ends_when_the_client_goes_quiet() {
        let (mut socket, mut server) = pair();
        let web_server = std::thread::spawn(move || {
            // Body keeps coming for a while, then the client holds its side open, silent.
            for _ in 0..3 {
                server.write_all(&[9u8; 100]).unwrap();
                std::thread::sleep(Duration::from_millis(300));
            }
            server
        });
        let started = Instant::now();
        socket.linger_close(64 * 1024, Duration::from_secs(60));
        let took = started.elapsed();
        assert!(took >= LINGER_QUIET, "{took:?}");
        assert!(took < Duration::from_secs(30), "{took:?}");
        assert!(socket.fd.is_none());
        drop(web_server.join().unwrap());
    }

    #[test]
    fn a_lingering_close_gives_up_after_its_bound() {
        let (mut socket, _server) = pair();
        let started = Instant::now();
        socket.linger_close(64 * 1024, Duration::from_millis(30));
        assert!(started.elapsed() >= Duration::from_millis(25));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(socket.fd.is_none());
    }

    /// Over TCP, bytes left unread at close turn the FIN into a reset; the client must
    /// still read the whole response and a clean end.
    #[test]
    fn a_close_after_the_request_sheds_trailing_bytes_so_tcp_ends_cleanly() {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let mut socket = Socket::from(OwnedFd::from(accepted));
        client.write_all(b"request+trailing").unwrap();
        let mut buf = [0u8; 7];
        socket.read_exact(&mut buf).unwrap();
        // Wait until the trailing bytes are in the worker's receive queue, as they are
        // when the client wrote them with the request.
        let mut fds = [nix::poll::PollFd::new(
            socket.fd().unwrap().as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(5000u16)).unwrap();
        socket.write_all(b"response").unwrap();
        socket.close_shedding();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"response");
    }
}
