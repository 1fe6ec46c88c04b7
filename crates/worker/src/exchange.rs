//! The connection a runtime's [`crate::serve::Handler`] serves a request on: FastCGI from
//! a web server, or HTTP/1.1 from the client itself (`protocol = "http"`). Both carry the
//! same cycle (CGI params in, body read as a stream, a CGI response out, finish), so a
//! runtime writes its request code once, against this type.
//!
//! When the pool's access log shows a response header (`%{Name}o`), the exchange keeps a
//! copy of each response's CGI head as the runtime writes it, for the log line.

use std::io;

use drover_fastcgi::Connection;

use crate::http::HttpConn;
use crate::socket::Socket;

/// The longest response head kept for the access log; past it, the rest is not looked at.
const MAX_KEPT_HEAD: usize = 16 * 1024;

/// One accepted connection, of either protocol.
pub struct Exchange {
    protocol: Protocol,
    /// The current response's head, while [`Exchange::keep_head`] asked for it.
    head: Option<KeptHead>,
}

/// The protocol an [`Exchange`] speaks.
pub enum Protocol {
    FastCgi(Connection<Socket>),
    Http(HttpConn),
}

/// A copy of a response's CGI head (`Status:` and header lines, up to the blank line).
#[derive(Default)]
struct KeptHead {
    bytes: Vec<u8>,
    /// The blank line was seen (or the head grew past [`MAX_KEPT_HEAD`]).
    complete: bool,
}

impl KeptHead {
    fn take(&mut self, data: &[u8]) {
        if self.complete {
            return;
        }
        // The blank line may straddle two writes: look back two bytes.
        let from = self.bytes.len().saturating_sub(2);
        self.bytes.extend_from_slice(data);
        // The line break that ends the last header: one followed by an empty line.
        let tail = &self.bytes[from..];
        let end = (0..tail.len()).find(|&i| {
            tail[i] == b'\n'
                && (tail[i + 1..].starts_with(b"\n") || tail[i + 1..].starts_with(b"\r\n"))
        });
        if let Some(at) = end {
            self.bytes.truncate(from + at + 1);
            self.complete = true;
        } else if self.bytes.len() > MAX_KEPT_HEAD {
            self.bytes.truncate(MAX_KEPT_HEAD);
            self.complete = true;
        }
    }
}

impl Exchange {
    /// A FastCGI connection from a web server.
    pub fn fastcgi(conn: Connection<Socket>) -> Exchange {
        Exchange {
            protocol: Protocol::FastCgi(conn),
            head: None,
        }
    }

    /// An HTTP/1.1 connection from a client.
    pub fn http(conn: HttpConn) -> Exchange {
        Exchange {
            protocol: Protocol::Http(conn),
            head: None,
        }
    }

    /// The connection itself, once the exchange is over (its buffers serve the next one).
    pub fn into_protocol(self) -> Protocol {
        self.protocol
    }

    /// The connection itself, for what only one protocol does.
    pub fn protocol_mut(&mut self) -> &mut Protocol {
        &mut self.protocol
    }

    /// Keeps a copy of the next response's head (`keep`), or keeps none: called before each
    /// request, with whether the access log shows a response header.
    pub fn keep_head(&mut self, keep: bool) {
        match (&mut self.head, keep) {
            (Some(head), true) => {
                head.bytes.clear();
                head.complete = false;
            }
            (None, true) => self.head = Some(KeptHead::default()),
            (_, false) => self.head = None,
        }
    }

    /// The head of the response since [`Exchange::keep_head`]: its lines, each ending in a
    /// line break; empty when none was kept or written.
    pub fn kept_head(&self) -> &[u8] {
        self.head.as_ref().map_or(&[], |h| &h.bytes)
    }

    /// Reads request body; 0 at its end.
    pub fn read_stdin(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.read_stdin(buf),
            Protocol::Http(c) => c.read_stdin(buf),
        }
    }

    /// Reads and drops the body, up to `max_bytes`; true if it ended.
    pub fn discard_stdin(&mut self, max_bytes: usize) -> bool {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.discard_stdin(max_bytes),
            Protocol::Http(c) => c.discard_stdin(max_bytes),
        }
    }

    /// Writes CGI response output (`Status:` and headers, a blank line, then body).
    pub fn write_stdout(&mut self, data: &[u8]) -> io::Result<()> {
        if let Some(head) = &mut self.head {
            head.take(data);
        }
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.write_stdout(data),
            Protocol::Http(c) => c.write_stdout(data),
        }
    }

    /// Text for the error log: the web server's (FastCGI), or the pool's (HTTP).
    pub fn write_stderr(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.write_stderr(data),
            Protocol::Http(c) => c.write_stderr(data),
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.flush(),
            Protocol::Http(c) => c.flush(),
        }
    }

    /// Ends the response; returns whether the connection serves another request.
    pub fn finish(&mut self, app_status: u32) -> io::Result<bool> {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.finish(app_status),
            Protocol::Http(c) => c.finish(app_status),
        }
    }

    /// Whether the last request left body unread: close with a lingering close.
    pub fn body_unread(&self) -> bool {
        match &self.protocol {
            Protocol::FastCgi(c) => c.body_unread(),
            Protocol::Http(c) => c.body_unread(),
        }
    }

    pub fn get_ref(&self) -> &Socket {
        match &self.protocol {
            Protocol::FastCgi(c) => c.get_ref(),
            Protocol::Http(c) => c.get_ref(),
        }
    }

    pub fn get_mut(&mut self) -> &mut Socket {
        match &mut self.protocol {
            Protocol::FastCgi(c) => c.get_mut(),
            Protocol::Http(c) => c.get_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(writes: &[&[u8]]) -> Vec<u8> {
        let mut head = KeptHead::default();
        for data in writes {
            head.take(data);
        }
        head.bytes
    }

    #[test]
    fn the_head_is_kept_up_to_its_blank_line_across_writes() {
        let head = b"Status: 200 OK\r\nX-Id: 7\r\n";
        assert_eq!(kept(&[b"Status: 200 OK\r\nX-Id: 7\r\n\r\nbody"]), head);
        // The blank line split between writes, and a body write after it.
        assert_eq!(
            kept(&[
                b"Status: 200 OK\r\nX-Id: 7\r",
                b"\n\r",
                b"\nbo",
                b"dy\r\n\r\n"
            ]),
            head
        );
        assert_eq!(kept(&[b"A: 1\n\nbody"]), b"A: 1\n");
    }

    #[test]
    fn a_head_without_its_end_is_kept_only_up_to_the_bound() {
        let big = vec![b'x'; MAX_KEPT_HEAD + 10];
        assert_eq!(kept(&[&big, b"\r\n\r\n"]).len(), MAX_KEPT_HEAD);
    }
}
