//! `protocol = "http"`: a Python pool's workers answer HTTP/1.1 clients themselves, with
//! no nginx in front. A real client (ureq, or bytes written by hand on a TCP connection
//! for the edge cases): Flask GET and POST, keep-alive and pipelining, a chunked upload
//! with `Expect: 100-continue`, refused heads, 1,000 idle keep-alive connections that pin
//! no worker, X-Forwarded-For from an allowed peer, a client gone mid-body.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{field, fields, noise, sha256};
use crate::common::http1::{self, read_response};
use crate::common::{
    Drover, PoolFile, Site, TIMEOUT, free_port, http, pool_toml, probe, python, start_with_control,
};

/// A static Python pool on a loopback TCP port with `protocol = "http"`, and `extra` top-
/// level keys (`{site}` in them: the site's folder).
pub(super) struct HttpPool {
    name: &'static str,
    app: &'static str,
    workers: u32,
    port: u16,
    extra: String,
    /// More `[pm]` keys.
    pm: String,
    /// More `[python]` keys.
    pub(super) python: &'static str,
}

impl HttpPool {
    pub(super) fn new(
        name: &'static str,
        app: &'static str,
        workers: u32,
        port: u16,
        extra: &str,
    ) -> HttpPool {
        HttpPool {
            name,
            app,
            workers,
            port,
            extra: extra.to_string(),
            pm: String::new(),
            python: "",
        }
    }
}

impl PoolFile for HttpPool {
    fn name(&self) -> &str {
        self.name
    }

    fn toml(&self, site: &Site) -> String {
        let socket = site.socket(self.name);
        let text = pool_toml(
            &socket,
            &format!(
                "protocol = \"http\"\n{}\n[pm]\nmode = \"static\"\nmax_children = {}\n{}\n\
                 [python]\napp = \"{}\"\npython_path = [\"{}\"]\n{}\n",
                self.extra
                    .replace("{site}", &site.path().display().to_string()),
                self.workers,
                self.pm,
                self.app,
                site.path().join("apps").display(),
                self.python
            ),
        );
        // pool_toml writes a unix socket with a mode; this pool listens on TCP.
        text.replace(
            &format!(
                "listen = \"{}\"\nlisten_mode = \"0666\"\n",
                socket.display()
            ),
            &format!("listen = \"127.0.0.1:{}\"\n", self.port),
        )
    }
}

/// drover serving one HTTP pool of the fixture apps; no nginx.
pub(super) struct Server {
    pub(super) drover: Drover,
    pub(super) site: Site,
    pub(super) port: u16,
}

impl Server {
    pub(super) fn start(app: &'static str, workers: u32, extra: &str) -> Server {
        Server::start_pm(app, workers, extra, "")
    }

    fn start_pm(app: &'static str, workers: u32, extra: &str, pm: &str) -> Server {
        Server::start_python(app, workers, extra, pm, "")
    }

    /// An ASGI app (`interface = "asgi"`) on the HTTP listener.
    pub(super) fn start_asgi(app: &'static str, workers: u32, extra: &str) -> Server {
        Server::start_python(app, workers, extra, "", "interface = \"asgi\"")
    }

