//! ASGI pools (`interface = "asgi"`) behind nginx: the FastAPI fixture and two bare ASGI
//! apps of `tests/apps/asgi_app.py`, each test with its own drover and nginx, nginx keeping
//! its FastCGI connections open (`fastcgi_keep_conn on`) as a production setup would.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{noise, sha256};
use crate::common::http::{self, Raw, Wire};
use crate::common::{
    Drover, Location, Nginx, PythonPool, Site, Stack, TIMEOUT, proc, python, start_with_control,
};

/// drover serving `pool`, nginx passing every path under its mount to it on kept
/// connections.
fn asgi_stack(pool: PythonPool) -> Stack {
    let site = Site::new();
    python::install_apps(&site);
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix(&pool.location(), &site.socket(&pool.name)).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    Stack {
        nginx,
        drover,
        site,
    }
}

fn fastapi(workers: u32) -> Stack {
    asgi_stack(PythonPool::asgi("api", "app").max_children(workers))
}

/// GET `path`: asserts a 200 (showing drover's log otherwise) and returns the body.
fn ok(stack: &Stack, path: &str) -> String {
    let reply = http::try_get(&stack.url(path))
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", stack.drover.log.text()));
    assert_eq!(
        reply.status,
        200,
        "GET {path}: {reply:?}; log:\n{}",
        stack.drover.log.text()
    );
    reply.body
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The pool's workers: the drover-python processes that have no children (the zygote
/// has).
pub(super) fn python_workers(drover: &Drover) -> Vec<i32> {
    let below = drover.descendants();
    let is_parent = |pid: i32| {
        below
            .iter()
            .any(|&d| proc::stat(d).is_some_and(|s| s.ppid == pid))
    };
    below
        .iter()
        .copied()
        .filter(|&pid| proc::stat(pid).is_some_and(|s| s.comm == "drover-python" && s.state != 'Z'))
        .filter(|&pid| !is_parent(pid))
        .collect()
}

/// The `EVENT PID` lines the fixture's lifespan wrote.
fn lifespan_events(site: &Site, event: &str) -> Vec<i32> {
    let text = fs::read_to_string(site.path().join("apps/lifespan.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix(event)?.trim().parse().ok())
        .collect()
}

#[test]
fn fastapi_json_route_with_path_and_query_params_under_a_mount() {
    let stack = asgi_stack(PythonPool::asgi("api", "app").mount("/api"));

    assert_eq!(
        json(&ok(&stack, "/api/hello")),
        json(r#"{"hello":"world"}"#)
    );
    let got = json(&ok(&stack, "/api/items/42?q=drover%20rs"));

    assert_eq!(got["item_id"], 42);
    assert_eq!(got["q"], "drover rs");
    assert_eq!(got["path"], "/api/items/42");
    assert_eq!(got["root_path"], "/api");
    assert_eq!(
        got["resource_open"], true,
        "the lifespan state reaches requests"
    );
    let missing = http::get(&stack.url("/api/items/nope"));
    assert_eq!(missing.status, 422, "FastAPI's validation: {missing:?}");
}

#[test]
fn the_scope_carries_what_nginx_sent() {
    let stack = asgi_stack(PythonPool::asgi("raw", "scope_app"));

    let reply = http::get_with(
        &stack.url("/caf%C3%A9/x?a=1&b=%20"),
        &[("X-Request-Id", "r-17"), ("Accept", "text/plain")],
    );

    assert_eq!(
        reply.status,
        200,
        "{reply:?}; log:\n{}",
        stack.drover.log.text()
    );
    assert_eq!(
        reply.header_values("x-one"),
        ["1", "2"],
        "repeated headers stay"
    );
    let scope = json(&reply.body);
    assert_eq!(scope["type"], "http");
    assert_eq!(scope["asgi"]["version"], "3.0");
    assert_eq!(scope["http_version"], "1.1");
    assert_eq!(scope["method"], "GET");
    assert_eq!(scope["scheme"], "http");
    assert_eq!(scope["path"], "/caf\u{e9}/x");
    assert_eq!(scope["raw_path"], "/caf%C3%A9/x");
    assert_eq!(scope["query_string"], "a=1&b=%20");
    assert_eq!(scope["root_path"], "");
    assert_eq!(scope["client"][0], "127.0.0.1");
    assert_eq!(scope["server"][1], stack.nginx.port);
    let headers = scope["headers"].as_array().expect("headers");
    let has = |name: &str, value: &str| headers.iter().any(|h| h[0] == name && h[1] == value);
    assert!(has("x-request-id", "r-17"), "{headers:?}");
    assert!(has("accept", "text/plain"), "{headers:?}");
    assert!(headers.iter().any(|h| h[0] == "host"), "{headers:?}");
}

#[test]
fn a_post_body_reaches_a_bare_app_and_content_type_is_a_header() {
    let stack = asgi_stack(PythonPool::asgi("raw", "scope_app"));

    let reply = http::post(&stack.url("/form"), "text/plain", b"hello body");

    let scope = json(&reply.body);
    assert_eq!(scope["method"], "POST");
    assert_eq!(scope["body"], "hello body");
    let headers = scope["headers"].as_array().expect("headers");
    let count = |name: &str| headers.iter().filter(|h| h[0] == name).count();
    assert_eq!(count("content-type"), 1, "{headers:?}");
    assert_eq!(count("content-length"), 1, "{headers:?}");
}

#[test]
fn a_five_megabyte_body_streams_to_the_app_intact() {
    let stack = fastapi(2);
    let payload = noise(5 << 20);

    let reply = http::post(&stack.url("/sha256"), "application/octet-stream", &payload);

    assert_eq!(
        reply.status,
        200,
        "{reply:?}; log:\n{}",
        stack.drover.log.text()
    );
    let expected = format!("{} {}", payload.len(), sha256(&stack.site, &payload));
    assert_eq!(reply.body, expected);
}

#[test]
fn a_streamed_chunk_reaches_the_client_before_the_app_produces_the_last() {
    let stack = fastapi(1);
    let marker = stack.site.path().join("stream.go");

    let mut raw = Raw::send(
        stack.nginx.port,
        &format!("GET /stream?marker={} HTTP/1.0\r\n", marker.display()),
    );
    raw.read_until(b"first\n");
    fs::write(&marker, "").expect("create the marker");
    let wire = Wire::parse(&raw.read_to_end());

    assert_eq!(wire.status, 200, "head: {}", wire.head);
    assert_eq!(String::from_utf8_lossy(&wire.body), "first\nlast\n");
}

#[test]
fn slow_requests_run_at_once_on_one_worker() {
    let stack = fastapi(1);
    ok(&stack, "/hello");
    let url = stack.url("/sleep?s=1");

    let started = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            thread::spawn(move || http::get(&url))
        })
        .collect();
    let replies: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = started.elapsed();

    let pids: Vec<_> = replies
        .iter()
        .map(|r| {
            assert_eq!(r.status, 200, "{r:?}");
            json(&r.body)["pid"].as_i64().expect("pid")
        })
        .collect();
    assert!(pids.iter().all(|&p| p == pids[0]), "one worker: {pids:?}");
    assert!(
        took < Duration::from_millis(2500),
        "8 requests sleeping 1 s each took {took:?} on one worker"
    );
}

#[test]
fn an_exception_is_a_500_with_the_traceback_in_the_log_and_the_worker_serves_on() {
    let stack = fastapi(1);
    let worker = ok(&stack, "/pid");

    let reply = http::get(&stack.url("/boom"));

    assert_eq!(reply.status, 500, "{reply:?}");
    let line = stack.drover.log.wait_for_line("ZeroDivisionError", TIMEOUT);
    assert!(line.contains("pool api"), "{line}");
    let log = stack.drover.log.text();
    assert!(log.contains("Exception in ASGI app (GET /boom)"), "{log}");
    assert!(log.contains("Traceback (most recent call last)"), "{log}");
    assert_eq!(ok(&stack, "/pid"), worker, "the worker serves on");
}

#[test]
fn a_client_that_hangs_up_mid_stream_gives_the_app_http_disconnect() {
    let stack = fastapi(1);
    let worker = ok(&stack, "/pid");

    let mut raw = Raw::send(stack.nginx.port, "GET /endless?id=gone HTTP/1.0\r\n");
    raw.read_until(b"xxxx\n");
    drop(raw);

    stack.drover.log.wait_for_line("disconnected gone", TIMEOUT);
    assert_eq!(ok(&stack, "/pid"), worker, "the worker serves on");
}

#[test]
fn lifespan_runs_once_per_worker_startup_before_requests_shutdown_on_stop() {
    let mut stack = fastapi(2);
    // The worker that answers has run its startup before it took the request.
    let answered: i32 = ok(&stack, "/pid").parse().expect("pid");
    assert!(lifespan_events(&stack.site, "startup").contains(&answered));
    let mut expected = python_workers(&stack.drover);
    expected.sort();
    // Each worker starts up on its own, once (the other may still be at it).
    let started = crate::common::wait_until(TIMEOUT, "a startup per worker", || {
        let mut started = lifespan_events(&stack.site, "startup");
        started.sort();
        (started.len() >= expected.len()).then_some(started)
    });
    assert_eq!(started, expected, "one startup per worker");

    stack.drover.signal(Signal::SIGTERM);
    let status = stack.drover.wait_exit(TIMEOUT);

    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        stack.drover.log.text()
    );
    let mut stopped = lifespan_events(&stack.site, "shutdown");
    stopped.sort();
    assert_eq!(stopped, expected, "one shutdown per worker");
}

#[test]
fn max_requests_retires_the_worker_after_its_lifespan_shutdown() {
    let stack = asgi_stack(
        PythonPool::asgi("api", "app")
            .max_children(1)
            .max_requests(3, 0),
    );
    let first = ok(&stack, "/pid");
    ok(&stack, "/hello");
    ok(&stack, "/hello");

    let first: i32 = first.parse().expect("pid");
    let next = ok(&stack, "/pid");

    assert_ne!(next.parse::<i32>().expect("pid"), first, "a new worker");
    assert_eq!(lifespan_events(&stack.site, "shutdown"), [first]);
}

#[test]
fn an_app_without_lifespan_is_served() {
    let stack = asgi_stack(PythonPool::asgi("raw", "scope_app"));

    let scope = json(&ok(&stack, "/plain"));

    assert_eq!(scope["path"], "/plain");
    assert!(
        !stack.drover.log.text().contains("lifespan"),
        "{}",
        stack.drover.log.text()
    );
}

#[test]
fn a_failed_lifespan_startup_stops_the_pool_with_its_message() {
    let stack = asgi_stack(PythonPool::asgi("bad", "failing_app"));

    let log = &stack.drover.log;
    let line = log.wait_for_line("lifespan startup failed", TIMEOUT);

    assert!(line.contains("database unreachable"), "{line}");
    log.wait_for_line(
        "pool bad: the app failed to load (traceback above); the pool is stopped until a reload",
        TIMEOUT,
    );
}

/// The start of a FastCGI request whose params never end: BEGIN_REQUEST, then a PARAMS
/// record that announces more bytes than ever come.
const ENDLESS_PARAMS: [u8; 16 + 9] = [
    1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 4, 0, 1, 0xff, 0xff, 0, 0, b'x',
];

#[test]
fn slow_clients_cost_no_worker_and_are_dropped_after_request_read_timeout() {
    let stack = asgi_stack(
        PythonPool::asgi("api", "app")
            .max_children(1)
            .key("request_read_timeout", "\"2s\""),
    );
    ok(&stack, "/hello");
    let socket = stack.site.socket("api");

    // Ten clients that send a request's first bytes and then nothing, on the pool's one
    // worker.
    let started = Instant::now();
    let stalled: Vec<_> = (0..10)
        .map(|_| {
            let mut stream = UnixStream::connect(&socket).expect("connect to the pool");
            stream.write_all(&ENDLESS_PARAMS).expect("send");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("read timeout");
            stream
        })
        .collect();
    // Meanwhile the worker serves: the answer comes while the stalled ones still hold
    // their connections (none dropped yet).
    assert_eq!(json(&ok(&stack, "/hello"))["hello"], "world");
    assert!(
        !stack.drover.log.text().contains("dropped a connection"),
        "answered only after the stalled clients were dropped ({:?}):\n{}",
        started.elapsed(),
        stack.drover.log.text()
    );

    for mut stream in stalled {
        let mut buf = [0u8; 64];
        let read = stream.read(&mut buf);
        assert!(
            matches!(read, Ok(0)) || read.is_err() && started.elapsed() < Duration::from_secs(9),
            "{read:?}"
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(6),
        "dropped after {took:?}"
    );
    let line = "dropped a connection: the params of request 1 did not arrive within \
                request_read_timeout (2s); 25 bytes received";
    let dropped = stack
        .drover
        .log
        .wait_for_lines(0, line, |l| l.contains(line), 10, TIMEOUT);
    assert_eq!(dropped.len(), 10, "{dropped:?}");
}

#[test]
fn the_status_shows_the_worker_busy_with_its_oldest_request_and_counts_each() {
    let site = Site::new();
    python::install_apps(&site);
    let pool = PythonPool::asgi("api", "app").max_children(1);
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket("api")).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    let worker = |log: &str| {
        let text = ctl.ok(&["status", "api", "--full", "--json"], log);
        let status: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        status["processes"][0].clone()
    };
    assert_eq!(http::get(&nginx.url("/hello")).status, 200);

    let slow = {
        let url = nginx.url("/sleep?s=3");
        thread::spawn(move || http::get(&url))
    };
    let quick: Vec<_> = (0..4)
        .map(|_| {
            let url = nginx.url("/sleep?s=0.5");
            thread::spawn(move || http::get(&url))
        })
        .collect();
    for reply in quick {
        assert_eq!(reply.join().unwrap().status, 200);
    }
    // The short ones are done, the long one still runs: the worker is busy with it (the
    // master reads the slot's state on its 100 ms tick; the count is live).
    assert_eq!(worker(&drover.log.text())["requests"], 5);
    let shows = |state: &str, uri: &str| {
        proc::poll(Duration::from_secs(2), || {
            let w = worker(&drover.log.text());
            w["state"] == state && w["request uri"] == uri
        })
    };
    assert!(
        shows("Running", "/sleep?s=3"),
        "{}",
        worker(&drover.log.text())
    );
    assert_eq!(slow.join().unwrap().status, 200);

    let idle = worker(&drover.log.text());
    assert_eq!(idle["requests"], 6, "{idle}");
    assert!(
        proc::poll(
            Duration::from_secs(2),
            || worker(&drover.log.text())["state"] == "Idle"
        ),
        "{}",
        worker(&drover.log.text())
    );
}

#[test]
fn the_access_log_has_a_line_per_request_with_its_status() {
    let site = Site::new();
    python::install_apps(&site);
    let log_path = site.path().join("access.log");
    let pool = PythonPool::asgi("api", "app")
        .max_children(1)
        .key(
            "access_log",
            &format!("{:?}", log_path.display().to_string()),
        )
        // A response header (the app's names are lower case), and one it did not send.
        .key(
            "access_format",
            r#""%R - %u %t \"%m %r\" %s %{Content-Type}o %{X-Absent}o""#,
        );
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket("api")).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);

    assert_eq!(http::get(&nginx.url("/hello?x=1")).status, 200);
    assert_eq!(http::get(&nginx.url("/boom")).status, 500);

    let text = crate::common::wait_until(TIMEOUT, "two access log lines", || {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        (text.lines().count() >= 2).then_some(text)
    });
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with("\"GET /hello\" 200 application/json -"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("\"GET /boom\" 500 text/plain"),
        "{lines:?}"
    );
    drover.log.wait_for_line("ZeroDivisionError", TIMEOUT);
}

