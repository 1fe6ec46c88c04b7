//! One Python worker: forked by the zygote, it accepts FastCGI connections on fd 0 and
//! serves them through the WSGI app, one request at a time, in a plain blocking loop.
//!
//! It stops after `max_requests`, on SIGTERM (after finishing the request in hand: the
//! handler only sets a flag and interrupts a blocked accept), or when the master shuts the
//! listener down (accept fails: the pool is stopping).

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use drover_fastcgi::{Connection, Limits, Phase, ProtocolError};
use drover_proto::zygote::{EXIT_APP_LOAD, retiring_line};
use drover_scoreboard::{Slot, State, now_us};
use pyo3::prelude::*;

use super::wsgi::App;
use super::zygote;

/// What the zygote decided for this worker before forking it.
pub struct WorkerConfig {
    pub app: String,
    pub mount: String,
    /// Requests before the worker exits (its own draw of the jitter); 0 = never.
    pub max_requests: u32,
    pub generation: u32,
    /// max_memory: checked after every request, so a leak is caught within one request
    /// (the master's 100 ms sampling can miss many fast ones).
    pub max_memory: Option<u64>,
    /// How long reads may wait, in all, for a request's params and body, from the accept
    /// (or the first bytes of the request on a kept connection). None: no bound.
    pub request_read_timeout: Option<Duration>,
}

/// Set by SIGTERM: finish the request in hand, then exit.
static RETIRE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    RETIRE.store(true, Ordering::Relaxed);
}

/// How long a kept-open connection may stay silent between two requests before the worker
/// closes it and accepts another. Not `request_read_timeout`: nginx keeps idle upstream
/// connections open on purpose (`keepalive`), and a worker waiting on one is idle, not
/// reading a request.
const KEPT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// A read ran into `deadline`.
    timed_out: bool,
    /// Bytes read since the last [`Socket::start_request`], for the log of a dropped one.
    received: u64,
}

impl From<OwnedFd> for Socket {
    fn from(fd: OwnedFd) -> Socket {
        Socket {
            fd: Some(fd),
            budget: None,
            wait: true,
            timed_out: false,
            received: 0,
        }
    }
}

/// How a wait for the next request on a kept connection ended.
enum NextRequest {
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

    /// A request starts arriving: reads may wait `budget` in all for its params and body.
    fn start_request(&mut self, budget: Option<Duration>) {
        self.budget = budget;
        self.timed_out = false;
        self.received = 0;
    }

    /// Whether reads wait for input (see [`Socket::wait`]).
    pub(super) fn set_wait(&mut self, wait: bool) {
        self.wait = wait;
    }

    /// A read ran out of `request_read_timeout` since the last request started.
    pub(super) fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// Bytes read since the last request started.
    pub(super) fn received(&self) -> u64 {
        self.received
    }

    /// Waits up to `timeout` for the first bytes of the next request on a kept connection.
    fn wait_next(&self, timeout: Duration) -> io::Result<NextRequest> {
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

    /// Closes the socket now. The app may keep a request's environ, whose `wsgi.input`
    /// shares the connection, until Python collects it: the descriptor must not wait for
    /// that (nginx waits for the connection to close before it ends the response). Reads
    /// and writes after this fail with `NotConnected`.
    pub fn close(&mut self) {
        self.fd = None;
    }

    /// Closes a connection whose last request left body unread: shuts the sending side
    /// down first, so that the web server sees the response end now, then reads and drops
    /// what comes until the web server closes, `max_bytes` have come, or `bound` has passed
    /// (closing with input unread would reset the connection, and the web server could
    /// lose the end of the response).
    fn linger_close(&mut self, max_bytes: usize, bound: Duration) {
        if let Ok(fd) = self.fd() {
            let _ = nix::sys::socket::shutdown(fd.as_raw_fd(), nix::sys::socket::Shutdown::Write);
        }
        self.start_request(Some(bound));
        self.wait = true;
        let mut buf = [0u8; 16 * 1024];
        let mut dropped = 0;
        while dropped <= max_bytes {
            match self.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => dropped += n,
            }
        }
        self.close();
    }
}