    fn start_python(
        app: &'static str,
        workers: u32,
        extra: &str,
        pm: &str,
        python: &'static str,
    ) -> Server {
        let site = Site::new();
        python::install_apps(&site);
        let pool = HttpPool {
            name: "web",
            app,
            workers,
            port: free_port(),
            extra: extra.to_string(),
            pm: pm.to_string(),
            python,
        };
        let drover = Drover::start(&site, &[&pool]);
        Server {
            drover,
            site,
            port: pool.port,
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(super) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to drover");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream
    }
}

#[test]
fn flask_get_and_post_over_http_without_nginx() {
    let server = Server::start("flask_app:app", 2, "");

    let got = fields(&http::get(
        &server.url("/echo?name=drover&lang=rust%20%26%20python"),
    ));
    assert_eq!(field(&got, "method"), "GET");
    assert_eq!(field(&got, "get.name"), "drover");
    assert_eq!(field(&got, "get.lang"), "rust & python");

    let form = b"name=drover&motto=spawn+%26+reap";
    let reply = http::post(
        &server.url("/echo?via=form"),
        "application/x-www-form-urlencoded",
        form,
    );
    let got = fields(&reply);
    assert_eq!(field(&got, "method"), "POST");
    assert_eq!(field(&got, "post.motto"), "spawn & reap");
    assert_eq!(field(&got, "get.via"), "form");
    // Flask's body is complete when it returns: it goes out with its length.
    assert_eq!(
        reply.header("content-length"),
        reply.bytes.len().to_string()
    );
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let server = Server::start("wsgi_app:application", 2, "");
    let mut stream = server.connect();
    let mut pending = Vec::new();

    // Two requests on one connection, one after the other: one worker, one connection.
    stream
        .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let first = read_response(&mut stream, &mut pending);
    stream
        .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let second = read_response(&mut stream, &mut pending);
    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(
        first.body, second.body,
        "a kept connection stays on its worker"
    );

    // Three pipelined in one write: answered in the order sent.
    stream
        .write_all(
            b"GET /echo?n=1 HTTP/1.1\r\nHost: t\r\n\r\n\
              POST /echo?n=2 HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\na=b&c\
              GET /echo?n=3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    for n in 1..=3 {
        let response = read_response(&mut stream, &mut pending);
        assert_eq!(response.status, 200, "{}", response.head);
        assert!(
            response.text().contains(&format!("get.n={n}\n")),
            "response {n}: {}",
            response.text()
        );
    }
    // The last asked to close: the worker closes after it.
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_chunked_upload_with_expect_continue_arrives_whole() {
    let server = Server::start("wsgi_app:application", 1, "");
    let payload = noise(3 << 20);
    // Nothing of the body is sent before the 100: the app's first read asks for it.
    let response = http1::upload_chunked(&mut server.connect(), "/upload-sha256", &payload);
    assert_eq!(response.status, 200, "{}", response.head);
    let expected = format!("{} {}", payload.len(), sha256(&server.site, &payload));
    assert_eq!(response.text().trim(), expected);
}

/// Heads refused before the app runs: the status each gets and its log line (the TLS
/// listener's twin, https.rs, sends the same).
pub(super) fn hostile_heads() -> [(&'static str, String, &'static str); 4] {
    [
        (
            "431",
            format!(
                "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
                "b".repeat(40 * 1024)
            ),
            "request head too large (431)",
        ),
        (
            "400",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_string(),
            "both Content-Length and Transfer-Encoding",
        ),
        (
            "400",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd"
                .to_string(),
            "more than one Content-Length header (400)",
        ),
        (
            "413",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n".to_string(),
            "above max_request_body",
        ),
    ]
}

#[test]
fn hostile_heads_are_refused_with_their_status_and_logged() {
    let server = Server::start("wsgi_app:application", 1, "max_request_body = \"1MiB\"");
    let cases = hostile_heads();
    for (status, request, _) in &cases {
        // Refused heads end the connection.
        let text = http1::until_close(&mut server.connect(), request.as_bytes());
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} ")),
            "expected {status}, got {text}"
        );
    }
    for (_, _, line) in &cases {
        server.drover.log.wait_for_line(line, TIMEOUT);
    }
    // The worker serves on.
    assert_eq!(http::get(&server.url("/pid")).status, 200);
}

/// A chunked body has no length to refuse in its head: once it grows past
/// `max_request_body` while the app reads it, the client gets the 413 a Content-Length
/// above it gets, not the app's 500 for the read that failed; the worker serves on.
#[test]
fn a_chunked_body_past_max_request_body_is_answered_413() {
    let server = Server::start("wsgi_app:application", 1, "max_request_body = \"64KiB\"");
    chunked_body_past_the_limit_gets_413(&server, "/upload-sha256");
}

/// POSTs 160 KiB in chunks to `path` of a pool with `max_request_body = "64KiB"`, then
/// checks the 413, its log line, and that the worker answers the next request at once
/// although this client keeps its side of the connection open.
pub(super) fn chunked_body_past_the_limit_gets_413(server: &Server, path: &str) {
    let mut stream = server.connect();
    http1::start_chunked_upload(&mut stream, path);
    // 160 KiB in 32 KiB chunks; the worker may answer and close before the last ones.
    let _ = http1::send_chunks(&mut stream, &noise(160 << 10), 32 << 10, "", "");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    let text = String::from_utf8_lossy(&received);
    assert!(
        text.starts_with("HTTP/1.1 413 "),
        "expected 413, got {text:?}; the log:\n{}",
        server.drover.log.text()
    );
    server
        .drover
        .log
        .wait_for_line("above max_request_body (65536 bytes)", TIMEOUT);
    // The client keeps its side open: a lingering close gives up once the client is quiet
    // (2 s), not after its 30 s bound.
    let asked = Instant::now();
    assert_eq!(http::get(&server.url("/pid")).status, 200);
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(20),
        "the next request waited {waited:?}"
    );
    drop(stream);
}