#[test]
fn the_slowlog_shows_the_slow_request_s_awaits_innermost_first() {
    let site = Site::new();
    python::install_apps(&site);
    let slowlog = site.path().join("api.slow");
    let pool = PythonPool::asgi("api", "app")
        .max_children(1)
        .key("slowlog", &format!("{:?}", slowlog.display().to_string()))
        .key("request_slowlog_timeout", "\"1s\"");
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket("api")).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    let quick = {
        let url = nginx.url("/sleep?s=0.2");
        thread::spawn(move || http::get(&url))
    };

    let reply = http::get(&nginx.url("/slow?s=2.5"));

    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(quick.join().unwrap().status, 200);
    let text = crate::common::wait_until(TIMEOUT, "a slowlog entry", || {
        let text = fs::read_to_string(&slowlog).unwrap_or_default();
        text.contains("level1()").then_some(text)
    });
    assert!(
        text.contains("/slow?s=2.5"),
        "{text}; log:\n{}",
        drover.log.text()
    );
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no {needle} in {text}"))
    };
    assert!(
        at("level3()") < at("level2()") && at("level2()") < at("level1()"),
        "{text}"
    );
    assert!(text.contains("asgi_app.py:"), "{text}");
}

#[test]
fn a_graceful_stop_lets_the_requests_in_flight_finish_then_runs_lifespan_shutdown() {
    let mut stack = fastapi(1);
    let worker: i32 = ok(&stack, "/pid").parse().expect("pid");
    let slow: Vec<_> = (0..3)
        .map(|i| {
            let url = stack.url(&format!("/hold?id={i}&s=1.5"));
            thread::spawn(move || http::get(&url))
        })
        .collect();
    // All three are in the worker before the stop.
    stack
        .drover
        .log
        .wait_for_lines(0, "holding", |l| l.contains("holding "), 3, TIMEOUT);

    stack.drover.signal(Signal::SIGTERM);

    for reply in slow {
        let reply = reply.join().unwrap();
        assert_eq!(
            reply.status,
            200,
            "{reply:?}; log:\n{}",
            stack.drover.log.text()
        );
        assert_eq!(json(&reply.body)["pid"], worker);
    }
    let status = stack.drover.wait_exit(TIMEOUT);
    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        stack.drover.log.text()
    );
    assert_eq!(lifespan_events(&stack.site, "shutdown"), [worker]);
}

