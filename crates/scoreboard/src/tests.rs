//! Scoreboard tests: the slot life cycle, truncation, the retire request, torn reads under a
//! concurrent writer, a forked writer, a second mapping, the cost of a request's writes, and
//! the pool area: bucket choice, status classes, concurrent adds from forked workers.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getpid};

use super::*;

fn pid(n: i32) -> Pid {
    Pid::from_raw(n)
}

fn board(slots: usize) -> Scoreboard {
    Scoreboard::create("test", slots).expect("memfd scoreboard")
}

#[test]
fn a_new_board_is_all_free() {
    let b = board(3);
    assert_eq!(b.len(), 3);
    assert!(b.snapshot().is_empty());
    assert_eq!(b.free_slot(), Some(0));
}

#[test]
fn a_claimed_slot_shows_as_starting_and_is_no_longer_free() {
    let b = board(3);
    assert!(b.slot(0).claim(pid(100), 7));
    assert_eq!(b.free_slot(), Some(1));
    let [view] = b.snapshot().try_into().expect("one used slot");
    assert_eq!((view.slot, view.pid, view.generation), (0, pid(100), 7));
    assert_eq!((view.state, view.requests), (State::Starting, 0));
    assert_eq!(
        view.request,
        Some(Request::default()),
        "no request yet, but none torn"
    );
}

#[test]
fn claim_is_idempotent_for_its_pid_and_refused_to_another() {
    let b = board(1);
    let slot = b.slot(0);
    assert!(slot.claim(pid(100), 1), "the zygote, right after fork");
    slot.set_state(State::Idle);
    assert!(slot.claim(pid(100), 1), "the worker, second");
    assert_eq!(
        b.snapshot()[0].state,
        State::Idle,
        "the second claim reset nothing"
    );
    assert!(!slot.claim(pid(200), 1));
    assert_eq!(b.snapshot()[0].pid, pid(100));
}

#[test]
fn a_request_cycle_updates_state_counters_and_text() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.set_state(State::Idle);
    slot.set_state(State::Reading);
    assert!(b.snapshot()[0].state.is_busy());
    slot.begin_request(1_000, "POST", "/cart/add", "id=3", "/srv/app/index.php");
    let running = &b.snapshot()[0];
    assert_eq!(
        (running.state, running.since_us, running.requests),
        (State::Running, 1_000, 0)
    );
    let request = running.request.as_ref().expect("whole");
    assert_eq!(
        (request.method.as_str(), request.uri.as_str()),
        ("POST", "/cart/add")
    );
    assert_eq!(
        (request.query.as_str(), request.script.as_str()),
        ("id=3", "/srv/app/index.php")
    );
    assert_eq!(running.elapsed(1_500), Duration::from_micros(500));

    slot.end_request(4_000, Duration::from_micros(1_200), Some(21 << 20));
    let idle = &b.snapshot()[0];
    assert_eq!(
        (idle.state, idle.since_us, idle.requests),
        (State::Idle, 4_000, 1)
    );
    assert_eq!(
        (idle.last_duration, idle.last_cpu),
        (Duration::from_micros(3_000), Duration::from_micros(1_200))
    );
    assert_eq!(idle.last_memory, Some(21 << 20));
    assert_eq!(
        idle.request.as_ref().unwrap().uri,
        "/cart/add",
        "the last request stays visible"
    );
    assert!(!idle.state.is_busy());
}

#[test]
fn a_request_id_is_shown_with_its_request_and_cleared_with_the_next() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    let id = "0123456789abcdef0123456789abcdef";
    slot.begin_request_id(1_000, "GET", "/slow.php", "", "/srv/slow.php", id);
    assert_eq!(b.snapshot()[0].request.as_ref().unwrap().request_id, id);
    // Longer than the slot holds: cut at REQUEST_ID_MAX (a worker never gives one).
    let long = "x".repeat(REQUEST_ID_MAX + 10);
    slot.begin_request_id(2_000, "GET", "/a", "", "", &long);
    let shown = b.snapshot()[0].request.clone().unwrap().request_id;
    assert_eq!(shown.len(), REQUEST_ID_MAX);
    slot.begin_reading(3_000);
    assert_eq!(b.snapshot()[0].request.as_ref().unwrap().request_id, "");
    slot.begin_request(3_000, "GET", "/b", "", "");
    assert_eq!(b.snapshot()[0].request.as_ref().unwrap().request_id, "");
}

