//! The sans-I/O core on its own: the same bytes fed whole, one at a time and cut at random
//! give the same events; and what it answers and refuses, without a socket.

use super::support::*;
use crate::{Decoder, Event, Limits, ProtocolError, ProtocolStatus, RecordType, Reply};

/// An event with its body bytes owned, consecutive body slices joined (how bytes are cut
/// changes how a body is sliced, and nothing else).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Request {
        id: u16,
        keep: bool,
        params: Vec<(Vec<u8>, Vec<u8>)>,
    },
    Body(Vec<u8>),
    BodyEnd,
    Abort,
    Reply(Reply),
    Error(String),
}

/// Feeds `chunks` in turn, as the ASGI driver does (a cut header waits for the next
/// chunk); the app answers each request once its body ended or was aborted.
fn feed(limits: Limits, chunks: &[&[u8]]) -> (Vec<Seen>, Decoder) {
    let mut decoder = Decoder::new(limits);
    let mut seen = Vec::new();
    let mut pending = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        let mut input = &pending[..];
        loop {
            let (used, event) = match decoder.decode(input) {
                Ok(step) => step,
                Err(err) => {
                    seen.push(Seen::Error(err.to_string()));
                    return (seen, decoder);
                }
            };
            input = &input[used..];
            let Some(event) = event else {
                if used == 0 {
                    break;
                }
                continue;
            };
            let answered = matches!(event, Event::StdinEnd | Event::Abort);
            push(&mut seen, event);
            if answered && decoder.running() {
                decoder.finish();
            }
        }
        let left = input.len();
        pending.drain(..pending.len() - left);
    }
    (seen, decoder)
}

fn push(seen: &mut Vec<Seen>, event: Event<'_>) {
    let owned = match event {
        Event::Request(request) => Seen::Request {
            id: request.id,
            keep: request.keep_conn,
            params: request
                .params
                .iter()
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect(),
        },
        Event::Stdin(data) => {
            if let Some(Seen::Body(body)) = seen.last_mut() {
                body.extend_from_slice(data);
                return;
            }
            Seen::Body(data.to_vec())
        }
        Event::StdinEnd => Seen::BodyEnd,
        Event::Abort => Seen::Abort,
        Event::Reply(reply) => Seen::Reply(reply),
    };
    seen.push(owned);
}

fn whole(wire: &[u8]) -> Vec<Seen> {
    feed(Limits::default(), &[wire]).0
}

