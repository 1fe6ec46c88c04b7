//! The HTTP side: binding the control socket and the pools' `status_listen` sockets, and
//! serving them (hyper, HTTP/1.1) as tasks on the master's runtime.
//!
//! Binding is separate from serving so that the master binds everything before it spawns a
//! worker (a socket in use stops drover at start, not later), then serves inside its
//! runtime. Each request is routed (`route.rs`), the master is asked over the channel
//! when needed, and its [`ControlReply`] becomes the response. The server holds no state of
//! the master's: every answer is fresh.

use std::convert::Infallible;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::health::{self, LIVE_TIMEOUT};
use super::model::PoolStatus;
use super::render::{self, Exposition};
use super::request::{ControlReply, ControlRequest, Format, ToMaster};
use super::route::{self, Refusal, Route, Scope};
use crate::config::{ListenAddr, Pool};
use crate::listener::{ListenError, Listener};

/// The control socket's mode unless told otherwise: it can reload and resize pools.
pub const DEFAULT_MODE: u32 = 0o600;
/// Bodies are a few `KEY=VALUE` lines; anything larger is a mistake.
const MAX_BODY: usize = 64 * 1024;
/// A connection that sends no complete request head in this long is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The master answers from its loop within a tick; past this it is stuck, and the client
/// gets a 504 instead of waiting forever.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The connections one server (the control socket, a `status_listen`, `health_listen`)
/// keeps open at once. A new one past it closes the oldest: a client holding idle
/// connections can neither exhaust the master's descriptors nor keep kubelet's probe,
/// which connects anew each time, from being answered (`Connections`).
pub const MAX_CONNECTIONS: usize = 256;

/// The bound control socket, not yet served.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    file: SocketFile,
}

