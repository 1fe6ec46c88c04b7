//! Hot pure code of a Python worker besides the FastCGI codec (crates/fastcgi/benches):
//! building a PEP 3333 environ from nginx's params, and a worker's scoreboard writes per
//! request. Compare ratios between runs, not absolute times: the machines are shared and
//! noisy.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use drover_fastcgi::{Params, encode_pair};
use drover_python::wsgi::environ;
use drover_scoreboard::{Scoreboard, now_us};
use nix::unistd::Pid;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What nginx's fastcgi.conf sends for a browser's `GET /hello?name=x`.
fn nginx_get() -> Params {
    let pairs = [
        ("SCRIPT_FILENAME", "/srv/app/hello"),
        ("QUERY_STRING", "name=x"),
        ("REQUEST_METHOD", "GET"),
        ("CONTENT_TYPE", ""),
        ("CONTENT_LENGTH", ""),
        ("SCRIPT_NAME", "/hello"),
        ("REQUEST_URI", "/hello?name=x"),
        ("DOCUMENT_URI", "/hello"),
        ("DOCUMENT_ROOT", "/srv/app"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_SCHEME", "http"),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", "nginx/1.22.1"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "51234"),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_PORT", "80"),
        ("SERVER_NAME", "localhost"),
        ("REDIRECT_STATUS", "200"),
        ("HTTP_HOST", "localhost"),
        (
            "HTTP_USER_AGENT",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        (
            "HTTP_ACCEPT",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        ),
        ("HTTP_ACCEPT_LANGUAGE", "en-US,en;q=0.5"),
        ("HTTP_ACCEPT_ENCODING", "gzip, deflate, br"),
    ];
    let mut raw = Vec::new();
    for (name, value) in pairs {
        encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
    }
    Params::decode(raw).expect("valid params")
}

fn environ_building(c: &mut Criterion) {
    Python::initialize();
    let params = nginx_get();
    Python::attach(|py| {
        let base = PyDict::new(py);
        base.set_item("wsgi.version", (1, 0)).unwrap();
        c.bench_function("environ from 24 nginx params", |b| {
            b.iter(|| {
                let environ = base.copy().unwrap();
                environ::fill(py, &environ, black_box(&params), "").unwrap();
                black_box(environ);
            })
        });
    });
}

fn scoreboard_updates(c: &mut Criterion) {
    let board = Scoreboard::create("bench", 4).expect("memfd");
    let slot = board.slot(0);
    slot.claim(Pid::this(), 1);
    c.bench_function("scoreboard begin + end of one request", |b| {
        b.iter(|| {
            slot.begin_request(
                now_us(),
                "GET",
                black_box("/hello"),
                "name=x",
                "app:application",
            );
            slot.end_request(now_us(), Duration::from_micros(20), None);
        })
    });
    c.bench_function("scoreboard snapshot of 4 slots", |b| {
        b.iter(|| black_box(board.snapshot()))
    });
}

criterion_group!(benches, environ_building, scoreboard_updates);
criterion_main!(benches);
