//! FastCGI, the responder side: what a drover worker speaks to nginx.
//!
//! A sans-I/O core and a blocking driver (no tokio): [`Decoder`] takes bytes and gives
//! [`Event`]s, deciding everything the protocol asks of a responder; a worker accepts a
//! socket, wraps it in a [`Connection`] (which drives the core from the socket) and serves
//! requests from it in a plain loop. An event loop drives [`Decoder`] itself (the ASGI
//! worker's). On a [`ProtocolError`] the caller logs the reason and closes that
//! connection; nothing here panics on any input.
//!
//! | file            | owns |
//! |-----------------|------|
//! | `record.rs`     | the 8-byte header, record types, BEGIN/END_REQUEST and UNKNOWN_TYPE bodies |
//! | `params.rs`     | name-value pairs (1- and 4-byte lengths) and [`Params`], a request's variables |
//! | `management.rs` | the answer to FCGI_GET_VALUES |
//! | `decoder.rs`    | the protocol, sans I/O: [`Decoder`] |
//! | `decoder/event.rs` | what it is given and gives: [`Limits`], [`Event`], [`Reply`], [`Request`] |
//! | `input.rs`      | the read buffer |
//! | `output.rs`     | turning output into records with few `write()` calls; why records are unpadded |
//! | `wire.rs`       | the socket with both buffers: reads, writes, flush before blocking |
//! | `connection.rs` | the blocking driver: [`Connection`] (one connection's request cycle), [`Buffers`] |
//! | `connection/pull.rs` | the driver's loop: socket → decoder, replies → socket, the bypass for large bodies |
//! | `connection/stdin.rs` | the request body, streamed: [`Stdin`], ABORT_REQUEST |
//! | `error.rs`      | [`ProtocolError`]: why a connection had to end, as a log line reads it |
//! | `tests/`        | the core fed whole and cut, connection scenarios, malformed input, fuzzing, a real unix socket |
//!
//! What the worker around it must do (measured behind nginx 1.22):
//! - Close the socket as soon as a request without FCGI_KEEP_CONN is finished: nginx ends
//!   such a response only when the connection closes. If the app left body unread
//!   ([`Connection::body_unread`]), shut the sending side down first and read what is left
//!   until nginx closes (bounded): nginx stops sending a body once it has the response,
//!   and a close with input unread resets the connection under the response.
//! - Bound the time a request may take to arrive (a slow client holds the worker
//!   otherwise): the socket's reads fail with `TimedOut` or `WouldBlock`, which end the
//!   connection with [`ProtocolError::Timeout`].
//! - With `fastcgi_keep_conn on`, a worker waits on its kept connection between requests and
//!   accepts no other: the idle connections nginx caches (`keepalive` per nginx worker
//!   process) must stay below the pool's worker count, or the worker closes a kept
//!   connection that idles past a bound ([`ProtocolError::is_idle_timeout`], for a worker
//!   that bounds that wait with a socket read timeout).
//! - Write errors come back as `io::Error` (EPIPE when nginx gave up): SIGPIPE must stay
//!   ignored, as Rust binaries have it.
//!
//! ```no_run
//! use drover_fastcgi::{Connection, Limits};
//! # fn serve(listener: std::os::unix::net::UnixListener) -> std::io::Result<()> {
//! for stream in listener.incoming() {
//!     let mut connection = Connection::new(stream?, Limits::default());
//!     loop {
//!         let request = match connection.next_request() {
//!             Ok(Some(request)) => request,
//!             Ok(None) => break,
//!             Err(err) => { eprintln!("closing the connection: {err}"); break }
//!         };
//!         let mut body = Vec::new();
//!         std::io::Read::read_to_end(&mut connection.stdin(), &mut body)?;
//!         connection.write_stdout(b"Content-Type: text/plain\r\n\r\nhello")?;
//!         if !connection.finish(0)? {
//!             break;
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod connection;
mod decoder;
mod error;
mod input;
mod management;
mod output;
mod params;
mod record;
mod wire;

#[cfg(test)]
mod tests;

pub use connection::{Buffers, Connection, Stdin, discard_body};
pub use decoder::{Decoder, Event, Limits, Reply, Request};
pub use error::{NameValueError, Phase, ProtocolError};
pub use management::get_values_result;
pub use params::{Iter as ParamsIter, NameValues, Params, encode_pair, name_values};
pub use record::{
    BadVersion, BeginRequestBody, HEADER_LEN, Header, KEEP_CONN, MAX_CONTENT_LEN, ProtocolStatus,
    RecordType, Role, VERSION_1, end_request_body, unknown_type_body,
};
