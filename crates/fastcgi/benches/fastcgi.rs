//! The FastCGI responder's hot path, on in-memory streams (no syscalls): our own CPU per
//! request, per params decode, per STDOUT write. Compare ratios between runs, not absolute
//! times: the machines are shared and noisy.

use std::hint::black_box;
use std::io::{self, IoSlice, Read, Write};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use drover_fastcgi::{
    BeginRequestBody, Buffers, Connection, Header, KEEP_CONN, Limits, Params, RecordType, Role,
    encode_pair, name_values,
};

/// The params nginx's fastcgi.conf sends for `GET /index.php?page=2` from a browser.
const NGINX_GET: [(&str, &str); 26] = [
    ("SCRIPT_FILENAME", "/srv/www/public/index.php"),
    ("QUERY_STRING", "page=2"),
    ("REQUEST_METHOD", "GET"),
    ("CONTENT_TYPE", ""),
    ("CONTENT_LENGTH", ""),
    ("SCRIPT_NAME", "/index.php"),
    ("REQUEST_URI", "/index.php?page=2"),
    ("DOCUMENT_URI", "/index.php"),
    ("DOCUMENT_ROOT", "/srv/www/public"),
    ("SERVER_PROTOCOL", "HTTP/1.1"),
    ("REQUEST_SCHEME", "https"),
    ("HTTPS", "on"),
    ("GATEWAY_INTERFACE", "CGI/1.1"),
    ("SERVER_SOFTWARE", "nginx/1.26.3"),
    ("REMOTE_ADDR", "203.0.113.54"),
    ("REMOTE_PORT", "51234"),
    ("SERVER_ADDR", "192.0.2.10"),
    ("SERVER_PORT", "443"),
    ("SERVER_NAME", "example.org"),
    ("REDIRECT_STATUS", "200"),
    ("HTTP_HOST", "example.org"),
    (
        "HTTP_USER_AGENT",
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    ),
    (
        "HTTP_ACCEPT",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ),
    ("HTTP_ACCEPT_LANGUAGE", "en-US,en;q=0.5"),
    ("HTTP_ACCEPT_ENCODING", "gzip, deflate, br, zstd"),
    (
        "HTTP_COOKIE",
        "session=8f14e45fceea167a5a36dedd4bea2543; theme=dark",
    ),
];

const RESPONSE_HEAD: &[u8] =
    b"Status: 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 13\r\n\r\n";
const RESPONSE_BODY: &[u8] = b"Hello, world!";

fn params_stream() -> Vec<u8> {
    let mut stream = Vec::new();
    for (name, value) in NGINX_GET {
        encode_pair(&mut stream, name.as_bytes(), value.as_bytes());
    }
    stream
}

/// A record padded to 8 bytes, as nginx sends them.
fn nginx_record(out: &mut Vec<u8>, record_type: RecordType, content: &[u8]) {
    let len = u16::try_from(content.len()).expect("short content");
    let padding = (8 - content.len() % 8) % 8;
    let header = Header {
        record_type,
        request_id: 1,
        content_length: len,
        padding_length: padding as u8,
    };
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(content);
    out.resize(out.len() + padding, 0);
}

/// What nginx writes for one GET: BEGIN_REQUEST, PARAMS, the empty PARAMS and STDIN.
fn nginx_get(flags: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let begin = BeginRequestBody {
        role: Role::RESPONDER,
        flags,
    };
    nginx_record(&mut out, RecordType::BeginRequest, &begin.encode());
    nginx_record(&mut out, RecordType::Params, &params_stream());
    nginx_record(&mut out, RecordType::Params, b"");
    nginx_record(&mut out, RecordType::Stdin, b"");
    out
}

/// A kept-open connection that receives the same request forever and discards output.
struct Replay<'a> {
    request: &'a [u8],
    pos: usize,
}

impl Read for Replay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.request.len() {
            self.pos = 0;
        }
        let n = buf.len().min(self.request.len() - self.pos);
        buf[..n].copy_from_slice(&self.request[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(black_box(buf).len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Ok(black_box(bufs).iter().map(|buf| buf.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a worker does per request, minus the app: look up a param, read the (empty)
/// body, write a small response, end the request, hand the buffers back.
fn serve_one<S: Read + Write>(connection: &mut Connection<S>) -> bool {
    let request = connection.next_request().unwrap().unwrap();
    black_box(request.params.get("REQUEST_URI"));
    let mut body = [0; 64];
    while connection.read_stdin(&mut body).unwrap() > 0 {}
    connection.write_stdout(RESPONSE_HEAD).unwrap();
    connection.write_stdout(RESPONSE_BODY).unwrap();
    let kept = connection.finish(0).unwrap();
    connection.recycle(request);
    kept
}

fn request_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    let kept_get = nginx_get(KEEP_CONN);
    let mut kept = Connection::new(
        Replay {
            request: &kept_get,
            pos: 0,
        },
        Limits::default(),
    );
    group.bench_function("nginx_get_kept_connection", |b| {
        b.iter(|| serve_one(&mut kept))
    });
    // nginx without fastcgi_keep_conn: a new connection per request, either with the
    // buffers of the previous one or with new ones (16 KiB, 8 of them zeroed).
    let get = nginx_get(0);
    let replay = || Replay {
        request: &get,
        pos: 0,
    };
    let mut buffers = Some(Buffers::new());
    group.bench_function("nginx_get_connection_with_buffers", |b| {
        b.iter(|| {
            let reused = buffers.take().unwrap_or_default();
            let mut connection = Connection::with_buffers(replay(), Limits::default(), reused);
            serve_one(&mut connection);
            buffers = Some(connection.into_parts().1);
        })
    });
    group.bench_function("nginx_get_new_connection", |b| {
        b.iter(|| serve_one(&mut Connection::new(replay(), Limits::default())))
    });
    group.finish();
}

fn name_value_decode(c: &mut Criterion) {
    let stream = params_stream();
    let mut group = c.benchmark_group("params");
    group.throughput(Throughput::Elements(NGINX_GET.len() as u64));
    group.bench_function("name_values_nginx_get", |b| {
        b.iter(|| {
            name_values(black_box(&stream))
                .map(|pair| pair.unwrap().1.len())
                .sum::<usize>()
        })
    });
    // Includes copying the stream into a new Vec (as reading it does) and the two
    // allocations of a request whose buffers were not recycled.
    group.bench_function("decode_nginx_get", |b| {
        b.iter(|| Params::decode(black_box(&stream).clone()).unwrap())
    });
    group.finish();
}

/// Our CPU to turn app output into records and hand it to the socket: 1 KiB is copied into
/// the write buffer; 100 KiB goes out by `writev` straight from the app's buffer, so its
/// cost does not grow with the size (the kernel's copy is not ours, and not measured).
fn stdout_encoding(c: &mut Criterion) {
    let kept_get = nginx_get(KEEP_CONN);
    let mut group = c.benchmark_group("stdout");
    for (name, size) in [("1KiB", 1024), ("100KiB", 100 * 1024)] {
        let data = vec![b'x'; size];
        let mut connection = Connection::new(
            Replay {
                request: &kept_get,
                pos: 0,
            },
            Limits::default(),
        );
        connection.next_request().unwrap().unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                connection.write_stdout(black_box(&data)).unwrap();
                connection.flush().unwrap();
            })
        });
    }
    group.finish();
}

criterion_group!(benches, request_cycle, name_value_decode, stdout_encoding);
criterion_main!(benches);
