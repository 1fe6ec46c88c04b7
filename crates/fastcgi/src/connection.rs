//! The responder side of one FastCGI connection, for a worker's plain blocking loop:
//! `next_request` → read the body through `stdin` → `write_stdout` → `finish`, then again
//! while the web server keeps the connection open.
//!
//! One request at a time (FCGI_MAX_CONNS = FCGI_MAX_REQS = 1, FCGI_MPXS_CONNS = 0): a
//! worker is one process serving one request. Everything the protocol asks of a responder
//! besides the app's own input and output is handled here, whenever a record is read:
//! GET_VALUES and unknown management types are answered, other roles are refused with
//! UNKNOWN_ROLE, a second request id with CANT_MPX_CONN, and ABORT_REQUEST is noted.

mod records;
mod stdin;

use std::io::{self, Read, Write};

pub use stdin::Stdin;

use super::error::{Phase, ProtocolError};
use super::input::Input;
use super::output::Output;
use super::params::Params;
use super::record::{BeginRequestBody, Header, ProtocolStatus, RecordType, Role, end_request_body};
use super::wire::Wire;

/// Bounds on what a web server can make a worker hold before the app runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The size of one request's PARAMS stream (names, values and their lengths). It also
    /// ends a params stream that never ends. A stream that stalls instead is ended by the
    /// socket's read timeout, if the worker set one ([`ProtocolError::Timeout`]).
    pub max_params_bytes: usize,
    /// How much of a finished request's unread body is read and dropped before the next
    /// request on a kept connection; past it the connection ends
    /// ([`ProtocolError::UnreadBodyTooLarge`]). The worker bounds its lingering close by
    /// the same number. It must exceed the bodies the web server lets through: nginx may
    /// push a whole buffered body (from its temp file) before it reads the response, and
    /// ending the connection under it turns the response into a 502.
    pub max_unread_body: usize,
}

impl Default for Limits {
    /// 64 KiB of params: nginx's largest request headers (`large_client_header_buffers`
    /// 4 × 8k) plus fastcgi.conf's variables fit with room to spare. 64 MiB of unread body:
    /// reading and dropping it takes a few tens of milliseconds.
    fn default() -> Limits {
        Limits {
            max_params_bytes: 64 * 1024,
            max_unread_body: 64 * 1024 * 1024,
        }
    }
}

/// A request, as the app sees it before reading its body.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: u16,
    /// The web server asked to keep the connection open after this request.
    pub keep_conn: bool,
    pub params: Params,
}

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
    limits: Limits,
    /// The request between `next_request` and `finish`.
    current: Option<Current>,
    /// A request was finished before its STDIN ended: the rest of it (`skip_pending` bytes
    /// of the record in hand, then its records up to the empty STDIN) is skipped before the
    /// next request, and the web server may close the connection meanwhile.
    draining: Option<u16>,
    skip_pending: usize,
    /// No further request on this connection: the peer closed, a protocol or socket error,
    /// or a request without FCGI_KEEP_CONN was finished.
    closed: bool,
    /// Buffers for the next request's params: a recycled request's, or empty.
    spare: Params,
    /// The previous request's params size, so a new buffer is allocated once.
    params_hint: usize,
}

