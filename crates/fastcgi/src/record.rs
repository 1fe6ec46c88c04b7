//! The FastCGI record layer (spec §3.3, §5, §8): the 8-byte header, the record types, and
//! the fixed-size bodies of BEGIN_REQUEST, END_REQUEST and UNKNOWN_TYPE. Pure byte codecs.

use std::fmt;

/// The only version the spec defines; anything else means the peer is not speaking FastCGI.
pub const VERSION_1: u8 = 1;
pub const HEADER_LEN: usize = 8;
/// A record's content length is a u16.
pub const MAX_CONTENT_LEN: usize = u16::MAX as usize;
/// BEGIN_REQUEST flag: keep the connection open after END_REQUEST for another request.
pub const KEEP_CONN: u8 = 1;

/// A record's type. `Other` carries the byte of a type this side does not know, so that it
/// can be answered with UNKNOWN_TYPE and named in a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    BeginRequest,
    AbortRequest,
    EndRequest,
    Params,
    Stdin,
    Stdout,
    Stderr,
    Data,
    GetValues,
    GetValuesResult,
    UnknownType,
    Other(u8),
}

impl RecordType {
    pub fn from_u8(byte: u8) -> RecordType {
        match byte {
            1 => RecordType::BeginRequest,
            2 => RecordType::AbortRequest,
            3 => RecordType::EndRequest,
            4 => RecordType::Params,
            5 => RecordType::Stdin,
            6 => RecordType::Stdout,
            7 => RecordType::Stderr,
            8 => RecordType::Data,
            9 => RecordType::GetValues,
            10 => RecordType::GetValuesResult,
            11 => RecordType::UnknownType,
            other => RecordType::Other(other),
        }
    }

    pub fn as_u8(self) -> u8 {
        match self {
            RecordType::BeginRequest => 1,
            RecordType::AbortRequest => 2,
            RecordType::EndRequest => 3,
            RecordType::Params => 4,
            RecordType::Stdin => 5,
            RecordType::Stdout => 6,
            RecordType::Stderr => 7,
            RecordType::Data => 8,
            RecordType::GetValues => 9,
            RecordType::GetValuesResult => 10,
            RecordType::UnknownType => 11,
            RecordType::Other(byte) => byte,
        }
    }
}

/// The spec's names, as an operator would search for them.
impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            RecordType::BeginRequest => "BEGIN_REQUEST",
            RecordType::AbortRequest => "ABORT_REQUEST",
            RecordType::EndRequest => "END_REQUEST",
            RecordType::Params => "PARAMS",
            RecordType::Stdin => "STDIN",
            RecordType::Stdout => "STDOUT",
            RecordType::Stderr => "STDERR",
            RecordType::Data => "DATA",
            RecordType::GetValues => "GET_VALUES",
            RecordType::GetValuesResult => "GET_VALUES_RESULT",
            RecordType::UnknownType => "UNKNOWN_TYPE",
            RecordType::Other(byte) => return write!(f, "unknown type {byte}"),
        };
        f.write_str(name)
    }
}

/// A record header. Request id 0 marks a management record (GET_VALUES, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub record_type: RecordType,
    pub request_id: u16,
    pub content_length: u16,
    /// Bytes after the content that the receiver skips (senders may align records to 8).
    pub padding_length: u8,
}

impl Header {
    /// An unpadded header: see `output.rs` for why drover never pads.
    pub fn new(record_type: RecordType, request_id: u16, content_length: u16) -> Header {
        Header {
            record_type,
            request_id,
            content_length,
            padding_length: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let [id_hi, id_lo] = self.request_id.to_be_bytes();
        let [len_hi, len_lo] = self.content_length.to_be_bytes();
        let t = self.record_type.as_u8();
        [
            VERSION_1,
            t,
            id_hi,
            id_lo,
            len_hi,
            len_lo,
            self.padding_length,
            0,
        ]
    }

    /// The reserved byte is ignored, as the spec asks. A version other than 1 becomes
    /// [`crate::ProtocolError::BadVersion`].
    pub fn decode(bytes: [u8; HEADER_LEN]) -> Result<Header, BadVersion> {
        let [
            version,
            t,
            id_hi,
            id_lo,
            len_hi,
            len_lo,
            padding_length,
            _reserved,
        ] = bytes;
        if version != VERSION_1 {
            return Err(BadVersion(version));
        }
        Ok(Header {
            record_type: RecordType::from_u8(t),
            request_id: u16::from_be_bytes([id_hi, id_lo]),
            content_length: u16::from_be_bytes([len_hi, len_lo]),
            padding_length,
        })
    }

    /// Content and padding: what follows the header on the wire.
    pub fn body_len(&self) -> usize {
        usize::from(self.content_length) + usize::from(self.padding_length)
    }
}

/// A header whose version byte is not 1: the peer is not speaking FastCGI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadVersion(pub u8);

/// The role a web server asks for in BEGIN_REQUEST. drover is a responder only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role(pub u16);

impl Role {
    pub const RESPONDER: Role = Role(1);
    pub const AUTHORIZER: Role = Role(2);
    pub const FILTER: Role = Role(3);
}

/// The 8-byte content of a BEGIN_REQUEST record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeginRequestBody {
    pub role: Role,
    pub flags: u8,
}

