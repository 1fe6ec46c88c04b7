//! What the core hands its driver: the limits it is given, and the events it gives back
//! (a request, body bytes, the body's end, an abort, a record to send back).

use crate::params::Params;
use crate::record::{Header, ProtocolStatus, RecordType, end_request_body, unknown_type_body};

/// Bounds on what a web server can make a worker hold before the app runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The size of one request's PARAMS stream (names, values and their lengths). It also
    /// ends a params stream that never ends. A stream that stalls instead is ended by the
    /// socket's read timeout, if the worker set one ([`crate::ProtocolError::Timeout`]).
    pub max_params_bytes: usize,
    /// How much of a finished request's unread body is read and dropped before the next
    /// request on a kept connection; past it the connection ends
    /// ([`crate::ProtocolError::UnreadBodyTooLarge`]). The worker bounds its lingering close by
    /// the same number. It must exceed the bodies the web server lets through: nginx may
    /// push a whole buffered body (from its temp file) before it reads the response, and
    /// ending the connection under it turns the response into a 502.
    pub max_unread_body: usize,
}

impl Default for Limits {
    /// 64 KiB of params: nginx's largest request headers (`large_client_header_buffers`
    /// 4 × 8k) plus fastcgi.conf's variables fit with room to spare. 64 MiB of unread body:
    /// reading and dropping it takes a few tens of milliseconds.
    fn default() -> Limits {
        Limits {
            max_params_bytes: 64 * 1024,
            max_unread_body: 64 * 1024 * 1024,
        }
    }
}

/// A request, as the app sees it before reading its body.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: u16,
    /// The web server asked to keep the connection open after this request.
    pub keep_conn: bool,
    pub params: Params,
}

/// What the bytes decoded so far mean, in order.
#[derive(Debug)]
pub enum Event<'a> {
    /// A request's params are complete: the app can start.
    Request(Request),
    /// Body bytes of the request in hand: a slice of the input (never empty).
    Stdin(&'a [u8]),
    /// The body is complete (the empty STDIN record).
    StdinEnd,
    /// The web server aborted the request in hand (ABORT_REQUEST); its body ends here.
    Abort,
    /// A record to send back at once (a management answer, a refusal).
    Reply(Reply),
}

/// A record this side sends without the app: see [`Event::Reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// GET_VALUES_RESULT with this content.
    Values(Vec<u8>),
    /// UNKNOWN_TYPE, for a management record of this type.
    UnknownType(RecordType),
    /// END_REQUEST with app status 0: a refused request (UNKNOWN_ROLE, CANT_MPX_CONN), or
    /// one aborted before the app saw it (REQUEST_COMPLETE).
    End { id: u16, status: ProtocolStatus },
}

impl Reply {
    /// The record's type, request id and content.
    pub fn record(&self) -> (RecordType, u16, std::borrow::Cow<'_, [u8]>) {
        match self {
            Reply::Values(answer) => (RecordType::GetValuesResult, 0, answer[..].into()),
            Reply::UnknownType(record_type) => (
                RecordType::UnknownType,
                0,
                unknown_type_body(*record_type).to_vec().into(),
            ),
            Reply::End { id, status } => (
                RecordType::EndRequest,
                *id,
                end_request_body(0, *status).to_vec().into(),
            ),
        }
    }

    /// The record's bytes, unpadded (its content is at most 65,535 bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (record_type, id, content) = self.record();
        let len = u16::try_from(content.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&Header::new(record_type, id, len).encode());
        out.extend_from_slice(&content[..usize::from(len)]);
    }
}
