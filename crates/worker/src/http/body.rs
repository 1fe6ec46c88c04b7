//! A request body's framing, sans I/O: Content-Length, or chunked (its size lines and
//! trailers through [`super::chunked`]'s strict reader), with `max_request_body`. Bytes in,
//! body bytes out; no socket. The WSGI connection ([`super::HttpConn`]: the body it reads
//! ahead in the epoll loop, and the app's reads) and the ASGI one (`drover-python`'s
//! `asgi/http.rs`) read bodies through it, so both read one body where a front end does.

use super::chunked;
use super::head::Framing;

/// Where a body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Content-Length: this many bytes to come.
    Length(u64),
    /// Expecting a chunk-size line.
    ChunkSize,
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    Trailers,
    Ended,
}

/// One body's decoder. Copy: a reader may look ahead on a copy without consuming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyReader {
    state: State,
    /// Body bytes decoded so far.
    read: u64,
    /// `max_request_body`; None: no bound.
    max: Option<u64>,
}

/// What one [`BodyReader::step`] took: `used` bytes of the input, of which the first
/// `data` are body (the rest, or all of a step with no data, is framing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub used: usize,
    pub data: usize,
}

/// A body that cannot be read on: the status a client gets while no response went out
/// (400 for broken chunked syntax, 413 past `max_request_body`), and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    pub status: u16,
    pub reason: String,
}

impl Default for BodyReader {
    /// No body: already ended.
    fn default() -> BodyReader {
        BodyReader::new(Framing::Length(0), None)
    }
}

impl BodyReader {
    pub fn new(framing: Framing, max: Option<u64>) -> BodyReader {
        let state = match framing {
            Framing::Length(0) => State::Ended,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
        };
        BodyReader {
            state,
            read: 0,
            max,
        }
    }

    /// The body is complete (its last byte, or its trailers, decoded).
    pub fn ended(&self) -> bool {
        self.state == State::Ended
    }

    /// Body bytes decoded so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Decodes one piece at the start of `input`: body bytes (at most `room` of them) or
    /// framing. Ok(None): more input is needed, or the body has ended.
    pub fn step(&mut self, input: &[u8], room: usize) -> Result<Option<Step>, BodyError> {
        let refused = |reason: &str| BodyError {
            status: 400,
            reason: reason.to_string(),
        };
        let (next, used, data) = match self.state {
            State::Ended => return Ok(None),
            State::Length(left) | State::ChunkData(left) => {
                let n = (left.min(input.len() as u64) as usize).min(room);
                if n == 0 {
                    return Ok(None);
                }
                let left = left - n as u64;
                let next = match self.state {
                    State::Length(_) if left == 0 => State::Ended,
                    State::Length(_) => State::Length(left),
                    _ if left == 0 => State::ChunkEnd,
                    _ => State::ChunkData(left),
                };
                (next, n, n)
            }
            State::ChunkSize => match chunked::size_line(input).map_err(refused)? {
                Some((used, 0)) => (State::Trailers, used, 0),
                Some((used, size)) => (State::ChunkData(size), used, 0),
                None => return Ok(None),
            },
            State::ChunkEnd if input.len() < 2 => return Ok(None),
            State::ChunkEnd if &input[..2] != b"\r\n" => {
                return Err(refused("chunk data not followed by CRLF"));
            }
            State::ChunkEnd => (State::ChunkSize, 2, 0),
            // Trailers that must not follow a body (Content-Length, Host, TE...) too.
            State::Trailers => match chunked::trailers(input).map_err(|why| refused(&why))? {
                Some(used) => (State::Ended, used, 0),
                None => return Ok(None),
            },
        };
        self.state = next;
        self.read += data as u64;
        if let Some(max) = self.max.filter(|&max| self.read > max) {
            return Err(BodyError {
                status: 413,
                reason: format!("request body above max_request_body ({max} bytes)"),
            });
        }
        Ok(Some(Step { used, data }))
    }

    /// Decodes all it can of `input`, appending the body bytes to `out`; returns the bytes
    /// of `input` used.
    pub fn take(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, BodyError> {
        let mut at = 0;
        while let Some(step) = self.step(&input[at..], usize::MAX)? {
            out.extend_from_slice(&input[at..at + step.data]);
            at += step.used;
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests;