#[test]
fn reading_starts_the_request_clock_at_the_accept() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.begin_request(1_000, "GET", "/before", "", "");
    slot.end_request(2_000, Duration::ZERO, None);

    slot.begin_reading(5_000);
    let reading = &b.snapshot()[0];
    assert_eq!((reading.state, reading.since_us), (State::Reading, 5_000));
    assert!(reading.state.is_busy());
    assert_eq!(
        reading.request.as_ref().unwrap().uri,
        "",
        "a request being read is not the last one"
    );

    slot.end_reading(6_000);
    let dropped = &b.snapshot()[0];
    assert_eq!(
        (dropped.state, dropped.since_us, dropped.requests),
        (State::Idle, 6_000, 1),
        "a dropped connection is no request served"
    );

    slot.begin_reading(5_000);
    slot.begin_request(5_000, "POST", "/slow-body", "", "");
    slot.end_request(9_000, Duration::ZERO, None);
    assert_eq!(
        b.snapshot()[0].last_duration,
        Duration::from_micros(4_000),
        "the wait for the request counts toward its duration"
    );
}

#[test]
fn long_strings_are_truncated_on_a_character_boundary() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    // 255 ASCII bytes then a 2-byte 'é' that would straddle the 256-byte limit.
    let uri = format!("/{}é/tail", "a".repeat(254));
    let method = "M".repeat(40);
    slot.begin_request(0, &method, &uri, "", "");
    let request = b.snapshot()[0].request.clone().unwrap();
    assert_eq!(request.uri.len(), 255);
    assert_eq!(request.uri, uri[..255]);
    assert_eq!(request.method, "M".repeat(METHOD_MAX));
    assert_eq!(slot::truncate("ééé", 5), "éé");
    assert_eq!(slot::truncate("abc", 256), "abc");
}

#[test]
fn a_shorter_request_does_not_show_the_tail_of_a_longer_one() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.begin_request(0, "GET", "/a/very/long/path/indeed", "x=1&y=2", "/long.php");
    slot.begin_request(0, "GET", "/b", "", "/s.php");
    let request = b.snapshot()[0].request.clone().unwrap();
    assert_eq!(
        (
            request.uri.as_str(),
            request.query.as_str(),
            request.script.as_str()
        ),
        ("/b", "", "/s.php")
    );
}

#[test]
fn last_memory_is_the_last_requests_and_unknown_when_not_measured() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    assert_eq!(b.snapshot()[0].last_memory, None, "no request yet");
    slot.begin_request(0, "GET", "/big.php", "", "/big.php");
    slot.end_request(10, Duration::ZERO, Some(22_000_000));
    assert_eq!(b.snapshot()[0].last_memory, Some(22_000_000));
    slot.begin_request(20, "GET", "/hello.php", "", "/hello.php");
    assert_eq!(
        b.snapshot()[0].last_memory,
        Some(22_000_000),
        "while running: still the last request's, as php-fpm shows it"
    );
    slot.end_request(30, Duration::ZERO, Some(400_000));
    assert_eq!(b.snapshot()[0].last_memory, Some(400_000), "it drops");
    slot.begin_request(40, "GET", "/missing.php", "", "");
    slot.end_request(50, Duration::ZERO, None);
    assert_eq!(
        b.snapshot()[0].last_memory,
        None,
        "a request the runtime did not measure shows no older request's value"
    );
    slot.end_request(60, Duration::ZERO, Some(0));
    assert_eq!(b.snapshot()[0].last_memory, None, "0 is unknown too");
}

#[test]
fn release_frees_and_clears_the_slot() {
    let b = board(2);
    let slot = b.slot(0);
    slot.claim(pid(100), 3);
    slot.begin_request(10, "GET", "/x", "q", "/s");
    slot.end_request(20, Duration::from_micros(5), Some(1 << 20));
    b.request_retire(0, pid(100));
    slot.release();
    assert!(b.snapshot().is_empty());
    assert_eq!(b.free_slot(), Some(0));
    slot.claim(pid(101), 4);
    let view = &b.snapshot()[0];
    assert_eq!(
        (view.state, view.requests, view.since_us),
        (State::Starting, 0, 0)
    );
    assert_eq!(
        (view.last_duration, view.last_cpu, view.last_memory),
        (Duration::ZERO, Duration::ZERO, None),
        "nothing of the last worker's requests"
    );
    assert_eq!(view.request, Some(Request::default()));
    assert!(!view.retire_requested && !slot.retire_requested());
}

