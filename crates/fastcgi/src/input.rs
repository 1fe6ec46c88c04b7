//! The read buffer under a connection: lets one `read()` take in a whole nginx request
//! (BEGIN_REQUEST, PARAMS and often STDIN arrive in one segment) instead of one syscall
//! per record header and content. Allocated once, then reused across requests and (through
//! `Buffers`) across connections.

use std::io::{self, Read};

use super::record::HEADER_LEN;

/// Big enough for the header records of a typical request (params of 1–3 KiB) and a small
/// body; larger STDIN content is read straight into the app's buffer (see `connection.rs`).
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

    /// The next header's bytes, if all 8 are buffered.
    pub fn take_header(&mut self) -> Option<[u8; HEADER_LEN]> {
        let bytes = *self.buf[self.start..self.end].first_chunk::<HEADER_LEN>()?;
        self.start += HEADER_LEN;
        Some(bytes)
    }

    /// Moves buffered bytes into `dst`; returns how many.
    pub fn take_into(&mut self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.buffered());
        dst[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// Appends up to `n` buffered bytes to `dst`; returns how many.
    pub fn append_to(&mut self, dst: &mut Vec<u8>, n: usize) -> usize {
        let n = n.min(self.buffered());
        dst.extend_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// Drops up to `n` buffered bytes; returns how many.
    pub fn skip(&mut self, n: usize) -> usize {
        let n = n.min(self.buffered());
        self.start += n;
        n
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
        assert_eq!(input.take_header(), None);
        input.fill_from(&mut &[4u8, 5, 6, 7, 8, 9][..]).unwrap();
        assert_eq!(input.take_header(), Some([1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(input.buffered(), 1);
    }

    #[test]
    fn take_and_skip_stop_at_what_is_buffered() {
        let mut input = Input::new();
        input.fill_from(&mut &b"abcdef"[..]).unwrap();
        assert_eq!(input.skip(2), 2);
        let mut dst = [0; 3];
        assert_eq!(input.take_into(&mut dst), 3);
        assert_eq!(&dst, b"cde");
        assert_eq!(input.skip(10), 1);
        assert_eq!(input.buffered(), 0);
        assert_eq!(input.fill_from(&mut &b""[..]).unwrap(), 0);
    }
}
