//! What every read of a record does, whatever the request's stage: decode the header,
//! answer management records and refuse a second request, and name the phase in errors.

use std::io::{self, Read, Write};

use super::Connection;
use crate::error::ProtocolError;
use crate::management::get_values_result;
use crate::record::{BeginRequestBody, Header, ProtocolStatus, RecordType, unknown_type_body};
use crate::wire::WireError;

impl<S: Read + Write> Connection<S> {
    /// The next record that belongs to a request. Management records are answered here,
    /// and so is a BEGIN_REQUEST for a second request while one is in progress.
    pub(super) fn next_header(&mut self) -> Result<Option<Header>, ProtocolError> {
        loop {
            let Some(header) = self.read_header()? else {
                return Ok(None);
            };
            if header.request_id == 0 {
                self.answer_management(header)?;
                continue;
            }
            let busy_with = self.current.as_ref().map(|current| current.id);
            if header.record_type == RecordType::BeginRequest
                && busy_with.is_some_and(|id| id != header.request_id)
            {
                self.read_begin_body(header)?;
                self.push_end_request(header.request_id, 0, ProtocolStatus::CantMpxConn);
                continue;
            }
            return Ok(Some(header));
        }
    }

    /// GET_VALUES is answered for the variables this side knows (spec §4.1); any other
    /// management record gets UNKNOWN_TYPE, as libfcgi does.
    fn answer_management(&mut self, header: Header) -> Result<(), ProtocolError> {
        if header.record_type != RecordType::GetValues {
            self.skip(header.body_len())?;
            let body = unknown_type_body(header.record_type);
            self.wire.push(RecordType::UnknownType, 0, &body);
            return Ok(());
        }
        let mut query = vec![0; header.content_length.into()];
        self.read_exact(&mut query)?;
        self.skip(header.padding_length.into())?;
        let answer =
            get_values_result(&query).map_err(|source| ProtocolError::MalformedParams {
                request_id: 0,
                source,
            })?;
        self.wire.push(RecordType::GetValuesResult, 0, &answer);
        Ok(())
    }

    pub(super) fn read_begin_body(
        &mut self,
        header: Header,
    ) -> Result<BeginRequestBody, ProtocolError> {
        if header.content_length != BeginRequestBody::LEN {
            return Err(ProtocolError::BadRecordLength {
                record_type: header.record_type,
                length: header.content_length,
                expected: BeginRequestBody::LEN,
            });
        }
        let mut body = [0; BeginRequestBody::LEN as usize];
        self.read_exact(&mut body)?;
        self.skip(header.padding_length.into())?;
        Ok(BeginRequestBody::decode(body))
    }

    fn read_header(&mut self) -> Result<Option<Header>, ProtocolError> {
        match self.wire.read_header() {
            Ok(Some(bytes)) => Header::decode(bytes).map(Some),
            Ok(None) => Ok(None),
            Err(err) => Err(self.wire_error(err)),
        }
    }

    pub(super) fn read_some(&mut self, dst: &mut [u8]) -> Result<usize, ProtocolError> {
        let result = self.wire.read_some(dst);
        result.map_err(|err| self.wire_error(err))
    }

    pub(super) fn read_exact(&mut self, dst: &mut [u8]) -> Result<(), ProtocolError> {
        let result = self.wire.read_exact(dst);
        result.map_err(|err| self.wire_error(err))
    }

    pub(super) fn skip(&mut self, n: usize) -> Result<(), ProtocolError> {
        let result = self.wire.skip(n);
        result.map_err(|err| self.wire_error(err))
    }

    /// Names what the connection was doing; a socket read timeout becomes `Timeout`.
    pub(super) fn wire_error(&self, err: WireError) -> ProtocolError {
        let phase = self.phase();
        match err {
            WireError::Truncated => ProtocolError::Truncated { phase },
            WireError::Io(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                ProtocolError::Timeout { phase }
            }
            WireError::Io(err) => ProtocolError::Io(err),
        }
    }
}
