//! `warmup`: GET requests the zygote sends through the loaded app before it forks.
//!
//! What an app builds on its first requests (Flask's and Werkzeug's lazy imports and
//! caches, compiled routes, template caches) is otherwise built again in every worker, in
//! private memory, and makes every worker's first request slow. Built once in the zygote,
//! it is frozen with the rest of the app and shared copy-on-write.
//!
//! Each request takes the workers' own path: FastCGI records as nginx sends them, on a
//! socketpair, through the same [`App::handle`]. A thread reads the response (a large
//! page would not fit in the socket's buffer) and ends before any fork. The app sees
//! `DROVER_WARMUP = "1"` in the environ (not an `HTTP_` variable, so that no client can
//! send it), so that it can skip side effects. A failing request is
//! logged and the pool starts anyway: warm-up is an optimisation, not a health check.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::rc::Rc;
use std::time::Instant;

use drover_fastcgi::{
    BeginRequestBody, Connection, HEADER_LEN, Header, Limits, RecordType, Role, encode_pair,
};
use drover_worker::exchange::Exchange;
use drover_worker::socket::Socket;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use pyo3::prelude::*;

use super::wsgi::App;

/// Sends each of `paths` through `app` in turn and logs one line per request on stderr.
pub fn run(py: Python<'_>, app: &Py<PyAny>, mount: &str, paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    let app = match App::new(py, app.clone_ref(py), mount.to_string()) {
        Ok(app) => app,
        Err(err) => {
            err.print(py);
            return;
        }
    };
    for path in paths {
        let started = Instant::now();
        let outcome = match request(py, &app, path) {
            Ok(response) => status(&response),
            Err(err) => format!("failed: {err}"),
        };
        eprintln!(
            "warm-up GET {path}: {outcome} in {:.1} ms",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
}

/// One request on a fresh socketpair; returns the raw FastCGI response.
fn request(py: Python<'_>, app: &App, path: &str) -> std::io::Result<Vec<u8>> {
    let (client, server) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let bytes = records(path);
    let reader = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let mut client = std::fs::File::from(client);
        client.write_all(&bytes)?;
        let mut response = Vec::new();
        client.read_to_end(&mut response)?;
        Ok(response)
    });
    let mut fastcgi = Connection::new(Socket::from(server), Limits::default());
    let next = fastcgi.next_request();
    let conn = Rc::new(RefCell::new(Exchange::fastcgi(fastcgi)));
    match next {
        Ok(Some(request)) => {
            app.handle(py, &conn, request);
        }
        Ok(None) => {}
        Err(err) => eprintln!("warm-up: {err}"),
    }
    // The reader reads to the end of the stream: close our end now, as the app may still
    // hold the environ (its `wsgi.input` shares the connection) until the collector runs.
    conn.borrow_mut().get_mut().close();
    drop(conn);
    reader
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the reader panicked")))
}

/// The records nginx would send for `GET path` with `fastcgi.conf`'s params.
pub fn records(path: &str) -> Vec<u8> {
    let (uri, query) = path.split_once('?').unwrap_or((path, ""));
    let mut params = Vec::new();
    for (name, value) in [
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", "drover"),
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", path),
        ("DOCUMENT_URI", uri),
        ("SCRIPT_NAME", uri),
        ("QUERY_STRING", query),
        ("CONTENT_TYPE", ""),
        ("CONTENT_LENGTH", ""),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_SCHEME", "http"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "0"),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_PORT", "80"),
        ("SERVER_NAME", "localhost"),
        ("HTTP_HOST", "localhost"),
        ("HTTP_USER_AGENT", "drover-warmup"),
        ("DROVER_WARMUP", "1"),
    ] {
        encode_pair(&mut params, name.as_bytes(), value.as_bytes());
    }
    let begin = BeginRequestBody {
        role: Role::RESPONDER,
        flags: 0,
    };
    let mut out = Vec::new();
    let mut record = |kind: RecordType, content: &[u8]| {
        out.extend_from_slice(&Header::new(kind, 1, content.len() as u16).encode());
        out.extend_from_slice(content);
    };
    record(RecordType::BeginRequest, &begin.encode());
    for chunk in params.chunks(drover_fastcgi::MAX_CONTENT_LEN) {
        record(RecordType::Params, chunk);
    }
    record(RecordType::Params, &[]);
    record(RecordType::Stdin, &[]);
    out
}

/// The response's status from its STDOUT stream: the CGI `Status:` header, "200 OK"
/// when the head has none, or what went wrong.
pub fn status(response: &[u8]) -> String {
    let mut stdout = Vec::new();
    let mut rest = response;
    while rest.len() >= HEADER_LEN {
        let length = usize::from(u16::from_be_bytes([rest[4], rest[5]]));
        let end = HEADER_LEN + length + usize::from(rest[6]);
        if rest.len() < end {
            break;
        }
        if RecordType::from_u8(rest[1]) == RecordType::Stdout {
            stdout.extend_from_slice(&rest[HEADER_LEN..HEADER_LEN + length]);
        }
        rest = &rest[end..];
    }
    if stdout.is_empty() {
        return "no response".to_string();
    }
    let head = String::from_utf8_lossy(&stdout);
    let head = head.split("\r\n\r\n").next().unwrap_or_default();
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("status")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "200 OK".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_fastcgi::end_request_body;

    fn stdout_record(content: &[u8]) -> Vec<u8> {
        let mut out = Header::new(RecordType::Stdout, 1, content.len() as u16)
            .encode()
            .to_vec();
        out.extend_from_slice(content);
        out
    }

    #[test]
    fn the_records_parse_as_a_get_with_its_query() {
        let bytes = records("/search?q=a");
        let mut conn = Connection::new(std::io::Cursor::new(bytes), Limits::default());
        let request = conn.next_request().unwrap().expect("a request");
        let get = |name| String::from_utf8_lossy(request.params.get(name).unwrap()).into_owned();
        assert_eq!(get("REQUEST_METHOD"), "GET");
        assert_eq!(get("DOCUMENT_URI"), "/search");
        assert_eq!(get("QUERY_STRING"), "q=a");
        assert_eq!(get("REQUEST_URI"), "/search?q=a");
        assert_eq!(get("DROVER_WARMUP"), "1");
    }

    #[test]
    fn the_status_comes_from_the_head_split_over_records() {
        let mut response = stdout_record(b"Status: 404 NOT ");
        response.extend(stdout_record(
            b"FOUND\r\nContent-Type: text/plain\r\n\r\nStatus: 200",
        ));
        let mut end = Header::new(RecordType::EndRequest, 1, 8).encode().to_vec();
        end.extend_from_slice(&end_request_body(
            0,
            drover_fastcgi::ProtocolStatus::RequestComplete,
        ));
        response.extend(end);
        assert_eq!(status(&response), "404 NOT FOUND");
        assert_eq!(
            status(&stdout_record(b"Content-Type: text/plain\r\n\r\nhi")),
            "200 OK"
        );
        assert_eq!(status(&[]), "no response");
    }
}
