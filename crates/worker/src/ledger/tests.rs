//! The ledger's decisions, without a process: what the slot shows with several requests in
//! flight, what `max_requests` counts, and when `max_memory` retires a worker.

use drover_scoreboard::Scoreboard;

use super::*;

fn terms(max_requests: u32) -> Terms {
    Terms {
        label: "app:application".into(),
        generation: 1,
        max_requests,
        ..Terms::default()
    }
}

fn params(method: &str, uri: &str) -> Params {
    let mut raw = Vec::new();
    for (name, value) in [("REQUEST_METHOD", method), ("DOCUMENT_URI", uri)] {
        drover_fastcgi::encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
    }
    Params::decode(raw).expect("well-formed pairs")
}

/// The slot shows the oldest request in flight and goes idle with the last; each request
/// counts once in its total, and in the pool's histogram.
#[test]
fn the_slot_shows_the_oldest_request_in_flight() {
    for concurrency in [Concurrency::Threads, Concurrency::EventLoop] {
        let scoreboard = Scoreboard::create("test", 1).expect("memfd scoreboard");
        let board = Board {
            slot: scoreboard.slot(0),
            pool: scoreboard.pool(),
        };
        let ledger = Ledger::open(terms(0), Some(board), concurrency);
        let view = || scoreboard.snapshot().pop().expect("the claimed slot");
        let uri = || view().request.expect("an untorn read").uri;
        let first = ledger.begin(&params("GET", "/first"), None, 100);
        let second = ledger.begin(&params("GET", "/second"), Some("/x.php".into()), 200);
        assert_eq!((uri(), view().since_us), ("/first".to_string(), 100));
        assert_eq!(view().request.expect("untorn").script, "app:application");
        ledger.end(first, Some(200), None);
        assert_eq!((uri(), view().since_us), ("/second".to_string(), 200));
        assert_eq!(view().request.expect("untorn").script, "/x.php");
        assert!(view().state.is_busy());
        assert_eq!(view().requests, 1);
        let third = ledger.begin(&params("POST", "/third"), None, 300);
        assert_eq!(
            uri(),
            "/second",
            "{concurrency:?}: a newer one is not shown"
        );
        ledger.end(second, Some(404), None);
        assert_eq!(uri(), "/third");
        ledger.end(third, None, None);
        assert!(!view().state.is_busy());
        assert_eq!(view().requests, 3);
        let pool = scoreboard.pool().view();
        assert_eq!((pool.count(), pool.classes), (3, [0, 1, 0, 1, 0]));
    }
}

/// A request that is not the oldest ends first: the slot goes on showing the oldest.
#[test]
fn a_newer_request_that_ends_first_leaves_the_oldest_shown() {
    let scoreboard = Scoreboard::create("test", 1).expect("memfd scoreboard");
    let board = Board {
        slot: scoreboard.slot(0),
        pool: scoreboard.pool(),
    };
    let ledger = Ledger::open(terms(0), Some(board), Concurrency::EventLoop);
    let view = || scoreboard.snapshot().pop().expect("the claimed slot");
    let old = ledger.begin(&params("GET", "/old"), None, 100);
    let new = ledger.begin(&params("GET", "/new"), None, 200);
    ledger.end(new, Some(200), None);
    let shown = view();
    assert_eq!(shown.request.expect("untorn").uri, "/old");
    assert_eq!((shown.since_us, shown.requests), (100, 1));
    ledger.end(old, Some(200), None);
    assert!(!view().state.is_busy());
}

/// One request at a time: the slot shows the reading phase, then the request, then idle;
/// a worker with threads or an event loop shows no phases.
#[test]
fn only_a_worker_running_one_request_at_a_time_shows_its_phases() {
    for (concurrency, phases) in [
        (Concurrency::One, true),
        (Concurrency::Threads, false),
        (Concurrency::EventLoop, false),
    ] {
        let scoreboard = Scoreboard::create("test", 1).expect("memfd scoreboard");
        let board = Board {
            slot: scoreboard.slot(0),
            pool: scoreboard.pool(),
        };
        let ledger = Ledger::open(terms(0), Some(board), concurrency);
        let state = || scoreboard.snapshot().pop().expect("the claimed slot").state;
        assert_eq!(state(), State::Idle);
        ledger.show_reading(now_us());
        assert_eq!(state() == State::Reading, phases, "{concurrency:?}");
        let ticket = ledger.begin(&params("GET", "/"), None, now_us());
        assert_eq!(state(), State::Running);
        ledger.end(ticket, Some(200), None);
        ledger.show_finishing();
        assert_eq!(state() == State::Finishing, phases, "{concurrency:?}");
        ledger.show_idle();
        assert_eq!(state(), State::Idle);
    }
}

