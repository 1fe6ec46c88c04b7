//! The FastCGI records of one ASGI connection, decoded from whatever bytes the event loop
//! hands over (`data_received` cuts anywhere, also inside a header): a push parser, where
//! `drover_fastcgi::Connection` pulls from a blocking socket. It reuses that crate's header,
//! body and params codecs; what it adds is the state of a connection that serves one
//! request at a time (nginx does not multiplex) while the app runs between two feeds.

use drover_fastcgi::{
    BeginRequestBody, HEADER_LEN, Header, Limits, Params, Phase, ProtocolError, ProtocolStatus,
    RecordType, Role, end_request_body, get_values_result, unknown_type_body,
};

/// What one feed found, in order.
#[derive(Debug)]
pub enum Event {
    /// A request's params are complete: the app can start.
    Request { keep: bool, params: Params },
    /// Body bytes (the contents of consecutive STDIN records, joined).
    Body(Vec<u8>),
    /// The body is complete (the empty STDIN record).
    BodyEnd,
    /// The web server aborted the request (ABORT_REQUEST).
    Abort,
    /// Records to write back at once (management answers, refusals).
    Reply(Vec<u8>),
}

/// Where the connection is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for BEGIN_REQUEST.
    Idle,
    /// Reading request `id`'s params.
    Params { id: u16, keep: bool },
    /// Request `id` runs; its body is still arriving.
    Body { id: u16 },
    /// Request `id` runs; its body is complete.
    Running { id: u16 },
    /// Request `id` was answered before its body was complete: the rest is dropped.
    Skipping { id: u16 },
}

/// One connection's decoder.
pub struct Decoder {
    /// Bytes received and not yet decoded (at most one partial record).
    pending: Vec<u8>,
    state: State,
    /// The params stream being read.
    params: Vec<u8>,
    /// Body bytes dropped after an early answer, bounded like the blocking worker's.
    skipped: usize,
    /// Bytes received since the request in hand (or the connection) began, for the log
    /// line of a `request_read_timeout`.
    received: u64,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            pending: Vec::new(),
            state: State::Idle,
            params: Vec::new(),
            skipped: 0,
            received: 0,
        }
    }
}

impl Decoder {
    /// The id of the request in hand (its answer's records carry it).
    pub fn request_id(&self) -> Option<u16> {
        match self.state {
            State::Idle | State::Skipping { .. } => None,
            State::Params { id, .. } | State::Body { id } | State::Running { id } => Some(id),
        }
    }

    /// The request in hand was answered (END_REQUEST written): the connection takes the
    /// next one, after dropping what is left of this one's body.
    pub fn end_request(&mut self) {
        self.state = match self.state {
            State::Body { id } => State::Skipping { id },
            _ => State::Idle,
        };
        self.skipped = 0;
        self.received = 0;
    }

    /// Whether a request is being read: its params, or its body while it runs.
    /// `request_read_timeout` runs then, and not while a kept connection idles.
    pub fn reading(&self) -> bool {
        matches!(self.state, State::Params { .. } | State::Body { .. })
            || (self.state == State::Idle && !self.pending.is_empty())
    }

    /// What the connection waits for, as a `request_read_timeout` log line says it, and
    /// how many bytes came meanwhile.
    pub fn waiting(&self) -> (String, u64) {
        let what = match self.state {
            State::Idle | State::Skipping { .. } => "its first record (BEGIN_REQUEST)".to_string(),
            State::Params { id, .. } => format!("the params of request {id}"),
            State::Body { id } | State::Running { id } => format!("the body of request {id}"),
        };
        (what, self.received)
    }

    /// Whether the body of the request in hand (or the one just answered) is still arriving.
    /// What the web server's end of the connection means now: a record cut short, or
    /// params or a body that never ended; None at a request's end or between requests
    /// (the WSGI worker logs the same reasons, from `drover_fastcgi::Connection`).
    pub fn closed(&self) -> Option<ProtocolError> {
        let phase = self.phase();
        if !self.pending.is_empty() {
            return Some(ProtocolError::Truncated { phase });
        }
        match self.state {
            State::Params { .. } | State::Body { .. } => Some(ProtocolError::Closed { phase }),
            _ => None,
        }
    }