impl ControlSocket {
    /// Binds `path` with `mode` (use [`DEFAULT_MODE`]). A stale socket file is replaced; a
    /// live one (another drover) is an error, as is a file that is not a socket.
    pub fn bind(path: &Path, mode: u32) -> Result<ControlSocket, ListenError> {
        let addr = ListenAddr::Unix(path.to_owned());
        crate::listener::check_stale(&addr, path)?;
        let listener = bind_private(&addr, path, mode)?;
        Ok(ControlSocket {
            listener,
            file: SocketFile(path.to_owned()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.file.0
    }

    /// Serves every route, asking `master`. Call within the master's tokio runtime.
    pub fn serve(self, master: ToMaster) -> Served {
        let handler = Arc::new(Handler {
            master,
            scope: Scope::Control,
        });
        let task = tokio::spawn(accept_loop(Accepting::unix(self.listener), handler));
        Served {
            task,
            _file: Some(self.file),
        }
    }
}

/// A pool's bound `status_listen` socket, not yet served.
#[derive(Debug)]
pub struct StatusSocket {
    pool: String,
    /// As bound: a TCP port 0 is the port the kernel chose.
    addr: ListenAddr,
    listener: Bound,
    /// The pool's `listen_allowed_clients`, applied to TCP clients here too.
    allowed: Vec<IpAddr>,
}

#[derive(Debug)]
enum Bound {
    Unix(UnixListener, SocketFile),
    Tcp(std::net::TcpListener),
}

impl StatusSocket {
    /// Binds the pool's `status_listen`, if it has one, with the pool's own backlog, owner,
    /// group and mode (so that whoever may talk to the pool may read its status).
    pub fn bind(pool: &Pool) -> Result<Option<StatusSocket>, ListenError> {
        let Some(addr) = pool.status_listen.clone() else {
            return Ok(None);
        };
        let bound = Listener::bind(&Pool {
            listen: addr.clone(),
            ..pool.clone()
        })?;
        let (listener, addr) = match addr {
            ListenAddr::Unix(path) => (
                Bound::Unix(UnixListener::from(bound.fd), SocketFile(path.clone())),
                ListenAddr::Unix(path),
            ),
            // `status_listen` is an address (config::listen), never no socket.
            ListenAddr::NoSocket => return Ok(None),
            ListenAddr::Tcp(_) | ListenAddr::AnyAddress(_) => {
                let listener = std::net::TcpListener::from(bound.fd);
                let local = listener
                    .local_addr()
                    .map_err(io_error(&bound.addr, "getsockname"))?;
                (Bound::Tcp(listener), ListenAddr::Tcp(local))
            }
        };
        Ok(Some(StatusSocket {
            pool: pool.name.clone(),
            addr,
            listener,
            allowed: pool.listen_allowed_clients.clone(),
        }))
    }

    pub fn addr(&self) -> &ListenAddr {
        &self.addr
    }

    /// Serves `/status` and `/ping` for this pool, asking `master`. Call within the
    /// master's tokio runtime.
    pub fn serve(self, master: ToMaster) -> Served {
        let handler = Arc::new(Handler {
            master,
            scope: Scope::Status { pool: self.pool },
        });
        let (accepting, file) = match self.listener {
            Bound::Unix(listener, file) => (Accepting::unix(listener), Some(file)),
            Bound::Tcp(listener) => (Accepting::tcp(listener, self.allowed), None),
        };
        let task = tokio::spawn(accept_loop(accepting, handler));
        Served { task, _file: file }
    }
}

/// The bound `health_listen` socket, not yet served: `/livez`, `/readyz` and `/ping` for
/// Kubernetes' httpGet probes (or a container's HEALTHCHECK, on a unix socket).
#[derive(Debug)]
pub struct HealthSocket {
    addr: ListenAddr,
    listener: Bound,
}

impl HealthSocket {
    /// Binds `addr`: TCP (a bare port: every address, IPv6 and IPv4), or a unix socket
    /// anyone may connect to (mode 0666: it tells only whether drover is up).
    pub fn bind(addr: &ListenAddr) -> Result<HealthSocket, ListenError> {
        let tcp = |at: std::net::SocketAddr| {
            std::net::TcpListener::bind(at).map_err(io_error(addr, "bind"))
        };
        let listener = match addr {
            ListenAddr::Unix(path) => {
                crate::listener::check_stale(addr, path)?;
                let listener = bind_private(addr, path, 0o666)?;
                Bound::Unix(listener, SocketFile(path.clone()))
            }
            ListenAddr::Tcp(at) => Bound::Tcp(tcp(*at)?),
            ListenAddr::AnyAddress(port) => Bound::Tcp(
                tcp((std::net::Ipv6Addr::UNSPECIFIED, *port).into())
                    .or_else(|_| tcp((std::net::Ipv4Addr::UNSPECIFIED, *port).into()))?,
            ),
            // A background pool's "no socket": never what health_listen parses to.
            ListenAddr::NoSocket => {
                let none = std::io::Error::from(std::io::ErrorKind::InvalidInput);
                return Err(io_error(addr, "bind")(none));
            }
        };
        let addr = match &listener {
            Bound::Tcp(tcp) => {
                ListenAddr::Tcp(tcp.local_addr().map_err(io_error(addr, "getsockname"))?)
            }
            Bound::Unix(..) => addr.clone(),
        };
        Ok(HealthSocket { addr, listener })
    }

    /// As bound: a TCP port 0 is the port the kernel chose.
    pub fn addr(&self) -> &ListenAddr {
        &self.addr
    }

    /// Serves the probes, asking `master`. Call within the master's tokio runtime.
    pub fn serve(self, master: ToMaster) -> Served {
        let handler = Arc::new(Handler {
            master,
            scope: Scope::Health,
        });
        let (accepting, file) = match self.listener {
            Bound::Unix(listener, file) => (Accepting::unix(listener), Some(file)),
            Bound::Tcp(listener) => (Accepting::tcp(listener, Vec::new()), None),
        };
        let task = tokio::spawn(accept_loop(accepting, handler));
        Served { task, _file: file }
    }
}

/// A running server. Dropping it stops accepting and removes its socket file; requests in
/// flight finish on their own tasks.
#[derive(Debug)]
pub struct Served {
    task: JoinHandle<()>,
    _file: Option<SocketFile>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Owns a unix socket's file: removed when dropped.
#[derive(Debug)]
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn io_error(addr: &ListenAddr, what: &'static str) -> impl FnOnce(std::io::Error) -> ListenError {
    let addr = addr.clone();
    move |source| ListenError::Io { addr, what, source }
}

/// Binds in a fresh private folder beside `path`, sets the mode, then renames the socket
/// into place. A socket bound straight at `path` would exist with the umask's mode until the
/// chmod, and a client that connected in that moment would keep its connection; the rename
/// also replaces a stale file in one step.
fn bind_private(addr: &ListenAddr, path: &Path, mode: u32) -> Result<UnixListener, ListenError> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = parent.join(format!(".drover-ctl.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).map_err(io_error(addr, "create staging folder"))?;
    let bound = (|| {
        std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o700))?;
        let staged = staging.join("s");
        let listener = UnixListener::bind(&staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    let listener = bound.map_err(io_error(addr, "bind"))?;
    listener
        .set_nonblocking(true)
        .map_err(io_error(addr, "set non-blocking"))?;
    Ok(listener)
}

/// The two kinds of listener, behind one accept.
enum Accepting {
    Unix(std::io::Result<tokio::net::UnixListener>),
    Tcp(std::io::Result<tokio::net::TcpListener>, Vec<IpAddr>),
}

impl Accepting {
    fn unix(listener: UnixListener) -> Accepting {
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixListener::from_std(listener));
        Accepting::Unix(listener)
    }

    fn tcp(listener: std::net::TcpListener, allowed: Vec<IpAddr>) -> Accepting {
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener));
        Accepting::Tcp(listener, allowed)
    }
}

async fn accept_loop(incoming: Accepting, handler: Arc<Handler>) {
    let connections = Connections::new(MAX_CONNECTIONS);
    // The loops never end; only a listener tokio could not take reaches the log line.
    let err = match incoming {
        Accepting::Unix(Ok(listener)) => loop {
            match listener.accept().await {
                Ok((stream, _)) => connections.admit(stream, &handler),
                Err(err) => accept_failed(err).await,
            }
        },
        Accepting::Tcp(Ok(listener), allowed) => loop {
            match listener.accept().await {
                Ok((stream, peer)) if peer_allowed(peer.ip(), &allowed) => {
                    connections.admit(stream, &handler)
                }
                Ok((_, peer)) => {
                    tracing::warn!(
                        "status: refused a connection from {}: not in listen_allowed_clients",
                        peer.ip()
                    )
                }
                Err(err) => accept_failed(err).await,
            }
        },
        Accepting::Unix(Err(err)) | Accepting::Tcp(Err(err), _) => err,
    };
    tracing::error!("control: cannot serve: {err}");
}

fn peer_allowed(ip: IpAddr, allowed: &[IpAddr]) -> bool {
    allowed.is_empty() || allowed.contains(&ip) || allowed.contains(&ip.to_canonical())
}

/// Out of descriptors or memory: pause instead of spinning on the same error.
async fn accept_failed(err: std::io::Error) {
    tracing::warn!("control: accept failed: {err}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The open connections of one server, oldest first, at most `cap` of them: admitting one
/// past the cap aborts the oldest's task, which closes it. The oldest is the one most
/// likely idle (a request is answered within a tick, or [`REPLY_TIMEOUT`]).
struct Connections {
    cap: usize,
    open: Arc<std::sync::Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    next: u64,
    tasks: std::collections::VecDeque<(u64, tokio::task::AbortHandle)>,
    /// Connections closed to make room, logged once per [`EVICTIONS_LOGGED`].
    evicted: u64,
}

/// One line per this many connections closed to make room.
const EVICTIONS_LOGGED: u64 = 1000;

impl Connections {
    fn new(cap: usize) -> Connections {
        Connections {
            cap,
            open: Arc::default(),
        }
    }

    fn admit<IO>(&self, io: IO, handler: &Arc<Handler>)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut open = lock(&self.open);
        while open.tasks.len() >= self.cap {
            let Some((_, oldest)) = open.tasks.pop_front() else {
                break;
            };
            oldest.abort();
            if open.evicted.is_multiple_of(EVICTIONS_LOGGED) {
                tracing::warn!(
                    "control: {} connections open on one socket: the oldest closed for a new one \
                     ({} so far)",
                    self.cap,
                    open.evicted + 1
                );
            }
            open.evicted += 1;
        }
        let id = open.next;
        open.next += 1;
        let served = Arc::clone(&self.open);
        let task = spawn_connection(io, handler.clone(), move || {
            lock(&served).tasks.retain(|(open, _)| *open != id);
        });
        open.tasks.push_back((id, task.abort_handle()));
    }
}

fn lock(open: &std::sync::Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    // The lock is only held to push or remove an entry: a panic cannot leave it torn.
    open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves one connection on a task of its own; `done` runs when it ends by itself.
fn spawn_connection<IO>(
    io: IO,
    handler: Arc<Handler>,
    done: impl FnOnce() + Send + 'static,
) -> JoinHandle<()>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let service = service_fn(move |request| {
            let handler = handler.clone();
            async move { Ok::<_, Infallible>(handler.handle(request).await) }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(io), service);
        if let Err(err) = connection.await {
            tracing::debug!("control: connection ended: {err}");
        }
        done();
    })
}

struct Handler {
    master: ToMaster,
    scope: Scope,
}

impl Handler {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) if err.is::<http_body_util::LengthLimitError>() => {
                return error(413, &format!("the body is over {MAX_BODY} bytes"));
            }
            Err(err) => return error(400, &format!("cannot read the body: {err}")),
        };
        let route = route::route(
            parts.method.as_str(),
            parts.uri.path(),
            parts.uri.query(),
            &body,
            &self.scope,
        );
        match route {
            Err(refusal) => refused(refusal),
            Ok(Route::Ping) => plain(200, "text/plain; charset=utf-8", "pong".into()),
            Ok(Route::Live) => match self.ask_within(ControlRequest::Live, LIVE_TIMEOUT).await {
                ControlReply::Ok(_) => plain(200, "text/plain; charset=utf-8", "ok\n".into()),
                ControlReply::Error { message, .. } => plain(
                    503,
                    "text/plain; charset=utf-8",
                    format!("[-]master loop: {message}\nlivez check failed\n"),
                ),
                reply => unexpected(reply),
            },
            Ok(Route::Ready { verbose }) => {
                let (status, body) = if health::stopping() {
                    health::render_stopping()
                } else {
                    match self.ask_within(ControlRequest::Ready, LIVE_TIMEOUT).await {
                        ControlReply::Ready(readiness) => health::render_ready(&readiness, verbose),
                        ControlReply::Error { message, .. } => (
                            503,
                            format!("[-]master loop: {message}\nreadyz check failed\n"),
                        ),
                        reply => return unexpected(reply),
                    }
                };
                plain(status, "text/plain; charset=utf-8", body)
            }
            Ok(Route::Status { pool, format, full }) => {
                let one = pool.is_some();
                match self.ask(ControlRequest::Status { pool }).await {
                    ControlReply::Status(pools) => status(&pools, format, full, one),
                    reply => unexpected(reply),
                }
            }
            Ok(Route::Metrics { pool, full }) => {
                let accept = parts.headers.get(hyper::header::ACCEPT);
                let exposition = Exposition::from_accept(accept.and_then(|a| a.to_str().ok()));
                match self.ask(ControlRequest::Status { pool }).await {
                    ControlReply::Status(pools) => plain(
                        200,
                        exposition.content_type(),
                        render::metrics(&pools, full, exposition),
                    ),
                    reply => unexpected(reply),
                }
            }
            Ok(Route::Master(request)) => {
                let config = matches!(request, ControlRequest::Config { .. });
                match self.ask(request).await {
                    ControlReply::Ok(text) if config => {
                        plain(200, "text/plain; charset=utf-8", text)
                    }
                    ControlReply::Ok(message) => {
                        json(200, &serde_json::json!({ "message": message }))
                    }
                    reply => unexpected(reply),
                }
            }
        }
    }

