//! The request cycle: params, body, output, end of request, kept connections.

use super::support::*;
use crate::{Connection, Limits, MAX_CONTENT_LEN, ProtocolError};

#[test]
fn a_request_is_answered_with_stdout_its_end_and_end_request() {
    let served = serve(request(1, 0, b"hello"));
    assert!(served.error.is_none());
    let [seen] = &served.seen[..] else {
        panic!("one request: {:?}", served.seen)
    };
    assert_eq!(seen.request.id, 1);
    assert!(!seen.request.keep_conn && !seen.kept);
    assert_eq!(
        seen.request.params.get("REQUEST_METHOD"),
        Some(&b"POST"[..])
    );
    assert_eq!(seen.request.params.get("SCRIPT_NAME"), Some(&b"/app"[..]));
    assert_eq!(seen.body, b"hello");
    assert_eq!(
        served.records,
        [
            Rec {
                record_type: STDOUT,
                id: 1,
                content: b"hello".to_vec()
            },
            Rec {
                record_type: STDOUT,
                id: 1,
                content: vec![]
            },
            Rec {
                record_type: END,
                id: 1,
                content: vec![0, 0, 0, 0, 0, 0, 0, 0]
            },
        ]
    );
}

#[test]
fn a_small_response_costs_one_write() {
    let served = serve(request(1, 0, b"hello"));
    assert_eq!(served.writes, 1);
}

#[test]
fn keep_conn_serves_two_requests_on_one_connection() {
    let input = [request(1, KEEP, b"first"), request(1, KEEP, b"second")].concat();
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(served.seen.len(), 2);
    assert!(
        served
            .seen
            .iter()
            .all(|seen| seen.request.keep_conn && seen.kept)
    );
    assert_eq!(served.seen[1].body, b"second");
    let ends: Vec<_> = served
        .records
        .iter()
        .filter(|r| r.record_type == END)
        .collect();
    assert_eq!(ends.len(), 2);
}

#[test]
fn without_keep_conn_the_connection_ends_after_one_request() {
    let input = [request(1, 0, b"first"), request(1, 0, b"second")].concat();
    let served = serve(input);
    assert_eq!(served.seen.len(), 1);
    assert!(served.error.is_none());
}

#[test]
fn a_body_in_many_small_padded_records_is_streamed() {
    let body: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
    let mut input = [
        begin(7, RESPONDER, 0),
        params(7, &[("CONTENT_LENGTH", "2000")]),
    ]
    .concat();
    let mut rest = &body[..];
    let mut size = 1;
    while !rest.is_empty() {
        let n = size.min(rest.len());
        input.extend(padded(STDIN, 7, &rest[..n], (n % 8) as u8));
        rest = &rest[n..];
        size = size % 13 + 1;
    }
    input.extend(record(STDIN, 7, b""));
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(served.seen[0].body, body);
}

#[test]
fn input_arriving_one_byte_at_a_time_gives_the_same_requests() {
    let input = [request(1, KEEP, b"first body"), request(2, 0, b"second")].concat();
    let mut duplex = Duplex::new(input.clone());
    duplex.max_read = 1;
    let slow = serve_duplex(duplex, Limits::default());
    let fast = serve(input);
    assert!(slow.error.is_none());
    assert_eq!(slow.records, fast.records);
    assert_eq!(slow.seen[1].body, b"second");
}

