//! One worker, forked by its zygote: it accepts FastCGI connections on fd 0 and serves
//! them through its runtime's [`Handler`], one request at a time, in a plain blocking loop.
//!
//! It stops after `max_requests`, on SIGTERM (after finishing the request in hand: the
//! handler only sets a flag and interrupts a blocked accept), above `max_memory`, when the
//! master sets its slot's retire flag, or when the master shuts the listener down (accept
//! fails: the pool is stopping). Around each request it writes its scoreboard slot, which
//! is how the master sees it busy or idle; at the end of each it adds the request's
//! duration and status class to the pool's area of the scoreboard (every request counts
//! there, which the master's sampling could not achieve).

use std::cell::RefCell;
use std::io::{self, Write};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use drover_fastcgi::{Buffers, Connection, Limits, Params, Phase, ProtocolError, Request};

pub use crate::exchange::Exchange;
use crate::exchange::Protocol;
use crate::http::HttpConfig;
use drover_proto::zygote::retiring_line;
use drover_scoreboard::{PoolStats, Slot, State, now_us};

use crate::access::{AccessLog, Entry};
use crate::builtin::Builtin;
use crate::socket::{NextRequest, Socket, accept};
use crate::threads::Threaded;

/// What the zygote decided for this worker before forking it.
pub struct WorkerConfig {
    /// What the scoreboard shows as the script when the handler names none
    /// ([`Handler::script`]; Python: the app spec).
    pub label: String,
    /// Requests before the worker exits (its own draw of the jitter); 0 = never.
    pub max_requests: u32,
    pub generation: u32,
    /// max_memory: checked after every request, so a leak is caught within one request
    /// (the master's 100 ms sampling can miss many fast ones).
    pub max_memory: Option<u64>,
    /// How long reads may wait, in all, for a request's params and body, from the accept
    /// (or the first bytes of the request on a kept connection). None: no bound.
    pub request_read_timeout: Option<Duration>,
    /// The pool's access log, opened by the zygote; None: off.
    pub access_log: Option<AccessLog>,
    /// `protocol = "http"`: the listener speaks HTTP/1.1 to clients ([`crate::http`]);
    /// None: FastCGI.
    pub http: Option<HttpConfig>,
    /// `status_path` and `ping_path`: requests the worker answers itself.
    pub builtin: Option<Builtin>,
}

/// Where a worker writes in its pool's scoreboard.
#[derive(Clone, Copy)]
pub struct Board<'a> {
    /// Its own slot: its state and current request.
    pub slot: &'a Slot,
    /// The pool's area: the request-duration histogram and responses by status class.
    pub pool: &'a PoolStats,
}

/// How a request ended, for the worker loop.
pub struct Outcome {
    /// The connection can serve another request.
    pub keep: bool,
}

/// A connection as the handler gets it: shared, so that the request's objects in the
/// language runtime (Python's `wsgi.input`) can read the body from it.
pub type Conn = Rc<RefCell<Exchange>>;

/// What a runtime plugs into the worker loop: how it runs a request.
pub trait Handler {
    /// Runs once before the first accept, after [`run`] installed the SIGTERM handler and
    /// claimed the slot (Python: imports the app when it was not preloaded). `Err(code)`
    /// ends the worker with that exit code. Default: nothing to do.
    fn start(&mut self) -> Result<(), i32> {
        Ok(())
    }

    /// The scoreboard's script field for this request (PHP: SCRIPT_FILENAME; Python: the
    /// app). Default: None → [`WorkerConfig::label`].
    fn script(&self, _params: &Params) -> Option<String> {
        None
    }

    /// Serves one request read from `conn`, writes the whole response, ends it
    /// (END_REQUEST). Returns whether the connection may be kept.
    fn handle(&mut self, conn: &Conn, request: Request) -> Outcome;

    /// The peak memory, in bytes, of the request [`Handler::handle`] just served, as the
    /// runtime measures it; the scoreboard's "last request memory". Called once after each
    /// request. Default: None (unknown; the process's RSS is no request's peak).
    fn request_memory(&self) -> Option<u64> {
        None
    }

