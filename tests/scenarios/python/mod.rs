//! Python WSGI pools behind nginx: the plain WSGI fixture (`tests/apps/wsgi_app.py`)
//! and the Flask one (`tests/apps/flask_app.py`), each test with its own drover and nginx.
//!
//! - [`requests`]: what reaches the app: query, form, a 10 MB upload, unicode, a mount.
//! - [`responses`]: what reaches the client: 10 MB, streaming, repeated headers, write(),
//!   HEAD, close() on every request.
//! - [`errors`]: exc_info, wsgi.errors, app exceptions, bad heads, an app that cannot load.
//! - [`workers`]: SIGKILL of a worker and of the zygote, max_requests, TERM.
//! - [`pep3333`]: an app wrapped in `wsgiref.validate` behind stock nginx: GET, POST, HEAD.
//! - [`http_pool`]: `protocol = "http"`, no nginx: keep-alive, pipelining, chunked, 100-continue,
//!   refused heads, 1,000 idle connections, X-Forwarded-For, a client gone mid-body.
//! - [`https`]: `certfile` on the HTTP listener: the pool's certificate, ALPN, client
//!   certificates, bad files refused at load and on reload, a renewed certificate, and the
//!   hostile clients over TLS (mid-handshake, plain HTTP, a huge ClientHello, trickling,
//!   the smuggling shapes, clients that never read), and `drover serve --certfile`.
//! - [`interpreter`]: the app's `sys.prefix` is drover's Python, or the virtualenv drover is
//!   installed in, whatever `python3` is first on `PATH`.
//! - [`factory`]: `app = "module:create_app(...)"`, as gunicorn takes it.
//! - [`hooks`]: a gunicorn.conf.py as the hooks file: each hook at its moment.
//! - [`abort`]: a request past `request_terminate_timeout` is aborted from inside first.
//! - [`threads`]: `threads = N`: N sleeping requests overlap on one worker (WSGI, Flask),
//!   max_requests, TERM, request_terminate_timeout, the access log and the status with
//!   threads, a bad value refused at load.
//! - [`asgi`]: `interface = "asgi"`: FastAPI and bare ASGI apps, lifespan, concurrency on
//!   one worker, disconnects, max_requests, request_read_timeout, the status, the slowlog,
//!   a graceful stop with requests in flight, a reload, hooks, asyncio without uvloop.
//! - [`asgi_reload`]: reloads under load through nginx keeping its connections
//!   (`keepalive 8`, `fastcgi_keep_conn on`) lose no request of an ASGI pool.
//! - [`asgi_http`]: an ASGI pool on `protocol = "http"`, no nginx: FastAPI, keep-alive,
//!   pipelining, chunked upload with 100-continue, refused heads, lifespan, WebSockets.
//! - [`asgi_limits`]: what a hostile client costs an ASGI worker on HTTP: WebSocket messages
//!   past `ws_max_size` (1009), text that is not UTF-8 (1007), pipelining without reading.
//! - [`django`]: a Django 5 project through its ASGI handler, behind nginx and on HTTP:
//!   path converters under a mount, a form POST with CSRF, a 4 MB multipart upload,
//!   streaming, a view cancelled on disconnect, connections freed on asgiref's thread.

mod abort;
mod asgi;
mod asgi_http;
mod asgi_limits;
mod asgi_reload;
mod django;
mod errors;
mod factory;
mod hooks;
mod http_hostile;
mod http_pool;
mod https;
mod interpreter;
mod lifecycle;
mod pep3333;
mod requests;
mod responses;
mod threads;
mod workers;

use std::collections::BTreeMap;

use crate::common::{PythonPool, Site, Stack, http};

/// The plain WSGI app as pool `py` with `max_children` workers.
fn wsgi_stack(max_children: u32) -> Stack {
    Stack::python(
        Site::new(),
        PythonPool::wsgi("py").max_children(max_children),
    )
}

/// A `name=value` per line body as a map; asserts a 200 first.
fn fields(reply: &http::Reply) -> BTreeMap<String, String> {
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    let lines = reply.body.lines().filter_map(|l| l.split_once('='));
    lines.map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn field<'a>(fields: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    fields
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no {key} in {fields:#?}"))
}

/// GET /pid: asserts a 200 and returns the pid of the worker that served it. A failure
/// shows drover's log.
fn served_by(stack: &Stack) -> i32 {
    let log = || stack.drover.log.text();
    let reply =
        http::try_get(&stack.url("/pid")).unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    assert_eq!(reply.status, 200, "reply: {reply:?}; log:\n{}", log());
    reply
        .body
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {reply:?}"))
}

/// Reproducible upload and download bytes.
fn noise(len: usize) -> Vec<u8> {
    crate::common::bytes::noise(len, 0x2545_F491_4F6C_DD1D)
}

fn sha256(site: &Site, bytes: &[u8]) -> String {
    crate::common::bytes::digest(site, "sha256sum", bytes)
}
