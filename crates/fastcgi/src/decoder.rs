//! The responder's protocol, sans I/O: bytes in, [`Event`]s out. Both connections drive
//! it: [`crate::Connection`] pulls bytes from a blocking socket into it, the ASGI worker's
//! event loop pushes whatever `data_received` got (cut anywhere, a header included).
//!
//! One request at a time (FCGI_MAX_CONNS = FCGI_MAX_REQS = 1, FCGI_MPXS_CONNS = 0): a
//! worker serves one request per connection at once, and nginx does not multiplex.
//! Everything the protocol asks of a responder besides the app's own input and output is
//! decided here, as records arrive: GET_VALUES and unknown management types are answered,
//! other roles are refused with UNKNOWN_ROLE, a second request id with CANT_MPX_CONN, an
//! ABORT_REQUEST before the params end is answered with END_REQUEST (the app never saw
//! the request), and the body a finished request left unread is dropped, up to
//! [`Limits::max_unread_body`]. The answers come out as [`Event::Reply`]; the driver
//! writes them. A [`ProtocolError`] ends the connection; no input makes this panic.
//!
//! Record content streams: a PARAMS or STDIN record is taken as its bytes arrive, so a
//! driver never needs to buffer a whole record (STDIN bytes come out as slices of the
//! input, which may be the app's own buffer). Only BEGIN_REQUEST's 8 bytes and a
//! GET_VALUES query are collected whole.

mod event;

pub use event::{Event, Limits, Reply, Request};

use crate::error::{Phase, ProtocolError};
use crate::management::get_values_result;
use crate::params::Params;
use crate::record::{BeginRequestBody, HEADER_LEN, Header, ProtocolStatus, RecordType, Role};

/// Where the connection is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for BEGIN_REQUEST.
    Idle,
    /// Reading request `id`'s params.
    Params { id: u16, keep: bool },
    /// Request `id` runs; its body is arriving.
    Stdin { id: u16 },
    /// Request `id` runs; its body has ended (or the web server aborted it).
    Ran { id: u16, aborted: bool },
    /// Request `id` was finished before its body ended: the rest is dropped, counted
    /// against `max_unread_body`, until its empty STDIN or the next BEGIN_REQUEST.
    Draining { id: u16 },
}

/// Where the decoder is inside the record in hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InRecord {
    /// At a record boundary: the next 8 bytes are a header.
    Header,
    /// `remaining` bytes of this record's content are to come, then its padding.
    Content {
        header: Header,
        take: Take,
        remaining: usize,
    },
    /// Padding bytes to skip.
    Padding(usize),
}

/// What becomes of a record's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    Skip,
    Params,
    Stdin,
    /// Collected whole, then acted on (BEGIN_REQUEST's body, a GET_VALUES query).
    Collect,
}

/// One connection's protocol state.
pub struct Decoder {
    limits: Limits,
    state: State,
    record: InRecord,
    /// The params stream being read (into a recycled request's buffers when there is one).
    params: Params,
    /// The previous request's params size, so that a new buffer is allocated once.
    params_hint: usize,
    /// A GET_VALUES query, collected whole.
    collected: Vec<u8>,
    /// A BEGIN_REQUEST's body, collected whole (on the stack: one per request).
    begin: [u8; BeginRequestBody::LEN as usize],
    /// Bytes dropped while draining, against `max_unread_body`.
    dropped: usize,
    /// A refused or aborted request without FCGI_KEEP_CONN ended the connection.
    over: bool,
}

impl Decoder {
    pub fn new(limits: Limits) -> Decoder {
        Decoder::with_params(limits, Params::default())
    }

    /// A decoder that reads the first request's params into `params`' buffers.
    pub fn with_params(limits: Limits, params: Params) -> Decoder {
        Decoder {
            limits,
            state: State::Idle,
            record: InRecord::Header,
            params,
            params_hint: 1024,
            collected: Vec::new(),
            begin: [0; BeginRequestBody::LEN as usize],
            dropped: 0,
            over: false,
        }
    }

    /// Takes back a served request's params: the next request's are read into its buffers.
    pub fn recycle(&mut self, params: Params) {
        self.params = params;
    }

