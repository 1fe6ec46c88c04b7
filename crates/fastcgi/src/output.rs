//! The write side: turns STDOUT/STDERR data and control replies into records, with as few
//! `write()` calls as the data allows. This is the hot path of every response.
//!
//! - Small records are appended to one buffer, which is written when the connection
//!   flushes: a small response (headers, body, empty STDOUT, END_REQUEST) costs one
//!   `write()` in `finish()`.
//! - Larger data is not copied: its header goes to the end of the buffer and one
//!   `writev()` sends buffer and data together, one record of up to 65535 bytes per call.
//!
//! Records are never padded. Padding to a multiple of 8 is a recommendation (spec §3.3)
//! aimed at receivers that copy records into aligned storage; every receiver must honour
//! `paddingLength`, 0 included (nginx, Apache, the `fastcgi-client` crate, libfcgi), and
//! unpadded records save bytes and an iovec per record.

use std::io::{self, IoSlice, Write};

use super::record::{HEADER_LEN, Header, MAX_CONTENT_LEN, RecordType};

/// Writes up to this size (with what is already buffered) are coalesced in the buffer;
/// above it, copying costs more than the `writev()` it would save.
pub(super) const COALESCE_LIMIT: usize = 8 * 1024;

pub(super) struct Output {
    buf: Vec<u8>,
}

