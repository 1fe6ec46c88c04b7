//! One HTTP/1.1 connection, with the same request cycle as a FastCGI one (read the body,
//! write a CGI response, finish), so that the runtimes serve both through
//! [`crate::exchange::Exchange`]: the body is de-chunked into the stdin stream, the CGI
//! response becomes an HTTP response ([`super::response`]), and `Expect: 100-continue` is
//! answered when the epoll loop starts to wait for the body
//! ([`HttpConn::send_continue`]), or else at the app's first read.
//!
//! A driver: the input (heads, bodies, pipelined bytes) is [`super::incoming::Incoming`]'s,
//! sans I/O; this file owns the socket and the response.

use std::io::{self, Read, Write};

use super::body::BodyReader;
use super::head::{Head, Peer, Refusal};
use super::incoming::Incoming;
use super::response::{self, Ask, Body};
use crate::socket::Socket;

/// Output is written once this much is buffered (or at a flush, or at the end).
const OUT_CHUNK: usize = 16 * 1024;
/// The largest CGI head an app may write.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// The most request body the epoll loop reads ahead, in memory, before the app runs (see
/// [`HttpConn::body_here`]); a larger body is read by the worker as the app asks for it.
pub const BODY_AHEAD: usize = 64 * 1024;

/// An accepted HTTP connection: the socket, what has been read of it and not yet used
/// (a pipelined request's head may already be here), and the request in progress.
pub struct HttpConn {
    socket: Socket,
    /// What has been read and not yet taken, and the request body's decoder.
    input: Incoming,
    current: Option<Current>,
    out: Vec<u8>,
    /// The last request ended with its body not all read: the connection ends, lingering.
    body_unread: bool,
    /// How far [`Self::body_here`] has looked into the current body: bytes past the input's
    /// front,
    /// and the framing state there (unbounded: the app's reads apply `max_request_body`).
    ahead: (usize, BodyReader),
    /// No further request on this connection.
    closed: bool,
}

struct Current {
    /// `Expect: 100-continue` not yet answered.
    continue_due: bool,
    ask: Ask,
    response: Response,
    /// The connection may serve another request after this one.
    keep: bool,
    status: Option<u16>,
}

enum Response {
    /// The CGI head, until it is complete.
    Pending(Vec<u8>),
    Sending(Body),
    /// drover answered for the app (413 for a chunked body past `max_request_body` before
    /// the app's head went out, 502 for an app that sent no head): nothing more goes out.
    Refused,
}

impl HttpConn {
    pub fn new(socket: Socket) -> HttpConn {
        HttpConn {
            socket,
            input: Incoming::new(),
            current: None,
            out: Vec::new(),
            body_unread: false,
            ahead: (0, BodyReader::default()),
            closed: false,
        }
    }