/// Reads what is there without blocking, and waits (within the budget) only when nothing
/// is: under load the request is already in the socket when it is accepted, so this costs
/// one `recv` where a socket read timeout would cost a `setsockopt` per connection too.
impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.fd()?;
        loop {
            match nix::unistd::write(fd, buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => return other.map_err(io::Error::from),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs the worker to its end; returns its exit code.
pub fn run(
    py: Python<'_>,
    app: Option<Py<PyAny>>,
    config: WorkerConfig,
    slot: Option<&Slot>,
) -> i32 {
    install_signals();
    CPU_MARK.store(cpu_time().as_nanos() as u64, Ordering::Relaxed);
    if let Some(slot) = slot {
        slot.claim(nix::unistd::getpid(), config.generation);
        slot.set_state(State::Idle);
    }
    let callable = match app {
        Some(app) => app,
        None => match zygote::load_app(py, &config.app) {
            Ok(app) => app,
            Err(err) => {
                eprintln!("cannot load the app {:?}:", config.app);
                err.print(py);
                return i32::from(EXIT_APP_LOAD);
            }
        },
    };
    // The master asks for a slow request's stack with SIGUSR2: faulthandler writes it to
    // stderr (the pool's output socket) without stopping the request.
    let registered = py.import("faulthandler").and_then(|faulthandler| {
        let stderr = py.import("sys")?.getattr("stderr")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("file", stderr)?;
        kwargs.set_item("all_threads", true)?;
        faulthandler.call_method("register", (libc::SIGUSR2,), Some(&kwargs))
    });
    if let Err(err) = registered {
        err.display(py);
    }
    let app = match App::new(py, callable, config.mount.clone()) {
        Ok(app) => app,
        Err(err) => {
            err.print(py);
            return 1;
        }
    };
    let allowed = allowed_clients();
    let mut served: u32 = 0;
    let done = |served: u32| {
        RETIRE.load(Ordering::Relaxed)
            || (config.max_requests > 0 && served >= config.max_requests)
            || slot.is_some_and(Slot::retire_requested)
    };
    while !done(served) {
        let accepted = py.detach(accept);
        let socket = match accepted {
            Ok(socket) => socket,
            Err(err)
                if err.raw_os_error() == Some(libc::EINTR)
                    || err.raw_os_error() == Some(libc::ECONNABORTED) =>
            {
                continue;
            }
            // The master shut the listener down: the pool is stopping.
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => break,
            Err(err) => {
                eprintln!("accept failed: {err}");
                if matches!(
                    err.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                return 1;
            }
        };
        if !allowed.is_empty() && !peer_allowed(&socket, &allowed) {
            continue;
        }
        served += serve_connection(py, &app, socket, &config, served, &done, slot);
    }
    0
}

/// Serves requests on one connection until it ends or the worker must stop. Returns how
/// many requests it served.
fn serve_connection(
    py: Python<'_>,
    app: &App,
    socket: Socket,
    config: &WorkerConfig,
    served_before: u32,
    done: &dyn Fn(u32) -> bool,
    slot: Option<&Slot>,
) -> u32 {
    let conn = Rc::new(RefCell::new(Connection::new(socket, Limits::default())));
    let served = serve_requests(py, app, &conn, config, served_before, done, slot);
    // Closed explicitly: the app may still hold an environ whose wsgi.input shares the
    // connection.
    let mut conn = conn.borrow_mut();
    if conn.body_unread() {
        if let Some(slot) = slot {
            slot.set_state(State::Finishing);
        }
        let bound = config.request_read_timeout.unwrap_or(KEPT_IDLE_TIMEOUT);
        let max_bytes = Limits::default().max_unread_body;
        conn.get_mut().linger_close(max_bytes, bound);
    } else {
        conn.get_mut().close();
    }
    if let Some(slot) = slot {
        slot.end_reading(now_us());
    }
    served
}

fn serve_requests(
    py: Python<'_>,
    app: &App,
    conn: &Rc<RefCell<Connection<Socket>>>,
    config: &WorkerConfig,
    served_before: u32,
    done: &dyn Fn(u32) -> bool,
    slot: Option<&Slot>,
) -> u32 {
    let mut served = 0;
    loop {
        // From the accept, or from the first bytes of the next request on a kept
        // connection: the worker is busy reading, and the request's clock runs.
        let start_us = now_us();
        if let Some(slot) = slot {
            slot.begin_reading(start_us);
        }
        conn.borrow_mut()
            .get_mut()
            .start_request(config.request_read_timeout);
        let next = conn.borrow_mut().next_request();
        let request = match next {
            Ok(Some(request)) => request,
            Ok(None) => return served,
            Err(err) => {
                log_closed(&err, conn.borrow().get_ref(), config);
                return served;
            }
        };
        if let Some(slot) = slot {
            let p = &request.params;
            let text = |name: &str| String::from_utf8_lossy(p.get(name).unwrap_or_default());
            slot.begin_request(
                start_us,
                &text("REQUEST_METHOD"),
                &text("DOCUMENT_URI"),
                &text("QUERY_STRING"),
                &config.app,
            );
        }
        let id = request.id;
        let outcome = app.handle(py, conn, request);
        if let Some(slot) = slot {
            slot.end_request(now_us(), request_cpu());
        }
        served += 1;
        let socket_timed_out = conn.borrow().get_ref().timed_out();
        if socket_timed_out {
            let received = conn.borrow().get_ref().received();
            eprintln!(
                "dropped request {id}: its body did not arrive within request_read_timeout ({}); {received} bytes received",
                show(config.request_read_timeout)
            );
            return served;
        }
        check_memory(config);
        if !outcome.keep || done(served_before + served) {
            return served;
        }
        // A kept connection: idle until the web server sends the next request on it.
        loop {
            match conn.borrow().get_ref().wait_next(KEPT_IDLE_TIMEOUT) {
                Ok(NextRequest::Arrived) => break,
                Ok(NextRequest::Interrupted) if !done(served_before + served) => continue,
                Ok(_) | Err(_) => return served,
            }
        }
    }
}

/// The log line of a connection that ended on an error. A request whose params did not
/// arrive within `request_read_timeout` is "dropped", with what was missing and how much
/// had come.
fn log_closed(err: &ProtocolError, socket: &Socket, config: &WorkerConfig) {
    let ProtocolError::Timeout { phase } = err else {
        eprintln!("closing a FastCGI connection: {err}");
        return;
    };
    let missing = match phase {
        Phase::Idle => "its first record (BEGIN_REQUEST)".to_string(),
        Phase::Params(id) => format!("the params of request {id}"),
        Phase::Stdin(id) => format!("the body of request {id}"),
    };
    eprintln!(
        "dropped a connection: {missing} did not arrive within request_read_timeout ({}); {} bytes received",
        show(config.request_read_timeout),
        socket.received()
    );
}

/// A timeout as a log line shows it.
fn show(timeout: Option<Duration>) -> String {
    match timeout {
        Some(timeout) => format!("{timeout:?}"),
        None => "off".to_string(),
    }
}

/// max_memory: a worker above it retires after the request it just served.
fn check_memory(config: &WorkerConfig) {
    let Some(limit) = config.max_memory else {
        return;
    };
    let Some(rss) = drover_proto::resident_memory(None).filter(|&rss| rss > limit) else {
        return;
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    // One write, marked: the master logs it as the pool's retire line.
    let line = retiring_line(&format!(
        "resident memory {:.1} MiB, above max_memory ({:.1} MiB)",
        mib(rss),
        mib(limit)
    ));
    let _ = io::stderr().write_all(line.as_bytes());
    RETIRE.store(true, Ordering::Relaxed);
}

/// `listen_allowed_clients`, as the master passes it to every runtime (libfcgi's and
/// php-cgi's variable): empty = any client.
fn allowed_clients() -> Vec<std::net::IpAddr> {
    std::env::var("FCGI_WEB_SERVER_ADDRS")
        .map(|list| {
            list.split(',')
                .filter_map(|ip| ip.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A TCP client whose address is not allowed is refused (the connection is closed and the
/// refusal logged); other sockets have no address to check.
fn peer_allowed(socket: &Socket, allowed: &[std::net::IpAddr]) -> bool {
    use nix::sys::socket::{SockaddrStorage, getpeername};
    let Some(fd) = &socket.fd else { return false };
    let Ok(peer) = getpeername::<SockaddrStorage>(fd.as_raw_fd()) else {
        return true;
    };
    let ip: std::net::IpAddr = match (peer.as_sockaddr_in(), peer.as_sockaddr_in6()) {
        (Some(v4), _) => v4.ip().into(),
        (_, Some(v6)) => v6.ip().into(),
        _ => return true,
    };
    if allowed.contains(&ip) {
        return true;
    }
    eprintln!("refused a connection from {ip}: not in listen_allowed_clients");
    false
}

/// The worker's CPU time when its previous request ended (or when it started).
static CPU_MARK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The CPU time of the request that just ended: since the previous one ended, so its
/// accept and reads count too and the clock is read once per request, not twice.
fn request_cpu() -> Duration {
    let now = cpu_time().as_nanos() as u64;
    let before = CPU_MARK.swap(now, Ordering::Relaxed);
    Duration::from_nanos(now.saturating_sub(before))
}

/// CPU time this process has used so far.
fn cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

fn accept() -> io::Result<Socket> {
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

fn install_signals() {
    // SAFETY: the handler only stores to an atomic. No SA_RESTART: a blocked accept
    // returns EINTR, so the worker notices at once.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        // Die with the zygote (SIGTERM: finish the request first).
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
}