/// `max_requests` counts requests handled (ended), not begun: the worker stops once that
/// many have ended, and requests still in flight do not count.
#[test]
fn max_requests_counts_the_requests_handled() {
    let ledger = Ledger::open(terms(2), None, Concurrency::Threads);
    let a = ledger.begin(&params("GET", "/a"), None, 1);
    let b = ledger.begin(&params("GET", "/b"), None, 2);
    let c = ledger.begin(&params("GET", "/c"), None, 3);
    assert!(!ledger.must_stop(), "three begun, none handled");
    assert!(!ledger.end(a, Some(200), None));
    assert_eq!(ledger.handled(), 1);
    // A request that ends without a status (the client went away) counts too.
    assert!(ledger.end(b, None, None), "two handled: the limit");
    assert!(ledger.must_stop());
    assert!(
        ledger.end(c, Some(200), None),
        "one in flight finishes, and counts"
    );
    assert_eq!(ledger.handled(), 3);
}

#[test]
fn without_max_requests_the_worker_stops_only_when_asked() {
    let ledger = Ledger::open(terms(0), None, Concurrency::One);
    for n in 0..1000 {
        let ticket = ledger.begin(&params("GET", "/"), None, n);
        assert!(!ledger.end(ticket, Some(200), None));
    }
    ledger.stop();
    assert!(ledger.must_stop());
    assert!(reached(1, 1) && !reached(0, u32::MAX) && !reached(5, 4));
}

/// `max_memory` retires a worker above it, with the figures in MiB; the memory is not read
/// without a limit.
#[test]
fn max_memory_retires_a_worker_above_it() {
    let mib = 1024 * 1024;
    let unread = || -> Option<u64> { panic!("read without a limit") };
    assert_eq!(over_memory(None, unread), None);
    assert_eq!(over_memory(Some(100 * mib), || Some(100 * mib)), None);
    assert_eq!(over_memory(Some(100 * mib), || None), None, "unknown");
    assert_eq!(
        over_memory(Some(100 * mib), || Some(150 * mib + mib / 2)).as_deref(),
        Some("resident memory 150.5 MiB, above max_memory (100.0 MiB)")
    );
}

/// The ticket keeps the response's head only when the access log shows a header.
#[test]
fn a_ticket_keeps_the_head_only_for_a_log_that_shows_one() {
    let ledger = Ledger::open(terms(0), None, Concurrency::EventLoop);
    let mut ticket = ledger.begin(&params("GET", "/"), None, 1);
    assert!(!ticket.keeps_head());
    ticket.keep_head(b"Status: 200 OK\r\n");
    assert!(ticket.head.is_empty() && ticket.logged.is_none());
    let _ = ledger.end(ticket, Some(200), None);
}

/// The id a request came with, or the one identify() stamped, is the one the slot shows
/// while the oldest in flight.
#[test]
fn the_slot_shows_the_oldest_requests_id() {
    let scoreboard = Scoreboard::create("test", 1).expect("memfd scoreboard");
    let board = Board {
        slot: scoreboard.slot(0),
        pool: scoreboard.pool(),
    };
    let ledger = Ledger::open(terms(0), Some(board), Concurrency::EventLoop);
    let shown_id = || {
        scoreboard
            .snapshot()
            .pop()
            .unwrap()
            .request
            .unwrap()
            .request_id
    };
    let mut raw = Vec::new();
    drover_fastcgi::encode_pair(&mut raw, b"HTTP_X_REQUEST_ID", b"from-nginx-1");
    let given = Params::decode(raw).unwrap();
    let first = ledger.begin(&given, None, 100);
    assert_eq!(first.request_id(), "from-nginx-1");
    assert_eq!(shown_id(), "from-nginx-1");
    let mut bare = params("GET", "/second");
    let stamped = ledger.identify(&mut bare);
    let second = ledger.begin(&bare, None, 200);
    assert_eq!(second.request_id(), stamped);
    assert_eq!(stamped.len(), 32);
    ledger.end(first, Some(200), None);
    assert_eq!(shown_id(), stamped);
    ledger.end(second, Some(200), None);
}

/// An event loop reads the process's CPU time at each request's end, and at a request's
/// start only when the loop idled since the previous end: a request begun at once is
/// measured from that end's reading.
#[test]
fn an_event_loop_reads_the_cpu_at_a_start_only_after_idling() {
    let burn = || {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::black_box(0);
        }
    };
    let ledger = Ledger::open(terms(0), None, Concurrency::EventLoop);
    let first = ledger.begin(&params("GET", "/"), None, now_us());
    burn();
    let _ = ledger.end(first, Some(200), None);
    let at_end = ledger.books().cpu_mark;
    assert!(at_end.total() > Duration::ZERO);
    // The next one begins within BUSY_GAP_US of the end (a previous end in the future
    // makes it so on a loaded machine too).
    ledger.books().ended_us = now_us() + 60_000_000;
    burn();
    let second = ledger.begin(&params("GET", "/"), None, now_us());
    assert_eq!(
        ledger.books().cpu_mark,
        at_end,
        "a start right after an end"
    );
    let _ = ledger.end(second, Some(200), None);
    let at_end = ledger.books().cpu_mark;
    ledger.books().ended_us = now_us() - 2 * BUSY_GAP_US;
    burn();
    let third = ledger.begin(&params("GET", "/"), None, now_us());
    assert!(
        ledger.books().cpu_mark.total() >= at_end.total() + Duration::from_millis(5),
        "a start after an idle is read anew"
    );
    let _ = ledger.end(third, Some(200), None);
}
