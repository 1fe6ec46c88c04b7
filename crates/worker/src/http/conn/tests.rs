use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use super::*;
use crate::http::head::Trusted;
use crate::socket::tests::pair;

mod refusals;

fn open(input: &[u8]) -> (HttpConn, UnixStream) {
    let (socket, mut client) = pair();
    client.write_all(input).unwrap();
    let mut conn = HttpConn::new(socket);
    conn.get_mut().set_wait(false);
    (conn, client)
}

fn head(conn: &mut HttpConn) -> Head {
    let trusted = Trusted::Any;
    let peer = Peer {
        remote: None,
        local: None,
        trusted: &trusted,
        max_body: None,
    };
    loop {
        if let Some(head) = conn.next_head(&peer).unwrap() {
            conn.get_mut().set_wait(true);
            return head;
        }
        assert!(conn.fill().unwrap() > 0);
    }
}

fn body(conn: &mut HttpConn) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 3];
    loop {
        match conn.read_stdin(&mut buf).unwrap() {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn response(client: &mut UnixStream) -> String {
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    client.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_chunked_body_is_read_dechunked_and_the_response_is_chunked() {
    let (mut conn, mut client) = open(
        b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nChecksum: x\r\n\r\n",
    );
    head(&mut conn);
    assert_eq!(body(&mut conn), b"hello, world");
    conn.write_stdout(b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nab")
        .unwrap();
    // Flushed: the app streams, so the length is not known.
    conn.flush().unwrap();
    conn.write_stdout(b"cd").unwrap();
    assert!(conn.finish(0).unwrap());
    drop(conn);
    let text = response(&mut client);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Transfer-Encoding: chunked\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"),
        "{text}"
    );
}

#[test]
fn a_response_all_written_before_the_end_gets_a_length() {
    let (mut conn, mut client) = open(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    head(&mut conn);
    conn.write_stdout(b"Status: 200 OK\r\n\r\n").unwrap();
    conn.write_stdout(b"hello").unwrap();
    assert!(conn.finish(0).unwrap());
    drop(conn);
    let text = response(&mut client);
    assert!(text.contains("Content-Length: 5\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
}

#[test]
fn pipelined_requests_are_read_one_after_the_other() {
    let (mut conn, mut client) = open(
        b"POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let first = head(&mut conn);
    assert_eq!(first.params.get("DOCUMENT_URI"), Some(&b"/1"[..]));
    assert_eq!(body(&mut conn), b"abc");
    conn.write_stdout(b"Status: 201 Created\r\nContent-Length: 1\r\n\r\n1")
        .unwrap();
    assert!(conn.finish(0).unwrap());
    conn.end_request();
    assert!(conn.has_input());
    let second = head(&mut conn);
    assert_eq!(second.params.get("DOCUMENT_URI"), Some(&b"/2"[..]));
    conn.write_stdout(b"Status: 200 OK\r\nContent-Length: 1\r\n\r\n2")
        .unwrap();
    assert!(conn.finish(0).unwrap());
    drop(conn);
    let text = response(&mut client);
    let first = text.find("201 Created").unwrap();
    let second = text.find("200 OK").unwrap();
    assert!(first < second, "{text}");
}

#[test]
fn expect_continue_is_answered_at_the_first_body_read() {
    let (mut conn, mut client) =
        open(b"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    head(&mut conn);
    let mut interim = [0u8; 25];
    let reader = std::thread::spawn(move || {
        client.read_exact(&mut interim).unwrap();
        client.write_all(b"hi").unwrap();
        (client, interim)
    });
    assert_eq!(body(&mut conn), b"hi");
    let (_client, interim) = reader.join().unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
}

#[test]
fn an_unread_body_still_on_its_way_ends_the_connection() {
    let (mut conn, mut client) =
        open(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab");
    head(&mut conn);
    conn.write_stdout(b"Status: 200 OK\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    assert!(!conn.finish(0).unwrap());
    assert!(conn.body_unread());
    // The worker closes it (lingering); the client has the whole response first.
    conn.get_mut().close();
    assert!(response(&mut client).ends_with("\r\n\r\n"));
}

#[test]
fn a_client_gone_mid_body_is_an_error_not_an_end() {
    let (mut conn, client) = open(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab");
    head(&mut conn);
    drop(client);
    let mut buf = [0u8; 16];
    assert_eq!(conn.read_stdin(&mut buf).unwrap(), 2);
    let err = conn.read_stdin(&mut buf).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_bad_chunk_size_is_refused_with_400() {
    let (mut conn, mut client) =
        open(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    head(&mut conn);
    let err = conn.read_stdin(&mut [0u8; 16]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(conn.closed());
    // The app's response, had it written one after the failed read, goes nowhere.
    conn.write_stdout(b"Status: 500\r\n\r\n").unwrap();
    assert!(!conn.finish(0).unwrap());
    assert_eq!(conn.status(), Some(400));
    conn.get_mut().close();
    assert!(response(&mut client).starts_with("HTTP/1.1 400 "));
}
