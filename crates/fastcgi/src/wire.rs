//! The socket with its two buffers: bytes read and not yet decoded, records to write.
//! Knows bytes and records, not requests; [`crate::decoder`] gives them meaning.
//!
//! One rule joins the two directions: buffered output is flushed before any read that may
//! block. The web server may be waiting for it (a GET_VALUES answer, a CANT_MPX_CONN reply,
//! a response sent before its body was read) while this side waits for input.

use std::io::{self, Read, Write};

use super::input::Input;
use super::output::Output;
use super::record::RecordType;

pub(super) struct Wire<S> {
    pub stream: S,
    input: Input,
    output: Output,
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

    /// The bytes read and not yet decoded.
    pub fn input(&self) -> &[u8] {
        self.input.data()
    }

    pub fn consume(&mut self, n: usize) {
        self.input.consume(n);
    }

    /// Whether a read of `len` bytes is better made straight into the caller's buffer.
    pub fn bypasses(&self, len: usize) -> bool {
        self.input.buffered() == 0 && len >= self.input.capacity()
    }

    /// One read into `dst`, bypassing the buffer (see [`Self::bypasses`]): one copy, from
    /// the kernel to the app. Ok(0) at end of stream.
    pub fn read_direct(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.flush()?;
        Ok(retry_interrupted(|| self.stream.read(dst))?.min(dst.len()))
    }

    /// One read into the input buffer, after flushing output. Ok(false) at end of stream.
    pub fn fill(&mut self) -> io::Result<bool> {
        if !self.output.is_empty() {
            self.flush()?;
        }
        let (input, stream) = (&mut self.input, &mut self.stream);
        Ok(retry_interrupted(|| input.fill_from(stream))? > 0)
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
}

fn retry_interrupted(mut read: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match read() {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}