    /// Reads what has arrived (the socket must not wait: see [`Socket::set_wait`]).
    /// Ok(0): the client closed.
    /// Over TLS, also what the session decrypted past the first read (epoll would not
    /// wake for it: it has left the socket).
    pub fn fill(&mut self) -> io::Result<usize> {
        let socket = &mut self.socket;
        let mut got = self.input.read_from(16 * 1024, |room| socket.read(room))?;
        while got > 0 && self.socket.buffered() {
            let socket = &mut self.socket;
            match self.input.read_from(16 * 1024, |room| socket.read(room)) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        Ok(got)
    }

    /// Whether bytes of a next request are here already (pipelined).
    pub fn has_input(&self) -> bool {
        self.input.has_input()
    }

    /// Parses the next request's head from what has been read; Ok(None): not complete.
    /// Complete, it starts the request: its body is read next.
    pub fn next_head(&mut self, peer: &Peer<'_>) -> Result<Option<Head>, Refusal> {
        let Some(head) = self.input.head(peer)? else {
            return Ok(None);
        };
        self.input.begin(&head, peer.max_body);
        self.ahead = (0, BodyReader::new(head.framing, None));
        self.current = Some(Current {
            continue_due: head.expect_continue,
            ask: Ask {
                minor: head.minor,
                keep_alive: head.keep_alive,
                head_method: head.head_method,
            },
            response: Response::Pending(Vec::new()),
            keep: head.keep_alive,
            status: None,
        });
        Ok(Some(head))
    }

    /// Whether the current request's body is here: all of it, or `BODY_AHEAD` (64 KiB) of
    /// it (the worker reads the rest). The epoll loop asks this before the app runs, so
    /// that a body that trickles costs a descriptor, not a worker. Looks only at bytes it
    /// has not looked at before; a chunked body breaking its syntax is refused here.
    pub fn body_here(&mut self) -> Result<bool, String> {
        let (mut at, mut body) = self.ahead;
        let input = self.input.unread();
        let here = loop {
            if at >= BODY_AHEAD || body.ended() {
                break true;
            }
            match body.step(&input[at..], usize::MAX) {
                Ok(Some(step)) => at += step.used,
                Ok(None) => break false,
                Err(err) => return Err(err.reason),
            }
        };
        self.ahead = (at, body);
        Ok(here)
    }

    /// Answers `Expect: 100-continue` now, if it is due: the epoll loop is about to wait
    /// for the body.
    pub fn send_continue(&mut self) -> io::Result<()> {
        let Some(current) = &mut self.current else {
            return Ok(());
        };
        if !current.continue_due || self.input.body().ended() {
            return Ok(());
        }
        current.continue_due = false;
        self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        self.write_out()
    }

    /// Answers a refused head and ends the connection.
    pub fn refuse(&mut self, refusal: &Refusal) {
        let _ = self
            .socket
            .write_all(&response::refusal(refusal.status, &refusal.reason));
        self.closed = true;
    }

    /// The status the last response went out with.
    pub fn status(&self) -> Option<u16> {
        self.current.as_ref().and_then(|c| c.status)
    }

    /// Reads request body; 0 at its end. The first read answers `Expect: 100-continue`.
    pub fn read_stdin(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Some(current) = &mut self.current else {
            return Ok(0);
        };
        if current.continue_due && !self.input.body().ended() {
            current.continue_due = false;
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.write_out()?;
        }
        self.read_body(out)
    }

    fn read_body(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        while self.current.is_some() {
            match self.input.read_body(out) {
                Ok(Some(n)) => return Ok(n),
                Ok(None) => {
                    if self.fill()? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the client closed the connection before the end of the body",
                        ));
                    }
                }
                Err(err) => {
                    self.refuse_body(err.status, &err.reason);
                    return Err(self.bad_body(&err.reason));
                }
            }
        }
        Ok(0)
    }

    /// A chunked body grew past `max_request_body` (413, as for a Content-Length above it;
    /// php-fpm behind nginx would get nginx's) or broke the chunked syntax (400): the client
    /// gets that status, unless the app's response has begun to go out, in which case the
    /// connection just ends.
    fn refuse_body(&mut self, status: u16, why: &str) {
        let Some(current) = &mut self.current else {
            return;
        };
        if !matches!(current.response, Response::Pending(_)) {
            return;
        }
        current.response = Response::Refused;
        current.status = Some(status);
        current.keep = false;
        self.out.clear();
        self.out.extend_from_slice(&response::refusal(status, why));
        let _ = self.write_out();
    }

    /// A body that cannot be read on: the connection ends after this request.
    fn bad_body(&mut self, why: &str) -> io::Error {
        self.closed = true;
        if let Some(current) = &mut self.current {
            current.keep = false;
        }
        io::Error::new(io::ErrorKind::InvalidData, why.to_string())
    }

    /// Reads and drops the body up to `max_bytes`; true if it ended. Sends no 100: a
    /// client still waiting for one has sent no body.
    pub fn discard_stdin(&mut self, max_bytes: usize) -> bool {
        if self.current.as_ref().is_some_and(|c| c.continue_due) {
            return false;
        }
        drover_fastcgi::discard_body(max_bytes, |buf| self.read_body(buf))
    }

    /// Sends response data: first the CGI head, then body. Output is held until a flush,
    /// [`Self::finish`] or 16 KiB: a response that is all here by then goes
    /// out with a Content-Length, not in chunks.
    pub fn write_stdout(&mut self, data: &[u8]) -> io::Result<()> {
        let current = self.current.as_mut().ok_or_else(no_request)?;
        match &mut current.response {
            Response::Sending(_) => self.send_body(data),
            Response::Refused => Ok(()),
            Response::Pending(pending) => {
                pending.extend_from_slice(data);
                if pending.len() >= OUT_CHUNK {
                    self.commit(false)?;
                }
                Ok(())
            }
        }
    }

    /// Translates the held CGI head and sends what is held of the body. `complete`: the
    /// response is all here. Without a complete head yet, only checks its size.
    fn commit(&mut self, complete: bool) -> io::Result<()> {
        let Some(current) = self.current.as_mut() else {
            return Err(no_request());
        };
        let Response::Pending(pending) = &mut current.response else {
            return Ok(());
        };
        let translated = response::translate(pending, current.ask, complete)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let Some(t) = translated else {
            if pending.len() > MAX_RESPONSE_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the app's response head is too large",
                ));
            }
            return Ok(());
        };
        let rest = pending.split_off(t.consumed);
        current.response = Response::Sending(t.body);
        current.keep &= t.keep;
        current.status = Some(t.status);
        self.out.extend_from_slice(&t.head);
        self.send_body(&rest)
    }

    fn send_body(&mut self, data: &[u8]) -> io::Result<()> {
        let Some(current) = &mut self.current else {
            return Err(no_request());
        };
        let Response::Sending(body) = &mut current.response else {
            return Err(no_request());
        };
        if data.is_empty() {
            return Ok(());
        }
        match body {
            Body::None => return Ok(()),
            Body::Length(left) => {
                let n = (*left).min(data.len() as u64) as usize;
                *left -= n as u64;
                if n < data.len() {
                    // More than the app's Content-Length: the rest would be read as the
                    // next response.
                    current.keep = false;
                }
                self.out.extend_from_slice(&data[..n]);
            }
            Body::Chunked => {
                self.out
                    .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                self.out.extend_from_slice(data);
                self.out.extend_from_slice(b"\r\n");
            }
            Body::Close => self.out.extend_from_slice(data),
        }
        if self.out.len() >= OUT_CHUNK {
            self.write_out()?;
        }
        Ok(())
    }

    /// Writes text for the error log: the worker's stderr (there is no web server's log).
    pub fn write_stderr(&mut self, data: &[u8]) -> io::Result<()> {
        io::stderr().write_all(data)
    }

    /// Writes what is buffered: the app wants it to reach the client now.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.current.is_some() {
            self.commit(false)?;
        }
        self.write_out()
    }

    fn write_out(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let result = self.socket.write_all(&self.out);
        if let Err(err) = &result
            && err.kind() == io::ErrorKind::TimedOut
        {
            eprintln!(
                "dropped a connection: {err}, {} bytes unsent",
                self.out.len()
            );
        }
        self.out.clear();
        self.closed |= result.is_err();
        result
    }

    /// Ends the response: the last chunk, or the connection's end when the response cannot
    /// be delimited otherwise (a failed app: `app_status` ≠ 0, or fewer bytes than its
    /// Content-Length). Returns whether the connection serves another request.
    pub fn finish(&mut self, app_status: u32) -> io::Result<bool> {
        // A failed app's response is not complete: it goes out chunked, unterminated.
        let committed = self.commit(app_status == 0);
        let current = self.current.as_mut().ok_or_else(no_request)?;
        if committed.is_err() {
            current.keep = false;
        }
        match current.response {
            Response::Pending(_) => {
                // No complete head was written: nothing the client could use went out.
                current.keep = false;
                current.status = Some(502);
                let bad = response::refusal(502, "the app sent no complete response head");
                self.out.extend_from_slice(&bad);
                current.response = Response::Refused;
            }
            Response::Sending(Body::Chunked) if app_status == 0 => {
                self.out.extend_from_slice(b"0\r\n\r\n");
            }
            Response::Sending(Body::Length(left)) if left > 0 => current.keep = false,
            Response::Sending(_) | Response::Refused => {}
        }
        if app_status != 0 {
            current.keep = false;
        }
        let flushed = self.write_out();
        // A body the app did not read: what has arrived is dropped; a body still on its way
        // ends the connection (with a lingering close, so that the response is not reset).
        let mut keep = self.current.as_ref().is_some_and(|c| c.keep);
        if self.current.is_some() && !self.input.body().ended() {
            self.socket.set_wait(false);
            let ended = self.discard_stdin(64 * 1024);
            self.socket.set_wait(true);
            if !ended {
                keep = false;
                self.body_unread = true;
            }
        }
        if let Some(current) = &mut self.current {
            current.keep = keep;
        }
        self.closed |= !keep;
        flushed?;
        Ok(!self.closed)
    }

    /// Forgets the finished request (its status was read).
    pub fn end_request(&mut self) {
        self.current = None;
    }

    /// Whether the last request left body unread (see `Connection::body_unread`).
    pub fn body_unread(&self) -> bool {
        self.body_unread
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    pub fn get_ref(&self) -> &Socket {
        &self.socket
    }

    pub fn get_mut(&mut self) -> &mut Socket {
        &mut self.socket
    }
}

fn no_request() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "no HTTP request in progress")
}

#[cfg(test)]
mod tests;
