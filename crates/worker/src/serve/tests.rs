//! The worker loop on one connection, with a handler that answers every request, over a
//! socketpair: kept connections, `max_requests`, `request_read_timeout`, the scoreboard's
//! script field, and the pool area's histogram and status classes.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use drover_fastcgi::{BeginRequestBody, HEADER_LEN, Header, RecordType, Role, encode_pair};
use drover_scoreboard::{Scoreboard, State};

use super::*;

/// Answers every request with a small page, and names the script (and the request's
/// memory) when told to.
struct Answer {
    script: Option<String>,
    memory: Option<u64>,
    /// What it says the response's status was.
    status: Option<u16>,
    handled: u32,
}

impl Handler for Answer {
    fn script(&self, _params: &Params) -> Option<String> {
        self.script.clone()
    }

    fn request_memory(&self) -> Option<u64> {
        self.memory
    }

    fn response_status(&self) -> Option<u16> {
        self.status
    }

    fn handle(&mut self, conn: &Conn, _request: Request) -> Outcome {
        self.handled += 1;
        let mut conn = conn.borrow_mut();
        let written = conn.write_stdout(b"Content-Type: text/plain\r\n\r\nhi");
        let finished = written.and_then(|()| conn.finish(0));
        Outcome {
            keep: matches!(finished, Ok(true)),
        }
    }
}

fn config() -> WorkerConfig {
    WorkerConfig {
        label: "app:application".to_string(),
        max_requests: 0,
        generation: 1,
        max_memory: None,
        request_read_timeout: None,
        access_log: None,
        http: None,
        builtin: None,
    }
}

/// The records nginx sends for `GET uri` as request `id`, complete with an empty body.
fn get(id: u16, uri: &str, keep_conn: bool) -> Vec<u8> {
    let mut params = Vec::new();
    for (name, value) in [("REQUEST_METHOD", "GET"), ("DOCUMENT_URI", uri)] {
        encode_pair(&mut params, name.as_bytes(), value.as_bytes());
    }
    let begin = BeginRequestBody {
        role: Role::RESPONDER,
        flags: u8::from(keep_conn),
    };
    let mut out = Vec::new();
    let mut record = |kind: RecordType, content: &[u8]| {
        out.extend_from_slice(&Header::new(kind, id, content.len() as u16).encode());
        out.extend_from_slice(content);
    };
    record(RecordType::BeginRequest, &begin.encode());
    record(RecordType::Params, &params);
    record(RecordType::Params, &[]);
    record(RecordType::Stdin, &[]);
    out
}

/// Serves one connection on which the web server sends `requests` (then shuts its sending
/// side down, when `then_close`) and reads until the worker closes. Returns how many
/// requests the worker served and how many END_REQUEST records the web server read.
/// `board`: the worker's slot and the pool's area, where it writes.
fn serve(
    handler: &mut Answer,
    mut config: WorkerConfig,
    board: Option<Board<'_>>,
    requests: Vec<u8>,
    then_close: bool,
) -> (u32, usize) {
    let (socket, mut server) = crate::socket::tests::pair();
    let web_server = std::thread::spawn(move || {
        server.write_all(&requests).unwrap();
        if then_close {
            server.shutdown(std::net::Shutdown::Write).unwrap();
        }
        ended_requests(&mut server)
    });
    let ledger = config.open_ledger(board, Concurrency::One);
    let mut worker = Worker {
        handler,
        config,
        ledger: &ledger,
        buffers: None,
    };
    worker.serve_connection(socket);
    (ledger.handled(), web_server.join().unwrap())
}

/// The worker's slot (the scoreboard's only one) and the pool's area.
fn board(scoreboard: &Scoreboard) -> Option<Board<'_>> {
    Some(Board {
        slot: scoreboard.slot(0),
        pool: scoreboard.pool(),
    })
}

/// nginx without `fastcgi_keep_conn` opens a connection per request: the worker keeps
/// each connection's buffers for the next one, which is served as the first was.
#[test]
fn a_new_connection_takes_the_previous_ones_buffers() {
    let mut handler = Answer {
        script: None,
        memory: None,
        status: None,
        handled: 0,
    };
    let ledger = config().open_ledger(None, Concurrency::One);
    let mut worker = Worker {
        handler: &mut handler,
        config: config(),
        ledger: &ledger,
        buffers: None,
    };
    for round in 1..=3 {
        let (socket, mut server) = crate::socket::tests::pair();
        let web_server = std::thread::spawn(move || {
            server.write_all(&get(1, "/", false)).unwrap();
            ended_requests(&mut server)
        });
        worker.serve_connection(socket);
        assert_eq!(web_server.join().unwrap(), 1, "round {round}");
        assert_eq!(ledger.handled(), round);
        assert!(
            worker.buffers.is_some(),
            "round {round}: the buffers are kept"
        );
    }
    assert_eq!(handler.handled, 3);
}

