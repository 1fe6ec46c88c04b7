//! Raw FastCGI abuse at a pool's socket, past nginx: a WSGI pool (drover's own worker), an
//! ASGI pool (its event loop's own FastCGI decoding) and a PHP pool each get every
//! malformed conversation in [`CASES`]. Each one must end with
//! that connection closed (by drover's worker with a logged reason where it is a protocol
//! error), the pool still answering a normal request through nginx, and the master alive
//! with every process below it tracked.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::common::{
    Location, Nginx, PhpPool, PythonPool, Site, TIMEOUT, http, proc, python, start_with_control,
};

const BEGIN: u8 = 1;
const ABORT: u8 = 2;
const END: u8 = 3;
const PARAMS: u8 = 4;
const STDIN: u8 = 5;
const GET_VALUES: u8 = 9;

/// One record: version 1, `kind`, request `id`, `content`, no padding.
fn record(kind: u8, id: u16, content: &[u8]) -> Vec<u8> {
    let len = u16::try_from(content.len()).expect("a record holds at most 64 KiB");
    let mut out = vec![1, kind];
    out.extend(id.to_be_bytes());
    out.extend(len.to_be_bytes());
    out.extend([0, 0]);
    out.extend(content);
    out
}

/// BEGIN_REQUEST, responder role, with or without FCGI_KEEP_CONN.
fn begin(id: u16, keep: bool) -> Vec<u8> {
    record(BEGIN, id, &[0, 1, u8::from(keep), 0, 0, 0, 0, 0])
}

/// One name-value pair with 1-byte lengths (both below 128).
fn pair(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![name.len() as u8, value.len() as u8];
    out.extend(name.as_bytes());
    out.extend(value.as_bytes());
    out
}

