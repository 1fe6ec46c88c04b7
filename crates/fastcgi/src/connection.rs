//! The responder side of one FastCGI connection, for a worker's plain blocking loop:
//! `next_request` → read the body through `stdin` → `write_stdout` → `finish`, then again
//! while the web server keeps the connection open.
//!
//! A driver over [`Decoder`], which decides what every record means (management answers,
//! refusals, aborts, the body a finished request left): this file reads the socket into
//! it, writes its replies, and keeps what belongs to the app's side of a request (its id,
//! whether STDERR was used, a failed body read).

mod pull;
mod stdin;

use std::io::{self, Read, Write};

use pull::Step;
pub use stdin::{Stdin, discard_body};

use super::decoder::{Decoder, Limits, Request};
use super::error::ProtocolError;
use super::input::Input;
use super::output::Output;
use super::params::Params;
use super::record::{ProtocolStatus, RecordType, end_request_body};
use super::wire::Wire;

/// A connection's buffers (16 KiB, plus the params of the last recycled request), passed
/// from one connection to the next so that a worker given a new connection per request
/// (nginx without `fastcgi_keep_conn`) allocates nothing per request:
///
/// ```no_run
/// # use drover_fastcgi::{Buffers, Connection, Limits};
/// # fn serve(listener: std::os::unix::net::UnixListener) -> std::io::Result<()> {
/// let mut buffers = Buffers::new();
/// for stream in listener.incoming() {
///     let mut connection = Connection::with_buffers(stream?, Limits::default(), buffers);
///     // ... serve its requests ...
///     let (stream, reusable) = connection.into_parts();
///     drop(stream); // closed now: the web server waits for it to end the response
///     buffers = reusable;
/// }
/// # Ok(())
/// # }
/// ```
pub struct Buffers {
    input: Input,
    output: Output,
    params: Params,
}

impl Buffers {
    pub fn new() -> Buffers {
        Buffers {
            input: Input::new(),
            output: Output::new(),
            params: Params::default(),
        }
    }
}

impl Default for Buffers {
    fn default() -> Buffers {
        Buffers::new()
    }
}

/// One accepted connection. `S` is the socket: a `UnixStream`, a `TcpStream`, or anything
/// `Read + Write` (tests use memory).
pub struct Connection<S> {
    /// The socket and its buffers; owned, so the connection closes when it is dropped.
    wire: Wire<S>,
    /// What the records mean: the protocol's state.
    decoder: Decoder,
    /// The request between `next_request` and `finish`.
    current: Option<Current>,
    /// Reading the body hit a protocol or socket error; reads keep failing.
    failed: bool,
    /// No further request on this connection: the peer closed, a protocol or socket error,
    /// or a request without FCGI_KEEP_CONN was finished.
    closed: bool,
}

struct Current {
    id: u16,
    keep_conn: bool,
    /// Something was written to STDERR, so the stream is closed by an empty record.
    stderr_used: bool,
}

impl<S: Read + Write> Connection<S> {
    pub fn new(stream: S, limits: Limits) -> Connection<S> {
        Connection::with_buffers(stream, limits, Buffers::new())
    }

    /// A connection that uses the buffers of a previous one (see [`Buffers`]).
    pub fn with_buffers(stream: S, limits: Limits, buffers: Buffers) -> Connection<S> {
        let Buffers {
            input,
            output,
            params,
        } = buffers;
        Connection {
            wire: Wire::new(stream, input, output),
            decoder: Decoder::with_params(limits, params),
            current: None,
            failed: false,
            closed: false,
        }
    }

    /// Takes back a served request, so that the next request's params are read into its
    /// buffers instead of new ones. Optional; it saves two allocations per request.
    pub fn recycle(&mut self, request: Request) {
        self.decoder.recycle(request.params);
    }

    /// Reads records until a request's BEGIN_REQUEST and whole PARAMS stream are here.
    /// `Ok(None)`: the connection is over (the web server closed it between requests, or
    /// the last request did not set FCGI_KEEP_CONN). On `Err` the caller logs the reason
    /// and drops the connection.
    pub fn next_request(&mut self) -> Result<Option<Request>, ProtocolError> {
        if let Some(current) = &self.current {
            return Err(ProtocolError::RequestNotFinished {
                request_id: current.id,
            });
        }
        if self.closed {
            return Ok(None);
        }
        let result = self.read_request();
        if !matches!(result, Ok(Some(_))) {
            self.closed = true;
            self.current = None;
        }
        result
    }

