//! The request body: STDIN records, streamed to the app as they arrive.

use std::io::{self, Read, Write};

use super::Connection;
use super::pull::Step;
use crate::error::ProtocolError;

impl<S: Read + Write> Connection<S> {
    /// The request body, streamed from STDIN records as they arrive; end of file at the
    /// empty STDIN record, or when the web server aborted the request ([`Self::aborted`]).
    pub fn stdin(&mut self) -> Stdin<'_, S> {
        Stdin { connection: self }
    }

    /// What [`Stdin`] does, for callers that cannot hold a borrow between reads. A
    /// protocol error comes as an `io::Error` whose inner error is the [`ProtocolError`].
    pub fn read_stdin(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.read_body(buf).map_err(|err| {
            self.closed = true;
            if self.current.is_some() {
                self.failed = true;
            }
            err.into()
        })
    }

    /// Reads and drops the rest of the current request's body, up to `max_bytes`; true
    /// once it has ended. For a body the app left unread, before [`Self::finish`]: with a
    /// socket whose reads take only what has already arrived, this ends most bodies (often
    /// just their closing empty record) without a wait. It stops at the first error (a
    /// read that would wait is one); the connection then serves no further request, and
    /// [`Self::body_unread`] will tell the caller to linger when it closes.
    pub fn discard_stdin(&mut self, max_bytes: usize) -> bool {
        if discard_body(max_bytes, |buf| self.read_body(buf)) {
            return true;
        }
        self.closed = true;
        false
    }

    /// The web server sent ABORT_REQUEST for the current request (noticed while reading its
    /// body): reads return end of file. The app may stop early; it still calls `finish`.
    pub fn aborted(&self) -> bool {
        self.current.is_some() && self.decoder.aborted()
    }

    /// Reads body bytes of the current request into `buf` (not empty); 0 at its end.
    fn read_body(&mut self, buf: &mut [u8]) -> Result<usize, ProtocolError> {
        if self.current.is_none() {
            return Ok(0);
        }
        if self.failed {
            let failed = io::Error::other("the request body failed to read earlier");
            return Err(ProtocolError::Io(failed));
        }
        while self.decoder.body_open() {
            match self.pull(buf)? {
                Step::Stdin(n) => return Ok(n),
                Step::StdinEnd | Step::Abort => return Ok(0),
                Step::Eof => {
                    let leftover = self.wire.input().len();
                    let phase = self.decoder.phase();
                    let err = self.decoder.at_eof(leftover);
                    return Err(err.unwrap_or(ProtocolError::Closed { phase }));
                }
                // Neither comes while a body is read.
                Step::Request(_) | Step::Over => {}
            }
        }
        Ok(0)
    }
}

/// The request body as a reader, borrowed from the connection.
pub struct Stdin<'a, S> {
    connection: &'a mut Connection<S>,
}

impl<S: Read + Write> Stdin<'_, S> {
    pub fn aborted(&self) -> bool {
        self.connection.aborted()
    }
}

impl<S: Read + Write> Read for Stdin<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.connection.read_stdin(buf)
    }
}

/// Reads and drops a request body with `read` (a chunk a call, 0 at its end): true once it
/// has ended; false after `max_bytes` were dropped with more to come, or at the first
/// error. [`Connection::discard_stdin`] and the HTTP worker's connection both drain a body
/// the app left unread with it.
pub fn discard_body<E>(
    max_bytes: usize,
    mut read: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> bool {
    let mut buf = [0u8; 4096];
    let mut dropped = 0;
    while dropped <= max_bytes {
        match read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => dropped += n,
            Err(_) => return false,
        }
    }
    false
}
