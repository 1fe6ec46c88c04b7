//! The read buffer under a connection: lets one `read()` take in a whole nginx request
//! (BEGIN_REQUEST, PARAMS and often STDIN arrive in one segment) instead of one syscall
//! per record header and content. Allocated once, then reused across requests and (through
//! `Buffers`) across connections.

use std::io::{self, Read};

#[cfg(test)]
use super::record::HEADER_LEN;

/// Big enough for the header records of a typical request (params of 1–3 KiB) and a small
/// body; larger STDIN content is read straight into the app's buffer (see `connection/stdin.rs`).
pub(super) const INPUT_CAPACITY: usize = 8 * 1024;

pub(super) struct Input {
    buf: Box<[u8]>,
    /// `buf[start..end]` is read from the stream but not yet parsed.
    start: usize,
    end: usize,
}

impl Input {
    pub fn new() -> Input {
        Input {
            buf: vec![0; INPUT_CAPACITY].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    pub fn clear(&mut self) {
        (self.start, self.end) = (0, 0);
    }

    /// The bytes read and not yet decoded.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Drops the first `n` of [`Self::data`] (decoded).
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.buffered());
    }

    /// One `read()` from `stream` into the free space, after moving what is left (at most
    /// part of a header, in practice) to the front. Ok(0) at end of stream.
    pub fn fill_from<R: Read>(&mut self, stream: &mut R) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let free = &mut self.buf[self.end..];
        // `min` guards against a `Read` that claims more than it was given.
        let n = stream.read(free)?.min(free.len());
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_split_across_reads_is_joined() {
        let mut input = Input::new();
        input.fill_from(&mut &[1u8, 2, 3][..]).unwrap();
        assert_eq!(input.data().first_chunk::<HEADER_LEN>(), None);
        input.fill_from(&mut &[4u8, 5, 6, 7, 8, 9][..]).unwrap();
        assert_eq!(
            input.data().first_chunk::<HEADER_LEN>(),
            Some(&[1, 2, 3, 4, 5, 6, 7, 8])
        );
        input.consume(HEADER_LEN);
        assert_eq!(input.buffered(), 1);
    }

    #[test]
    fn consume_stops_at_what_is_buffered() {
        let mut input = Input::new();
        input.fill_from(&mut &b"abcdef"[..]).unwrap();
        input.consume(2);
        assert_eq!(&input.data()[..3], b"cde");
        input.consume(3);
        input.consume(10);
        assert_eq!(input.buffered(), 0);
        assert_eq!(input.fill_from(&mut &b""[..]).unwrap(), 0);
    }
}