    /// The master's answer; a 503 or 504 as an error reply when it cannot give one.
    async fn ask(&self, request: ControlRequest) -> ControlReply {
        self.ask_within(request, REPLY_TIMEOUT).await
    }

    async fn ask_within(&self, request: ControlRequest, timeout: Duration) -> ControlReply {
        let (reply, answer) = oneshot::channel();
        let asked = async {
            self.master.send((request, reply)).await.ok()?;
            answer.await.ok()
        };
        match tokio::time::timeout(timeout, asked).await {
            Ok(Some(reply)) => reply,
            Ok(None) => ControlReply::Error {
                status: 503,
                message: "the master is not taking requests (stopping?)".into(),
            },
            Err(_) => ControlReply::Error {
                status: 504,
                message: format!(
                    "the master did not answer within {}",
                    humantime::format_duration(timeout)
                ),
            },
        }
    }
}

/// Asked for one pool, the JSON is php-fpm's single object; for every pool, an array.
fn status(pools: &[PoolStatus], format: Format, full: bool, one: bool) -> Response<Full<Bytes>> {
    let body = match (format, pools) {
        (Format::Text, _) => render::text(pools, full),
        (Format::Json, [pool]) if one => render::json_pool(pool, full),
        (Format::Json, _) => render::json(pools, full),
        (Format::OpenMetrics, _) => render::openmetrics(pools, full),
    };
    plain(200, format.content_type(), body)
}