/// A POST's params (a body of 100 bytes announced), without the empty end record.
fn post_params(id: u16) -> Vec<u8> {
    let mut content = pair("REQUEST_METHOD", "POST");
    content.extend(pair("CONTENT_LENGTH", "100"));
    content.extend(pair("SCRIPT_FILENAME", "/nonexistent.php"));
    record(PARAMS, id, &content)
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// One malformed conversation: the bytes sent (then the write side is shut, as a web
/// server that gave up would), the reason drover's worker must log for it, if it is a
/// protocol error (a clean end of the connection is not logged), and a record type its
/// answer must hold, if the protocol calls for one.
struct Case {
    name: &'static str,
    bytes: fn() -> Vec<u8>,
    logged: Option<&'static str>,
    answer: Option<u8>,
}

const UNKNOWN_TYPE: u8 = 11;
const GET_VALUES_RESULT: u8 = 10;

const CASES: &[Case] = &[
    Case {
        name: "zero bytes",
        bytes: Vec::new,
        logged: None,
        answer: None,
    },
    Case {
        name: "bad version",
        bytes: || {
            let mut r = begin(1, false);
            r[0] = 0;
            r
        },
        logged: Some("bad FastCGI version 0"),
        answer: None,
    },
    Case {
        name: "HTTP instead of FastCGI",
        bytes: || b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        logged: Some("bad FastCGI version 71"),
        answer: None,
    },
    Case {
        name: "truncated header, then close",
        bytes: || vec![1, BEGIN, 0],
        logged: Some("in the middle of a record"),
        answer: None,
    },
    Case {
        name: "content length past the end",
        bytes: || begin(1, false)[..11].to_vec(),
        logged: Some("in the middle of a record"),
        answer: None,
    },
    Case {
        name: "BEGIN_REQUEST of the wrong length",
        bytes: || record(BEGIN, 1, &[0, 1, 0, 0, 0]),
        logged: Some("BEGIN_REQUEST record of 5 bytes (expected 8)"),
        answer: None,
    },
    Case {
        name: "records of unknown type",
        // A management record of an unknown type is answered; a record for a request that
        // is not active is ignored (the specification's rules).
        bytes: || cat(&[record(77, 0, b"??"), record(200, 1, b"")]),
        logged: None,
        answer: Some(UNKNOWN_TYPE),
    },
    Case {
        name: "params that never end",
        bytes: || cat(&[begin(1, false), record(PARAMS, 1, &pair("A", "b"))]),
        logged: Some("closed the connection while reading the params of request 1"),
        answer: None,
    },
    Case {
        name: "params past the limit",
        bytes: || {
            let chunk = record(PARAMS, 1, &[b'x'; 60_000]);
            cat(&[begin(1, false), chunk.clone(), chunk])
        },
        logged: Some("exceed the limit"),
        answer: None,
    },
    Case {
        name: "malformed params",
        // A name of 127 bytes in a stream of 3: the stream is decoded at its end record.
        bytes: || {
            let bad = record(PARAMS, 1, &[0x7f, 0x01, b'a']);
            cat(&[begin(1, false), bad, record(PARAMS, 1, b"")])
        },
        logged: Some("malformed"),
        answer: None,
    },
    Case {
        name: "a second request id on one connection",
        bytes: || cat(&[begin(1, true), begin(2, true), record(PARAMS, 2, b"")]),
        logged: Some("closed the connection while reading the params of request 1"),
        answer: None,
    },
    Case {
        name: "STDIN before PARAMS",
        bytes: || cat(&[begin(1, false), record(STDIN, 1, b"x")]),
        logged: Some("unexpected"),
        answer: None,
    },
    Case {
        name: "ABORT mid-body",
        bytes: || {
            cat(&[
                begin(1, false),
                post_params(1),
                record(PARAMS, 1, b""),
                record(STDIN, 1, &[b'b'; 10]),
                record(ABORT, 1, b""),
            ])
        },
        logged: None,
        answer: None,
    },
    Case {
        name: "END_REQUEST sent by the client",
        // Into an active request: while idle, a record for no request is ignored.
        bytes: || cat(&[begin(1, false), record(END, 1, &[0; 8])]),
        logged: Some("unexpected"),
        answer: None,
    },
    Case {
        name: "GET_VALUES, then garbage",
        bytes: || {
            let mut out = record(GET_VALUES, 0, &pair("FCGI_MAX_CONNS", ""));
            out.extend((0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
            out
        },
        logged: Some("bad FastCGI version"),
        // The answer to GET_VALUES waits for a flush the garbage never lets happen.
        answer: None,
    },
    Case {
        name: "GET_VALUES of unknown and oversized names",
        bytes: || {
            let mut names = pair("FCGI_MAX_CONNS", "");
            names.extend(pair(&"N".repeat(127), ""));
            record(GET_VALUES, 0, &names)
        },
        logged: None,
        answer: Some(GET_VALUES_RESULT),
    },
];

/// Sends `bytes`, shuts the write side, and reads until the server closes: what it
/// answered, or `None` when it had not closed 10 s later.
fn send(socket: &std::path::Path, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = UnixStream::connect(socket).expect("connect to the pool");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The server may close before it has read everything (a bad first header): fine.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Some(answer),
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(_) => return Some(answer),
        }
    }
}

/// The record types in an answer, in order (a torn last record ends the list).
fn record_types(mut answer: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while answer.len() >= 8 {
        let len = usize::from(u16::from_be_bytes([answer[4], answer[5]])) + usize::from(answer[6]);
        types.push(answer[1]);
        answer = answer.get(8 + len..).unwrap_or_default();
    }
    types
}

#[test]
fn malformed_fastcgi_closes_the_connection_and_the_pools_carry_on() {
    let site = Site::new();
    python::install_apps(&site);
    site.script("hello.php", "<?php echo 'hello';");
    let py = PythonPool::wsgi("py").mount("/py");
    let asgi = PythonPool::asgi("asgi", "app").mount("/asgi");
    let php = PhpPool::new("www");
    let (drover, ctl) = start_with_control(&site, &[&php, &py, &asgi]);
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location::php(&site.socket("www")),
            Location::prefix(&py.location(), &site.socket("py")),
            Location::prefix(&asgi.location(), &site.socket("asgi")).keep_conn(),
        ],
    );
    let answers = || {
        let php = http::get(&nginx.url("/hello.php"));
        let py = http::get(&nginx.url("/py/pid"));
        let asgi = http::get(&nginx.url("/asgi/pid"));
        (php.status, py.status, asgi.status)
    };
    assert_eq!(answers(), (200, 200, 200));

    for case in CASES {
        for pool in ["py", "asgi", "www"] {
            let from = drover.log.len();
            let answer = send(&site.socket(pool), &(case.bytes)()).unwrap_or_else(|| {
                panic!(
                    "{pool}, {}: the connection stayed open 10 s after the client's end",
                    case.name
                )
            });
            if let (Some(kind), "py" | "asgi") = (case.answer, pool) {
                let types = record_types(&answer);
                assert!(
                    types.contains(&kind),
                    "{pool}, {}: no record of type {kind} in the answer ({types:?})",
                    case.name
                );
            }
            if let (Some(reason), "py" | "asgi") = (case.logged, pool) {
                drover.log.wait_for(
                    from,
                    &format!("{pool}, {}: a logged reason with {reason:?}", case.name),
                    |l| l.contains(reason),
                    TIMEOUT,
                );
            }
            assert_eq!(
                answers(),
                (200, 200, 200),
                "{pool}, {}: the pools stopped answering; log:\n{}",
                case.name,
                drover.log.text()
            );
        }
    }

    // Workers a malformed connection killed have been replaced and are tracked.
    ctl.wait_all_tracked(drover.pid(), &drover.log);
    assert!(proc::is_running(drover.pid()), "the master is gone");
}