/// Raises this process's open-file limit to `want`, within the hard limit.
fn raise_fd_limit(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on a valid rlimit struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}

#[test]
fn a_thousand_idle_keep_alive_connections_pin_no_worker() {
    raise_fd_limit(4096);
    let server = Server::start("wsgi_app:application", 4, "keepalive_timeout = \"60s\"");
    // 1,000 connections that each served a request and now idle, kept open by the client.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let mut stream = server.connect();
        stream
            .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let response = read_response(&mut stream, &mut Vec::new());
        assert_eq!(response.status, 200);
        idle.push(stream);
    }
    // New clients are still served at once, by every worker: 8 at a time, each request
    // taking 50 ms in the app, need all 4.
    let workers = python::wait_started(&server.drover.log, 0, "web", "worker", 4, TIMEOUT);
    let started = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let url = server.url("/nap");
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| {
                        let asked = Instant::now();
                        let reply = http::get(&url);
                        assert_eq!(reply.status, 200);
                        (reply.body.trim().parse::<i32>().unwrap(), asked.elapsed())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let served: Vec<(i32, Duration)> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let slowest = served.iter().map(|(_, took)| *took).max().unwrap();
    assert!(
        slowest < Duration::from_secs(2),
        "a request took {slowest:?} beside 1,000 idle connections"
    );
    let seen: std::collections::BTreeSet<i32> = served.iter().map(|(pid, _)| *pid).collect();
    assert_eq!(
        seen.len(),
        4,
        "only {seen:?} of {workers:?} answered in {:?}",
        started.elapsed()
    );
    // And the idle connections are still open and usable.
    for stream in idle.iter_mut().step_by(100) {
        stream
            .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(stream, &mut Vec::new()).status, 200);
    }
}

#[test]
fn an_idle_connection_is_closed_after_keepalive_timeout() {
    let server = Server::start("wsgi_app:application", 1, "keepalive_timeout = \"300ms\"");
    let mut stream = server.connect();
    stream
        .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut stream, &mut Vec::new()).status, 200);
    let idle = Instant::now();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(
        idle.elapsed() >= Duration::from_millis(250) && idle.elapsed() < Duration::from_secs(5),
        "closed after {:?}",
        idle.elapsed()
    );
}

#[test]
fn x_forwarded_for_counts_only_from_an_allowed_peer() {
    let server = Server::start(
        "wsgi_app:application",
        1,
        "forwarded_allow_ips = [\"127.0.0.2\"]",
    );
    let ask = |source: &str| {
        let mut stream = http1::connect_from(source, server.port);
        stream
            .write_all(
                b"GET /remote HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 203.0.113.7\r\n\
                  X-Forwarded-Proto: https\r\n\r\n",
            )
            .unwrap();
        read_response(&mut stream, &mut Vec::new()).text()
    };
    let proxied = ask("127.0.0.2");
    assert!(proxied.contains("remote_addr=203.0.113.7\n"), "{proxied}");
    assert!(proxied.contains("url_scheme=https\n"), "{proxied}");
    let direct = ask("127.0.0.1");
    assert!(direct.contains("remote_addr=127.0.0.1\n"), "{direct}");
    assert!(direct.contains("url_scheme=http\n"), "{direct}");
}

#[test]
fn a_client_gone_mid_body_costs_one_request_not_the_worker() {
    let server = Server::start("wsgi_app:application", 1, "");
    let before = http::get(&server.url("/pid")).body;
    {
        let mut stream = server.connect();
        stream
            .write_all(
                b"POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n",
            )
            .unwrap();
        stream.write_all(&[b'x'; 1000]).unwrap();
        // Gone, 999,000 bytes short.
    }
    // The body is read ahead in the epoll set, before the app runs: the close is seen
    // there, logged, and the same worker serves on.
    server.drover.log.wait_for_line(
        "the client closed the connection before the end of the body",
        TIMEOUT,
    );
    let after = http::get(&server.url("/pid")).body;
    assert_eq!(before, after, "the worker was replaced");
}

