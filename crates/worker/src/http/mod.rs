//! `protocol = "http"`: the pool's workers speak HTTP/1.1 to clients themselves, with no
//! web server in front, as gunicorn's do. They accept on the pool's shared listener as a
//! FastCGI worker does; the master stays off the path.
//!
//! The runtimes do not change: an HTTP request becomes the CGI params a web server would
//! send over FastCGI ([`head`]), its body is read as the same stream (de-chunked), and the
//! CGI response the runtime writes becomes an HTTP response ([`response`]), through one
//! [`crate::exchange::Exchange`].
//!
//! An idle keep-alive connection must never pin a worker (slowloris costs file
//! descriptors, not workers): a worker keeps its idle connections and the listener in one
//! epoll set, reads heads without waiting until httparse says one is complete, and only
//! then runs the app (`listen.rs`).
//!
//! | file          | owns |
//! |---------------|------|
//! | `head.rs`     | the request head: httparse, the smuggling checks, limits, CGI params, X-Forwarded-* |
//! | `body.rs`     | the request body's framing, sans I/O: Content-Length or chunked, `max_request_body` |
//! | `incoming.rs` | a connection's input, sans I/O: the buffer, the heads, the body of the request in hand |
//! | `chunked.rs`  | the chunk-size line and the trailers, refusing what a front end could read otherwise |
//! | `response.rs` | the CGI head (or ASGI's status and headers) → HTTP head, and the response body's framing |
//! | `conn.rs`     | [`HttpConn`]: the socket's driver over `incoming`: 100-continue, the response, keep-alive |
//! | `listen.rs`   | the worker loop: the epoll set, accept, heads, pipelining, timeouts |

pub mod body;
pub mod chunked;
pub(crate) mod conn;
pub mod head;
pub mod incoming;
mod listen;
pub mod response;

use std::sync::Arc;
use std::time::Duration;

pub use conn::HttpConn;
pub use head::Trusted;
pub(crate) use listen::serve;

/// The pool's HTTP settings, as the zygote passes them to each worker.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `keepalive_timeout`: how long a kept connection may idle between two requests.
    pub keepalive_timeout: Duration,
    /// `forwarded_allow_ips`: the peers whose X-Forwarded-For/-Proto are believed.
    pub trusted: Trusted,
    /// `max_request_body`: larger bodies are refused (413); None: no bound.
    pub max_body: Option<u64>,
    /// `send_timeout`: a response write that makes no progress this long ends the
    /// connection.
    pub send_timeout: Duration,
    /// `certfile`: the listener speaks TLS with this config (built once, in the zygote,
    /// from the memfd the master wrote); None: plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// The pool's HTTP settings from the zygote's terms (and, with `tls_fd`, the
/// certificate and key in the memfd there, taken: call this once); Ok(None) for a FastCGI
/// pool. Err: the TLS memfd cannot be read or used (the master checked the same files).
pub fn config(args: &drover_proto::zygote::ZygoteArgs) -> Result<Option<HttpConfig>, String> {
    if args.protocol != drover_proto::zygote::Protocol::Http {
        return Ok(None);
    }
    let tls = match args.tls_fd {
        None => None,
        Some(fd) => {
            use drover_proto::tls;
            let material = tls::Material::from_fd(fd)
                .map_err(|e| format!("cannot read the TLS memfd: {e}"))?;
            let settings = tls::Settings {
                cert_reqs: args.cert_reqs,
                ciphers: args.ciphers.clone(),
                min_version: args.ssl_version,
            };
            let config = tls::server_config(&material, &settings)
                .map_err(|p| format!("{}: {}", p.part.key(), p.reason))?;
            Some(Arc::new(config))
        }
    };
    let trusted = if args.forwarded_allow_ips.iter().any(|ip| ip == "*") {
        Trusted::Any
    } else {
        // The master checked each address at load.
        Trusted::Ips(
            args.forwarded_allow_ips
                .iter()
                .filter_map(|ip| ip.parse().ok())
                .collect(),
        )
    };
    Ok(Some(HttpConfig {
        keepalive_timeout: Duration::from_millis(args.keepalive_timeout_ms),
        trusted,
        max_body: args.max_request_body,
        send_timeout: Duration::from_millis(args.send_timeout_ms),
        tls,
    }))
}

/// How long a request head may take to arrive when `request_read_timeout` is off: a
/// trickling client holds only a file descriptor, but not forever.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(60);