struct Current {
    id: u16,
    keep_conn: bool,
    stage: Stage,
    /// Something was written to STDERR, so the stream is closed by an empty record.
    stderr_used: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Params,
    /// `remaining` content bytes of the STDIN record in hand are unread, then `padding`.
    Stdin {
        remaining: usize,
        padding: usize,
    },
    StdinEnded,
    Aborted,
    /// Reading the body hit a protocol or socket error; reads keep failing.
    Failed,
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
            limits,
            current: None,
            draining: None,
            skip_pending: 0,
            closed: false,
            params_hint: 1024,
            spare: params,
        }
    }

    /// Takes back a served request, so that the next request's params are read into its
    /// buffers instead of new ones. Optional; it saves two allocations per request.
    pub fn recycle(&mut self, request: Request) {
        self.spare = request.params;
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
        if let Stage::Stdin { remaining, padding } = current.stage {
            self.draining = Some(id);
            // Padding is skipped as soon as a record's content is read, so none is left
            // behind a fully read record.
            self.skip_pending = if remaining > 0 {
                remaining + padding
            } else {
                0
            };
        }
        // (A failed body read has set `closed` already.)
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
        self.draining.is_some()
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
                params: self.spare,
            },
        )
    }

    fn phase(&self) -> Phase {
        match &self.current {
            None => Phase::Idle,
            Some(Current {
                id,
                stage: Stage::Params,
                ..
            }) => Phase::Params(*id),
            Some(Current { id, .. }) => Phase::Stdin(*id),
        }
    }

    fn read_request(&mut self) -> Result<Option<Request>, ProtocolError> {
        loop {
            let begin = match self.next_begin() {
                // A web server that got its response may close without sending the rest of
                // the body it no longer needs: a clean end, not a truncated record.
                Err(ProtocolError::Truncated { .. }) if self.draining.is_some() => None,
                other => other?,
            };
            let Some((id, body)) = begin else {
                return Ok(None);
            };
            if body.role != Role::RESPONDER {
                self.push_end_request(id, 0, ProtocolStatus::UnknownRole);
                if !body.keep_conn() {
                    self.wire.flush()?;
                    return Ok(None);
                }
                continue;
            }
            if let Some(request) = self.read_params(id, body.keep_conn())? {
                return Ok(Some(request));
            }
            if self.closed {
                self.wire.flush()?;
                return Ok(None);
            }
        }
    }

    /// Skips to the next BEGIN_REQUEST. Ok(None): the web server closed the connection.
    fn next_begin(&mut self) -> Result<Option<(u16, BeginRequestBody)>, ProtocolError> {
        let pending = std::mem::take(&mut self.skip_pending);
        self.skip(pending)?;
        let mut skipped = pending;
        loop {
            let Some(header) = self.next_header()? else {
                return Ok(None);
            };
            if header.record_type == RecordType::BeginRequest {
                self.draining = None;
                return Ok(Some((header.request_id, self.read_begin_body(header)?)));
            }
            // No live request owns this record: it is the unread body of the request just
            // finished, or belongs to a request refused with UNKNOWN_ROLE or CANT_MPX_CONN.
            if self.draining == Some(header.request_id)
                && header.record_type == RecordType::Stdin
                && header.content_length == 0
            {
                self.draining = None;
            }
            if let Some(request_id) = self.draining {
                skipped += header.body_len();
                if skipped > self.limits.max_unread_body {
                    let limit = self.limits.max_unread_body;
                    return Err(ProtocolError::UnreadBodyTooLarge { request_id, limit });
                }
            }
            self.skip(header.body_len())?;
        }
    }

    /// Reads the PARAMS stream of request `id`. Ok(None): the web server aborted it first
    /// (answered here, as the app never saw it).
    fn read_params(&mut self, id: u16, keep_conn: bool) -> Result<Option<Request>, ProtocolError> {
        self.current = Some(Current {
            id,
            keep_conn,
            stage: Stage::Params,
            stderr_used: false,
        });
        let mut params = std::mem::take(&mut self.spare);
        let raw = params.reset();
        if raw.capacity() == 0 {
            raw.reserve(self.params_hint);
        }
        loop {
            let Some(header) = self.next_header()? else {
                return Err(ProtocolError::Closed {
                    phase: self.phase(),
                });
            };
            if header.request_id != id {
                self.skip(header.body_len())?;
                continue;
            }
            match header.record_type {
                RecordType::Params if header.content_length == 0 => {
                    self.skip(header.padding_length.into())?;
                    break;
                }
                RecordType::Params => self.read_params_record(header, raw)?,
                RecordType::AbortRequest => {
                    self.skip(header.body_len())?;
                    self.current = None;
                    self.closed |= !keep_conn;
                    self.push_end_request(id, 0, ProtocolStatus::RequestComplete);
                    return Ok(None);
                }
                record_type => {
                    return Err(ProtocolError::UnexpectedRecord {
                        record_type,
                        phase: self.phase(),
                    });
                }
            }
        }
        self.params_hint = raw.len();
        params
            .index()
            .map_err(|source| ProtocolError::MalformedParams {
                request_id: id,
                source,
            })?;
        self.set_stage(Stage::Stdin {
            remaining: 0,
            padding: 0,
        });
        Ok(Some(Request {
            id,
            keep_conn,
            params,
        }))
    }

    fn read_params_record(
        &mut self,
        header: Header,
        raw: &mut Vec<u8>,
    ) -> Result<(), ProtocolError> {
        let start = raw.len();
        let end = start + usize::from(header.content_length);
        if end > self.limits.max_params_bytes {
            let limit = self.limits.max_params_bytes;
            return Err(ProtocolError::ParamsTooLarge {
                request_id: header.request_id,
                limit,
            });
        }
        let result = self.wire.append_exact(raw, end - start);
        result.map_err(|err| self.wire_error(err))?;
        self.skip(header.padding_length.into())
    }

    fn push_end_request(&mut self, id: u16, app_status: u32, status: ProtocolStatus) {
        self.wire.push(
            RecordType::EndRequest,
            id,
            &end_request_body(app_status, status),
        );
    }

    fn set_stage(&mut self, stage: Stage) {
        if let Some(current) = &mut self.current {
            current.stage = stage;
        }
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
