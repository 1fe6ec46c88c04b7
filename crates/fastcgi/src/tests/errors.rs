//! Malformed or hostile input: each case ends the connection with the right reason.

use std::io::ErrorKind;

use super::support::*;
use crate::{Connection, Limits, NameValueError, Phase, ProtocolError, RecordType};

fn error_of(input: Vec<u8>) -> ProtocolError {
    let served = serve(input);
    served
        .error
        .unwrap_or_else(|| panic!("no error; saw {:?}", served.seen))
}

#[test]
fn a_bad_version_is_refused() {
    let mut input = request(1, 0, b"");
    input[0] = 2;
    assert!(matches!(
        error_of(input),
        ProtocolError::BadVersion { version: 2 }
    ));
    let err = error_of(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
    assert!(matches!(err, ProtocolError::BadVersion { version: b'G' }));
}

#[test]
fn end_of_stream_inside_a_header_is_a_truncated_record() {
    let err = error_of(vec![1, 1, 0]);
    assert!(
        matches!(err, ProtocolError::Truncated { phase: Phase::Idle }),
        "{err}"
    );
}

#[test]
fn end_of_stream_inside_params_content_is_a_truncated_record() {
    let mut input = begin(1, RESPONDER, 0);
    input.extend(record(PARAMS, 1, &pairs(&[("NAME", "value")])));
    input.truncate(input.len() - 3);
    assert!(matches!(
        error_of(input),
        ProtocolError::Truncated {
            phase: Phase::Params(1)
        }
    ));
}

#[test]
fn end_of_stream_inside_body_content_is_a_truncated_record() {
    let mut input = [begin(1, RESPONDER, 0), params(1, &[])].concat();
    input.extend(record(STDIN, 1, b"0123456789"));
    input.truncate(input.len() - 2);
    let served = serve(input);
    assert!(matches!(
        served.error,
        Some(ProtocolError::Truncated {
            phase: Phase::Stdin(1)
        })
    ));
    assert_eq!(
        served.seen[0].body, b"01234567",
        "the bytes before the cut reached the app"
    );
    assert!(!served.seen[0].kept);
}

#[test]
fn end_of_stream_between_records_of_a_request_is_a_close_mid_request() {
    let input = [
        begin(1, RESPONDER, 0),
        record(PARAMS, 1, &pairs(&[("A", "b")])),
    ]
    .concat();
    assert!(matches!(
        error_of(input),
        ProtocolError::Closed {
            phase: Phase::Params(1)
        }
    ));
    let input = [
        begin(1, RESPONDER, 0),
        params(1, &[]),
        record(STDIN, 1, b"x"),
    ]
    .concat();
    let err = error_of(input);
    assert_eq!(
        err.to_string(),
        "the web server closed the connection while reading the stdin of request 1"
    );
}

#[test]
fn a_begin_request_body_of_the_wrong_size_is_refused() {
    let input = record(BEGIN, 1, &[0, 1, 0, 0, 0, 0]);
    let err = error_of(input);
    assert!(matches!(
        err,
        ProtocolError::BadRecordLength {
            length: 6,
            expected: 8,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "BEGIN_REQUEST record of 6 bytes (expected 8)"
    );
}

#[test]
fn params_over_the_limit_are_refused_before_they_are_read() {
    let limits = Limits {
        max_params_bytes: 1000,
        ..Limits::default()
    };
    let big = "x".repeat(2000);
    let input = [begin(1, RESPONDER, 0), params(1, &[("BIG", &big)])].concat();
    let served = serve_duplex(Duplex::new(input), limits);
    let err = served.error.unwrap();
    assert!(matches!(
        err,
        ProtocolError::ParamsTooLarge {
            request_id: 1,
            limit: 1000
        }
    ));
    assert_eq!(
        err.to_string(),
        "the params of request 1 exceed the limit of 1000 bytes"
    );
}

#[test]
fn a_params_stream_that_never_ends_is_cut_by_the_limit() {
    let mut input = begin(1, RESPONDER, 0);
    for _ in 0..100_000 {
        input.extend(record(PARAMS, 1, &[1, 1, b'a', b'b']));
    }
    let err = error_of(input);
    assert!(
        matches!(err, ProtocolError::ParamsTooLarge { limit: 65536, .. }),
        "{err}"
    );
}

#[test]
fn a_stalled_params_stream_times_out_with_the_sockets_read_timeout() {
    let mut duplex = Duplex::new(begin(1, RESPONDER, 0));
    duplex.at_end = Some(ErrorKind::WouldBlock);
    let err = serve_duplex(duplex, Limits::default()).error.unwrap();
    assert!(
        matches!(
            err,
            ProtocolError::Timeout {
                phase: Phase::Params(1)
            }
        ),
        "{err}"
    );
    assert!(!err.is_idle_timeout());
    assert_eq!(
        err.to_string(),
        "timed out while reading the params of request 1"
    );
}

#[test]
fn an_idle_kept_connection_timing_out_is_told_apart() {
    let mut duplex = Duplex::new(request(1, KEEP, b""));
    duplex.at_end = Some(ErrorKind::TimedOut);
    let served = serve_duplex(duplex, Limits::default());
    assert_eq!(served.seen.len(), 1);
    assert!(served.error.unwrap().is_idle_timeout());
}

#[test]
fn records_out_of_order_for_the_current_request_are_unexpected() {
    let cases: [(Vec<u8>, RecordType, Phase); 5] = [
        (
            record(STDIN, 1, b"early"),
            RecordType::Stdin,
            Phase::Params(1),
        ),
        (record(DATA, 1, b"x"), RecordType::Data, Phase::Params(1)),
        (
            begin(1, RESPONDER, 0),
            RecordType::BeginRequest,
            Phase::Params(1),
        ),
        (
            [params(1, &[]), record(PARAMS, 1, b"\x01\x01ab")].concat(),
            RecordType::Params,
            Phase::Stdin(1),
        ),
        (
            [params(1, &[]), record(STDOUT, 1, b"x")].concat(),
            RecordType::Stdout,
            Phase::Stdin(1),
        ),
    ];
    for (tail, record_type, phase) in cases {
        let input = [begin(1, RESPONDER, 0), tail].concat();
        match error_of(input) {
            ProtocolError::UnexpectedRecord {
                record_type: t,
                phase: p,
            } => {
                assert_eq!((t, p), (record_type, phase));
            }
            other => panic!("{other}"),
        }
    }
    let err = error_of([begin(1, RESPONDER, 0), record(STDIN, 1, b"")].concat());
    assert_eq!(
        err.to_string(),
        "unexpected STDIN record while reading the params of request 1"
    );
}

#[test]
fn a_stray_record_after_a_finished_request_is_skipped() {
    // No live request owns it; libfcgi ignores such records too.
    let input = [
        request(1, KEEP, b"body"),
        record(STDIN, 1, b"late"),
        request(1, 0, b"x"),
    ]
    .concat();
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(served.seen[1].body, b"x");
}

#[test]
fn malformed_params_are_refused() {
    let input = [
        begin(1, RESPONDER, 0),
        record(PARAMS, 1, &[4, 9, b'N', b'A']),
        record(PARAMS, 1, b""),
    ]
    .concat();
    match error_of(input) {
        ProtocolError::MalformedParams {
            request_id: 1,
            source,
        } => {
            let message = ProtocolError::MalformedParams {
                request_id: 1,
                source: source.clone(),
            };
            assert!(
                message
                    .to_string()
                    .starts_with("malformed params of request 1: the pair at byte 0")
            );
            assert_eq!(
                source,
                NameValueError::TruncatedData {
                    offset: 0,
                    declared: 13,
                    available: 2
                }
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_malformed_get_values_is_refused() {
    let err = error_of(record(GET_VALUES, 0, &[0x80, 1]));
    assert!(matches!(
        err,
        ProtocolError::MalformedParams { request_id: 0, .. }
    ));
    assert_eq!(
        err.to_string(),
        "malformed GET_VALUES query: the length at byte 0 is cut off by the end of the stream"
    );
}

#[test]
fn a_body_error_reaches_the_app_as_io_error_and_ends_the_connection() {
    let mut input = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    input.extend(record(STDIN, 1, b"ab"));
    input.extend([7, 5, 0, 1, 0, 0, 0, 0]);
    let mut connection = Connection::new(Duplex::new(input), Limits::default());
    connection.next_request().unwrap().unwrap();
    let mut buf = [0; 10];
    assert_eq!(connection.read_stdin(&mut buf).unwrap(), 2);
    let err = connection.read_stdin(&mut buf).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(matches!(
        to_protocol_error(err),
        ProtocolError::BadVersion { version: 7 }
    ));
    assert!(
        connection.read_stdin(&mut buf).is_err(),
        "reads keep failing"
    );
    connection.write_stdout(b"Status: 400\r\n\r\n").unwrap();
    assert!(!connection.finish(0).unwrap(), "not kept after an error");
    assert!(connection.next_request().unwrap().is_none());
    let records = parse(&connection.into_inner().output);
    assert_eq!(records.last().map(|r| r.record_type), Some(END));
}