#[test]
fn retire_reaches_only_the_pid_it_was_meant_for() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    assert!(!slot.retire_requested());
    assert!(b.request_retire(0, pid(100)));
    assert!(slot.retire_requested() && b.snapshot()[0].retire_requested);
    slot.release();
    slot.claim(pid(101), 2);
    assert!(!b.request_retire(0, pid(100)), "worker 100 is gone");
    assert!(
        !slot.retire_requested(),
        "nor does its old request retire worker 101"
    );
    assert!(!b.request_retire(5, pid(101)), "out of range");
}

#[test]
fn a_writer_killed_mid_write_reads_as_unknown_until_released() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.begin_request(0, "GET", "/x", "", "");
    slot.abandon_write();
    let started = Instant::now();
    let view = &b.snapshot()[0];
    assert_eq!(view.request, None, "reported as unknown");
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "the read gave up quickly"
    );
    slot.release();
    slot.claim(pid(101), 1);
    assert_eq!(b.snapshot()[0].request, Some(Request::default()));
}

/// The request with number n: every field names n, so a mix of two requests shows.
fn numbered(n: u64) -> (String, String, String) {
    (
        format!("/req/{n}/{}/{n}", "p".repeat((n % 200) as usize)),
        format!("n={n}"),
        format!("/s/{n}.py"),
    )
}

#[test]
fn a_reader_never_sees_a_torn_request_under_a_hammering_writer() {
    let b = Arc::new(board(1));
    b.slot(0).claim(pid(100), 1);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (b, stop) = (Arc::clone(&b), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                let (uri, query, script) = numbered(n);
                b.slot(0).begin_request(n, "GET", &uri, &query, &script);
                b.slot(0).end_request(n + 1, Duration::ZERO, Some(n + 1));
                n += 1;
            }
            n
        })
    };
    let (mut whole, mut unknown) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        let view = b.snapshot().pop().expect("slot in use");
        let Some(request) = view.request else {
            unknown += 1;
            continue;
        };
        if request.uri.is_empty() {
            continue;
        }
        let n: u64 = request.uri.split('/').nth(2).unwrap().parse().unwrap();
        assert_eq!(
            (request.uri.clone(), request.query, request.script),
            numbered(n),
            "torn read"
        );
        assert!(
            view.since_us == n || view.since_us == n + 1,
            "since {} for request {n}",
            view.since_us
        );
        // Ended: its own memory; running: the one before's (none before the first).
        let memory = if view.since_us == n + 1 { n + 1 } else { n };
        assert_eq!(
            view.last_memory,
            Some(memory).filter(|&m| m > 0),
            "torn read"
        );
        whole += 1;
    }
    stop.store(true, Relaxed);
    let written = writer.join().unwrap();
    eprintln!("{written} requests written, {whole} whole reads, {unknown} unknown");
    assert!(
        whole > 100,
        "the reader mostly gets through ({whole} whole, {unknown} unknown)"
    );
}

#[test]
fn a_forked_worker_writes_a_slot_the_parent_reads() {
    let b = board(2);
    let index = b.free_slot().unwrap();
    // SAFETY: the child only stores to shared memory and _exits: no allocation, no lock, no
    // destructor, so the other test threads' state at fork time cannot matter.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let slot = b.slot(index);
            slot.claim(getpid(), 9);
            slot.set_state(State::Idle);
            slot.begin_request(5, "PUT", "/from/child", "c=1", "/child.py");
            slot.end_request(25, Duration::from_micros(7), Some(4096));
            // SAFETY: ends the child at once, running none of the test harness.
            unsafe { libc::_exit(0) };
        }
        ForkResult::Parent { child } => {
            assert!(
                b.slot(index).claim(child, 9),
                "the zygote's claim, racing the child's"
            );
            assert_eq!(waitpid(child, None).unwrap(), WaitStatus::Exited(child, 0));
            let view = b.snapshot().pop().unwrap();
            assert_eq!(
                (view.pid, view.generation, view.state),
                (child, 9, State::Idle)
            );
            assert_eq!(
                (view.requests, view.last_duration, view.last_cpu),
                (1, Duration::from_micros(20), Duration::from_micros(7))
            );
            assert_eq!(view.last_memory, Some(4096));
            assert_eq!(view.request.unwrap().uri, "/from/child");
            b.slot(index).release();
            assert_eq!(b.free_slot(), Some(0));
        }
    }
}

