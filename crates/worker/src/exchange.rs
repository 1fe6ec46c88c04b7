//! The connection a runtime's [`crate::serve::Handler`] serves a request on: FastCGI from
//! a web server, or HTTP/1.1 from the client itself (`protocol = "http"`). Both carry the
//! same cycle (CGI params in, body read as a stream, a CGI response out, finish), so a
//! runtime writes its request code once, against this type.

use std::io;

use drover_fastcgi::Connection;

use crate::http::HttpConn;
use crate::socket::Socket;

/// One accepted connection, of either protocol.
pub enum Exchange {
    FastCgi(Connection<Socket>),
    Http(HttpConn),
}

impl Exchange {
    /// Reads request body; 0 at its end.
    pub fn read_stdin(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Exchange::FastCgi(c) => c.read_stdin(buf),
            Exchange::Http(c) => c.read_stdin(buf),
        }
    }

    /// Reads and drops the body, up to `max_bytes`; true if it ended.
    pub fn discard_stdin(&mut self, max_bytes: usize) -> bool {
        match self {
            Exchange::FastCgi(c) => c.discard_stdin(max_bytes),
            Exchange::Http(c) => c.discard_stdin(max_bytes),
        }
    }

    /// Writes CGI response output (`Status:` and headers, a blank line, then body).
    pub fn write_stdout(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Exchange::FastCgi(c) => c.write_stdout(data),
            Exchange::Http(c) => c.write_stdout(data),
        }
    }

    /// Text for the error log: the web server's (FastCGI), or the pool's (HTTP).
    pub fn write_stderr(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Exchange::FastCgi(c) => c.write_stderr(data),
            Exchange::Http(c) => c.write_stderr(data),
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Exchange::FastCgi(c) => c.flush(),
            Exchange::Http(c) => c.flush(),
        }
    }

    /// Ends the response; returns whether the connection serves another request.
    pub fn finish(&mut self, app_status: u32) -> io::Result<bool> {
        match self {
            Exchange::FastCgi(c) => c.finish(app_status),
            Exchange::Http(c) => c.finish(app_status),
        }
    }

    /// Whether the last request left body unread: close with a lingering close.
    pub fn body_unread(&self) -> bool {
        match self {
            Exchange::FastCgi(c) => c.body_unread(),
            Exchange::Http(c) => c.body_unread(),
        }
    }

    pub fn get_ref(&self) -> &Socket {
        match self {
            Exchange::FastCgi(c) => c.get_ref(),
            Exchange::Http(c) => c.get_ref(),
        }
    }

    pub fn get_mut(&mut self) -> &mut Socket {
        match self {
            Exchange::FastCgi(c) => c.get_mut(),
            Exchange::Http(c) => c.get_mut(),
        }
    }
}