#[test]
fn a_large_body_is_read_through_large_buffers() {
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut input = [begin(1, RESPONDER, 0), params(1, &[])].concat();
    for chunk in body.chunks(MAX_CONTENT_LEN) {
        input.extend(padded(STDIN, 1, chunk, 1));
    }
    input.extend(record(STDIN, 1, b""));
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();
    let mut read = Vec::new();
    let mut buf = vec![0; 100_000];
    loop {
        let n = connection.read_stdin(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        read.extend_from_slice(&buf[..n]);
    }
    assert_eq!(read, body);
}

#[test]
fn output_larger_than_a_record_is_split_into_records_of_at_most_65535_bytes() {
    let data: Vec<u8> = (0..150_000u32).map(|i| (i % 253) as u8).collect();
    let mut connection = Connection::new(Duplex::new(request(3, 0, b"")), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stdout(b"Status: 200 OK\r\n\r\n").unwrap();
    connection.write_stdout(&data).unwrap();
    assert!(!connection.finish(0).unwrap());
    let records = parse(&connection.into_inner().output);
    let lens: Vec<_> = records
        .iter()
        .map(|r| (r.record_type, r.content.len()))
        .collect();
    assert_eq!(
        lens,
        [
            (STDOUT, 18),
            (STDOUT, 65535),
            (STDOUT, 65535),
            (STDOUT, 150_000 - 2 * 65535),
            (STDOUT, 0),
            (END, 8)
        ]
    );
    let sent: Vec<u8> = records[1..4]
        .iter()
        .flat_map(|r| r.content.clone())
        .collect();
    assert_eq!(sent, data);
}

#[test]
fn stderr_is_sent_and_its_stream_closed_before_end_request() {
    let mut connection = Connection::new(Duplex::new(request(1, 0, b"")), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stderr(b"PHP Warning: oops\n").unwrap();
    connection.write_stdout(b"body").unwrap();
    connection.finish(3).unwrap();
    let records = parse(&connection.into_inner().output);
    let types: Vec<_> = records.iter().map(|r| r.record_type).collect();
    assert_eq!(types, [STDERR, STDOUT, STDOUT, STDERR, END]);
    assert_eq!(records[0].content, b"PHP Warning: oops\n");
    assert_eq!(end_of(&records[4]), (3, 0));
}

#[test]
fn empty_writes_send_no_record_that_would_end_the_stream() {
    let mut connection = Connection::new(Duplex::new(request(1, 0, b"")), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stdout(b"").unwrap();
    connection.write_stderr(b"").unwrap();
    connection.finish(0).unwrap();
    let types: Vec<_> = parse(&connection.into_inner().output)
        .iter()
        .map(|r| r.record_type)
        .collect();
    assert_eq!(types, [STDOUT, END]);
}

#[test]
fn flush_sends_a_streamed_chunk_before_the_request_ends() {
    let mut connection = Connection::new(Duplex::new(request(1, 0, b"")), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stdout(b"first chunk").unwrap();
    assert!(
        connection.get_ref().output.is_empty(),
        "small writes wait for flush"
    );
    connection.flush().unwrap();
    assert_eq!(
        parse(&connection.get_ref().output)[0].content,
        b"first chunk"
    );
}

#[test]
fn padded_records_of_every_kind_are_accepted() {
    let mut input = padded(BEGIN, 1, &[0, 1, KEEP, 0, 0, 0, 0, 0], 3);
    input.extend(padded(PARAMS, 1, &pairs(&[("A", "1")]), 7));
    input.extend(padded(PARAMS, 1, b"", 5));
    input.extend(padded(STDIN, 1, b"abc", 5));
    input.extend(padded(STDIN, 1, b"", 8));
    input.extend(padded(GET_VALUES, 0, &pairs(&[("FCGI_MAX_REQS", "")]), 2));
    input.extend(request(2, 0, b"next"));
    let served = serve(input);
    assert!(served.error.is_none(), "{:?}", served.error);
    assert_eq!(served.seen.len(), 2);
    assert_eq!(served.seen[0].request.params.get("A"), Some(&b"1"[..]));
    assert_eq!(served.seen[0].body, b"abc");
}

#[test]
fn params_split_anywhere_across_records_and_four_byte_lengths_decode() {
    let long_name = "HTTP_X_".to_owned() + &"N".repeat(200);
    let long_value = "v".repeat(1000);
    let stream = pairs(&[
        ("QUERY_STRING", "a=1"),
        (&long_name, &long_value),
        ("E", ""),
    ]);
    let mut input = begin(1, RESPONDER, 0);
    for piece in stream.chunks(7) {
        input.extend(record(PARAMS, 1, piece));
    }
    input.extend(record(PARAMS, 1, b""));
    input.extend(stdin(1, b""));
    let served = serve(input);
    let params = &served.seen[0].request.params;
    assert_eq!(params.len(), 3);
    assert_eq!(params.get(&long_name), Some(long_value.as_bytes()));
    assert_eq!(params.get("QUERY_STRING"), Some(&b"a=1"[..]));
}

#[test]
fn an_unread_body_is_skipped_before_the_next_request() {
    let mut body_records = begin(1, RESPONDER, KEEP);
    body_records.extend(params(1, &[]));
    body_records.extend(padded(STDIN, 1, &[b'x'; 100], 4));
    body_records.extend(padded(STDIN, 1, &[b'y'; 100], 4));
    body_records.extend(record(STDIN, 1, b""));
    let input = [body_records, request(1, 0, b"second")].concat();
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();
    let mut part = [0; 30];
    assert_eq!(
        connection.read_stdin(&mut part).unwrap(),
        30,
        "read part of the first record"
    );
    connection.write_stdout(b"413").unwrap();
    assert!(connection.finish(0).unwrap());
    let second = connection.next_request().unwrap().unwrap();
    assert_eq!(second.params.get("SCRIPT_NAME"), Some(&b"/app"[..]));
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut connection.stdin(), &mut body).unwrap();
    assert_eq!(body, b"second");
}

#[test]
fn a_web_server_closing_during_an_unread_body_ends_the_connection_cleanly() {
    let mut input = begin(1, RESPONDER, KEEP);
    input.extend(params(1, &[]));
    input.extend(record(STDIN, 1, &[b'x'; 100]));
    input.truncate(input.len() - 40);
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();
    assert!(connection.finish(0).unwrap());
    assert!(connection.next_request().unwrap().is_none());
}

#[test]
fn a_body_left_unread_on_a_closing_connection_asks_for_a_lingering_close() {
    let mut input = [begin(1, RESPONDER, 0), params(1, &[])].concat();
    input.extend(record(STDIN, 1, &[b'x'; 100]));
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stdout(b"early answer").unwrap();

    assert!(!connection.finish(0).unwrap());

    assert!(connection.body_unread());
    let records = parse(&connection.get_ref().output);
    assert_eq!(records.last().map(|r| r.record_type), Some(END));
}

#[test]
fn a_body_read_to_its_end_needs_no_lingering_close() {
    let input = request(1, 0, b"all of it");
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();

    assert!(connection.discard_stdin(1024), "the whole body had arrived");
    assert!(!connection.finish(0).unwrap());

    assert!(!connection.body_unread());
}

#[test]
fn discarding_stops_where_the_arrived_input_ends_and_ends_the_connection() {
    let mut input = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    input.extend(record(STDIN, 1, &[b'x'; 100]));
    let mut duplex = Duplex::new(input);
    // What a socket that does not wait says when nothing more has arrived.
    duplex.at_end = Some(std::io::ErrorKind::WouldBlock);
    let mut connection = Connection::new(duplex, Limits::default());
    connection.next_request().unwrap().unwrap();

    assert!(!connection.discard_stdin(1024));

    assert!(
        !connection.finish(0).unwrap(),
        "the record position may be lost: no further request"
    );
    assert!(connection.body_unread());
}

#[test]
fn discarding_stops_at_its_byte_bound() {
    let mut input = [begin(1, RESPONDER, 0), params(1, &[])].concat();
    for _ in 0..4 {
        input.extend(record(STDIN, 1, &[b'x'; 4096]));
    }
    input.extend(record(STDIN, 1, b""));
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();

    assert!(!connection.discard_stdin(5000));

    connection.finish(0).unwrap();
    assert!(connection.body_unread());
}

#[test]
fn a_kept_connection_ends_when_the_unread_body_outgrows_its_bound() {
    let mut input = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    for _ in 0..3 {
        input.extend(record(STDIN, 1, &[b'x'; 1000]));
    }
    input.extend(record(STDIN, 1, b""));
    input.extend(request(2, 0, b"next"));
    let limits = Limits {
        max_unread_body: 2000,
        ..Limits::default()
    };
    let mut connection = Connection::new(Duplex::new(input), limits);
    connection.next_request().unwrap().unwrap();
    assert!(connection.finish(0).unwrap());

    let err = connection.next_request().unwrap_err();

    assert!(
        matches!(
            err,
            ProtocolError::UnreadBodyTooLarge {
                request_id: 1,
                limit: 2000
            }
        ),
        "{err}"
    );
}

#[test]
fn abort_during_the_body_ends_reads_and_the_request_still_gets_end_request() {
    let mut input = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    input.extend(record(STDIN, 1, b"partial"));
    input.extend(record(ABORT, 1, b""));
    input.extend(request(2, 0, b"next"));
    let served = serve(input);
    assert!(served.error.is_none());
    assert!(served.seen[0].aborted);
    assert_eq!(served.seen[0].body, b"partial");
    assert!(!served.seen[1].aborted);
    assert_eq!(served.seen[1].body, b"next");
    let ends: Vec<_> = served
        .records
        .iter()
        .filter(|r| r.record_type == END)
        .collect();
    assert_eq!((ends[0].id, end_of(ends[0])), (1, (0, 0)));
}

#[test]
fn abort_before_the_params_end_is_answered_without_the_app() {
    let mut input = begin(1, RESPONDER, KEEP);
    input.extend(record(PARAMS, 1, &pairs(&[("A", "1")])));
    input.extend(record(ABORT, 1, b""));
    input.extend(request(2, 0, b""));
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(served.seen.len(), 1);
    assert_eq!(served.seen[0].request.id, 2);
    assert_eq!(served.records[0].id, 1);
    assert_eq!(end_of(&served.records[0]), (0, 0));
}

#[test]
fn abort_before_the_params_end_without_keep_conn_ends_the_connection() {
    let input = [
        begin(1, RESPONDER, 0),
        record(ABORT, 1, b""),
        request(2, 0, b""),
    ]
    .concat();
    let served = serve(input);
    assert!(served.error.is_none() && served.seen.is_empty());
    assert_eq!(served.records.len(), 1);
}

#[test]
fn writing_or_finishing_without_a_request_is_refused() {
    let mut connection = Connection::new(Duplex::new(Vec::new()), Limits::default());
    let kind = connection.write_stdout(b"x").unwrap_err().kind();
    assert_eq!(kind, std::io::ErrorKind::InvalidInput);
    assert!(connection.finish(0).is_err());
    assert!(connection.next_request().unwrap().is_none());
}

#[test]
fn next_request_before_finish_is_a_caller_error() {
    let mut connection = Connection::new(Duplex::new(request(5, KEEP, b"")), Limits::default());
    connection.next_request().unwrap().unwrap();
    let err = connection.next_request().unwrap_err();
    assert_eq!(
        err.to_string(),
        "next_request() called before request 5 was finished"
    );
}

#[test]
fn a_recycled_request_lends_its_buffers_without_leaking_its_params() {
    let input = [
        begin(1, RESPONDER, KEEP),
        params(1, &[("OLD", "1"), ("SHARED", "old")]),
        stdin(1, b""),
        begin(1, RESPONDER, 0),
        params(1, &[("SHARED", "new")]),
        stdin(1, b""),
    ]
    .concat();
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    let first = connection.next_request().unwrap().unwrap();
    assert!(connection.finish(0).unwrap());
    connection.recycle(first);
    let second = connection.next_request().unwrap().unwrap();
    assert_eq!(second.params.len(), 1);
    assert_eq!(second.params.get("OLD"), None);
    assert_eq!(second.params.get("SHARED"), Some(&b"new"[..]));
}

#[test]
fn buffers_pass_to_the_next_connection_emptied() {
    // The first socket is left mid-request with buffered output and unread input.
    let mut connection = Connection::new(Duplex::new(request(1, KEEP, b"body")), Limits::default());
    connection.next_request().unwrap().unwrap();
    connection.write_stdout(b"never sent").unwrap();
    let (old, buffers) = connection.into_parts();
    assert!(old.output.is_empty());
    let duplex = Duplex::new(request(2, 0, b"fresh"));
    let mut connection = Connection::with_buffers(duplex, Limits::default(), buffers);
    let request = connection.next_request().unwrap().unwrap();
    assert_eq!(request.id, 2);
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut connection.stdin(), &mut body).unwrap();
    assert_eq!(body, b"fresh");
    assert!(!connection.finish(0).unwrap());
    let records = parse(&connection.into_inner().output);
    assert!(records.iter().all(|r| r.id == 2));
}