    /// What is being read, as the errors name it.
    fn phase(&self) -> Phase {
        match self.state {
            State::Idle | State::Skipping { .. } | State::Running { .. } => Phase::Idle,
            State::Params { id, .. } => Phase::Params(id),
            State::Body { id } => Phase::Stdin(id),
        }
    }

    pub fn body_unread(&self) -> bool {
        matches!(self.state, State::Body { .. } | State::Skipping { .. })
    }

    /// Decodes what `data` completes; events go to `out`. An error ends the connection.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        self.received += data.len() as u64;
        // The common case, a feed that holds whole records, is decoded in place.
        if self.pending.is_empty() {
            let used = self.decode(data, out)?;
            self.pending.extend_from_slice(&data[used..]);
        } else {
            self.pending.extend_from_slice(data);
            let pending = std::mem::take(&mut self.pending);
            let used = self.decode(&pending, out);
            self.pending = pending;
            self.pending.drain(..used?);
        }
        Ok(())
    }

    /// Decodes the whole records at the start of `data`; returns how many bytes they took.
    fn decode(&mut self, data: &[u8], out: &mut Vec<Event>) -> Result<usize, ProtocolError> {
        let mut pos = 0;
        while let Some(head) = data.get(pos..pos + HEADER_LEN) {
            let header = Header::decode(head.try_into().unwrap_or_default())?;
            let end = pos + HEADER_LEN + header.body_len();
            let Some(record) = data.get(pos + HEADER_LEN..end) else {
                break;
            };
            let content = &record[..usize::from(header.content_length)];
            self.record(header, content, out)?;
            pos = end;
        }
        Ok(pos)
    }

    fn record(
        &mut self,
        header: Header,
        content: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), ProtocolError> {
        let id = header.request_id;
        match (header.record_type, self.state) {
            (RecordType::GetValues, _) if id == 0 => {
                let answer = get_values_result(content).map_err(|source| {
                    ProtocolError::MalformedParams {
                        request_id: 0,
                        source,
                    }
                })?;
                out.push(Event::Reply(record(
                    RecordType::GetValuesResult,
                    0,
                    &answer,
                )));
            }
            (RecordType::BeginRequest, State::Idle | State::Skipping { .. }) => {
                let body: [u8; 8] =
                    content
                        .try_into()
                        .map_err(|_| ProtocolError::BadRecordLength {
                            record_type: RecordType::BeginRequest,
                            length: header.content_length,
                            expected: BeginRequestBody::LEN,
                        })?;
                let body = BeginRequestBody::decode(body);
                if body.role != Role::RESPONDER {
                    out.push(Event::Reply(end_record(id, ProtocolStatus::UnknownRole)));
                    self.state = State::Idle;
                    return Ok(());
                }
                self.params.clear();
                self.state = State::Params {
                    id,
                    keep: body.keep_conn(),
                };
            }
            // A second request while one is in hand: this side serves one at a time.
            (RecordType::BeginRequest, _) => {
                out.push(Event::Reply(end_record(id, ProtocolStatus::CantMpxConn)));
            }
            (RecordType::Params, State::Params { id: current, keep }) if id == current => {
                if content.is_empty() {
                    let params =
                        Params::decode(std::mem::take(&mut self.params)).map_err(|source| {
                            ProtocolError::MalformedParams {
                                request_id: id,
                                source,
                            }
                        })?;
                    self.state = State::Body { id };
                    out.push(Event::Request { keep, params });
                } else if self.params.len() + content.len() > Limits::default().max_params_bytes {
                    return Err(ProtocolError::ParamsTooLarge {
                        request_id: id,
                        limit: Limits::default().max_params_bytes,
                    });
                } else {
                    self.params.extend_from_slice(content);
                }
            }
            (RecordType::Stdin, State::Body { id: current }) if id == current => {
                if content.is_empty() {
                    self.state = State::Running { id };
                    out.push(Event::BodyEnd);
                } else if let Some(Event::Body(body)) = out.last_mut() {
                    body.extend_from_slice(content);
                } else {
                    out.push(Event::Body(content.to_vec()));
                }
            }
            (RecordType::Stdin, State::Skipping { id: current }) if id == current => {
                if content.is_empty() {
                    self.state = State::Idle;
                }
                self.skipped += content.len();
                if self.skipped > Limits::default().max_unread_body {
                    return Err(ProtocolError::UnreadBodyTooLarge {
                        request_id: id,
                        limit: Limits::default().max_unread_body,
                    });
                }
            }
            (RecordType::AbortRequest, State::Params { id: current, .. })
            | (RecordType::AbortRequest, State::Body { id: current })
            | (RecordType::AbortRequest, State::Running { id: current })
                if id == current =>
            {
                out.push(Event::Abort);
            }
            // A record of the request in hand that its phase does not allow (a body before
            // the params end, an END_REQUEST from the web server): the web server is broken,
            // and the connection closes, as the blocking responder's does.
            (record_type, State::Params { id: current, .. }) if id == current => {
                return Err(ProtocolError::UnexpectedRecord {
                    record_type,
                    phase: self.phase(),
                });
            }
            (RecordType::EndRequest, _) if self.request_id() == Some(id) => {
                return Err(ProtocolError::UnexpectedRecord {
                    record_type: RecordType::EndRequest,
                    phase: self.phase(),
                });
            }
            // A management record this side does not know: the spec's answer.
            (other, _) if id == 0 => {
                let body = unknown_type_body(other);
                out.push(Event::Reply(record(RecordType::UnknownType, 0, &body)));
            }
            // Records of another request id, DATA (the filter role's), and a stream's
            // records after its end are ignored, as the blocking responder does.
            _ => {}
        }
        Ok(())
    }
}