#[test]
fn a_second_mapping_from_the_fd_shares_the_slots() {
    let master = board(4);
    let zygote =
        Scoreboard::from_fd(master.fd().try_clone_to_owned().unwrap()).expect("valid scoreboard");
    assert_eq!(zygote.len(), 4);
    zygote.slot(2).claim(pid(300), 1);
    zygote.slot(2).begin_request(0, "GET", "/shared", "", "");
    let view = master.snapshot().pop().unwrap();
    assert_eq!((view.slot, view.pid), (2, pid(300)));
    assert_eq!(view.request.unwrap().uri, "/shared");
    assert!(master.request_retire(2, pid(300)));
    assert!(zygote.slot(2).retire_requested());
}

#[test]
fn from_fd_refuses_what_is_not_a_scoreboard() {
    let fd = |len: i64| {
        let fd = memfd_create("not-a-scoreboard", MFdFlags::MFD_CLOEXEC).unwrap();
        ftruncate(&fd, len).unwrap();
        fd
    };
    let too_small = Scoreboard::from_fd(fd(10)).unwrap_err();
    assert!(too_small.to_string().contains("size 10"), "{too_small}");
    let zeroed = Scoreboard::from_fd(fd((SLOTS_AT + 2 * SLOT_SIZE) as i64)).unwrap_err();
    assert!(zeroed.to_string().contains("magic"), "{zeroed}");
}

#[test]
fn a_worker_cannot_shrink_the_scoreboard_under_the_master() {
    let b = board(2);
    assert!(
        ftruncate(b.fd(), 0).is_err(),
        "sealed: truncating would SIGBUS the master"
    );
}

#[test]
fn now_us_is_the_monotonic_clock_of_instant() {
    let (a, t0) = (now_us(), Instant::now());
    std::thread::sleep(Duration::from_millis(20));
    let (b, t1) = (now_us(), Instant::now());
    let (clock, instant) = (b - a, t1.duration_since(t0).as_micros() as u64);
    assert!(
        clock.abs_diff(instant) < 5_000,
        "{clock} µs vs {instant} µs"
    );
}

/// Not a benchmark, a guard and a figure: what the request path pays for the scoreboard.
#[test]
fn begin_and_end_cost_tens_of_nanoseconds() {
    const ROUNDS: u32 = 200_000;
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    let started = Instant::now();
    for n in 0..ROUNDS {
        slot.begin_request(
            u64::from(n),
            "GET",
            "/api/v1/orders/12345/items",
            "page=2&sort=date",
            "/srv/app/wsgi.py",
        );
        slot.end_request(u64::from(n) + 1, Duration::from_micros(3), Some(1 << 20));
    }
    let per_request = started.elapsed() / ROUNDS;
    eprintln!("scoreboard begin_request + end_request: {per_request:?} per request");
    assert_eq!(b.snapshot()[0].requests, u64::from(ROUNDS));
    // Loose, to hold in debug builds on a loaded machine too; release builds measure ~tens of ns.
    assert!(per_request < Duration::from_micros(20), "{per_request:?}");
}

#[test]
fn a_duration_falls_in_the_first_bucket_it_does_not_pass() {
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(5_000), 0, "le: a bound is in its own bucket");
    assert_eq!(bucket(5_001), 1);
    assert_eq!(bucket(99_999), 4);
    assert_eq!(bucket(100_000), 4);
    assert_eq!(bucket(1_000_001), 8);
    assert_eq!(bucket(10_000_000), BUCKETS - 2);
    assert_eq!(bucket(10_000_001), BUCKETS - 1, "+Inf");
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    assert!(BUCKET_BOUNDS_US.is_sorted());
}

#[test]
fn statuses_count_by_class_and_odd_ones_in_the_histogram_only() {
    assert_eq!(class(100), Some(0));
    assert_eq!(class(200), Some(1));
    assert_eq!(class(404), Some(3));
    assert_eq!(class(599), Some(4));
    assert_eq!((class(99), class(600), class(0)), (None, None, None));
    let b = board(1);
    let pool = b.pool();
    assert_eq!(pool.view(), PoolView::default(), "a new board starts at 0");
    pool.record(3_000, Some(200));
    pool.record(30_000, Some(500));
    pool.record(20_000_000, Some(404));
    pool.record(7_000, None);
    pool.record(1, Some(999));
    pool.accept();
    let view = pool.view();
    assert_eq!(view.count(), 5);
    assert_eq!(
        view.accepted, 1,
        "counted apart: a request taken, not yet ended"
    );
    assert_eq!(view.buckets[0], 2);
    assert_eq!(view.buckets[1], 1);
    assert_eq!(view.buckets[3], 1);
    assert_eq!(view.buckets[BUCKETS - 1], 1);
    assert_eq!(
        view.sum,
        Duration::from_micros(3_000 + 30_000 + 20_000_000 + 7_000 + 1)
    );
    assert_eq!(view.classes, [0, 1, 0, 1, 1]);
}

