//! Arbitrary bytes as what a web server sends a worker: the record and params decoders and
//! one connection's request cycle (management records, bodies, aborts, keep-conn) must end
//! every input with a request, a clean close or a `ProtocolError`, never a panic or a hang.
//! The first byte picks the read size and the params limit, so short reads and the limit
//! are exercised too. Then the sans-I/O core the connection drives is fed the same bytes
//! whole and cut every few bytes, as the ASGI event loop feeds it: the events must be the
//! same.

#![no_main]

use std::io::{self, Cursor, Read, Write};

use drover_fastcgi::{Connection, Decoder, Event, Limits, Params, name_values};
use libfuzzer_sys::fuzz_target;

/// A socket whose peer sent `input` and then closed, returning at most `max_read` bytes a
/// read, as a socket does when data arrives in pieces.
struct Stream {
    input: Cursor<Vec<u8>>,
    max_read: usize,
    written: usize,
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.max_read);
        self.input.read(&mut buf[..n])
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An event as text, body slices joined: cutting the input changes how a body is sliced,
/// and nothing else.
fn events(limits: Limits, input: &[u8], cut: usize) -> Vec<String> {
    let mut decoder = Decoder::new(limits);
    let mut seen: Vec<String> = Vec::new();
    let mut pending = Vec::new();
    for chunk in input.chunks(cut) {
        pending.extend_from_slice(chunk);
        let mut rest = &pending[..];
        loop {
            let (used, event) = match decoder.decode(rest) {
                Ok(step) => step,
                Err(err) => {
                    seen.push(format!("error {err}"));
                    return seen;
                }
            };
            rest = &rest[used..];
            let answered = matches!(event, Some(Event::StdinEnd | Event::Abort));
            match event {
                Some(Event::Stdin(data)) => {
                    let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
                    match seen.last_mut() {
                        Some(last) if last.starts_with("body ") => last.push_str(&hex),
                        _ => seen.push(format!("body {hex}")),
                    }
                }
                Some(Event::Request(r)) => seen.push(format!("request {} {}", r.id, r.keep_conn)),
                Some(other) => seen.push(format!("{other:?}")),
                None if used == 0 => break,
                None => {}
            }
            if answered && decoder.running() {
                decoder.finish();
            }
        }
        let left = rest.len();
        pending.drain(..pending.len() - left);
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    // The name-value decoder on its own, as FCGI_GET_VALUES and PARAMS use it.
    for pair in name_values(input) {
        if pair.is_err() {
            break;
        }
    }
    let _ = Params::decode(input.to_vec());

    let stream = Stream {
        input: Cursor::new(input.to_vec()),
        max_read: 1 + usize::from(knobs & 0x0f) * 512,
        written: 0,
    };
    let limits = Limits {
        max_params_bytes: 1 + usize::from(knobs >> 4) * 4096,
        ..Limits::default()
    };
    let whole = events(limits, input, input.len().max(1));
    let cut = 1 + usize::from(knobs & 0x0f);
    assert_eq!(events(limits, input, cut), whole, "cut every {cut} bytes");
    let mut connection = Connection::new(stream, limits);
    // Each request consumes input; the bound only guards against a bug that would not.
    for _ in 0..10_000 {
        match connection.next_request() {
            Ok(Some(_request)) => {}
            Ok(None) | Err(_) => break,
        }
        let mut body = [0; 1024];
        loop {
            match connection.read_stdin(&mut body) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = connection.write_stdout(b"Content-Type: text/plain\r\n\r\nok");
        match connection.finish(0) {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
});