/// One record with `content` (at most [`drover_fastcgi::MAX_CONTENT_LEN`] bytes).
fn record(record_type: RecordType, id: u16, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + content.len());
    let len = u16::try_from(content.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&Header::new(record_type, id, len).encode());
    out.extend_from_slice(&content[..usize::from(len)]);
    out
}

/// An END_REQUEST record with a protocol status and app status 0.
fn end_record(id: u16, status: ProtocolStatus) -> Vec<u8> {
    record(RecordType::EndRequest, id, &end_request_body(0, status))
}

#[cfg(test)]
impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        match (self, other) {
            (Event::Request { keep: a, params: p }, Event::Request { keep: b, params: q }) => {
                a == b && p.iter().eq(q.iter())
            }
            (Event::Body(a), Event::Body(b)) | (Event::Reply(a), Event::Reply(b)) => a == b,
            (Event::BodyEnd, Event::BodyEnd) | (Event::Abort, Event::Abort) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_fastcgi::{KEEP_CONN, encode_pair};

    fn rec(t: RecordType, id: u16, content: &[u8]) -> Vec<u8> {
        record(t, id, content)
    }

    fn begin(id: u16, flags: u8) -> Vec<u8> {
        let body = BeginRequestBody {
            role: Role::RESPONDER,
            flags,
        };
        rec(RecordType::BeginRequest, id, &body.encode())
    }

    fn get_request(id: u16, body: &[u8]) -> Vec<u8> {
        let mut params = Vec::new();
        encode_pair(&mut params, b"REQUEST_METHOD", b"POST");
        encode_pair(&mut params, b"DOCUMENT_URI", b"/x");
        let mut out = begin(id, KEEP_CONN);
        out.extend(rec(RecordType::Params, id, &params));
        out.extend(rec(RecordType::Params, id, b""));
        if !body.is_empty() {
            out.extend(rec(RecordType::Stdin, id, body));
        }
        out.extend(rec(RecordType::Stdin, id, b""));
        out
    }

    fn feed_all(decoder: &mut Decoder, data: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        decoder.feed(data, &mut out).unwrap();
        out
    }

    #[test]
    fn a_request_in_one_feed_gives_its_params_and_whole_body() {
        let mut d = Decoder::default();
        let events = feed_all(&mut d, &get_request(1, b"hello"));
        assert_eq!(events.len(), 3, "{events:?}");
        let Event::Request { keep, params } = &events[0] else {
            panic!("{events:?}")
        };
        assert!(*keep);
        assert_eq!(params.get("DOCUMENT_URI"), Some(&b"/x"[..]));
        assert_eq!(events[1], Event::Body(b"hello".to_vec()));
        assert_eq!(events[2], Event::BodyEnd);
        assert_eq!(d.request_id(), Some(1));
    }

    #[test]
    fn bytes_cut_anywhere_decode_to_the_same_events() {
        let wire = get_request(7, b"0123456789");
        for cut in 1..wire.len() {
            let mut d = Decoder::default();
            let mut events = feed_all(&mut d, &wire[..cut]);
            events.extend(feed_all(&mut d, &wire[cut..]));
            let bodies: Vec<u8> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Body(b) => Some(b.clone()),
                    _ => None,
                })
                .flatten()
                .collect();
            assert_eq!(bodies, b"0123456789", "cut at {cut}");
            assert_eq!(events.last(), Some(&Event::BodyEnd), "cut at {cut}");
        }
    }

    #[test]
    fn a_second_request_while_one_runs_is_refused_as_cant_mpx() {
        let mut d = Decoder::default();
        feed_all(&mut d, &get_request(1, b""));
        let events = feed_all(&mut d, &begin(2, 0));
        let expected = end_record(2, ProtocolStatus::CantMpxConn);
        assert_eq!(events, [Event::Reply(expected)]);
        // Once answered, the connection takes the next request.
        d.end_request();
        let events = feed_all(&mut d, &get_request(3, b""));
        assert!(matches!(events[0], Event::Request { .. }), "{events:?}");
    }

    #[test]
    fn the_body_left_after_an_early_answer_is_dropped() {
        let mut d = Decoder::default();
        let wire = get_request(1, b"unread");
        let events = feed_all(&mut d, &wire[..wire.len() - 16]);
        assert!(matches!(events[0], Event::Request { .. }));
        d.end_request();
        assert!(d.body_unread());
        let events = feed_all(&mut d, &wire[wire.len() - 16..]);
        assert!(events.is_empty(), "{events:?}");
        assert!(!d.body_unread());
    }

    #[test]
    fn a_request_is_being_read_until_its_body_is_complete() {
        let mut d = Decoder::default();
        assert!(!d.reading(), "a new connection waits for nothing yet");
        let wire = get_request(1, b"body");
        feed_all(&mut d, &wire[..5]);
        assert!(d.reading(), "half a header");
        feed_all(&mut d, &wire[5..wire.len() - 8]);
        assert!(d.reading(), "the body is still coming");
        feed_all(&mut d, &wire[wire.len() - 8..]);
        assert!(!d.reading(), "complete: the app runs");
        d.end_request();
        assert!(!d.reading(), "a kept connection idles");
    }

    #[test]
    fn get_values_and_unknown_management_records_are_answered() {
        let mut d = Decoder::default();
        let mut query = Vec::new();
        encode_pair(&mut query, b"FCGI_MPXS_CONNS", b"");
        let events = feed_all(&mut d, &rec(RecordType::GetValues, 0, &query));
        let Event::Reply(reply) = &events[0] else {
            panic!()
        };
        assert_eq!(reply[1], RecordType::GetValuesResult.as_u8());
        let events = feed_all(&mut d, &rec(RecordType::Other(42), 0, b""));
        let Event::Reply(reply) = &events[0] else {
            panic!()
        };
        assert_eq!(reply[1], RecordType::UnknownType.as_u8());
        assert_eq!(reply[8], 42);
    }

    #[test]
    fn other_roles_are_refused_and_garbage_ends_the_connection() {
        let mut d = Decoder::default();
        let body = BeginRequestBody {
            role: Role::AUTHORIZER,
            flags: 0,
        };
        let events = feed_all(&mut d, &rec(RecordType::BeginRequest, 1, &body.encode()));
        assert_eq!(
            events,
            [Event::Reply(end_record(1, ProtocolStatus::UnknownRole))]
        );
        let mut out = Vec::new();
        let err = Decoder::default()
            .feed(b"GET / HTTP/1.1\r\n", &mut out)
            .unwrap_err();
        assert!(err.to_string().contains("HTTP instead of FastCGI"), "{err}");
    }

    #[test]
    fn params_past_the_limit_end_the_connection() {
        let mut d = Decoder::default();
        let mut wire = begin(1, 0);
        let chunk = vec![b'a'; 60_000];
        for _ in 0..2 {
            wire.extend(rec(RecordType::Params, 1, &chunk));
        }
        let mut out = Vec::new();
        assert!(matches!(
            d.feed(&wire, &mut out),
            Err(ProtocolError::ParamsTooLarge { .. })
        ));
    }

    #[test]
    fn abort_request_is_passed_on() {
        let mut d = Decoder::default();
        let wire = get_request(1, b"");
        feed_all(&mut d, &wire[..wire.len() - 8]);
        let events = feed_all(&mut d, &rec(RecordType::AbortRequest, 1, b""));
        assert_eq!(events, [Event::Abort]);
    }
}
