//! An in-memory socket, a web server's record encoders, and a parser for the answers.

use std::io::{self, Cursor, IoSlice, Read, Write};

use crate::{Connection, Limits, ProtocolError, Request, encode_pair};

pub const BEGIN: u8 = 1;
pub const ABORT: u8 = 2;
pub const END: u8 = 3;
pub const PARAMS: u8 = 4;
pub const STDIN: u8 = 5;
pub const STDOUT: u8 = 6;
pub const STDERR: u8 = 7;
pub const DATA: u8 = 8;
pub const GET_VALUES: u8 = 9;
pub const GET_VALUES_RESULT: u8 = 10;
pub const UNKNOWN_TYPE: u8 = 11;

pub const RESPONDER: u16 = 1;
pub const AUTHORIZER: u16 = 2;
pub const KEEP: u8 = 1;

/// A socket in memory: reads come from `input` (at most `max_read` bytes per call, as a
/// socket delivers segments), writes go to `output`.
pub struct Duplex {
    pub input: Cursor<Vec<u8>>,
    pub output: Vec<u8>,
    pub max_read: usize,
    /// What a read returns once `input` is used up: end of file, or this error (a socket
    /// read timeout gives WouldBlock).
    pub at_end: Option<io::ErrorKind>,
    pub writes: usize,
}

impl Duplex {
    pub fn new(input: Vec<u8>) -> Duplex {
        Duplex {
            input: Cursor::new(input),
            output: Vec::new(),
            max_read: usize::MAX,
            at_end: None,
            writes: 0,
        }
    }
}

impl Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let exhausted = self.input.position() as usize >= self.input.get_ref().len();
        if let (true, Some(kind)) = (exhausted, self.at_end) {
            return Err(kind.into());
        }
        let n = buf.len().min(self.max_read);
        self.input.read(&mut buf[..n])
    }
}

impl Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes += 1;
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes += 1;
        bufs.iter()
            .for_each(|buf| self.output.extend_from_slice(buf));
        Ok(bufs.iter().map(|buf| buf.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub fn padded(record_type: u8, id: u16, content: &[u8], padding: u8) -> Vec<u8> {
    let len = u16::try_from(content.len()).unwrap();
    let mut out = vec![1, record_type];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[padding, 0]);
    out.extend_from_slice(content);
    out.extend(std::iter::repeat_n(0xee, padding.into()));
    out
}

pub fn record(record_type: u8, id: u16, content: &[u8]) -> Vec<u8> {
    padded(record_type, id, content, 0)
}

pub fn begin(id: u16, role: u16, flags: u8) -> Vec<u8> {
    let [hi, lo] = role.to_be_bytes();
    record(BEGIN, id, &[hi, lo, flags, 0, 0, 0, 0, 0])
}

pub fn pairs(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in pairs {
        encode_pair(&mut out, name.as_bytes(), value.as_bytes());
    }
    out
}

/// One PARAMS record with every pair (if any), then the empty one that ends the stream.
pub fn params(id: u16, list: &[(&str, &str)]) -> Vec<u8> {
    let mut out = if list.is_empty() {
        Vec::new()
    } else {
        record(PARAMS, id, &pairs(list))
    };
    out.extend(record(PARAMS, id, b""));
    out
}

/// The body in one record (if any), then the empty one.
pub fn stdin(id: u16, body: &[u8]) -> Vec<u8> {
    let mut out = if body.is_empty() {
        Vec::new()
    } else {
        record(STDIN, id, body)
    };
    out.extend(record(STDIN, id, b""));
    out
}

pub fn request(id: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let list = [("REQUEST_METHOD", "POST"), ("SCRIPT_NAME", "/app")];
    [
        begin(id, RESPONDER, flags),
        params(id, &list),
        stdin(id, body),
    ]
    .concat()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub record_type: u8,
    pub id: u16,
    pub content: Vec<u8>,
}

/// Parses what the connection wrote; checks version, reserved bytes, and that drover
/// sends no padding and no bytes outside records.
pub fn parse(mut out: &[u8]) -> Vec<Rec> {
    let mut records = Vec::new();
    while !out.is_empty() {
        assert!(out.len() >= 8, "a partial header at the end: {out:?}");
        assert_eq!(out[0], 1, "version");
        assert_eq!((out[6], out[7]), (0, 0), "padding and reserved");
        let len = usize::from(u16::from_be_bytes([out[4], out[5]]));
        let id = u16::from_be_bytes([out[2], out[3]]);
        records.push(Rec {
            record_type: out[1],
            id,
            content: out[8..8 + len].to_vec(),
        });
        out = &out[8 + len..];
    }
    records
}

/// The END_REQUEST content: (app status, protocol status).
pub fn end_of(rec: &Rec) -> (u32, u8) {
    assert_eq!(rec.record_type, END);
    let c = &rec.content;
    (u32::from_be_bytes([c[0], c[1], c[2], c[3]]), c[4])
}

/// A request as the test app saw it.
#[derive(Debug)]
pub struct Seen {
    pub request: Request,
    pub body: Vec<u8>,
    pub aborted: bool,
    pub kept: bool,
}

pub struct Served {
    pub seen: Vec<Seen>,
    pub error: Option<ProtocolError>,
    pub records: Vec<Rec>,
    pub writes: usize,
}

pub fn serve(input: Vec<u8>) -> Served {
    serve_duplex(Duplex::new(input), Limits::default())
}

/// Plays a worker: each request's body is read to its end (in 5-byte reads, to exercise
/// record boundaries) and echoed on STDOUT; stops at the end of the connection or at the
/// first error, which it keeps (downcast from the body reader's `io::Error`).
pub fn serve_duplex(duplex: Duplex, limits: Limits) -> Served {
    let mut connection = Connection::new(duplex, limits);
    let mut seen = Vec::new();
    let mut error = None;
    // Bounded: every request consumes input, but a bug must fail the test, not hang it.
    for _ in 0..1000 {
        let request = match connection.next_request() {
            Ok(Some(request)) => request,
            Ok(None) => break,
            Err(err) => {
                error = Some(err);
                break;
            }
        };
        let mut body = Vec::new();
        let mut chunk = [0; 5];
        loop {
            match connection.read_stdin(&mut chunk) {
                Ok(0) => break,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
                Err(err) => {
                    error = Some(to_protocol_error(err));
                    break;
                }
            }
        }
        let aborted = connection.aborted();
        let written = connection.write_stdout(&body);
        let kept = written.and_then(|()| connection.finish(0));
        let kept = kept.unwrap_or(false);
        seen.push(Seen {
            request,
            body,
            aborted,
            kept,
        });
        if error.is_some() || !kept {
            break;
        }
    }
    let duplex = connection.into_inner();
    Served {
        seen,
        error,
        records: parse(&duplex.output),
        writes: duplex.writes,
    }
}

pub fn to_protocol_error(err: io::Error) -> ProtocolError {
    if err
        .get_ref()
        .is_some_and(|inner| inner.is::<ProtocolError>())
    {
        let inner = err
            .into_inner()
            .unwrap()
            .downcast::<ProtocolError>()
            .unwrap();
        *inner
    } else {
        ProtocolError::Io(err)
    }
}