#[test]
fn a_large_body_the_app_never_reads_does_not_stall_the_kept_connection() {
    let stack = fastapi(1);
    let payload = noise(3 << 20);

    for _ in 0..3 {
        // GET-only route: FastAPI answers 405 without reading the body.
        let reply = http::post(&stack.url("/hello"), "application/octet-stream", &payload);
        assert_eq!(
            reply.status,
            405,
            "{reply:?}; log:\n{}",
            stack.drover.log.text()
        );
        assert_eq!(json(&ok(&stack, "/hello"))["hello"], "world");
    }
}

#[test]
fn a_reload_renews_the_workers_each_running_lifespan_shutdown_and_startup() {
    let stack = fastapi(2);
    let first: Vec<i32> = python_workers(&stack.drover);
    assert_eq!(first.len(), 2);
    ok(&stack, "/hello");
    let log = &stack.drover.log;

    let from = log.len();
    stack.drover.signal(Signal::SIGHUP);
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);

    let renewed = crate::common::wait_until(TIMEOUT, "2 workers, both new", || {
        let pids = python_workers(&stack.drover);
        (pids.len() == 2 && pids.iter().all(|p| !first.contains(p))).then_some(pids)
    });
    assert!(proc::poll(TIMEOUT, || first
        .iter()
        .all(|&p| !proc::is_running(p))));
    let new: i32 = ok(&stack, "/pid").parse().expect("pid");
    assert!(renewed.contains(&new), "{new} not in {renewed:?}");
    let mut stopped = lifespan_events(&stack.site, "shutdown");
    stopped.sort();
    let mut old = first.clone();
    old.sort();
    assert_eq!(stopped, old, "each old worker ran its shutdown once");
    let started = lifespan_events(&stack.site, "startup");
    assert!(started.contains(&new), "{started:?}");
    crate::common::wait_until(TIMEOUT, "a startup per new worker", || {
        let started = lifespan_events(&stack.site, "startup");
        renewed.iter().all(|p| started.contains(p)).then_some(())
    });
}