#[test]
fn the_pool_area_is_not_a_slot() {
    let b = board(2);
    b.pool().record(1_000, Some(200));
    assert!(b.snapshot().is_empty(), "no slot written");
    b.slot(0).claim(pid(7), 1);
    b.slot(0).begin_request(0, "GET", "/", "", "");
    b.slot(0).end_request(10, Duration::ZERO, None);
    assert_eq!(b.pool().view().count(), 1, "a slot's writes leave it alone");
    let last = b.slot(1);
    last.claim(pid(8), 1);
    last.end_request(10, Duration::ZERO, None);
    last.release();
    assert_eq!(b.pool().view().classes[1], 1);
}

#[test]
fn forked_workers_adding_at_once_lose_no_request() {
    const WORKERS: u64 = 4;
    const REQUESTS: u64 = 20_000;
    let master = board(4);
    let zygote =
        Scoreboard::from_fd(master.fd().try_clone_to_owned().unwrap()).expect("valid scoreboard");
    let mut children = Vec::new();
    for w in 0..WORKERS {
        // SAFETY: the child only adds to shared memory and _exits: no allocation, no lock,
        // no destructor, so the other test threads' state at fork time cannot matter.
        match unsafe { fork() }.expect("fork") {
            ForkResult::Child => {
                let pool = zygote.pool();
                for i in 0..REQUESTS {
                    pool.accept();
                    let status = [200, 404, 500][((i + w) % 3) as usize];
                    pool.record(i % 20_000, Some(status));
                }
                // SAFETY: ends the child at once, running none of the test harness.
                unsafe { libc::_exit(0) };
            }
            ForkResult::Parent { child } => children.push(child),
        }
    }
    for child in children {
        assert_eq!(waitpid(child, None).unwrap(), WaitStatus::Exited(child, 0));
    }
    let view = master.pool().view();
    assert_eq!(view.count(), WORKERS * REQUESTS);
    assert_eq!(view.accepted, WORKERS * REQUESTS, "accepted conn");
    assert_eq!(view.classes.iter().sum::<u64>(), WORKERS * REQUESTS);
    let per_worker_sum: u64 = (0..REQUESTS).map(|i| i % 20_000).sum();
    assert_eq!(view.sum, Duration::from_micros(WORKERS * per_worker_sum));
    // 0..=5000 µs: 5001 of every 20000 per worker.
    assert_eq!(view.buckets[0], WORKERS * 5_001);
}

#[test]
fn a_request_that_ends_while_others_run_counts_and_keeps_the_slot_busy() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.begin_request(1_000, "GET", "/slow", "", "main:app");
    slot.count_request(250, Duration::from_micros(40), None);
    let view = &b.snapshot()[0];
    assert_eq!(
        (view.state, view.since_us, view.requests),
        (State::Running, 1_000, 1)
    );
    assert_eq!(view.request.as_ref().expect("whole").uri, "/slow");
    slot.end_request(3_000, Duration::from_micros(10), None);
    let view = &b.snapshot()[0];
    assert_eq!((view.state, view.requests), (State::Idle, 2));
}

#[test]
fn an_output_line_gets_the_id_of_the_request_in_flight_when_it_was_read() {
    let b = board(1);
    let slot = b.slot(0);
    slot.claim(pid(100), 1);
    slot.set_state(State::Idle);
    let view = || b.view_of(pid(100)).expect("the claimed slot");
    assert_eq!(view().request_id_at(50), None, "no request yet");
    slot.begin_request_id(1_000, "GET", "/slow", "", "", "id-1");
    assert_eq!(view().request_id_at(1_500), Some("id-1"));
    assert_eq!(view().request_id_at(900), None, "read before it began");
    slot.end_request(4_000, Duration::ZERO, None);
    // Read during the request, taken after its end: still its line.
    assert_eq!(view().request_id_at(3_999), Some("id-1"));
    assert_eq!(view().request_id_at(4_100), None, "between requests");
    slot.begin_request_id(5_000, "GET", "/next", "", "", "id-2");
    assert_eq!(
        view().request_id_at(3_000),
        None,
        "another request began since"
    );
    assert_eq!(view().request_id_at(5_000), Some("id-2"));
    assert!(b.view_of(pid(101)).is_none());
}
