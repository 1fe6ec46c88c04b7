//! One worker, forked by its zygote: it accepts FastCGI connections on fd 0 and serves
//! them through its runtime's [`Handler`], one request at a time, in a plain blocking loop.
//!
//! It stops after `max_requests`, on SIGTERM (after finishing the request in hand: the
//! handler only sets a flag and interrupts a blocked accept), above `max_memory`, when the
//! master sets its slot's retire flag, or when the master shuts the listener down (accept
//! fails: the pool is stopping). Each request is begun and ended in the worker's
//! [`Ledger`], which keeps the scoreboard slot (how the master sees the worker busy or
//! idle), the pool's histogram, the access log, and those limits.

use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use drover_fastcgi::{Buffers, Connection, Limits, Params, Phase, ProtocolError, Request};

use crate::access::AccessLog;
use crate::builtin::Builtin;
pub use crate::exchange::Exchange;
use crate::exchange::Protocol;
use crate::http::HttpConfig;
pub use crate::ledger::Board;
use crate::ledger::{Concurrency, Ledger, Terms, retire};
use crate::socket::{AcceptFailed, NextRequest, Socket, accept, accept_failed};

/// What the zygote decided for this worker before forking it.
pub struct WorkerConfig {
    /// What the scoreboard shows as the script when the handler names none
    /// ([`Handler::script`]; Python: the app spec).
    pub label: String,
    /// Requests before the worker exits (its own draw of the jitter); 0 = never.
    pub max_requests: u32,
    pub generation: u32,
    /// max_memory: checked after every request ([`Ledger::end`]).
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

extern "C" fn on_sigterm(_: libc::c_int) {
    retire();
}

/// How long a kept-open connection may stay silent between two requests before the worker
/// closes it and accepts another. Not `request_read_timeout`: nginx keeps idle upstream
/// connections open on purpose (`keepalive`), and a worker waiting on one is idle, not
/// reading a request.
const KEPT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a worker to its end (max_requests, SIGTERM after the request in hand, listener
/// shut down); returns its exit code.
///
/// Installs the SIGTERM handler and `PR_SET_PDEATHSIG`, opens the worker's [`Ledger`]
/// (which claims the slot, and records each request), accepts on fd 0, refuses clients
/// outside `listen_allowed_clients` (`FCGI_WEB_SERVER_ADDRS`), enforces
/// `request_read_timeout`, and lingers on a connection left with body unread.
pub fn run<H: Handler>(handler: &mut H, mut config: WorkerConfig, board: Option<Board<'_>>) -> i32 {
    let ledger = match prepare(handler, &mut config, board, Concurrency::One) {
        Ok(ledger) => ledger,
        Err(code) => return code,
    };
    let allowed = allowed_clients();
    let http = config.http.clone();
    let mut worker = Worker {
        handler,
        config,
        ledger: &ledger,
        buffers: None,
    };
    if let Some(http) = http {
        return crate::http::serve(&mut worker, &http, &allowed);
    }
    accept_loop(&mut worker, &allowed)
}

/// A worker's start, before its first accept: the SIGTERM handler, the ledger opened (the
/// slot claimed), the runtime's [`Handler::start`].
pub(crate) fn prepare<'a, H: Handler>(
    handler: &mut H,
    config: &mut WorkerConfig,
    board: Option<Board<'a>>,
    concurrency: Concurrency,
) -> Result<Ledger<'a>, i32> {
    install_signals();
    let ledger = config.open_ledger(board, concurrency);
    handler.start()?;
    Ok(ledger)
}

impl WorkerConfig {
    /// Opens the worker's [`Ledger`] on these terms, which takes the access log (and
    /// claims the slot). For a loop that is not [`run`]'s (Python's ASGI event loop).
    pub fn open_ledger<'a>(
        &mut self,
        board: Option<Board<'a>>,
        concurrency: Concurrency,
    ) -> Ledger<'a> {
        let terms = Terms {
            label: self.label.clone(),
            generation: self.generation,
            max_requests: self.max_requests,
            max_memory: self.max_memory,
            access_log: self.access_log.take(),
        };
        Ledger::open(terms, board, concurrency)
    }
}