impl BeginRequestBody {
    pub const LEN: u16 = 8;

    pub fn decode(bytes: [u8; 8]) -> BeginRequestBody {
        BeginRequestBody {
            role: Role(u16::from_be_bytes([bytes[0], bytes[1]])),
            flags: bytes[2],
        }
    }

    /// For clients and tests; drover itself only decodes this body.
    pub fn encode(&self) -> [u8; 8] {
        let [hi, lo] = self.role.0.to_be_bytes();
        [hi, lo, self.flags, 0, 0, 0, 0, 0]
    }

    pub fn keep_conn(&self) -> bool {
        self.flags & KEEP_CONN != 0
    }
}

/// Why a request ended, from the protocol's point of view (END_REQUEST's protocolStatus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProtocolStatus {
    RequestComplete = 0,
    /// A second request on a connection that carries one at a time.
    CantMpxConn = 1,
    Overloaded = 2,
    UnknownRole = 3,
}

/// The 8-byte content of an END_REQUEST record.
pub fn end_request_body(app_status: u32, status: ProtocolStatus) -> [u8; 8] {
    let [a, b, c, d] = app_status.to_be_bytes();
    [a, b, c, d, status as u8, 0, 0, 0]
}

/// The 8-byte content of an UNKNOWN_TYPE record: the type that was not understood.
pub fn unknown_type_body(record_type: RecordType) -> [u8; 8] {
    [record_type.as_u8(), 0, 0, 0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtocolError;

    #[test]
    fn header_encodes_big_endian_fields_in_spec_order() {
        let header = Header {
            record_type: RecordType::Stdout,
            request_id: 0x0102,
            content_length: 0xfffe,
            padding_length: 2,
        };
        assert_eq!(header.encode(), [1, 6, 0x01, 0x02, 0xff, 0xfe, 2, 0]);
        assert_eq!(Header::decode(header.encode()).unwrap(), header);
        assert_eq!(header.body_len(), 0xfffe + 2);
    }

    #[test]
    fn header_decode_ignores_the_reserved_byte() {
        let header = Header::decode([1, 5, 0, 1, 0, 3, 5, 0xaa]).unwrap();
        assert_eq!(
            header,
            Header {
                record_type: RecordType::Stdin,
                request_id: 1,
                content_length: 3,
                padding_length: 5
            }
        );
    }

    #[test]
    fn header_with_another_version_is_rejected() {
        for version in [0, 2, 255] {
            let err =
                ProtocolError::from(Header::decode([version, 1, 0, 1, 0, 8, 0, 0]).unwrap_err());
            assert!(matches!(err, ProtocolError::BadVersion { version: v } if v == version));
        }
    }

    #[test]
    fn http_sent_to_a_fastcgi_socket_is_named_in_the_error() {
        let err = ProtocolError::from(Header::decode(*b"GET / HT").unwrap_err());
        let message = err.to_string();
        assert!(message.contains("bad FastCGI version 71"), "{message}");
        assert!(message.contains("HTTP instead of FastCGI"), "{message}");
    }

    #[test]
    fn every_type_byte_round_trips() {
        for byte in 0..=u8::MAX {
            assert_eq!(RecordType::from_u8(byte).as_u8(), byte);
        }
        assert_eq!(RecordType::from_u8(9), RecordType::GetValues);
        assert_eq!(RecordType::from_u8(12), RecordType::Other(12));
        assert_eq!(RecordType::from_u8(2).to_string(), "ABORT_REQUEST");
        assert_eq!(RecordType::Other(42).to_string(), "unknown type 42");
    }

    #[test]
    fn begin_request_body_decodes_role_and_keep_conn() {
        let body = BeginRequestBody::decode([0, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(body.role, Role::RESPONDER);
        assert!(body.keep_conn());
        let body = BeginRequestBody::decode([0, 2, 0xfe, 9, 9, 9, 9, 9]);
        assert_eq!(body.role, Role::AUTHORIZER);
        assert!(!body.keep_conn());
        let filter = BeginRequestBody {
            role: Role::FILTER,
            flags: KEEP_CONN,
        };
        assert_eq!(BeginRequestBody::decode(filter.encode()), filter);
    }

    #[test]
    fn end_request_body_carries_app_status_and_protocol_status() {
        assert_eq!(
            end_request_body(0x0102_0304, ProtocolStatus::RequestComplete),
            [1, 2, 3, 4, 0, 0, 0, 0]
        );
        assert_eq!(end_request_body(0, ProtocolStatus::CantMpxConn)[4], 1);
        assert_eq!(end_request_body(0, ProtocolStatus::Overloaded)[4], 2);
        assert_eq!(end_request_body(0, ProtocolStatus::UnknownRole)[4], 3);
    }

    #[test]
    fn unknown_type_body_names_the_type() {
        assert_eq!(
            unknown_type_body(RecordType::Other(200)),
            [200, 0, 0, 0, 0, 0, 0, 0]
        );
    }
}