#[test]
fn an_asgi_worker_runs_the_worker_hooks_and_refuses_request_hooks() {
    let site = Site::new();
    python::install_apps(&site);
    site.write(
        "apps/asgi_hooks.py",
        "import sys\n\n\
         def post_fork(server, worker):\n    print(f'marker-post_fork {worker.pid}', file=sys.stderr, flush=True)\n\n\
         def post_worker_init(worker):\n    print('marker-post_worker_init', file=sys.stderr, flush=True)\n\n\
         def worker_exit(server, worker):\n    print('marker-worker_exit', file=sys.stderr, flush=True)\n",
    );
    site.write(
        "apps/request_hooks.py",
        "def pre_request(worker, req):\n    pass\n",
    );
    let hooked = PythonPool::asgi("api", "app")
        .max_children(1)
        .python_key("hooks", "\"asgi_hooks\"");
    let refused = PythonPool::asgi("req", "scope_app")
        .max_children(1)
        .python_key("hooks", "\"request_hooks\"");
    let mut drover = Drover::start(&site, &[&hooked, &refused]);
    let nginx = Nginx::start_locations(
        &site,
        &[Location::prefix("/", &site.socket("api")).keep_conn()],
    );
    let log = drover.log.clone();

    let forked = log.wait_for_line("marker-post_fork", TIMEOUT);
    log.wait_for_line("marker-post_worker_init", TIMEOUT);
    let pid = ok_at(&nginx, "/pid");
    assert!(
        forked.contains(&format!("marker-post_fork {pid}")),
        "{forked}"
    );
    let line = log.wait_for_line("they cannot run for an ASGI app", TIMEOUT);
    assert!(line.contains("pool req"), "{line}");

    drover.signal(Signal::SIGTERM);
    drover.wait_exit(TIMEOUT);
    log.wait_for_line("marker-worker_exit", TIMEOUT);
}