/// Accepts on fd 0 and serves each connection, until the worker must stop; returns the
/// worker's exit code. A worker's threads ([`crate::threads`]) each run it.
pub(crate) fn accept_loop<H: Handler>(worker: &mut Worker<'_, H>, allowed: &[IpAddr]) -> i32 {
    while !worker.done() {
        let socket = match worker.handler.blocking(accept) {
            Ok(socket) => socket,
            // An HTTP pool made the shared listener non-blocking before a reload turned
            // it to FastCGI: this loop blocks in accept, so it makes it blocking again.
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) => {
                // SAFETY: fd 0 is the pool's listener for the worker's whole life.
                let listener = unsafe { std::os::fd::BorrowedFd::borrow_raw(0) };
                let blocking = nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty());
                let _ = nix::fcntl::fcntl(listener, blocking);
                continue;
            }
            Err(err) => match accept_failed(&err) {
                AcceptFailed::Again | AcceptFailed::Starved => continue,
                AcceptFailed::Closed => break,
                AcceptFailed::Failed => return 1,
            },
        };
        worker.ledger.connection();
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
    /// The access log is in the ledger.
    pub(crate) config: WorkerConfig,
    /// The worker's books, shared by all its loops (its threads, when it has several).
    pub(crate) ledger: &'a Ledger<'a>,
    /// The last connection's buffers, for the next one: nginx without `fastcgi_keep_conn`
    /// opens a connection per request, and new buffers (24 KiB zeroed) cost about 8,500
    /// instructions each time.
    pub(crate) buffers: Option<Buffers>,
}

impl<H: Handler> Worker<'_, H> {
    /// The worker must stop once the request in hand is served.
    pub(crate) fn done(&self) -> bool {
        self.ledger.must_stop()
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
            self.ledger.show_finishing();
            let bound = self
                .config
                .request_read_timeout
                .unwrap_or(KEPT_IDLE_TIMEOUT);
            let max_bytes = Limits::default().max_unread_body;
            conn.get_mut().linger_close(max_bytes, bound);
        } else {
            conn.get_mut().close_shedding();
        }
        self.ledger.show_idle();
    }

    fn serve_requests(&mut self, conn: &Conn) {
        loop {
            // From the accept, or from the first bytes of the next request on a kept
            // connection: the worker is busy reading, and the request's clock runs.
            let start_us = drover_scoreboard::now_us();
            self.ledger.show_reading(start_us);
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

    /// Runs one request whose params are read, and records it in the ledger. Returns
    /// whether the connection may serve another request.
    pub(crate) fn run_request(&mut self, conn: &Conn, mut request: Request, start_us: u64) -> bool {
        // The app sees the id every line about the request shows (HTTP_X_REQUEST_ID).
        self.ledger.identify(&mut request.params);
        // status_path and ping_path: answered here, never by the runtime (which is not
        // asked for their script either: drover-php would keep its decision for them).
        let builtin = self.config.builtin.as_ref();
        let asked = builtin.and_then(|b| Some((b, b.asked(&request.params)?)));
        let script = match asked {
            Some(_) => (request.params.get("SCRIPT_NAME"))
                .map(|name| String::from_utf8_lossy(name).into_owned()),
            None => self.handler.script(&request.params),
        };
        let mut ticket = self.ledger.begin(&request.params, script, start_us);
        conn.borrow_mut().keep_head(ticket.keeps_head());
        let id = request.id;
        let (keep, status, memory) = match asked {
            Some((builtin, asked)) => {
                let (keep, status) =
                    builtin.respond(asked, &request.params, &mut conn.borrow_mut());
                (keep, Some(status), None)
            }
            None => {
                let outcome = self.handler.handle(conn, request);
                let handler = &self.handler;
                (
                    outcome.keep,
                    handler.response_status(),
                    handler.request_memory(),
                )
            }
        };
        ticket.keep_head(conn.borrow().kept_head());
        self.ledger.end(ticket, status, memory);
        let conn = conn.borrow();
        if conn.get_ref().timed_out() {
            eprintln!(
                "dropped request {id}: its body did not arrive within request_read_timeout ({}); {} bytes received",
                show(self.config.request_read_timeout),
                conn.get_ref().received()
            );
            return false;
        }
        keep
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
