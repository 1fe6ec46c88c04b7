//! The body decoder fed whole, a byte at a time and cut at random: the same body, the same
//! bytes used, the same refusal.

use super::*;

/// Feeds `chunks` in turn (bytes not used wait for the next), as both connections do;
/// returns the body, whether it ended, the bytes left over, or the refusal.
fn feed(
    framing: Framing,
    max: Option<u64>,
    chunks: &[&[u8]],
) -> Result<(Vec<u8>, bool, Vec<u8>), BodyError> {
    let mut reader = BodyReader::new(framing, max);
    let mut body = Vec::new();
    let mut buf = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        let used = reader.take(&buf, &mut body)?;
        buf.drain(..used);
    }
    Ok((body, reader.ended(), buf))
}

const CHUNKED: &[u8] =
    b"5\r\nhello\r\n1;ext=\"a b\"\r\n,\r\n6\r\n world\r\n0\r\nChecksum: x\r\n\r\nGET /next";

fn cases() -> Vec<(Framing, Option<u64>, Vec<u8>)> {
    vec![
        (Framing::Length(11), None, b"hello worldGET /next".to_vec()),
        (Framing::Chunked, None, CHUNKED.to_vec()),
        (Framing::Chunked, Some(8), CHUNKED.to_vec()),
        (Framing::Chunked, None, b"3;x\nabc\r\n0\r\n\r\n".to_vec()),
        (Framing::Chunked, None, b"3\r\nabcX\r\n".to_vec()),
        (Framing::Chunked, None, b"0\r\nHost: evil\r\n\r\n".to_vec()),
        (Framing::Chunked, None, b"4\r\nab".to_vec()),
    ]
}

#[test]
fn a_byte_at_a_time_and_random_cuts_give_what_the_whole_gives() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut below = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for (framing, max, wire) in cases() {
        let whole = feed(framing, max, &[&wire]);
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(feed(framing, max, &bytes), whole, "{framing:?} {wire:?}");
        for _ in 0..100 {
            let mut chunks = Vec::new();
            let mut rest = &wire[..];
            while !rest.is_empty() {
                let n = 1 + below(rest.len().min(12));
                chunks.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(feed(framing, max, &chunks), whole, "{framing:?} {wire:?}");
        }
    }
}

#[test]
fn a_body_ends_where_its_framing_says_and_the_rest_is_left() {
    let (body, ended, rest) = feed(Framing::Length(11), None, &[b"hello worldGET /next"]).unwrap();
    assert_eq!(
        (&body[..], ended, &rest[..]),
        (&b"hello world"[..], true, &b"GET /next"[..])
    );
    let (body, ended, rest) = feed(Framing::Chunked, None, &[CHUNKED]).unwrap();
    assert_eq!(
        (&body[..], ended, &rest[..]),
        (&b"hello, world"[..], true, &b"GET /next"[..])
    );
    let (body, ended, _) = feed(Framing::Chunked, None, &[b"4\r\nab"]).unwrap();
    assert_eq!((&body[..], ended), (&b"ab"[..], false));
    assert!(BodyReader::default().ended());
}

#[test]
fn broken_syntax_is_400_and_a_body_past_the_bound_413() {
    let err = feed(Framing::Chunked, Some(8), &[CHUNKED]).unwrap_err();
    assert_eq!(err.status, 413);
    assert!(
        err.reason.contains("max_request_body (8 bytes)"),
        "{}",
        err.reason
    );
    for wire in [
        &b"3;x\nabc\r\n0\r\n\r\n"[..],
        b"3\r\nabcX\r\n",
        b"0\r\nHost: evil\r\n\r\n",
    ] {
        let err = feed(Framing::Chunked, None, &[wire]).unwrap_err();
        assert_eq!(err.status, 400, "{err:?}");
    }
}

#[test]
fn a_step_takes_no_more_body_than_there_is_room_for() {
    let mut reader = BodyReader::new(Framing::Length(10), None);
    assert_eq!(
        reader.step(b"0123456789", 4),
        Ok(Some(Step { used: 4, data: 4 }))
    );
    assert_eq!(reader.read(), 4);
    assert_eq!(reader.step(b"", 4), Ok(None));
    assert!(!reader.ended());
}
