//! HTTP/1.1 written by hand on a TCP connection straight to a server with no nginx in front
//! (a `protocol = "http"` pool, WSGI or ASGI), for what a client library hides: responses
//! read one after another off a kept connection, pipelining, a chunked upload that waits
//! for `100 Continue`, a refusal that ends the connection, a chosen source address.
//! [`super::http::Raw`] is the same idea through nginx, one request per connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

use super::TIMEOUT;

/// The interim response a server sends before reading a body that `Expect`s it.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// One response read off a connection: its head and body, delimited by Content-Length or
/// chunked, so that the next one can be read from the same connection.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// The status line and headers, with the empty line that ends them.
    pub head: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 (invalid bytes replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads the next response off `stream`; `pending` holds what was read past the previous
/// one (pipelined responses arrive together) and keeps what is read past this one.
/// Panics when the connection closes first or on [`TIMEOUT`].
pub fn read_response(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Response {
    let head_end = loop {
        if let Some(at) = find(pending, b"\r\n\r\n") {
            break at + 4;
        }
        fill(stream, pending);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    pending.drain(..head_end);
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let body = if let Some(length) = header("content-length") {
        let length: usize = length.parse().unwrap();
        while pending.len() < length {
            fill(stream, pending);
        }
        pending.drain(..length).collect()
    } else if header("transfer-encoding").as_deref() == Some("chunked") {
        read_chunked(stream, pending)
    } else {
        Vec::new()
    };
    Response { status, head, body }
}

/// A chunked body up to its last chunk (which has no trailers in drover's responses).
fn read_chunked(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(at) = find(pending, b"\r\n") {
                break at;
            }
            fill(stream, pending);
        };
        let size = usize::from_str_radix(
            std::str::from_utf8(&pending[..line_end]).unwrap().trim(),
            16,
        )
        .unwrap();
        pending.drain(..line_end + 2);
        while pending.len() < size + 2 {
            fill(stream, pending);
        }
        body.extend(pending.drain(..size));
        pending.drain(..2);
        if size == 0 {
            return body;
        }
    }
}

fn fill(stream: &mut TcpStream, pending: &mut Vec<u8>) {
    let mut buf = [0u8; 65536];
    let n = stream.read(&mut buf).expect("read a response");
    assert!(
        n > 0,
        "the connection closed; received {:?}",
        String::from_utf8_lossy(pending)
    );
    pending.extend_from_slice(&buf[..n]);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads the `100 Continue` a server owes a request head with `Expect: 100-continue`
/// before its body; asserts that it is exactly that.
pub fn read_continue(stream: &mut TcpStream) {
    let mut interim = [0u8; CONTINUE.len()];
    stream.read_exact(&mut interim).unwrap();
    assert_eq!(
        &interim,
        CONTINUE,
        "{:?}",
        String::from_utf8_lossy(&interim)
    );
}

/// Sends the head of a chunked `POST path` that expects `100 Continue`, and reads the 100:
/// nothing of the body goes before it.
pub fn start_chunked_upload(stream: &mut TcpStream, path: &str) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
         Expect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    read_continue(stream);
}

/// Sends `body` as chunks of `size` bytes, each size line followed by `extension` (`""`, or
/// `";ext=1"`), then the last chunk with `trailers` (header lines, each ending in CRLF).
/// Stops at the first write the server refused, since a server may answer and close
/// before the end (a body past its limit).
pub fn send_chunks(
    stream: &mut TcpStream,
    body: &[u8],
    size: usize,
    extension: &str,
    trailers: &str,
) -> io::Result<()> {
    for chunk in body.chunks(size) {
        stream.write_all(format!("{:x}{extension}\r\n", chunk.len()).as_bytes())?;
        stream.write_all(chunk)?;
        stream.write_all(b"\r\n")?;
    }
    stream.write_all(format!("0\r\n{trailers}\r\n").as_bytes())
}

/// A whole chunked upload after `100 Continue` (100,000-byte chunks, each with a chunk
/// extension, a trailer after the last), and its response.
pub fn upload_chunked(stream: &mut TcpStream, path: &str, body: &[u8]) -> Response {
    start_chunked_upload(stream, path);
    send_chunks(stream, body, 100_000, ";ext=1", "X-Trailer: t\r\n").unwrap();
    read_response(stream, &mut Vec::new())
}

/// Sends `request` and reads until the server closes the connection, as it does after a
/// refusal; what it sent, as text.
pub fn until_close(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).unwrap();
    let mut received = Vec::new();
    stream
        .read_to_end(&mut received)
        .expect("the server ends the connection");
    String::from_utf8_lossy(&received).into_owned()
}

/// Asks the ASGI test app's `/stream` (tests/apps/asgi_app.py: `first` at once, `last` once
/// `marker` exists) on `stream`, plain or TLS, and checks the streamed response: chunked,
/// its first chunk read before the marker is created, so before the app has the last one.
pub fn streams_its_first_chunk_first(stream: &mut (impl Read + Write), marker: &std::path::Path) {
    stream
        .write_all(
            format!(
                "GET /stream?marker={} HTTP/1.1\r\nHost: t\r\n\r\n",
                marker.display()
            )
            .as_bytes(),
        )
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("first\n") {
        let n = stream.read(&mut buf).expect("read the first chunk");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&got).to_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    std::fs::write(marker, "").expect("create the marker");
    let mut rest = Vec::new();
    while !String::from_utf8_lossy(&rest).ends_with("0\r\n\r\n") {
        let n = stream.read(&mut buf).expect("read the rest");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&rest));
        rest.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&rest).contains("last\n"));
}

/// A TCP connection to `127.0.0.1:port` from the loopback address `source` (`127.0.0.2`
/// for a peer in `forwarded_allow_ips`), reads bounded by [`TIMEOUT`].
pub fn connect_from(source: &str, port: u16) -> TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    let from: SocketAddr = format!("{source}:0").parse().unwrap();
    let SocketAddr::V4(from) = from else { panic!() };
    bind(fd.as_raw_fd(), &SockaddrIn::from(from)).unwrap();
    let to = SockaddrIn::new(127, 0, 0, 1, port);
    connect(fd.as_raw_fd(), &to).unwrap();
    let stream = TcpStream::from(fd);
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream
}