impl Output {
    pub fn new() -> Output {
        // Room for coalesced data plus the records `finish()` appends, so it never grows.
        Output {
            buf: Vec::with_capacity(COALESCE_LIMIT + 4 * HEADER_LEN + 8),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Appends `content` as records (one empty record if `content` is empty: the end of a
    /// stream). Only for short content: control replies and the ends of streams.
    pub fn push(&mut self, record_type: RecordType, request_id: u16, content: &[u8]) {
        if content.is_empty() {
            self.buf
                .extend_from_slice(&Header::new(record_type, request_id, 0).encode());
        }
        for chunk in content.chunks(MAX_CONTENT_LEN) {
            self.push_header(record_type, request_id, chunk.len());
            self.buf.extend_from_slice(chunk);
        }
    }

    /// Sends `data` as stream records. Empty data sends nothing: an empty record would end
    /// the stream. Data that fits under [`COALESCE_LIMIT`] stays buffered until `flush`.
    pub fn write_stream<W: Write>(
        &mut self,
        stream: &mut W,
        record_type: RecordType,
        request_id: u16,
        data: &[u8],
    ) -> io::Result<()> {
        if self.buf.len() + HEADER_LEN + data.len() <= COALESCE_LIMIT {
            if !data.is_empty() {
                self.push(record_type, request_id, data);
            }
            return Ok(());
        }
        for chunk in data.chunks(MAX_CONTENT_LEN) {
            self.push_header(record_type, request_id, chunk.len());
            let result =
                write_all_vectored(stream, &mut [IoSlice::new(&self.buf), IoSlice::new(chunk)]);
            // Cleared even on error: after a partial write the stream is unusable anyway,
            // and nothing may be sent twice.
            self.buf.clear();
            result?;
        }
        Ok(())
    }

    /// Writes everything buffered.
    pub fn flush<W: Write>(&mut self, stream: &mut W) -> io::Result<()> {
        if !self.buf.is_empty() {
            let result = stream.write_all(&self.buf);
            self.buf.clear();
            result?;
        }
        stream.flush()
    }

    fn push_header(&mut self, record_type: RecordType, request_id: u16, len: usize) {
        // Callers pass chunks of at most MAX_CONTENT_LEN bytes.
        let len = u16::try_from(len).unwrap_or(u16::MAX);
        self.buf
            .extend_from_slice(&Header::new(record_type, request_id, len).encode());
    }
}

/// `Write::write_all_vectored` is not stable yet: the same loop, over `advance_slices`.
fn write_all_vectored<W: Write>(stream: &mut W, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match stream.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts calls, accepts at most `max` bytes per call (as a full socket would).
    struct Sink {
        data: Vec<u8>,
        writes: usize,
        max: usize,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            let n = buf.len().min(self.max);
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        /// Takes from every slice, as a socket's `writev()` does.
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.writes += 1;
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(self.max - n);
                self.data.extend_from_slice(&buf[..take]);
                n += take;
            }
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn sink(max: usize) -> Sink {
        Sink {
            data: Vec::new(),
            writes: 0,
            max,
        }
    }

    #[test]
    fn small_writes_are_coalesced_until_flush() {
        let (mut out, mut sink) = (Output::new(), sink(usize::MAX));
        out.write_stream(&mut sink, RecordType::Stdout, 1, b"Status: 200\r\n\r\n")
            .unwrap();
        out.write_stream(&mut sink, RecordType::Stdout, 1, b"")
            .unwrap();
        out.write_stream(&mut sink, RecordType::Stdout, 1, b"hello")
            .unwrap();
        out.push(RecordType::Stdout, 1, b"");
        assert_eq!(sink.writes, 0);
        out.flush(&mut sink).unwrap();
        assert_eq!(sink.writes, 1);
        let mut expected = vec![1, 6, 0, 1, 0, 15, 0, 0];
        expected.extend_from_slice(b"Status: 200\r\n\r\n");
        expected.extend_from_slice(&[1, 6, 0, 1, 0, 5, 0, 0]);
        expected.extend_from_slice(b"hello");
        expected.extend_from_slice(&[1, 6, 0, 1, 0, 0, 0, 0]);
        assert_eq!(sink.data, expected);
    }

    #[test]
    fn large_data_goes_out_with_the_buffer_in_one_call_per_record() {
        let (mut out, mut sink) = (Output::new(), sink(usize::MAX));
        out.write_stream(&mut sink, RecordType::Stdout, 1, b"head")
            .unwrap();
        let data = vec![7u8; 100 * 1024];
        out.write_stream(&mut sink, RecordType::Stdout, 1, &data)
            .unwrap();
        assert_eq!(sink.writes, 2);
        assert!(out.is_empty());
        assert_eq!(
            &sink.data[..12],
            &[1, 6, 0, 1, 0, 4, 0, 0, b'h', b'e', b'a', b'd']
        );
        assert_eq!(&sink.data[12..20], &[1, 6, 0, 1, 0xff, 0xff, 0, 0]);
        let second = 20 + MAX_CONTENT_LEN;
        let rest = (100 * 1024 - MAX_CONTENT_LEN) as u16;
        assert_eq!(
            &sink.data[second..second + 8],
            &Header::new(RecordType::Stdout, 1, rest).encode()
        );
        assert_eq!(sink.data.len(), 12 + 2 * HEADER_LEN + data.len());
    }

    #[test]
    fn short_writes_are_resumed() {
        let (mut out, mut sink) = (Output::new(), sink(1000));
        let data = vec![1u8; 20_000];
        out.write_stream(&mut sink, RecordType::Stderr, 3, &data)
            .unwrap();
        assert_eq!(sink.data.len(), HEADER_LEN + data.len());
        assert_eq!(&sink.data[..8], &[1, 7, 0, 3, 0x4e, 0x20, 0, 0]);
    }

    #[test]
    fn push_splits_long_content_and_marks_stream_ends() {
        let mut out = Output::new();
        out.push(RecordType::Stdout, 1, &vec![0; MAX_CONTENT_LEN + 1]);
        let mut sink = sink(usize::MAX);
        out.flush(&mut sink).unwrap();
        assert_eq!(&sink.data[..8], &[1, 6, 0, 1, 0xff, 0xff, 0, 0]);
        let second = HEADER_LEN + MAX_CONTENT_LEN;
        assert_eq!(&sink.data[second..second + 8], &[1, 6, 0, 1, 0, 1, 0, 0]);
    }
}
