//! Arbitrary bytes as what a client sends an HTTP worker: the head parser (httparse and the
//! smuggling checks) must parse or refuse every input, never panic; behind a head that
//! parses, the body decoder (Content-Length or chunked, `max_request_body`) fed the rest
//! whole and cut every few bytes, as both connections feed it, must give the same body,
//! the same end and the same refusal. The first byte picks the cut and the bound.

#![no_main]

use drover_worker::http::Trusted;
use drover_worker::http::body::{BodyError, BodyReader};
use drover_worker::http::head::{self, Framing, Peer};
use libfuzzer_sys::fuzz_target;

/// The body, whether it ended and the bytes used, or the refusal.
fn decode(
    framing: Framing,
    max: Option<u64>,
    input: &[u8],
    cut: usize,
) -> Result<(Vec<u8>, bool, usize), BodyError> {
    let mut reader = BodyReader::new(framing, max);
    let (mut body, mut buf, mut used) = (Vec::new(), Vec::new(), 0);
    for chunk in input.chunks(cut) {
        buf.extend_from_slice(chunk);
        let n = reader.take(&buf, &mut body)?;
        buf.drain(..n);
        used += n;
    }
    Ok((body, reader.ended(), used))
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let trusted = Trusted::Any;
    let max = (knobs & 0x80 != 0).then_some(64);
    let peer = Peer {
        remote: None,
        local: None,
        trusted: &trusted,
        max_body: max,
    };
    let Ok(Some(head)) = head::parse(input, &peer) else {
        return;
    };
    let rest = &input[head.len..];
    // A refusal is compared by its status: which rule names a malformed line can depend on
    // how much of it had arrived (a bare CR seen before the LF that follows it, or the bare
    // LF after it), and both end the request with the same 400.
    let status = |r: Result<(Vec<u8>, bool, usize), BodyError>| r.map_err(|e| e.status);
    let whole = status(decode(head.framing, max, rest, rest.len().max(1)));
    let cut = 1 + usize::from(knobs & 0x0f);
    assert_eq!(
        status(decode(head.framing, max, rest, cut)),
        whole,
        "cut every {cut} bytes"
    );
});