    /// The HTTP status of the response [`Handler::handle`] just sent, when the runtime knows
    /// it (Python: the status given to `start_response`; PHP: `http_response_code()`).
    /// Called once after each request, for the pool's responses by class. Default: None
    /// (the request still counts in the duration histogram).
    fn response_status(&self) -> Option<u16> {
        None
    }

    /// Runs a blocking wait (accept, the wait for the next request on a kept connection).
    /// Python releases the GIL around it, which is why `f` must be `Send`. Default: f().
    fn blocking<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        f()
    }

    /// Runs the whole serving loop of one of a worker's threads ([`crate::threads`]), on
    /// that thread. Python attaches the thread to the interpreter for the loop's length, so
    /// that its thread state (and what the app keeps in it) lasts. Default: f().
    fn thread<T>(f: impl FnOnce() -> T) -> T
    where
        Self: Sized,
    {
        f()
    }
}

/// Set by SIGTERM, or by [`check_memory`]: finish the request in hand, then exit.
static RETIRE: AtomicBool = AtomicBool::new(false);

/// True once SIGTERM (or max_memory) asked this worker to stop; a runtime may poll it.
pub fn retiring() -> bool {
    RETIRE.load(Ordering::Relaxed)
}

/// Asks the worker to stop once the request in hand is served (Python: after a request it
/// aborted past `request_terminate_timeout`).
pub fn retire() {
    RETIRE.store(true, Ordering::Relaxed);
}

extern "C" fn on_sigterm(_: libc::c_int) {
    RETIRE.store(true, Ordering::Relaxed);
}

/// How long a kept-open connection may stay silent between two requests before the worker
/// closes it and accepts another. Not `request_read_timeout`: nginx keeps idle upstream
/// connections open on purpose (`keepalive`), and a worker waiting on one is idle, not
/// reading a request.
const KEPT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a worker to its end (max_requests, SIGTERM after the request in hand, listener
/// shut down); returns its exit code.
///
/// Installs the SIGTERM handler and `PR_SET_PDEATHSIG`, claims `slot` for this pid, accepts
/// on fd 0, refuses clients outside `listen_allowed_clients` (`FCGI_WEB_SERVER_ADDRS`),
/// writes the scoreboard phases, enforces `request_read_timeout`, checks `max_memory` after
/// each request, and lingers on a connection left with body unread.
pub fn run<H: Handler>(handler: &mut H, config: WorkerConfig, board: Option<Board<'_>>) -> i32 {
    let slot = board.map(|b| b.slot);
    if let Err(code) = prepare(handler, &config, slot) {
        return code;
    }
    let allowed = allowed_clients();
    let http = config.http.clone();
    let mut worker = Worker {
        handler,
        config,
        slot,
        pool: board.map(|b| b.pool),
        served: 0,
        threaded: None,
        buffers: None,
    };
    if let Some(http) = http {
        return crate::http::serve(&mut worker, &http, &allowed);
    }
    accept_loop(&mut worker, &allowed)
}

/// A worker's start, before its first accept: the SIGTERM handler, the slot claimed, the
/// runtime's [`Handler::start`].
pub(crate) fn prepare<H: Handler>(
    handler: &mut H,
    config: &WorkerConfig,
    slot: Option<&Slot>,
) -> Result<(), i32> {
    install_signals();
    if let Some(slot) = slot {
        slot.claim(nix::unistd::getpid(), config.generation);
        slot.set_state(State::Idle);
    }
    handler.start()
}

/// Accepts on fd 0 and serves each connection, until the worker must stop; returns the
/// worker's exit code. A worker's threads ([`crate::threads`]) each run it.
pub(crate) fn accept_loop<H: Handler>(worker: &mut Worker<'_, H>, allowed: &[IpAddr]) -> i32 {
    while !worker.done() {
        let socket = match worker.handler.blocking(accept) {
            Ok(socket) => socket,
            Err(err)
                if err.raw_os_error() == Some(libc::EINTR)
                    || err.raw_os_error() == Some(libc::ECONNABORTED) =>
            {
                continue;
            }
            // An HTTP pool made the shared listener non-blocking before a reload turned
            // it to FastCGI: this loop blocks in accept, so it makes it blocking again.
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) => {
                // SAFETY: fd 0 is the pool's listener for the worker's whole life.
                let listener = unsafe { std::os::fd::BorrowedFd::borrow_raw(0) };
                let blocking = nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty());
                let _ = nix::fcntl::fcntl(listener, blocking);
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
        if !allowed.is_empty() && !peer_allowed(&socket, allowed) {
            continue;
        }
        worker.serve_connection(socket);
    }
    0
}

/// The worker loop's state.
pub(crate) struct Worker<'a, H> {
    pub(crate) handler: &'a mut H,
    pub(crate) config: WorkerConfig,
    pub(crate) slot: Option<&'a Slot>,
    /// The pool's area, where every request's duration and status class are added.
    pub(crate) pool: Option<&'a PoolStats>,
    /// Requests served so far, for `max_requests`.
    pub(crate) served: u32,
    /// One of several threads of the worker ([`crate::threads`]): what they share (the
    /// count for `max_requests`, the slot, the access log). None: the worker's only loop.
    pub(crate) threaded: Option<Threaded<'a>>,
    /// The last connection's buffers, for the next one: nginx without `fastcgi_keep_conn`
    /// opens a connection per request, and new buffers (24 KiB zeroed) cost about 8,500
    /// instructions each time.
    pub(crate) buffers: Option<Buffers>,
}

