//! The request body: STDIN records, streamed to the app as they arrive.

use std::io::{self, Read, Write};

use super::{Connection, Current, Stage};
use crate::error::ProtocolError;
use crate::record::RecordType;

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
            if let Some(current) = &mut self.current {
                current.stage = Stage::Failed;
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
        let mut buf = [0u8; 4096];
        let mut dropped = 0;
        while dropped <= max_bytes {
            match self.read_body(&mut buf) {
                Ok(0) => return true,
                Ok(n) => dropped += n,
                Err(_) => break,
            }
        }
        self.closed = true;
        false
    }

    /// The web server sent ABORT_REQUEST for the current request (noticed while reading its
    /// body): reads return end of file. The app may stop early; it still calls `finish`.
    pub fn aborted(&self) -> bool {
        matches!(
            &self.current,
            Some(Current {
                stage: Stage::Aborted,
                ..
            })
        )
    }

    /// Reads body bytes of the current request into `buf` (not empty); 0 at its end.
    fn read_body(&mut self, buf: &mut [u8]) -> Result<usize, ProtocolError> {
        loop {
            let Some(current) = &self.current else {
                return Ok(0);
            };
            let id = current.id;
            match current.stage {
                Stage::Params | Stage::StdinEnded | Stage::Aborted => return Ok(0),
                Stage::Failed => {
                    let failed = io::Error::other("the request body failed to read earlier");
                    return Err(ProtocolError::Io(failed));
                }
                Stage::Stdin { remaining: 0, .. } => self.next_stdin_record(id)?,
                Stage::Stdin { remaining, padding } => {
                    let want = remaining.min(buf.len());
                    let n = self.read_some(&mut buf[..want])?;
                    let remaining = remaining - n;
                    self.set_stage(Stage::Stdin { remaining, padding });
                    if remaining == 0 {
                        self.skip(padding)?;
                    }
                    return Ok(n);
                }
            }
        }
    }

    /// Reads up to the next STDIN record of request `id` and sets the stage from it.
    fn next_stdin_record(&mut self, id: u16) -> Result<(), ProtocolError> {
        let Some(header) = self.next_header()? else {
            return Err(ProtocolError::Closed {
                phase: self.phase(),
            });
        };
        if header.request_id != id {
            return self.skip(header.body_len());
        }
        let stage = match header.record_type {
            RecordType::Stdin if header.content_length == 0 => {
                self.skip(header.padding_length.into())?;
                Stage::StdinEnded
            }
            RecordType::Stdin => Stage::Stdin {
                remaining: header.content_length.into(),
                padding: header.padding_length.into(),
            },
            RecordType::AbortRequest => {
                self.skip(header.body_len())?;
                Stage::Aborted
            }
            record_type => {
                return Err(ProtocolError::UnexpectedRecord {
                    record_type,
                    phase: self.phase(),
                });
            }
        };
        self.set_stage(stage);
        Ok(())
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
