//! What the connection answers on its own: management records, other roles, a second
//! request on a busy connection.

use super::support::*;
use crate::name_values;

fn get_values() -> Vec<u8> {
    let query = pairs(&[
        ("FCGI_MAX_CONNS", ""),
        ("FCGI_MAX_REQS", ""),
        ("FCGI_MPXS_CONNS", ""),
    ]);
    record(GET_VALUES, 0, &query)
}

fn values_of(rec: &Rec) -> Vec<(String, String)> {
    assert_eq!((rec.record_type, rec.id), (GET_VALUES_RESULT, 0));
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    name_values(&rec.content)
        .map(|pair| pair.unwrap())
        .map(|(n, v)| (text(n), text(v)))
        .collect()
}

#[test]
fn get_values_is_answered_between_requests() {
    let served = serve([get_values(), request(1, 0, b"")].concat());
    assert!(served.error.is_none());
    let expected = [
        ("FCGI_MAX_CONNS", "1"),
        ("FCGI_MAX_REQS", "1"),
        ("FCGI_MPXS_CONNS", "0"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(values_of(&served.records[0]), expected);
    assert_eq!(served.seen.len(), 1);
}

#[test]
fn get_values_alone_then_close_is_a_clean_connection() {
    let served = serve(get_values());
    assert!(served.error.is_none() && served.seen.is_empty());
    assert_eq!(served.records.len(), 1);
}

#[test]
fn get_values_is_answered_in_the_middle_of_a_body() {
    let mut input = [begin(1, RESPONDER, 0), params(1, &[])].concat();
    input.extend(record(STDIN, 1, b"ab"));
    input.extend(get_values());
    input.extend(stdin(1, b"cd"));
    let served = serve(input);
    assert_eq!(served.seen[0].body, b"abcd");
    assert_eq!(values_of(&served.records[0]).len(), 3);
}

#[test]
fn unknown_management_types_get_unknown_type() {
    let input = [
        record(42, 0, b"whatever"),
        record(STDIN, 0, b"x"),
        request(1, 0, b""),
    ]
    .concat();
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(
        served.records[0],
        Rec {
            record_type: UNKNOWN_TYPE,
            id: 0,
            content: vec![42, 0, 0, 0, 0, 0, 0, 0]
        }
    );
    assert_eq!(served.records[1].content[0], STDIN);
    assert_eq!(served.seen.len(), 1);
}

#[test]
fn another_role_is_refused_with_unknown_role_and_its_records_skipped() {
    let mut input = begin(1, AUTHORIZER, KEEP);
    input.extend(params(1, &[("A", "1")]));
    input.extend(stdin(1, b"ignored"));
    input.extend(request(2, 0, b"served"));
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(
        (served.records[0].id, end_of(&served.records[0])),
        (1, (0, 3))
    );
    assert_eq!(served.seen.len(), 1);
    assert_eq!(served.seen[0].body, b"served");
}

#[test]
fn another_role_without_keep_conn_ends_the_connection() {
    let input = [begin(1, 3, 0), params(1, &[]), request(2, 0, b"")].concat();
    let served = serve(input);
    assert!(served.error.is_none() && served.seen.is_empty());
    assert_eq!(served.records.len(), 1);
    assert_eq!(end_of(&served.records[0]), (0, 3));
}

#[test]
fn a_second_request_id_while_reading_params_gets_cant_mpx_conn() {
    let mut input = begin(1, RESPONDER, 0);
    input.extend(record(PARAMS, 1, &pairs(&[("A", "1")])));
    input.extend(begin(2, RESPONDER, 0));
    input.extend(params(2, &[("B", "2")]));
    input.extend(record(PARAMS, 1, b""));
    input.extend(stdin(2, b"not ours"));
    input.extend(stdin(1, b"ours"));
    let served = serve(input);
    assert!(served.error.is_none(), "{:?}", served.error);
    assert_eq!(
        (served.records[0].id, end_of(&served.records[0])),
        (2, (0, 1))
    );
    let seen = &served.seen[0];
    assert_eq!((seen.request.id, &seen.body[..]), (1, &b"ours"[..]));
    assert_eq!(seen.request.params.get("B"), None);
}

#[test]
fn a_second_request_id_while_reading_the_body_gets_cant_mpx_conn() {
    let mut input = [begin(1, RESPONDER, KEEP), params(1, &[])].concat();
    input.extend(record(STDIN, 1, b"one"));
    input.extend(begin(9, RESPONDER, KEEP));
    input.extend(record(ABORT, 9, b""));
    input.extend(stdin(1, b"two"));
    let served = serve(input);
    assert!(served.error.is_none());
    assert_eq!(served.seen[0].body, b"onetwo");
    assert!(
        !served.seen[0].aborted,
        "an abort for the refused id is not ours"
    );
    assert_eq!(
        (served.records[0].id, end_of(&served.records[0])),
        (9, (0, 1))
    );
}