fn ok_at(nginx: &Nginx, path: &str) -> String {
    let reply = http::get(&nginx.url(path));
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

#[test]
fn without_uvloop_the_workers_run_on_asyncio() {
    let site = Site::new();
    python::install_apps(&site);
    // A uvloop that cannot be imported, ahead of the real one on sys.path.
    site.write(
        "noloop/uvloop.py",
        "raise ImportError('uvloop hidden by the test')\n",
    );
    let env = format!(
        "[env]\nPYTHONPATH = {:?}\n",
        site.path().join("noloop").display().to_string()
    );
    let pool = PythonPool::asgi("api", "app").max_children(1);
    let pool = PythonPool { keys: env, ..pool };
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket("api")).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    let stack = Stack {
        nginx,
        drover,
        site,
    };

    assert_eq!(ok(&stack, "/loop"), "asyncio");
    let payload = noise(1 << 20);
    let reply = http::post(&stack.url("/sha256"), "application/octet-stream", &payload);
    let expected = format!("{} {}", payload.len(), sha256(&stack.site, &payload));
    assert_eq!(reply.body, expected);
    let urls: Vec<_> = (0..4).map(|_| stack.url("/sleep?s=1")).collect();
    let started = Instant::now();
    let replies: Vec<_> = urls
        .into_iter()
        .map(|url| thread::spawn(move || http::get(&url)))
        .collect();
    for reply in replies {
        assert_eq!(reply.join().unwrap().status, 200);
    }
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn with_uvloop_installed_the_workers_run_on_it() {
    let stack = fastapi(1);
    let has_uvloop = std::process::Command::new("python3")
        .args(["-c", "import uvloop"])
        .status()
        .is_ok_and(|s| s.success());
    let expected = if has_uvloop { "uvloop" } else { "asyncio" };
    assert_eq!(ok(&stack, "/loop"), expected);
}

/// A connection that brings no request (a port check, a client nginx gave up on before it
/// wrote) costs an ASGI worker only its accept and close: 50,000 of them, opened and closed
/// on the pool's socket one after another, leave the worker's memory where it was, cost it
/// well under a millisecond of CPU each, and the next request is answered.
#[test]
fn fifty_thousand_connections_without_a_request_leave_the_worker_as_it_was() {
    const CONNECTIONS: u32 = 50_000;
    let stack = asgi_stack(PythonPool::asgi("raw", "scope_app").max_children(1));
    ok(&stack, "/warm");
    let workers = python_workers(&stack.drover);
    assert_eq!(workers.len(), 1, "{workers:?}");
    let worker = workers[0];
    let fds = proc::open_fds(worker).unwrap();
    let rss = proc::rss_kib(worker).unwrap();
    let cpu = proc::cpu_time(worker).unwrap();
    let socket = stack.site.socket("raw");
    let start = Instant::now();
    for _ in 0..CONNECTIONS {
        drop(UnixStream::connect(&socket).expect("connect to the pool's socket"));
        assert!(
            start.elapsed() < TIMEOUT * 10,
            "50,000 connects took too long"
        );
    }
    let connecting = start.elapsed();
    // The worker has closed every one of them when its descriptors are back to before.
    let settled = proc::poll(TIMEOUT, || proc::open_fds(worker) <= Some(fds));
    assert!(
        settled,
        "the worker still holds {:?} descriptors (had {fds})",
        proc::open_fds(worker)
    );
    let used = proc::cpu_time(worker).unwrap() - cpu;
    let grown = proc::rss_kib(worker).unwrap().saturating_sub(rss);
    let per = used / CONNECTIONS;
    eprintln!(
        "{CONNECTIONS} connections in {connecting:?}: worker CPU {used:?} ({per:?} each), \
         VmRSS {rss} KiB + {grown} KiB"
    );
    assert!(
        grown < 2048,
        "the worker grew {grown} KiB over {CONNECTIONS} connections"
    );
    assert!(
        per < Duration::from_micros(300),
        "{per:?} of worker CPU per connection"
    );
    assert!(ok(&stack, "/after").contains("/after"));
    assert!(proc::is_running(worker), "the worker was replaced");
}

/// nginx's default FastCGI wiring, a new connection per request (no `fastcgi_keep_conn`),
/// which most setups copy from php-fpm's snippet: requests that answer at once and ones
/// that wait run side by side on one worker, a 5 MB body arrives whole, a streamed
/// response arrives as the app writes it, and the worker holds no connection afterwards.
/// The worker accepts on its loop's thread through io_uring, and says so once.
#[test]
fn on_nginx_s_default_wiring_each_request_s_connection_is_served_and_closed() {
    default_wiring("", "accepting on the loop's thread (io_uring)");
}

/// The same where io_uring is not to be had: the accepts run on a thread of their own
/// (`DROVER_ASGI_ACCEPT_THREAD`, internal, takes that path as a kernel without io_uring
/// would).
#[test]
fn without_io_uring_the_accepts_run_on_a_thread_and_serve_the_same() {
    default_wiring(
        "[env]\nDROVER_ASGI_ACCEPT_THREAD = \"1\"\n",
        "accepting on a thread (io_uring: DROVER_ASGI_ACCEPT_THREAD is set)",
    );
}

/// [`on_nginx_s_default_wiring_each_request_s_connection_is_served_and_closed`] with the
/// pool's `keys`, the worker's log saying `accepting`.
fn default_wiring(keys: &str, accepting: &str) {
    let site = Site::new();
    python::install_apps(&site);
    let pool = PythonPool::asgi("api", "app").max_children(1);
    let pool = PythonPool {
        keys: keys.to_string(),
        ..pool
    };
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix(&pool.location(), &site.socket(&pool.name));
    // 40 clients at once, each with its own connection to the pool: room for 80 and more
    // (the default 64 made nginx reset some clients when they all overlapped).
    let nginx = Nginx::start_sized(&site, &[location], 256);
    let stack = Stack {
        nginx,
        drover,
        site,
    };
    ok(&stack, "/hello");
    let log = stack.drover.log.text();
    assert_eq!(
        log.lines().filter(|l| l.contains("accepting on")).count(),
        1,
        "{log}"
    );
    assert!(log.contains(accepting), "{log}");
    let worker = python_workers(&stack.drover)[0];
    let fds = proc::open_fds(worker).unwrap();

    let started = Instant::now();
    let clients: Vec<_> = (0..40)
        .map(|i| {
            let url = stack.url(if i % 4 == 0 { "/sleep?s=1" } else { "/hello" });
            thread::spawn(move || http::get(&url))
        })
        .collect();
    for client in clients {
        let reply = client.join().unwrap();
        assert_eq!(
            reply.status,
            200,
            "{reply:?}; log:\n{}",
            stack.drover.log.text()
        );
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(3000),
        "40 requests, 10 sleeping 1 s, took {took:?}"
    );

    let payload = noise(5 << 20);
    let reply = http::post(&stack.url("/sha256"), "application/octet-stream", &payload);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body,
        format!("{} {}", payload.len(), sha256(&stack.site, &payload))
    );

    let marker = stack.site.path().join("stream.go");
    let mut raw = Raw::send(
        stack.nginx.port,
        &format!("GET /stream?marker={} HTTP/1.0\r\n", marker.display()),
    );
    raw.read_until(b"first\n");
    fs::write(&marker, "").expect("create the marker");
    let wire = Wire::parse(&raw.read_to_end());
    assert_eq!(String::from_utf8_lossy(&wire.body), "first\nlast\n");

    let settled = proc::poll(TIMEOUT, || proc::open_fds(worker) <= Some(fds));
    assert!(
        settled,
        "the worker holds {:?} descriptors, had {fds}",
        proc::open_fds(worker)
    );
}
