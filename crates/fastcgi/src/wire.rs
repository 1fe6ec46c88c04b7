//! The socket with its two buffers: reading record headers and contents, writing records.
//! Knows bytes and records, not requests; [`super::connection`] gives them meaning.
//!
//! One rule joins the two directions: buffered output is flushed before any read that may
//! block. The web server may be waiting for it (a GET_VALUES answer, a CANT_MPX_CONN reply,
//! a response sent before its body was read) while this side waits for input.

use std::io::{self, Read, Write};

use super::input::Input;
use super::output::Output;
use super::record::{HEADER_LEN, RecordType};

pub(super) struct Wire<S> {
    pub stream: S,
    input: Input,
    output: Output,
}

/// A read that could not complete; the connection adds what it was doing.
pub(super) enum WireError {
    /// The stream ended inside a record.
    Truncated,
    Io(io::Error),
}

impl From<io::Error> for WireError {
    fn from(err: io::Error) -> WireError {
        WireError::Io(err)
    }
}

impl<S: Read + Write> Wire<S> {
    /// Buffers left over from another connection are emptied, not reallocated.
    pub fn new(stream: S, mut input: Input, mut output: Output) -> Wire<S> {
        input.clear();
        output.clear();
        Wire {
            stream,
            input,
            output,
        }
    }

    pub fn into_parts(self) -> (S, Input, Output) {
        (self.stream, self.input, self.output)
    }

    /// The next header's bytes; Ok(None) if the stream ended cleanly before it.
    pub fn read_header(&mut self) -> Result<Option<[u8; HEADER_LEN]>, WireError> {
        loop {
            if let Some(bytes) = self.input.take_header() {
                return Ok(Some(bytes));
            }
            if !self.fill()? {
                return if self.input.buffered() == 0 {
                    Ok(None)
                } else {
                    Err(WireError::Truncated)
                };
            }
        }
    }

    /// Reads at least one byte of record content into `dst` (not empty).
    pub fn read_some(&mut self, dst: &mut [u8]) -> Result<usize, WireError> {
        if self.input.buffered() == 0 {
            if dst.len() >= self.input.capacity() {
                // A large body read bypasses the buffer: one copy, from the kernel to the app.
                self.flush()?;
                let n = retry_interrupted(|| self.stream.read(dst))?.min(dst.len());
                return if n == 0 {
                    Err(WireError::Truncated)
                } else {
                    Ok(n)
                };
            }
            if !self.fill()? {
                return Err(WireError::Truncated);
            }
        }
        Ok(self.input.take_into(dst))
    }

    pub fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<(), WireError> {
        while !dst.is_empty() {
            let n = self.read_some(dst)?;
            dst = &mut dst[n..];
        }
        Ok(())
    }

    /// Appends `n` bytes of record content to `dst`: for params, which are small and
    /// usually buffered already, so they are copied once and never zero-filled first.
    pub fn append_exact(&mut self, dst: &mut Vec<u8>, mut n: usize) -> Result<(), WireError> {
        loop {
            n -= self.input.append_to(dst, n);
            if n == 0 {
                return Ok(());
            }
            if !self.fill()? {
                return Err(WireError::Truncated);
            }
        }
    }

    /// Skips `n` bytes of record content or padding.
    pub fn skip(&mut self, mut n: usize) -> Result<(), WireError> {
        loop {
            n -= self.input.skip(n);
            if n == 0 {
                return Ok(());
            }
            if !self.fill()? {
                return Err(WireError::Truncated);
            }
        }
    }

    /// Queues a short record (see [`Output::push`]).
    pub fn push(&mut self, record_type: RecordType, request_id: u16, content: &[u8]) {
        self.output.push(record_type, request_id, content);
    }

    pub fn write_stream(
        &mut self,
        record_type: RecordType,
        id: u16,
        data: &[u8],
    ) -> io::Result<()> {
        self.output
            .write_stream(&mut self.stream, record_type, id, data)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.output.flush(&mut self.stream)
    }

    /// One read into the input buffer, after flushing output. Ok(false) at end of stream.
    fn fill(&mut self) -> Result<bool, WireError> {
        if !self.output.is_empty() {
            self.flush()?;
        }
        let (input, stream) = (&mut self.input, &mut self.stream);
        Ok(retry_interrupted(|| input.fill_from(stream))? > 0)
    }
}

fn retry_interrupted(mut read: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match read() {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}