/// Conversations that cover every state: padding, management records, refusals, aborts,
/// a body left unread, a second request, errors.
fn conversations() -> Vec<Vec<u8>> {
    let mut query = Vec::new();
    crate::encode_pair(&mut query, b"FCGI_MAX_CONNS", b"");
    vec![
        request(1, KEEP, b"hello"),
        [
            record(GET_VALUES, 0, &query),
            record(42, 0, b"xyz"),
            padded(BEGIN, 3, &[0, 1, KEEP, 0, 0, 0, 0, 0], 5),
            padded(PARAMS, 3, &pairs(&[("A", "1"), ("B", "two")]), 3),
            padded(PARAMS, 3, b"", 7),
            padded(STDIN, 3, b"0123456789", 6),
            begin(4, RESPONDER, 0),
            record(STDIN, 9, b"other"),
            padded(STDIN, 3, b"", 1),
            request(5, 0, b""),
        ]
        .concat(),
        [
            begin(1, AUTHORIZER, KEEP),
            begin(2, RESPONDER, KEEP),
            record(ABORT, 2, b""),
            begin(3, RESPONDER, KEEP),
            params(3, &[("X", "y")]),
            record(STDIN, 3, b"part"),
            record(ABORT, 3, b""),
            request(4, KEEP, b"body"),
        ]
        .concat(),
        [begin(1, RESPONDER, 0), record(STDIN, 1, b"too early")].concat(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        [begin(1, RESPONDER, 0), record(BEGIN, 2, b"short")].concat(),
    ]
}

#[test]
fn bytes_fed_one_at_a_time_give_the_events_of_the_whole() {
    for wire in conversations() {
        let expected = whole(&wire);
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(feed(Limits::default(), &bytes).0, expected);
    }
}

#[test]
fn bytes_cut_at_random_give_the_events_of_the_whole() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut below = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for wire in conversations() {
        let expected = whole(&wire);
        for _ in 0..200 {
            let mut chunks = Vec::new();
            let mut rest = &wire[..];
            while !rest.is_empty() {
                let n = 1 + below(rest.len().min(40));
                chunks.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(feed(Limits::default(), &chunks).0, expected);
        }
    }
}

#[test]
fn a_request_gives_its_params_then_its_body() {
    let seen = whole(&request(1, KEEP, b"hello"));
    let Seen::Request { id, keep, params } = &seen[0] else {
        panic!("{seen:?}")
    };
    assert_eq!((*id, *keep), (1, true));
    assert_eq!(params[0], (b"REQUEST_METHOD".to_vec(), b"POST".to_vec()));
    assert_eq!(seen[1..], [Seen::Body(b"hello".to_vec()), Seen::BodyEnd]);
}

#[test]
fn management_records_and_refusals_are_replies() {
    let seen = whole(&conversations()[1]);
    let Seen::Reply(Reply::Values(answer)) = &seen[0] else {
        panic!("{seen:?}")
    };
    let pairs: Vec<_> = crate::name_values(answer).map(Result::unwrap).collect();
    assert_eq!(pairs, [(&b"FCGI_MAX_CONNS"[..], &b"1"[..])]);
    assert_eq!(
        seen[1],
        Seen::Reply(Reply::UnknownType(RecordType::Other(42)))
    );
    let cant_mpx = Seen::Reply(Reply::End {
        id: 4,
        status: ProtocolStatus::CantMpxConn,
    });
    assert!(seen.contains(&cant_mpx), "{seen:?}");
    // The padded body came whole, the other request's STDIN was not taken for it.
    assert!(
        seen.contains(&Seen::Body(b"0123456789".to_vec())),
        "{seen:?}"
    );
    let seen = whole(&conversations()[2]);
    assert_eq!(
        seen[..2],
        [
            Seen::Reply(Reply::End {
                id: 1,
                status: ProtocolStatus::UnknownRole
            }),
            Seen::Reply(Reply::End {
                id: 2,
                status: ProtocolStatus::RequestComplete
            }),
        ]
    );
    assert!(seen.contains(&Seen::Abort), "{seen:?}");
}

#[test]
fn the_body_left_by_an_early_answer_is_dropped() {
    let mut decoder = Decoder::new(Limits::default());
    let wire = request(1, KEEP, b"unread");
    let mut input = &wire[..wire.len() - 16];
    while let (used @ 1.., _) = decoder.decode(input).unwrap() {
        input = &input[used..];
    }
    assert!(decoder.running());
    decoder.finish();
    assert!(decoder.body_unread());
    assert_eq!(decoder.request_id(), None);
    let mut rest = &wire[wire.len() - 16 - input.len()..];
    while let (used @ 1.., event) = decoder.decode(rest).unwrap() {
        assert!(event.is_none(), "{event:?}");
        rest = &rest[used..];
    }
    assert!(!decoder.body_unread());
}

#[test]
fn a_body_left_past_the_limit_ends_the_connection() {
    let limits = Limits {
        max_unread_body: 10,
        ..Limits::default()
    };
    let mut decoder = Decoder::new(limits);
    let wire = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    decoder.decode_all(&wire, |_| {}).unwrap();
    decoder.finish();
    let err = decoder.decode_all(&record(STDIN, 1, &[b'x'; 11]), |_| {});
    assert!(matches!(
        err,
        Err(ProtocolError::UnreadBodyTooLarge {
            request_id: 1,
            limit: 10
        })
    ));
}

#[test]
fn params_past_the_limit_end_the_connection() {
    let mut wire = begin(1, RESPONDER, 0);
    let chunk = vec![b'a'; 60_000];
    for _ in 0..2 {
        wire.extend(record(PARAMS, 1, &chunk));
    }
    let mut decoder = Decoder::new(Limits::default());
    assert!(matches!(
        decoder.decode_all(&wire, |_| {}),
        Err(ProtocolError::ParamsTooLarge { .. })
    ));
}

#[test]
fn the_end_of_the_stream_is_named_by_what_it_cuts_short() {
    let wire = request(1, KEEP, b"body");
    let cases = [
        (0, None),
        (
            3,
            Some("in the middle of a record while waiting for a request"),
        ),
        (
            16,
            Some("closed the connection while reading the params of request 1"),
        ),
        (
            20,
            Some("in the middle of a record while reading the params of request 1"),
        ),
        (
            wire.len() - 8,
            Some("closed the connection while reading the stdin of request 1"),
        ),
        (
            wire.len() - 9,
            Some("in the middle of a record while reading the stdin"),
        ),
        (wire.len(), None),
    ];
    for (cut, expected) in cases {
        let mut decoder = Decoder::new(Limits::default());
        let used = decoder.decode_all(&wire[..cut], |_| {}).unwrap();
        let err = decoder.at_eof(cut - used).map(|err| err.to_string());
        match expected {
            Some(text) => assert!(
                err.as_deref().unwrap_or("").contains(text),
                "{cut}: {err:?}"
            ),
            None => assert_eq!(err, None, "{cut}"),
        }
    }
}

#[test]
fn a_reply_encodes_as_one_record() {
    let mut out = Vec::new();
    let end = Reply::End {
        id: 7,
        status: ProtocolStatus::CantMpxConn,
    };
    end.encode(&mut out);
    assert_eq!(out, [1, 3, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
}