    /// The buffers of the next request's params, for the next connection.
    pub fn into_params(self) -> Params {
        self.params
    }

    /// Decodes at most one event from the start of `input`: the bytes used and the event.
    /// `(0, None)`: `input` holds no complete header (or is empty); more is needed.
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<Event<'a>>), ProtocolError> {
        match self.record {
            InRecord::Header => {
                let Some(bytes) = input.first_chunk::<HEADER_LEN>() else {
                    return Ok((0, None));
                };
                let header = Header::decode(*bytes)?;
                self.record = InRecord::Content {
                    header,
                    take: Take::Skip,
                    remaining: header.content_length.into(),
                };
                let mut event = self.on_header(header)?;
                if self.record
                    == (InRecord::Content {
                        header,
                        take: Take::Collect,
                        remaining: 0,
                    })
                {
                    // An empty GET_VALUES: nothing more to collect.
                    event = self.on_collected(header)?;
                }
                self.settle();
                Ok((HEADER_LEN, event))
            }
            InRecord::Padding(n) => {
                let used = n.min(input.len());
                self.record = InRecord::Padding(n - used);
                self.settle();
                Ok((used, None))
            }
            InRecord::Content {
                header,
                take,
                remaining,
            } => {
                let used = remaining.min(input.len());
                if used == 0 {
                    return Ok((0, None));
                }
                let content = &input[..used];
                self.record = InRecord::Content {
                    header,
                    take,
                    remaining: remaining - used,
                };
                let done = used == remaining;
                let event = match take {
                    Take::Skip => None,
                    Take::Stdin => Some(Event::Stdin(content)),
                    Take::Params => {
                        self.params.raw_mut().extend_from_slice(content);
                        None
                    }
                    Take::Collect => {
                        if header.request_id == 0 {
                            self.collected.extend_from_slice(content);
                        } else {
                            // A BEGIN_REQUEST: its length is 8, checked with the header.
                            let at = usize::from(header.content_length) - remaining;
                            self.begin[at..at + used].copy_from_slice(content);
                        }
                        if done {
                            self.on_collected(header)?
                        } else {
                            None
                        }
                    }
                };
                self.settle();
                Ok((used, event))
            }
        }
    }

    /// Decodes all it can of `input`, calling `on_event` for each event; returns the bytes
    /// used (what is left is part of a header, to come again with the next bytes).
    pub fn decode_all(
        &mut self,
        mut input: &[u8],
        mut on_event: impl FnMut(Event<'_>),
    ) -> Result<usize, ProtocolError> {
        let start = input.len();
        loop {
            let (used, event) = self.decode(input)?;
            if let Some(event) = event {
                on_event(event);
            } else if used == 0 {
                return Ok(start - input.len());
            }
            input = &input[used..];
        }
    }

    /// The request in hand was answered: what is left of its body is dropped, and the
    /// connection takes the next request.
    pub fn finish(&mut self) {
        self.dropped = 0;
        self.state = match self.state {
            State::Stdin { id } => {
                if let InRecord::Content {
                    header,
                    take: Take::Stdin,
                    remaining,
                } = self.record
                {
                    self.record = InRecord::Content {
                        header,
                        take: Take::Skip,
                        remaining,
                    };
                    self.dropped = remaining + usize::from(header.padding_length);
                }
                State::Draining { id }
            }
            _ => State::Idle,
        };
    }

    /// What the connection was doing, as the errors name it.
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Idle | State::Draining { .. } => Phase::Idle,
            State::Params { id, .. } => Phase::Params(id),
            State::Stdin { id } | State::Ran { id, .. } => Phase::Stdin(id),
        }
    }

    /// The id of the request in hand, from its BEGIN_REQUEST until [`Self::finish`].
    pub fn request_id(&self) -> Option<u16> {
        match self.state {
            State::Idle | State::Draining { .. } => None,
            State::Params { id, .. } | State::Stdin { id } | State::Ran { id, .. } => Some(id),
        }
    }

    /// Whether a request is being read: its params, or its body.
    pub fn reading(&self) -> bool {
        matches!(self.state, State::Params { .. } | State::Stdin { .. })
    }

    /// Whether a record is partly decoded: its header is in, not all of its content (or
    /// padding).
    pub fn in_record(&self) -> bool {
        self.record != InRecord::Header
    }

    /// Whether the request in hand runs: its params are complete and it is not finished.
    pub fn running(&self) -> bool {
        matches!(self.state, State::Stdin { .. } | State::Ran { .. })
    }

    /// Whether the body of the request in hand is still arriving.
    pub fn body_open(&self) -> bool {
        matches!(self.state, State::Stdin { .. })
    }

    /// The web server aborted the request in hand.
    pub fn aborted(&self) -> bool {
        matches!(self.state, State::Ran { aborted: true, .. })
    }

    /// Whether the last finished request's body is still arriving (it is being dropped).
    pub fn body_unread(&self) -> bool {
        matches!(self.state, State::Draining { .. })
    }

    /// Bytes of a STDIN record's content the next [`Self::decode`] takes as body, without
    /// a header first: a driver may read them straight into the app's buffer.
    pub fn stdin_due(&self) -> usize {
        match self.record {
            InRecord::Content {
                take: Take::Stdin,
                remaining,
                ..
            } => remaining,
            _ => 0,
        }
    }

    /// A refused or aborted request without FCGI_KEEP_CONN ended the connection: the
    /// driver writes the replies and closes it.
    pub fn over(&self) -> bool {
        self.over
    }

    /// What the web server's end of the connection means now, with `leftover` bytes of a
    /// header undecoded: a record cut short, or params or a body that never ended. None at
    /// a clean end: between requests, or while a finished request's body is dropped (a
    /// web server that got its response may close without sending the rest).
    pub fn at_eof(&self, leftover: usize) -> Option<ProtocolError> {
        let phase = self.phase();
        match self.state {
            State::Draining { .. } => None,
            _ if leftover > 0 || self.record != InRecord::Header => {
                Some(ProtocolError::Truncated { phase })
            }
            State::Params { .. } | State::Stdin { .. } => Some(ProtocolError::Closed { phase }),
            State::Idle | State::Ran { .. } => None,
        }
    }

    /// A record that has ended gives way to its padding, then to the next header.
    fn settle(&mut self) {
        self.record = match self.record {
            InRecord::Content {
                header,
                remaining: 0,
                ..
            } if header.padding_length > 0 => InRecord::Padding(header.padding_length.into()),
            InRecord::Content { remaining: 0, .. } | InRecord::Padding(0) => InRecord::Header,
            other => other,
        };
    }

    /// Decides what a record means from its header; its content is to come.
    fn on_header(&mut self, header: Header) -> Result<Option<Event<'static>>, ProtocolError> {
        let id = header.request_id;
        if id == 0 {
            if header.record_type == RecordType::GetValues {
                self.collect();
                return Ok(None);
            }
            return Ok(Some(Event::Reply(Reply::UnknownType(header.record_type))));
        }
        if header.record_type == RecordType::BeginRequest {
            return self.on_begin(header);
        }
        match self.state {
            State::Idle => Ok(None),
            State::Draining { id: draining } => self.drain(header, draining),
            State::Params { id: current, keep } if id == current => self.on_params(header, keep),
            State::Stdin { id: current } if id == current => self.on_stdin(header),
            State::Ran { id: current, .. } if id == current => match header.record_type {
                RecordType::AbortRequest => {
                    self.state = State::Ran { id, aborted: true };
                    Ok(Some(Event::Abort))
                }
                RecordType::EndRequest => Err(self.unexpected(header)),
                _ => Ok(None),
            },
            // Another request's record: refused or not known here.
            _ => Ok(None),
        }
    }

    fn on_begin(&mut self, header: Header) -> Result<Option<Event<'static>>, ProtocolError> {
        if self.request_id() == Some(header.request_id) {
            return Err(self.unexpected(header));
        }
        if header.content_length != BeginRequestBody::LEN {
            return Err(ProtocolError::BadRecordLength {
                record_type: header.record_type,
                length: header.content_length,
                expected: BeginRequestBody::LEN,
            });
        }
        self.collect();
        Ok(None)
    }

    /// The content of a record collected whole is here.
    fn on_collected(&mut self, header: Header) -> Result<Option<Event<'static>>, ProtocolError> {
        let id = header.request_id;
        if id == 0 {
            let answer = get_values_result(&self.collected).map_err(|source| {
                ProtocolError::MalformedParams {
                    request_id: 0,
                    source,
                }
            })?;
            self.collected = Vec::new();
            return Ok(Some(Event::Reply(Reply::Values(answer))));
        }
        let body = BeginRequestBody::decode(self.begin);
        if self.request_id().is_some() {
            let status = ProtocolStatus::CantMpxConn;
            return Ok(Some(Event::Reply(Reply::End { id, status })));
        }
        self.state = State::Idle;
        if body.role != Role::RESPONDER {
            self.over |= !body.keep_conn();
            let status = ProtocolStatus::UnknownRole;
            return Ok(Some(Event::Reply(Reply::End { id, status })));
        }
        self.state = State::Params {
            id,
            keep: body.keep_conn(),
        };
        let raw = self.params.reset();
        if raw.capacity() == 0 {
            raw.reserve(self.params_hint);
        }
        Ok(None)
    }

    fn on_params(
        &mut self,
        header: Header,
        keep: bool,
    ) -> Result<Option<Event<'static>>, ProtocolError> {
        let id = header.request_id;
        match header.record_type {
            RecordType::Params if header.content_length == 0 => {
                self.params_hint = self.params.raw_mut().len();
                self.params
                    .index()
                    .map_err(|source| ProtocolError::MalformedParams {
                        request_id: id,
                        source,
                    })?;
                self.state = State::Stdin { id };
                let params = std::mem::take(&mut self.params);
                Ok(Some(Event::Request(Request {
                    id,
                    keep_conn: keep,
                    params,
                })))
            }
            RecordType::Params => {
                let end = self.params.raw_mut().len() + usize::from(header.content_length);
                if end > self.limits.max_params_bytes {
                    let limit = self.limits.max_params_bytes;
                    return Err(ProtocolError::ParamsTooLarge {
                        request_id: id,
                        limit,
                    });
                }
                self.set_take(Take::Params);
                Ok(None)
            }
            RecordType::AbortRequest => {
                self.state = State::Idle;
                self.over |= !keep;
                let status = ProtocolStatus::RequestComplete;
                Ok(Some(Event::Reply(Reply::End { id, status })))
            }
            _ => Err(self.unexpected(header)),
        }
    }

    fn on_stdin(&mut self, header: Header) -> Result<Option<Event<'static>>, ProtocolError> {
        let id = header.request_id;
        match header.record_type {
            RecordType::Stdin if header.content_length == 0 => {
                self.state = State::Ran { id, aborted: false };
                Ok(Some(Event::StdinEnd))
            }
            RecordType::Stdin => {
                self.set_take(Take::Stdin);
                Ok(None)
            }
            RecordType::AbortRequest => {
                self.state = State::Ran { id, aborted: true };
                Ok(Some(Event::Abort))
            }
            _ => Err(self.unexpected(header)),
        }
    }

    /// A record while a finished request's body is dropped: its empty STDIN ends that;
    /// anything else counts against `max_unread_body`.
    fn drain(&mut self, header: Header, id: u16) -> Result<Option<Event<'static>>, ProtocolError> {
        if header.request_id == id
            && header.record_type == RecordType::Stdin
            && header.content_length == 0
        {
            self.state = State::Idle;
            return Ok(None);
        }
        self.dropped += header.body_len();
        if self.dropped > self.limits.max_unread_body {
            let limit = self.limits.max_unread_body;
            return Err(ProtocolError::UnreadBodyTooLarge {
                request_id: id,
                limit,
            });
        }
        Ok(None)
    }

    fn collect(&mut self) {
        self.collected.clear();
        self.set_take(Take::Collect);
    }

    fn set_take(&mut self, new: Take) {
        if let InRecord::Content { take, .. } = &mut self.record {
            *take = new;
        }
    }

    fn unexpected(&self, header: Header) -> ProtocolError {
        ProtocolError::UnexpectedRecord {
            record_type: header.record_type,
            phase: self.phase(),
        }
    }
}
