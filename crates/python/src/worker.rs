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
use std::time::Duration;

use drover_fastcgi::{Connection, Limits};
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
}

/// Set by SIGTERM: finish the request in hand, then exit.
static RETIRE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    RETIRE.store(true, Ordering::Relaxed);
}

/// A stalled web server frees the worker after this long.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// An accepted connection (unix or TCP: only read and write are needed). It can be
/// closed while the connection object lives on (see [`Socket::close`]).
pub struct Socket(Option<OwnedFd>);

impl From<OwnedFd> for Socket {
    fn from(fd: OwnedFd) -> Socket {
        Socket(Some(fd))
    }
}

impl Socket {
    fn fd(&self) -> io::Result<&OwnedFd> {
        self.0
            .as_ref()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// Closes the socket now. The app may keep a request's environ, whose `wsgi.input`
    /// shares the connection, until Python collects it: the descriptor must not wait for
    /// that (nginx waits for the connection to close before it ends the response). Reads
    /// and writes after this fail with `NotConnected`.
    pub fn close(&mut self) {
        self.0 = None;
    }
}

/// Reads what is there without blocking, and waits (up to `READ_TIMEOUT`) only when
/// nothing is: under load the request is already in the socket when it is accepted, so
/// this costs one `recv` where a socket read timeout would cost a `setsockopt` per
/// connection too. A timeout is `WouldBlock`, as a socket read timeout reports it.
impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use nix::errno::Errno;
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use nix::sys::socket::{MsgFlags, recv};
        let fd = self.fd()?;
        loop {
            match recv(fd.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => {
                    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
                    let timeout = PollTimeout::try_from(READ_TIMEOUT).unwrap_or(PollTimeout::MAX);
                    match poll(&mut fds, timeout) {
                        Ok(0) => return Err(io::ErrorKind::WouldBlock.into()),
                        Ok(_) | Err(Errno::EINTR) => continue,
                        Err(err) => return Err(err.into()),
                    }
                }
                other => return other.map_err(io::Error::from),
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
    // Still shared: the app kept an environ (its wsgi.input holds the connection).
    if Rc::strong_count(&conn) > 1 {
        conn.borrow_mut().get_mut().close();
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
        let next = conn.borrow_mut().next_request();
        match next {
            Ok(Some(request)) => {
                if let Some(slot) = slot {
                    let p = &request.params;
                    let text =
                        |name: &str| String::from_utf8_lossy(p.get(name).unwrap_or_default());
                    slot.begin_request(
                        now_us(),
                        &text("REQUEST_METHOD"),
                        &text("DOCUMENT_URI"),
                        &text("QUERY_STRING"),
                        &config.app,
                    );
                }
                let outcome = app.handle(py, &conn, request);
                if let Some(slot) = slot {
                    slot.end_request(now_us(), request_cpu());
                }
                served += 1;
                if let Some(limit) = config.max_memory {
                    if let Some(rss) =
                        drover_proto::resident_memory(None).filter(|&rss| rss > limit)
                    {
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
                }
                if !outcome.keep || done(served_before + served) {
                    return served;
                }
            }
            Ok(None) => return served,
            Err(err) => {
                eprintln!("closing a FastCGI connection: {err}");
                return served;
            }
        }
    }
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
    let Some(fd) = &socket.0 else { return false };
    let Ok(peer) = getpeername::<SockaddrStorage>(fd.as_raw_fd()) else {
        return true;
    };
    let ip: std::net::IpAddr = match (peer.as_sockaddr_in(), peer.as_sockaddr_in6()) {
        (Some(v4), _) => std::net::Ipv4Addr::from(v4.ip()).into(),
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
    let _ = std::io::stdout().as_raw_fd();
}