fn unexpected(reply: ControlReply) -> Response<Full<Bytes>> {
    match reply {
        ControlReply::Error { status, message } => error(status, &message),
        other => error(
            500,
            &format!("the master gave an answer of the wrong kind: {other:?}"),
        ),
    }
}

fn refused(refusal: Refusal) -> Response<Full<Bytes>> {
    let mut response = error(refusal.status, &refusal.message);
    if let Some(allow) = refusal.allow {
        response.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static(allow),
        );
    }
    response
}

/// `{"error": message}` with `status`; a status that is not an error becomes 500.
fn error(status: u16, message: &str) -> Response<Full<Bytes>> {
    let status = if (400..=599).contains(&status) {
        status
    } else {
        500
    };
    json(status, &serde_json::json!({ "error": message }))
}

fn json(status: u16, value: &serde_json::Value) -> Response<Full<Bytes>> {
    plain(status, "application/json", format!("{value}\n"))
}

/// Status and ping must never be cached by a proxy in between (php-fpm's headers).
fn plain(status: u16, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .header(
            hyper::header::CACHE_CONTROL,
            "no-cache, no-store, must-revalidate, max-age=0",
        )
        .header(hyper::header::EXPIRES, "Thu, 01 Jan 1970 00:00:00 GMT")
        .body(Full::new(Bytes::from(body)))
        // Every part above is a valid constant or a checked status code.
        .expect("valid response")
}
