//! A minimal FastCGI client for the live tests: one request per connection, records built by
//! hand (FastCGI 1.0: 8-byte header, BEGIN_REQUEST, PARAMS, STDIN, then read to END_REQUEST).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

const BEGIN_REQUEST: u8 = 1;
const END_REQUEST: u8 = 3;
const PARAMS: u8 = 4;
const STDIN: u8 = 5;
const STDOUT: u8 = 6;

fn record(out: &mut Vec<u8>, kind: u8, content: &[u8]) {
    for chunk in content
        .chunks(65535)
        .chain(content.is_empty().then_some(&[][..]))
    {
        let len = chunk.len() as u16;
        out.extend_from_slice(&[1, kind, 0, 1, (len >> 8) as u8, len as u8, 0, 0]);
        out.extend_from_slice(chunk);
    }
}

fn length(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&(n as u32 | 0x8000_0000).to_be_bytes());
    }
}

/// Sends one responder request (id 1) on a new connection and returns the connection.
pub fn send(socket: &Path, params: &[(&str, &str)], body: &[u8]) -> UnixStream {
    let mut bytes = Vec::new();
    record(&mut bytes, BEGIN_REQUEST, &[0, 1, 0, 0, 0, 0, 0, 0]);
    let mut pairs = Vec::new();
    for (name, value) in params {
        length(&mut pairs, name.len());
        length(&mut pairs, value.len());
        pairs.extend_from_slice(name.as_bytes());
        pairs.extend_from_slice(value.as_bytes());
    }
    record(&mut bytes, PARAMS, &pairs);
    record(&mut bytes, PARAMS, &[]);
    if !body.is_empty() {
        record(&mut bytes, STDIN, body);
    }
    record(&mut bytes, STDIN, &[]);
    let mut stream = UnixStream::connect(socket).expect("connect to php-cgi");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    stream.write_all(&bytes).unwrap();
    stream
}

/// Reads records until END_REQUEST and returns the concatenated STDOUT (headers and body).
pub fn response(mut stream: UnixStream) -> String {
    let mut stdout = Vec::new();
    loop {
        let mut header = [0u8; 8];
        stream
            .read_exact(&mut header)
            .expect("a FastCGI record header");
        let len = usize::from(u16::from_be_bytes([header[4], header[5]]));
        let mut content = vec![0; len + usize::from(header[6])];
        stream.read_exact(&mut content).unwrap();
        match header[1] {
            STDOUT => stdout.extend_from_slice(&content[..len]),
            END_REQUEST => return String::from_utf8_lossy(&stdout).into_owned(),
            _ => {}
        }
    }
}
