//! Why a FastCGI connection had to end: every variant's message is the reason the worker
//! logs before it closes the connection (and goes on serving the next one).

use std::fmt;
use std::io;

use super::record::{BadVersion, RecordType};

/// What the connection was doing when something went wrong; part of every message so that
/// a log line says which request was hit and at what point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Between requests: waiting for a BEGIN_REQUEST.
    Idle,
    /// Reading the PARAMS stream of a request.
    Params(u16),
    /// The app is running: reading its STDIN, or writing its output.
    Stdin(u16),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Idle => f.write_str("waiting for a request"),
            Phase::Params(id) => write!(f, "reading the params of request {id}"),
            Phase::Stdin(id) => write!(f, "reading the stdin of request {id}"),
        }
    }
}

/// The connection cannot go on. The caller closes it and logs this; the worker lives on.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("bad FastCGI version {version} (expected 1){}", http_hint(*.version))]
    BadVersion { version: u8 },

    #[error("the web server closed the connection in the middle of a record while {phase}")]
    Truncated { phase: Phase },

    #[error("the web server closed the connection while {phase}")]
    Closed { phase: Phase },

    /// Also what ends a params stream that never ends: it cannot outgrow the limit.
    #[error("the params of request {request_id} exceed the limit of {limit} bytes")]
    ParamsTooLarge { request_id: u16, limit: usize },

    /// A kept connection whose finished request left more body unread than the limit.
    #[error("request {request_id} left more than {limit} bytes of its body unread")]
    UnreadBodyTooLarge { request_id: u16, limit: usize },

    #[error("unexpected {record_type} record while {phase}")]
    UnexpectedRecord {
        record_type: RecordType,
        phase: Phase,
    },

    #[error("{record_type} record of {length} bytes (expected {expected})")]
    BadRecordLength {
        record_type: RecordType,
        length: u16,
        expected: u16,
    },

    /// `request_id` 0: the content of a GET_VALUES record.
    #[error("malformed {}: {source}", name_value_stream(*.request_id))]
    MalformedParams {
        request_id: u16,
        source: NameValueError,
    },

    /// Only when the worker set a read timeout on the socket.
    #[error("timed out while {phase}")]
    Timeout { phase: Phase },

    /// A bug in the caller, not in the peer: the previous request never got its END_REQUEST.
    #[error("next_request() called before request {request_id} was finished")]
    RequestNotFinished { request_id: u16 },

    #[error("connection error: {0}")]
    Io(#[from] io::Error),
}

fn name_value_stream(request_id: u16) -> String {
    match request_id {
        0 => "GET_VALUES query".to_owned(),
        id => format!("params of request {id}"),
    }
}

/// A web server sending HTTP to a FastCGI socket (`proxy_pass` instead of `fastcgi_pass`)
/// is the usual cause of a bad version; its first byte is an ASCII letter ("GET", "POST").
fn http_hint(version: u8) -> &'static str {
    if version.is_ascii_uppercase() {
        " — is the web server sending HTTP instead of FastCGI?"
    } else {
        ""
    }
}

impl From<BadVersion> for ProtocolError {
    fn from(BadVersion(version): BadVersion) -> ProtocolError {
        ProtocolError::BadVersion { version }
    }
}

impl ProtocolError {
    /// True for a read timeout between requests: an idle kept-open connection that the
    /// worker may close quietly, rather than a failure worth a warning.
    pub fn is_idle_timeout(&self) -> bool {
        matches!(self, ProtocolError::Timeout { phase: Phase::Idle })
    }
}

/// How the app sees a protocol error while it reads its request body: an `io::Error` whose
/// kind fits and whose inner error is the `ProtocolError` (downcast it to log the reason).
impl From<ProtocolError> for io::Error {
    fn from(err: ProtocolError) -> io::Error {
        let kind = match err {
            ProtocolError::Io(inner) => return inner,
            ProtocolError::Truncated { .. } | ProtocolError::Closed { .. } => {
                io::ErrorKind::UnexpectedEof
            }
            ProtocolError::Timeout { .. } => io::ErrorKind::TimedOut,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

/// A name-value pair stream (PARAMS or GET_VALUES content) that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameValueError {
    #[error("the length at byte {offset} is cut off by the end of the stream")]
    TruncatedLength { offset: usize },

    #[error(
        "the pair at byte {offset} declares {declared} bytes of name and value, \
         but only {available} remain"
    )]
    TruncatedData {
        offset: usize,
        declared: u64,
        available: usize,
    },
}
