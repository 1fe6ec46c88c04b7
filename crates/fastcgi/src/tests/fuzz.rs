//! Property-style: random, mutated and truncated conversations never panic, never hang,
//! and always leave well-formed output. A fixed-seed PRNG keeps failures reproducible.

use super::support::*;
use crate::{Limits, ProtocolError};

/// xorshift64*: enough randomness for input generation, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// A conversation that touches every path: management, padding, refused role and id,
/// abort, a body in pieces, several requests on one connection.
fn conversation() -> Vec<u8> {
    let mut out = record(GET_VALUES, 0, &pairs(&[("FCGI_MAX_CONNS", "")]));
    out.extend(begin(1, RESPONDER, KEEP));
    out.extend(padded(
        PARAMS,
        1,
        &pairs(&[("REQUEST_METHOD", "POST"), ("CONTENT_LENGTH", "40")]),
        3,
    ));
    out.extend(record(PARAMS, 1, b""));
    out.extend(padded(STDIN, 1, &[b'a'; 25], 7));
    out.extend(begin(2, RESPONDER, 0));
    out.extend(record(STDIN, 1, &[b'b'; 15]));
    out.extend(record(STDIN, 1, b""));
    out.extend(begin(3, AUTHORIZER, KEEP));
    out.extend(params(3, &[("X", "y")]));
    out.extend(begin(1, RESPONDER, KEEP));
    out.extend(params(1, &[("Q", &"q".repeat(200))]));
    out.extend(record(ABORT, 1, b""));
    out.extend(record(77, 0, b"??"));
    out.extend(request(4, 0, b"last"));
    out
}

fn serve_with(input: Vec<u8>, rng: &mut Rng) -> Served {
    let mut duplex = Duplex::new(input);
    duplex.max_read = 1 + rng.below(64);
    serve_duplex(
        duplex,
        Limits {
            max_params_bytes: 1 + rng.below(2048),
            max_unread_body: rng.below(4096),
        },
    )
}

#[test]
fn the_conversation_is_served_whole() {
    let served = serve(conversation());
    assert!(served.error.is_none(), "{:?}", served.error);
    let ids: Vec<_> = served.seen.iter().map(|s| s.request.id).collect();
    assert_eq!(ids, [1, 1, 4]);
    assert!(served.seen[1].aborted);
}

#[test]
fn every_truncation_ends_cleanly_or_as_truncated_or_closed() {
    let whole = conversation();
    let mut rng = Rng(0x5eed);
    for len in 0..whole.len() {
        let served = serve_with(whole[..len].to_vec(), &mut rng);
        match served.error {
            None | Some(ProtocolError::Truncated { .. } | ProtocolError::Closed { .. }) => {}
            // A tight random limit may refuse the 200-byte param first.
            Some(ProtocolError::ParamsTooLarge { .. }) => {}
            Some(other) => panic!("cut at {len}: {other}"),
        }
    }
}

#[test]
fn mutated_conversations_never_panic() {
    let whole = conversation();
    let mut rng = Rng(0xdecaf);
    for _ in 0..3000 {
        let mut input = whole.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(input.len());
            match rng.below(3) {
                0 => input[at] = rng.byte(),
                1 => input.insert(at, rng.byte()),
                _ => drop(input.remove(at)),
            }
        }
        serve_with(input, &mut rng);
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xfeed_f00d);
    for _ in 0..5000 {
        let len = rng.below(400);
        let mut input: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        // Mostly valid headers, so that the input gets past the version check.
        let mut at = 0;
        while at + 8 <= input.len() && rng.below(8) != 0 {
            input[at] = 1;
            input[at + 1] = 1 + rng.below(11) as u8;
            input[at + 2] = 0;
            input[at + 3] = rng.below(3) as u8;
            input[at + 4] = 0;
            input[at + 6] = rng.below(4) as u8;
            at += 8 + usize::from(input[at + 5]) + usize::from(input[at + 6]);
        }
        serve_with(input, &mut rng);
    }
}