    /// Sends response data. Writes that fit in the connection's 8 KiB buffer are held
    /// there until [`Self::flush`] or [`Self::finish`], so that a small response costs one
    /// `write()`: call `flush` when the app yields a chunk that must reach the client now.
    pub fn write_stdout(&mut self, data: &[u8]) -> io::Result<()> {
        self.write_stream(RecordType::Stdout, data)
    }

    /// Sends text for the web server's error log (nginx logs it as "FastCGI sent in
    /// stderr"). Buffered like [`Self::write_stdout`].
    pub fn write_stderr(&mut self, data: &[u8]) -> io::Result<()> {
        if let Some(current) = &mut self.current {
            current.stderr_used |= !data.is_empty();
        }
        self.write_stream(RecordType::Stderr, data)
    }

    /// Writes what `write_stdout` and `write_stderr` buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        let result = self.wire.flush();
        self.closed |= result.is_err();
        result
    }

    /// Ends the request: an empty STDOUT record (and STDERR, if used), END_REQUEST with
    /// `app_status` (the CGI exit status; 0 = success), then flushes. Returns whether the
    /// connection stays open for another request; if not, the caller closes it.
    ///
    /// A body the app did not read is not waited for: the next `next_request` skips it, or,
    /// on a connection that ends here, [`Self::body_unread`] tells the caller to close it
    /// with a lingering close.
    pub fn finish(&mut self, app_status: u32) -> io::Result<bool> {
        let current = self.current.take().ok_or_else(no_request)?;
        let id = current.id;
        self.wire.push(RecordType::Stdout, id, b"");
        if current.stderr_used {
            self.wire.push(RecordType::Stderr, id, b"");
        }
        self.push_end_request(id, app_status, ProtocolStatus::RequestComplete);
        // A failed body read has set `closed` already: nothing more is read.
        if !self.failed {
            self.decoder.finish();
        }
        self.closed |= !current.keep_conn;
        self.flush()?;
        Ok(!self.closed)
    }

    /// Whether the last finished request's body had not ended. Closing the socket with
    /// input unread makes the kernel reset the connection, and the web server may then lose
    /// the response it has not read yet: the caller shuts its side down first (the web
    /// server sees the response end at once), then reads what is left until the web server
    /// closes (php-cgi's `fcgi_close` does the same).
    pub fn body_unread(&self) -> bool {
        self.decoder.body_unread()
    }

    pub fn get_ref(&self) -> &S {
        &self.wire.stream
    }

    /// For socket options (read timeout, TCP_NODELAY); reading or writing through it
    /// would desynchronise the records.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.wire.stream
    }

    /// The socket, for a lingering close after the last request. Unflushed output is lost.
    pub fn into_inner(self) -> S {
        self.into_parts().0
    }

    /// The socket and the buffers, for the next connection. Unflushed output is lost.
    pub fn into_parts(self) -> (S, Buffers) {
        let (stream, input, output) = self.wire.into_parts();
        (
            stream,
            Buffers {
                input,
                output,
                params: self.decoder.into_params(),
            },
        )
    }

    fn read_request(&mut self) -> Result<Option<Request>, ProtocolError> {
        loop {
            match self.pull(&mut [])? {
                Step::Request(request) => {
                    self.current = Some(Current {
                        id: request.id,
                        keep_conn: request.keep_conn,
                        stderr_used: false,
                    });
                    self.failed = false;
                    return Ok(Some(request));
                }
                Step::Over => {
                    self.wire.flush()?;
                    return Ok(None);
                }
                Step::Eof => {
                    let leftover = self.wire.input().len();
                    return self.decoder.at_eof(leftover).map_or(Ok(None), Err);
                }
                // No body comes between requests.
                Step::Stdin(_) | Step::StdinEnd | Step::Abort => {}
            }
        }
    }

    fn push_end_request(&mut self, id: u16, app_status: u32, status: ProtocolStatus) {
        self.wire.push(
            RecordType::EndRequest,
            id,
            &end_request_body(app_status, status),
        );
    }

    fn write_stream(&mut self, record_type: RecordType, data: &[u8]) -> io::Result<()> {
        let id = self.current.as_ref().ok_or_else(no_request)?.id;
        let result = self.wire.write_stream(record_type, id, data);
        self.closed |= result.is_err();
        result
    }
}

/// Calling `write_*` or `finish` with no request in progress is a bug in the caller.
fn no_request() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "no FastCGI request in progress",
    )
}