/// What the web server reads until the worker closes, as END_REQUEST records counted.
fn ended_requests(server: &mut UnixStream) -> usize {
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    // A worker that stops with requests unread may reset the connection after its answers.
    while let Ok(n @ 1..) = server.read(&mut buf) {
        response.extend_from_slice(&buf[..n]);
    }
    let mut ended = 0;
    let mut rest = &response[..];
    while rest.len() >= HEADER_LEN {
        let length = usize::from(u16::from_be_bytes([rest[4], rest[5]]));
        let end = (HEADER_LEN + length + usize::from(rest[6])).min(rest.len());
        ended += usize::from(RecordType::from_u8(rest[1]) == RecordType::EndRequest);
        rest = &rest[end..];
    }
    ended
}

fn answer(script: Option<&str>) -> Answer {
    Answer {
        script: script.map(str::to_string),
        memory: None,
        status: None,
        handled: 0,
    }
}

#[test]
fn a_kept_connection_serves_each_request_until_the_web_server_closes_it() {
    let mut requests = get(1, "/a", true);
    requests.extend(get(1, "/b", true));
    let mut handler = answer(None);
    assert_eq!(serve(&mut handler, config(), None, requests, true), (2, 2));
    assert_eq!(handler.handled, 2);
}

#[test]
fn a_worker_at_max_requests_stops_on_a_kept_connection() {
    let mut requests = get(1, "/a", true);
    requests.extend(get(1, "/b", true));
    let config = WorkerConfig {
        max_requests: 1,
        ..config()
    };
    // The handler left the first body's end unread: the worker lingers until the web
    // server, which has its response, closes.
    let started = Instant::now();
    assert_eq!(
        serve(&mut answer(None), config, None, requests, false),
        (1, 1)
    );
    assert!(started.elapsed() < KEPT_IDLE_TIMEOUT / 2);
}

#[test]
fn a_request_that_does_not_arrive_within_request_read_timeout_is_dropped() {
    // BEGIN_REQUEST and then nothing: a slow client.
    let begin_only = get(1, "/a", false)[..16].to_vec();
    let config = WorkerConfig {
        request_read_timeout: Some(Duration::from_millis(50)),
        ..config()
    };
    let mut handler = answer(None);
    let started = Instant::now();
    assert_eq!(serve(&mut handler, config, None, begin_only, false), (0, 0));
    assert!(started.elapsed() >= Duration::from_millis(45));
    assert!(started.elapsed() < KEPT_IDLE_TIMEOUT / 2);
    assert_eq!(handler.handled, 0);
}

#[test]
fn the_scoreboard_shows_the_handlers_script_or_else_the_label() {
    let board = Scoreboard::create("test", 1).unwrap();
    let slot = board.slot(0);
    slot.claim(nix::unistd::getpid(), 1);
    let last_script = |script: Option<&str>| {
        let request = get(1, "/a", false);
        let served = serve(
            &mut answer(script),
            config(),
            self::board(&board),
            request,
            false,
        );
        assert_eq!(served, (1, 1));
        let view = board.snapshot().pop().unwrap();
        assert_eq!(view.state, State::Idle);
        let request = view.request.unwrap();
        assert_eq!(
            (request.method.as_str(), request.uri.as_str()),
            ("GET", "/a")
        );
        request.script
    };
    assert_eq!(last_script(None), "app:application");
    assert_eq!(
        last_script(Some("/srv/www/index.php")),
        "/srv/www/index.php"
    );
    assert_eq!(board.snapshot()[0].requests, 2);
}

#[test]
fn the_scoreboard_shows_the_memory_the_handler_measured_or_none() {
    let board = Scoreboard::create("test", 1).unwrap();
    let slot = board.slot(0);
    slot.claim(nix::unistd::getpid(), 1);
    let last_memory = |memory: Option<u64>| {
        let mut handler = Answer {
            memory,
            ..answer(None)
        };
        let served = serve(
            &mut handler,
            config(),
            self::board(&board),
            get(1, "/a", false),
            false,
        );
        assert_eq!(served, (1, 1));
        board.snapshot().pop().unwrap().last_memory
    };
    assert_eq!(last_memory(Some(20 << 20)), Some(20 << 20));
    assert_eq!(
        last_memory(None),
        None,
        "Python's: unknown, not the last one's"
    );
}

#[test]
fn every_request_counts_in_the_pool_area_with_its_status_class() {
    let board = Scoreboard::create("test", 1).unwrap();
    let mut requests = get(1, "/a", true);
    requests.extend(get(1, "/b", true));
    requests.extend(get(1, "/c", true));
    let mut handler = Answer {
        status: Some(503),
        ..answer(None)
    };
    let served = serve(&mut handler, config(), self::board(&board), requests, true);
    assert_eq!(served, (3, 3));
    let view = board.pool().view();
    assert_eq!(view.count(), 3, "{view:?}");
    assert_eq!(view.classes, [0, 0, 0, 0, 3]);
    // Unknown status: in the histogram, in no class.
    handler.status = None;
    serve(
        &mut handler,
        config(),
        self::board(&board),
        get(1, "/d", false),
        false,
    );
    let view = board.pool().view();
    assert_eq!((view.count(), view.classes[4]), (4, 3));
}

#[test]
fn the_allowed_clients_are_the_addresses_that_parse() {
    assert_eq!(
        parse_clients("127.0.0.1, ::1,,nonsense"),
        [
            "127.0.0.1".parse::<IpAddr>().unwrap(),
            "::1".parse().unwrap()
        ]
    );
    assert!(parse_clients("").is_empty());
}
