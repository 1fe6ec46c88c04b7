//! One HTTP connection's input, sans I/O: the bytes received and not yet taken, the
//! request heads parsed from them ([`super::head`]) and the body of the request in hand
//! ([`super::body::BodyReader`]). Bytes in (pushed, or read into it by the driver), heads
//! and body bytes out. Both connections drive it: [`super::HttpConn`] (blocking: WSGI and
//! drover-php) and the ASGI loop's `Http` (`drover-python`'s `asgi/http.rs`), so a
//! pipelined request waits in the same buffer and a body is read the same way.

use super::body::{BodyError, BodyReader};
use super::head::{self, Head, Peer, Refusal};

/// Consumed bytes kept at the buffer's front before they are dropped, and the capacity an
/// emptied buffer keeps.
const KEEP: usize = 64 * 1024;

#[derive(Default)]
pub struct Incoming {
    buf: Vec<u8>,
    /// `buf[start..]` is not taken yet.
    start: usize,
    /// The body of the request in hand (ended between requests).
    body: BodyReader,
}

impl Incoming {
    pub fn new() -> Incoming {
        Incoming::default()
    }

    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(data);
    }

    /// Adds what `read` puts in the room for `n` bytes it is given (a socket read), and
    /// passes its result on.
    pub fn read_from<E>(
        &mut self,
        n: usize,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        self.compact();
        let len = self.buf.len();
        self.buf.resize(len + n, 0);
        let result = read(&mut self.buf[len..]);
        let got = result.as_ref().map_or(0, |&got| got.min(n));
        self.buf.truncate(len + got);
        result
    }

    /// The bytes received and not taken yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Whether bytes of a next request are here already (pipelined).
    pub fn has_input(&self) -> bool {
        self.start < self.buf.len()
    }

    /// Parses the head at the front, taking nothing. Ok(None): not complete yet.
    pub fn head(&self, peer: &Peer<'_>) -> Result<Option<Head>, Refusal> {
        head::parse(self.unread(), peer)
    }

    /// Starts the request of `head` (parsed by [`Self::head`]): its bytes are taken, and
    /// its body is read next, bounded by `max_body` (chunks; a Content-Length above it was
    /// refused with the head).
    pub fn begin(&mut self, head: &Head, max_body: Option<u64>) {
        self.start += head.len;
        self.body = BodyReader::new(head.framing, max_body);
    }

    /// The body of the request in hand.
    pub fn body(&self) -> &BodyReader {
        &self.body
    }

    /// Body bytes into `out` (not empty): Ok(Some(n)), 0 at the body's end; Ok(None) when
    /// more input is needed.
    pub fn read_body(&mut self, out: &mut [u8]) -> Result<Option<usize>, BodyError> {
        loop {
            if self.body.ended() {
                return Ok(Some(0));
            }
            let input = &self.buf[self.start..];
            let Some(step) = self.body.step(input, out.len())? else {
                return Ok(None);
            };
            out[..step.data].copy_from_slice(&input[..step.data]);
            self.start += step.used;
            if step.data > 0 {
                return Ok(Some(step.data));
            }
        }
    }

    /// All the body bytes here, appended to `out`; whether the body is complete.
    pub fn take_body(&mut self, out: &mut Vec<u8>) -> Result<bool, BodyError> {
        let used = self.body.take(&self.buf[self.start..], out)?;
        self.start += used;
        Ok(self.body.ended())
    }

    /// Everything not taken, and the buffer's memory with it (the connection turns raw).
    pub fn take_all(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.drain(..std::mem::take(&mut self.start));
        buf
    }

    /// Drops taken bytes: all of them once everything is taken, else past [`KEEP`].
    /// Pipelined requests rarely end where a read does: without this the buffer kept every
    /// byte the connection ever sent.
    fn compact(&mut self) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() > KEEP {
                self.buf.shrink_to(KEEP);
            }
        } else if self.start >= KEEP {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Trusted;

    /// What a connection takes from `chunks`, fed in turn: each request's method, URI and
    /// body, and a refusal if one ends it.
    fn take(chunks: &[&[u8]]) -> Vec<String> {
        let trusted = Trusted::Any;
        let peer = Peer {
            remote: None,
            local: None,
            trusted: &trusted,
            max_body: Some(64),
        };
        let mut input = Incoming::new();
        let mut seen = Vec::new();
        let mut in_hand = false;
        let mut body = Vec::new();
        for chunk in chunks {
            input.push(chunk);
            loop {
                if in_hand {
                    match input.take_body(&mut body) {
                        Ok(true) => {
                            seen.push(format!("body {}", String::from_utf8_lossy(&body)));
                            body.clear();
                            in_hand = false;
                        }
                        Ok(false) => break,
                        Err(err) => {
                            seen.push(format!("{} {}", err.status, err.reason));
                            return seen;
                        }
                    }
                }
                match input.head(&peer) {
                    Ok(Some(head)) => {
                        let method = head.params.get("REQUEST_METHOD").unwrap_or_default();
                        let uri = head.params.get("REQUEST_URI").unwrap_or_default();
                        let line = [method, b" ", uri].concat();
                        seen.push(String::from_utf8_lossy(&line).into_owned());
                        input.begin(&head, peer.max_body);
                        in_hand = true;
                    }
                    Ok(None) => break,
                    Err(refusal) => {
                        seen.push(format!("{} {}", refusal.status, refusal.reason));
                        return seen;
                    }
                }
            }
        }
        seen
    }

    const PIPELINED: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n\
        POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
        POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
        POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n";

    #[test]
    fn pipelined_requests_fed_a_byte_at_a_time_are_taken_as_whole() {
        // The last chunk is past max_request_body (64) once its 65th byte is read.
        let wire = [PIPELINED, &[b'z'; 65][..], b"\r\n0\r\n\r\n"].concat();
        let whole = take(&[&wire]);
        assert_eq!(
            whole[..7],
            [
                "GET /a",
                "body ",
                "POST /b",
                "body hello",
                "POST /c",
                "body abc",
                "POST /d"
            ]
        );
        assert!(whole[7].starts_with("413 "), "{whole:?}");
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(take(&bytes), whole);
    }

    #[test]
    fn taken_bytes_are_dropped_and_the_rest_kept() {
        let mut input = Incoming::new();
        input.push(&[b'x'; KEEP + 10]);
        input.start = KEEP + 4;
        input.push(b"yz");
        assert_eq!(input.unread(), b"xxxxxxyz");
        assert_eq!(input.take_all(), b"xxxxxxyz");
        assert!(!input.has_input());
        let got = input.read_from(4, |room: &mut [u8]| {
            room[..2].copy_from_slice(b"ab");
            Ok::<usize, ()>(2)
        });
        assert_eq!((got, input.unread()), (Ok(2), &b"ab"[..]));
    }
}
