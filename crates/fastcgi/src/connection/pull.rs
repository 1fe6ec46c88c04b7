//! The driver's one loop: read the socket into the decoder until it has something for the
//! request cycle, writing its replies (management answers, refusals) as they come.

use std::io::{self, Read, Write};

use super::Connection;
use crate::decoder::{Event, Request};
use crate::error::ProtocolError;

/// What [`Connection::pull`] found.
pub(super) enum Step {
    Request(Request),
    /// This many body bytes were put in the caller's buffer.
    Stdin(usize),
    StdinEnd,
    Abort,
    /// A refused or aborted request ended the connection; its replies are queued.
    Over,
    /// The web server closed the connection (the decoder says what that cuts short).
    Eof,
}

impl<S: Read + Write> Connection<S> {
    /// Decodes until the next step of the request cycle; body bytes go to `dst` (empty
    /// when no body is being read).
    pub(super) fn pull(&mut self, dst: &mut [u8]) -> Result<Step, ProtocolError> {
        loop {
            let due = if dst.is_empty() {
                0
            } else {
                self.decoder.stdin_due()
            };
            if due > 0 && self.wire.bypasses(dst.len()) {
                // A large body read bypasses the buffer: one copy, from the kernel to the app.
                let want = due.min(dst.len());
                let read = self.wire.read_direct(&mut dst[..want]);
                let n = read.map_err(|err| self.io_error(err))?;
                if n == 0 {
                    return Ok(Step::Eof);
                }
                // The decoder takes them all: they are content it is waiting for.
                self.decoder.decode(&dst[..n])?;
                return Ok(Step::Stdin(n));
            }
            let input = self.wire.input();
            // Body bytes are taken no faster than the caller's buffer holds them.
            let input = if due > 0 {
                &input[..input.len().min(dst.len())]
            } else {
                input
            };
            let (used, event) = self.decoder.decode(input)?;
            let mut reply = None;
            let step = match event {
                None => None,
                Some(Event::Request(request)) => Some(Step::Request(request)),
                Some(Event::Stdin(data)) => {
                    dst[..data.len()].copy_from_slice(data);
                    Some(Step::Stdin(data.len()))
                }
                Some(Event::StdinEnd) => Some(Step::StdinEnd),
                Some(Event::Abort) => Some(Step::Abort),
                Some(Event::Reply(answer)) => {
                    reply = Some(answer);
                    None
                }
            };
            self.wire.consume(used);
            if let Some(reply) = reply {
                let (record_type, id, content) = reply.record();
                self.wire.push(record_type, id, &content);
                if self.decoder.over() {
                    return Ok(Step::Over);
                }
                continue;
            }
            if let Some(step) = step {
                return Ok(step);
            }
            if used == 0 && !self.wire.fill().map_err(|err| self.io_error(err))? {
                return Ok(Step::Eof);
            }
        }
    }

    /// Names what the connection was doing; a socket read timeout becomes `Timeout`.
    pub(super) fn io_error(&self, err: io::Error) -> ProtocolError {
        if matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return ProtocolError::Timeout {
                phase: self.decoder.phase(),
            };
        }
        ProtocolError::Io(err)
    }
}