#[test]
fn a_client_trickling_its_head_holds_no_worker_and_is_dropped_in_time() {
    let server = Server::start("wsgi_app:application", 1, "request_read_timeout = \"1s\"");
    let mut slow = server.connect();
    slow.write_all(b"GET /pid HTTP/1.1\r\nHo").unwrap();
    // The pool's only worker still answers others at once.
    let asked = Instant::now();
    assert_eq!(http::get(&server.url("/pid")).status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    // The incomplete head is dropped after request_read_timeout, and the log says so.
    let mut rest = Vec::new();
    slow.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    server.drover.log.wait_for_line(
        "dropped a connection: its request head did not arrive within 1s",
        TIMEOUT,
    );
}

#[test]
fn the_access_log_has_a_line_per_http_request() {
    // php-fpm's default format and a response header, which an HTTP worker keeps from
    // the app's CGI head before it becomes HTTP.
    let server = Server::start(
        "wsgi_app:application",
        1,
        "access_log = \"{site}/access.log\"\n\
         access_format = \"%R - %u %t \\\"%m %r\\\" %s %{Content-Type}o\"",
    );
    let mut stream = server.connect();
    let mut pending = Vec::new();
    stream
        .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\nGET /nope?q=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    read_response(&mut stream, &mut pending);
    read_response(&mut stream, &mut pending);
    let path = server.site.path().join("access.log");
    let lines = crate::common::wait_until(TIMEOUT, "two access log lines", || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        (text.lines().count() >= 2).then_some(text)
    });
    let lines: Vec<&str> = lines.lines().collect();
    assert!(lines[0].starts_with("127.0.0.1 "), "{lines:?}");
    assert!(
        lines[0].ends_with("\"GET /pid\" 200 text/plain; charset=utf-8"),
        "{lines:?}"
    );
    // php-fpm's %r: the URI without its query.
    assert!(lines[1].contains("\"GET /nope\" 200"), "{lines:?}");
}

#[test]
fn max_requests_recycles_an_http_worker() {
    let server = Server::start_pm("wsgi_app:application", 1, "", "max_requests = 2");
    let pids: Vec<String> = (0..3)
        .map(|_| http::get(&server.url("/pid")).body)
        .collect();
    assert_eq!(pids[0], pids[1]);
    assert_ne!(
        pids[1],
        pids[2],
        "the worker served a third request; log:\n{}",
        server.drover.log.text()
    );
}

#[test]
fn term_lets_the_request_in_flight_finish_and_closes_idle_connections() {
    let mut server = Server::start("wsgi_app:application", 2, "keepalive_timeout = \"60s\"");
    let mut idle = server.connect();
    idle.write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut idle, &mut Vec::new()).status, 200);
    let marker = server.site.path().join("started");
    let url = server.url(&format!("/sleep?marker={}", marker.display()));
    let request = std::thread::spawn(move || http::get(&url));
    crate::common::wait_until(TIMEOUT, "the slow request to start", || {
        marker.exists().then_some(())
    });
    server.drover.signal(nix::sys::signal::Signal::SIGTERM);
    let reply = request.join().unwrap();
    assert_eq!((reply.status, reply.body.as_str()), (200, "done"));
    let status = server.drover.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", server.drover.log.text());
    let mut rest = Vec::new();
    idle.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn a_reload_switches_a_pool_between_http_and_fastcgi_on_the_same_socket() {
    let site = Site::new();
    python::install_apps(&site);
    let mut pool = HttpPool {
        name: "web",
        app: "wsgi_app:application",
        workers: 1,
        port: free_port(),
        extra: String::new(),
        pm: String::new(),
        python: "",
    };
    let (drover, _ctl) = start_with_control(&site, &[&pool]);
    let url = format!("http://127.0.0.1:{}/pid", pool.port);
    assert_eq!(http::get(&url).status, 200);
    let config = site.path().join("drover.toml");
    let reload = |text: String, round: usize| {
        site.write("pools.d/web.toml", &text);
        drover.signal(nix::sys::signal::Signal::SIGHUP);
        drover.log.wait_for_lines(
            0,
            "reload done",
            |l| l.contains("reload done"),
            round,
            TIMEOUT,
        );
    };
    // To FastCGI: the HTTP workers left the shared socket non-blocking; the FastCGI ones
    // must still serve (drover ctl probe speaks FastCGI, as nginx would).
    reload(pool.toml(&site).replace("protocol = \"http\"\n", ""), 1);
    for _ in 0..3 {
        let run = probe(&config, &["web", "/pid"]);
        assert_eq!(run.code, Some(0), "{run:#?}\n{}", drover.log.text());
    }
    // And back to HTTP.
    pool.extra = "keepalive_timeout = \"1s\"".into();
    reload(pool.toml(&site), 2);
    assert_eq!(http::get(&url).status, 200);
}