impl<H: Handler> Worker<'_, H> {
    /// The worker must stop once the request in hand is served.
    pub(crate) fn done(&self) -> bool {
        let served = match self.threaded {
            Some(threaded) => threaded.shared.started(),
            None => self.served,
        };
        RETIRE.load(Ordering::Relaxed)
            || (self.config.max_requests > 0 && served >= self.config.max_requests)
            || self.slot.is_some_and(Slot::retire_requested)
            || self.threaded.is_some_and(|t| t.shared.stopping())
    }

    /// The slot, when this loop writes its phases: a worker's threads share theirs through
    /// [`Threaded`], which shows the requests only.
    fn phase_slot(&self) -> Option<&Slot> {
        self.slot.filter(|_| self.threaded.is_none())
    }

    /// Serves requests on one connection until it ends or the worker must stop.
    fn serve_connection(&mut self, socket: Socket) {
        let buffers = self.buffers.take().unwrap_or_default();
        let conn = Rc::new(RefCell::new(Exchange::fastcgi(Connection::with_buffers(
            socket,
            Limits::default(),
            buffers,
        ))));
        self.serve_requests(&conn);
        self.close(&conn);
        // Unless the runtime still holds the connection (Python: an environ not yet
        // collected), whose buffers then go with it.
        if let Ok(exchange) = Rc::try_unwrap(conn)
            && let Protocol::FastCgi(connection) = exchange.into_inner().into_protocol()
        {
            self.buffers = Some(connection.into_parts().1);
        }
    }

    /// Closes a connection whose last request is over: explicitly, as the runtime may still
    /// hold objects that share it (Python: an environ whose wsgi.input reads it); with a
    /// lingering close when that request left body unread.
    pub(crate) fn close(&self, conn: &Conn) {
        let mut conn = conn.borrow_mut();
        if conn.body_unread() {
            if let Some(slot) = self.phase_slot() {
                slot.set_state(State::Finishing);
            }
            let bound = self
                .config
                .request_read_timeout
                .unwrap_or(KEPT_IDLE_TIMEOUT);
            let max_bytes = Limits::default().max_unread_body;
            conn.get_mut().linger_close(max_bytes, bound);
        } else {
            conn.get_mut().close_shedding();
        }
        if let Some(slot) = self.phase_slot() {
            slot.end_reading(now_us());
        }
    }

    fn serve_requests(&mut self, conn: &Conn) {
        loop {
            // From the accept, or from the first bytes of the next request on a kept
            // connection: the worker is busy reading, and the request's clock runs.
            let start_us = now_us();
            if let Some(slot) = self.phase_slot() {
                slot.begin_reading(start_us);
            }
            conn.borrow_mut()
                .get_mut()
                .start_request(self.config.request_read_timeout);
            let next = match conn.borrow_mut().protocol_mut() {
                Protocol::FastCgi(fastcgi) => fastcgi.next_request(),
                Protocol::Http(_) => Ok(None),
            };
            let request = match next {
                Ok(Some(request)) => request,
                Ok(None) => return,
                Err(err) => {
                    log_closed(&err, conn.borrow().get_ref(), &self.config);
                    return;
                }
            };
            if !self.run_request(conn, request, start_us) {
                return;
            }
            if self.done() {
                return;
            }
            // A kept connection: idle until the web server sends the next request on it.
            loop {
                let next = {
                    let conn = conn.borrow();
                    let socket = conn.get_ref();
                    self.handler
                        .blocking(|| socket.wait_next(KEPT_IDLE_TIMEOUT))
                };
                match next {
                    Ok(NextRequest::Arrived) => break,
                    Ok(NextRequest::Interrupted) if !self.done() => continue,
                    Ok(_) | Err(_) => return,
                }
            }
        }
    }

    /// Runs one request whose params are read, and records it: the scoreboard, the pool's
    /// histogram, the access log, `max_requests`, `max_memory`. Returns whether the
    /// connection may serve another request.
    pub(crate) fn run_request(&mut self, conn: &Conn, request: Request, start_us: u64) -> bool {
        let (logging, heads) = match (self.threaded, &self.config.access_log) {
            (Some(threaded), _) => (threaded.shared.logging(), threaded.shared.heads()),
            (None, Some(log)) => (true, log.shows_response_headers()),
            (None, None) => (false, false),
        };
        conn.borrow_mut().keep_head(heads);
        // status_path and ping_path: answered here, never by the runtime (which is not
        // asked for their script either: drover-php would keep its decision for them).
        let asked = (self.config.builtin.as_ref()).and_then(|b| b.asked(&request.params));
        let script = |handler: &H, params: &Params| match asked {
            Some(_) => params
                .get("SCRIPT_NAME")
                .map(|name| String::from_utf8_lossy(name).into_owned()),
            None => handler.script(params),
        };
        let logged = logging.then(|| {
            (
                request.params.clone(),
                script(self.handler, &request.params),
            )
        });
        let mut ticket = None;
        if let Some(slot) = self.slot {
            let p = &request.params;
            let text = |name: &str| String::from_utf8_lossy(p.get(name).unwrap_or_default());
            let script = match &logged {
                Some((_, script)) => script.clone(),
                None => script(self.handler, p),
            };
            let shown = [
                text("REQUEST_METHOD").into_owned(),
                text("DOCUMENT_URI").into_owned(),
                text("QUERY_STRING").into_owned(),
                script.unwrap_or_else(|| self.config.label.clone()),
            ];
            match self.threaded {
                Some(threaded) => ticket = Some(threaded.begin(slot, start_us, shown)),
                None => slot.begin_request(start_us, &shown[0], &shown[1], &shown[2], &shown[3]),
            }
        } else if let Some(threaded) = self.threaded {
            threaded.shared.count_start();
        }
        if let Some(pool) = self.pool {
            pool.accept();
        }
        let id = request.id;
        let cpu_start = crate::cpu::thread_cpu();
        let mut builtin_status = None;
        let outcome = match (asked, &self.config.builtin) {
            (Some(asked), Some(builtin)) => {
                let (response, status) = builtin.answer(asked, &request.params);
                builtin_status = Some(status);
                let mut c = conn.borrow_mut();
                let keep = c.write_stdout(&response).is_ok() && c.finish(0).unwrap_or(false);
                Outcome { keep }
            }
            _ => self.handler.handle(conn, request),
        };
        let end_us = now_us();
        let cpu = crate::cpu::thread_cpu().since(&cpu_start);
        let memory = self.handler.request_memory().filter(|_| asked.is_none());
        let duration_us = end_us.saturating_sub(start_us);
        if let Some(slot) = self.slot {
            match (self.threaded, ticket) {
                (Some(threaded), Some(ticket)) => {
                    threaded.end(slot, ticket, end_us, duration_us, cpu.total(), memory);
                }
                _ => slot.end_request(end_us, cpu.total(), memory),
            }
        }
        let status = builtin_status.or_else(|| self.handler.response_status());
        if let Some(pool) = self.pool {
            pool.record(duration_us, status);
        }
        if let Some((params, script)) = &logged {
            let conn = conn.borrow();
            let entry = Entry {
                params,
                status,
                duration: Duration::from_micros(duration_us),
                cpu,
                memory,
                script: script.as_deref().unwrap_or(&self.config.label),
                head: conn.kept_head(),
            };
            match (self.threaded, &mut self.config.access_log) {
                (Some(threaded), _) => threaded.shared.log(&entry),
                (None, Some(log)) => log.write(&entry),
                (None, None) => {}
            }
        }
        self.served += 1;
        let socket_timed_out = conn.borrow().get_ref().timed_out();
        if socket_timed_out {
            let received = conn.borrow().get_ref().received();
            eprintln!(
                "dropped request {id}: its body did not arrive within request_read_timeout ({}); {received} bytes received",
                show(self.config.request_read_timeout)
            );
            return false;
        }
        check_memory(&self.config);
        outcome.keep
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

/// `listen_allowed_clients`, once [`take_allowed_clients`] has kept it.
static ALLOWED_CLIENTS: std::sync::OnceLock<Vec<IpAddr>> = std::sync::OnceLock::new();

/// `listen_allowed_clients`, as the master passes it to every runtime (libfcgi's and
/// php-cgi's variable, `FCGI_WEB_SERVER_ADDRS`): empty = any client.
pub fn allowed_clients() -> Vec<IpAddr> {
    ALLOWED_CLIENTS
        .get_or_init(|| {
            std::env::var("FCGI_WEB_SERVER_ADDRS")
                .map(|list| parse_clients(&list))
                .unwrap_or_default()
        })
        .clone()
}

/// Keeps `listen_allowed_clients` for the workers and takes `FCGI_WEB_SERVER_ADDRS` out of
/// the environment, so that the app does not see it (php-fpm does not show its
/// `listen.allowed_clients` to scripts in `$_SERVER` or `getenv()`, nor gunicorn its
/// settings to an app). Called first thing in a zygote's `main`, while it has one thread.
pub fn take_allowed_clients() {
    let _ = allowed_clients();
    // SAFETY: called at the start of main, before the zygote starts any thread, so no
    // other thread reads the environment meanwhile.
    unsafe { std::env::remove_var("FCGI_WEB_SERVER_ADDRS") };
}

/// `FCGI_WEB_SERVER_ADDRS`'s comma-separated addresses; what does not parse is left out.
fn parse_clients(list: &str) -> Vec<IpAddr> {
    list.split(',')
        .filter_map(|ip| ip.trim().parse().ok())
        .collect()
}

/// A TCP client whose address is not allowed is refused (the connection is closed and the
/// refusal logged); other sockets have no address to check.
pub(crate) fn peer_allowed(socket: &Socket, allowed: &[IpAddr]) -> bool {
    let Some(ip) = socket.peer_ip() else {
        return true;
    };
    if allowed.contains(&ip) {
        return true;
    }
    eprintln!("refused a connection from {ip}: not in listen_allowed_clients");
    false
}

/// The worker's SIGTERM handler (retire after the request in hand) and its death signal.
/// [`run`] installs them; a runtime whose language records the handlers present when it
/// starts (PHP's `zend_signal`, which calls them from its own, deferred out of critical
/// sections) installs them in the zygote before it starts the language, so that the record
/// its workers inherit is this handler and not the default action, which would kill a
/// worker at once.
pub fn install_signals() {
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

#[cfg(test)]
mod tests;
