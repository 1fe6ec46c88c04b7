//! What every forked-worker runtime shares: the zygote's fork loop and one worker's
//! accept → FastCGI → handler loop. `drover-python` (WSGI on CPython) and `drover-php`
//! (embedded PHP) use it, each plugging its language in through two traits; this crate
//! depends on neither pyo3 nor libphp.
//!
//! - [`zygote`]: blocks the zygote's signals, keeps the pool's workers running, forks each
//!   through the runtime's [`zygote::Runtime`], reaps, backs off, gives out scoreboard
//!   slots, and reports starts and exits to the master.
//! - [`serve`]: one worker's life: accept on fd 0, serve a connection's requests through
//!   the runtime's [`serve::Handler`], keep connections nginx keeps, until the ledger says
//!   stop; `request_read_timeout`, the lingering close.
//! - [`ledger`]: a worker's books, the same for every loop (this one, [`threads`], the ASGI
//!   event loop, any caller that takes requests itself): a request begun from its params
//!   and ended with its status; the scoreboard slot (the oldest request in flight), the
//!   pool's histogram, the access log line, `max_requests` (requests handled),
//!   `max_memory`, and when the worker must stop.
//! - [`access`]: the pool's access log, a line per request written by the worker itself
//!   to the descriptor the master opened and passed to the zygote.
//! - [`request_id`]: each request's id (X-Request-Id, nginx's `$request_id`, or one the
//!   worker makes without a system call), stamped where the app sees it and given to
//!   every line about the request.
//! - [`builtin`]: php-fpm's `pm.status_path` and `ping.path`, answered on the pool's own
//!   socket before the runtime sees the request (the status fetched from the master).
//! - [`cpu`]: a request's CPU time, user and system, for the scoreboard and the log.
//! - [`threads`]: a worker whose threads each run that loop (`[python] threads`), sharing
//!   one ledger; its own thread watches for the worker's end and wakes the others.
//! - [`socket`]: an accepted connection, with the read budget and the lingering close.
//! - [`exchange`]: the connection a handler serves a request on, FastCGI or HTTP.
//! - [`http`]: `protocol = "http"`: HTTP/1.1 straight from clients, turned into the same
//!   CGI request cycle; idle keep-alive connections wait in an epoll set, not in a worker.
//! - [`tls`]: one TLS connection of such a pool (`certfile`), sans I/O, which the blocking
//!   WSGI socket and the ASGI worker's hub both drive.
//!
//! What a runtime keeps for itself: starting its interpreter and loading the app before the
//! first fork (after [`zygote::block_signals`]), the fork's own hooks, and running one
//! request. What the zygote and the master exchange is `drover_proto::zygote`; the FastCGI
//! codec is `drover_fastcgi`, the scoreboard `drover_scoreboard`.

pub mod access;
pub mod builtin;
pub mod cpu;
pub mod exchange;
pub mod http;
pub mod ledger;
pub mod request_id;
pub mod serve;
pub mod socket;
pub mod threads;
pub mod tls;
pub mod zygote;
