//! Over a real unix socket, with a web server's bytes written out by hand from the spec
//! (no encoder of ours involved), and a worker thread serving as the Python worker will.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::thread;
use std::time::Duration;

use crate::{Connection, Limits};

/// BEGIN_REQUEST, id 1, role RESPONDER, flags FCGI_KEEP_CONN.
const BEGIN_KEEP: [u8; 16] = [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0];
/// Same without FCGI_KEEP_CONN.
const BEGIN_CLOSE: [u8; 16] = [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
/// PARAMS, id 1: REQUEST_METHOD=POST, CONTENT_LENGTH=5, SCRIPT_NAME=/echo: 55 bytes of
/// content, padded by 1 to a multiple of 8 as libfcgi-based clients do; then the empty
/// PARAMS record.
const PARAMS: &[u8] = b"\x01\x04\x00\x01\x00\x37\x01\x00\
    \x0e\x04REQUEST_METHODPOST\
    \x0e\x01CONTENT_LENGTH5\
    \x0b\x05SCRIPT_NAME/echo\
    \x00\
    \x01\x04\x00\x01\x00\x00\x00\x00";
/// STDIN "hello" padded by 3, then the empty STDIN record.
const STDIN: &[u8] = b"\x01\x05\x00\x01\x00\x05\x03\x00hello\x00\x00\x00\
    \x01\x05\x00\x01\x00\x00\x00\x00";
/// GET_VALUES asking FCGI_MPXS_CONNS.
const GET_VALUES: &[u8] = b"\x01\x09\x00\x00\x00\x11\x00\x00\x0f\x00FCGI_MPXS_CONNS";

/// The answer to one echo request: the worker's two writes as two STDOUT records, the
/// empty STDOUT, END_REQUEST with app status 0 and REQUEST_COMPLETE.
const ECHO_ANSWER: &[u8] = b"\x01\x06\x00\x01\x00\x1c\x00\x00Content-Type: text/plain\r\n\r\n\
    \x01\x06\x00\x01\x00\x05\x00\x00hello\
    \x01\x06\x00\x01\x00\x00\x00\x00\
    \x01\x03\x00\x01\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";

/// Serves connections like a worker: echo each body after a header.
fn worker(listener: UnixListener, connections: usize) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut served = 0;
        for _ in 0..connections {
            let (stream, _) = listener.accept().unwrap();
            let mut connection = Connection::new(stream, Limits::default());
            while let Some(request) = connection.next_request().unwrap() {
                assert_eq!(request.params.get("SCRIPT_NAME"), Some(&b"/echo"[..]));
                let mut body = Vec::new();
                connection.stdin().read_to_end(&mut body).unwrap();
                connection
                    .write_stdout(b"Content-Type: text/plain\r\n\r\n")
                    .unwrap();
                connection.write_stdout(&body).unwrap();
                served += 1;
                if !connection.finish(0).unwrap() {
                    break;
                }
            }
        }
        served
    })
}

fn socket() -> (tempfile::TempDir, UnixListener, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool.sock");
    let listener = UnixListener::bind(&path).unwrap();
    (dir, listener, path)
}

fn read_exactly(stream: &mut UnixStream, len: usize) -> Vec<u8> {
    let mut answer = vec![0; len];
    stream.read_exact(&mut answer).unwrap();
    answer
}

#[test]
fn a_kept_connection_serves_two_hand_built_requests_byte_exact() {
    let (_dir, listener, path) = socket();
    let worker = worker(listener, 1);
    let mut client = UnixStream::connect(&path).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client
        .write_all(&[&BEGIN_KEEP[..], PARAMS, STDIN].concat())
        .unwrap();
    assert_eq!(read_exactly(&mut client, ECHO_ANSWER.len()), ECHO_ANSWER);
    client
        .write_all(&[&BEGIN_CLOSE[..], PARAMS, STDIN].concat())
        .unwrap();
    assert_eq!(read_exactly(&mut client, ECHO_ANSWER.len()), ECHO_ANSWER);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "the worker closed after the request without KEEP_CONN"
    );
    assert_eq!(worker.join().unwrap(), 2);
}

#[test]
fn get_values_is_answered_before_the_worker_blocks_for_more() {
    let (_dir, listener, path) = socket();
    let worker = worker(listener, 1);
    let mut client = UnixStream::connect(&path).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client.write_all(GET_VALUES).unwrap();
    // The client waits for the answer before sending anything else, as a health check
    // does: a worker that kept it buffered while reading would deadlock here.
    let expected = b"\x01\x0a\x00\x00\x00\x12\x00\x00\x0f\x01FCGI_MPXS_CONNS0";
    assert_eq!(read_exactly(&mut client, expected.len()), expected);
    client
        .write_all(&[&BEGIN_CLOSE[..], PARAMS, STDIN].concat())
        .unwrap();
    assert_eq!(read_exactly(&mut client, ECHO_ANSWER.len()), ECHO_ANSWER);
    assert_eq!(worker.join().unwrap(), 1);
}

#[test]
fn large_bodies_and_responses_cross_a_real_socket() {
    let (_dir, listener, path) = socket();
    let worker = worker(listener, 1);
    let client = UnixStream::connect(&path).unwrap();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let mut writer = client.try_clone().unwrap();
    let sent = body.clone();
    // Written from another thread: the worker answers while the body is still arriving.
    let sender = thread::spawn(move || {
        writer
            .write_all(&[&BEGIN_CLOSE[..], PARAMS].concat())
            .unwrap();
        for chunk in sent.chunks(32 * 1024) {
            let len = (chunk.len() as u16).to_be_bytes();
            writer
                .write_all(&[1, 5, 0, 1, len[0], len[1], 0, 0])
                .unwrap();
            writer.write_all(chunk).unwrap();
        }
        writer.write_all(&[1, 5, 0, 1, 0, 0, 0, 0]).unwrap();
    });
    let mut reader = client;
    let mut answer = Vec::new();
    reader.read_to_end(&mut answer).unwrap();
    sender.join().unwrap();
    let records = super::support::parse(&answer);
    let stdout: Vec<u8> = records
        .iter()
        .filter(|r| r.record_type == 6)
        .flat_map(|r| r.content.clone())
        .collect();
    assert_eq!(&stdout[..28], b"Content-Type: text/plain\r\n\r\n");
    assert_eq!(&stdout[28..], &body[..]);
    assert!(records.iter().all(|r| r.content.len() <= 65535));
    assert_eq!(worker.join().unwrap(), 1);
}
