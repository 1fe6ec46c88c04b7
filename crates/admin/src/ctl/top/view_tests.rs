//! The screen from status JSON as the master renders it (the fixtures of `control::fixture`
//! through `render::json`), without a terminal.

use std::time::Duration;

use super::*;
use drover::control::fixture::{blind, www};
use drover::control::render;

/// What the control socket answers for `pools`.
fn sample(pools: &[drover::control::PoolStatus]) -> Vec<Pool> {
    parse(&render::json(pools, true)).expect("the master's own JSON")
}

fn frame<'s>(pools: &'s [Pool], rows: &'s [Row], interactive: bool) -> Frame<'s> {
    Frame {
        pools,
        rows,
        clock: "06/Dec/2026:23:59:00 +0000",
        interval: Duration::from_secs(1),
        note: None,
        interactive,
    }
}

/// The line of `lines` that starts (after its 2-character mark) with `pool`.
fn pool_line<'l>(lines: &'l [String], pool: &str) -> &'l str {
    lines
        .iter()
        .find(|l| {
            l.get(2..)
                .is_some_and(|rest| rest.starts_with(&format!("{pool} ")))
        })
        .unwrap_or_else(|| panic!("no line of pool {pool:?} in:\n{}", lines.join("\n")))
}

#[test]
fn the_masters_json_parses_with_every_field_top_shows() {
    let pools = sample(&[www(), blind()]);
    let www = &pools[0];
    assert_eq!((www.active, www.idle, www.total), (1, 1, 2));
    assert_eq!(www.limits.max_children, 10);
    assert!(www.durations.is_some());
    assert_eq!(www.processes[0].request_id.as_deref(), Some("4f1c9e0a"));
    assert_eq!(www.processes[0].request_duration, Some(1_500_000));
    let blind = &pools[1];
    assert_eq!(blind.accepted_conn, None);
    assert_eq!(blind.durations, None);
    assert!(parse("{\"pool\": 1}").is_err());
}

#[test]
fn rates_and_percentiles_come_from_the_deltas_between_two_samples() {
    let mut before = www();
    before.accepted_conn = Some(100);
    let requests = before.requests.as_mut().unwrap();
    requests.buckets = [0; 12];
    let mut after = before.clone();
    after.accepted_conn = Some(150);
    // 50 more requests: 40 under 5 ms, 10 between 0.5 s and 1 s.
    let requests = after.requests.as_mut().unwrap();
    requests.buckets[0] = 40;
    requests.buckets[7] = 10;
    let (old, new) = (sample(&[before]), sample(&[after]));
    let rows = rows(Some((&old, Duration::from_secs(2))), &new);
    let row = &rows[0];
    assert_eq!(row.rate, Some(25.0));
    // The 25th of 50 is in the first bucket: 25/40 of the way to 5 ms.
    let p50 = row.p50.unwrap().as_secs_f64();
    assert!((p50 - 0.003125).abs() < 1e-9, "{p50}");
    // The 49.5th: 9.5/10 of the way from 0.5 s to 1 s.
    let p99 = row.p99.unwrap().as_secs_f64();
    assert!((p99 - 0.975).abs() < 1e-9, "{p99}");
}

#[test]
fn the_first_sample_shows_figures_since_the_pool_started() {
    let pools = sample(&[www()]);
    let row = &rows(None, &pools)[0];
    let status = www();
    let accepted = status.accepted_conn.unwrap() as f64;
    assert_eq!(
        row.rate,
        Some(accepted / status.start_since.as_secs() as f64)
    );
    assert!(row.p50.is_some() && row.p99.is_some());
    // Nothing new since the previous sample: no percentile, a rate of 0.
    let same = rows(Some((&pools, Duration::from_secs(1))), &pools);
    assert_eq!(
        (same[0].rate, same[0].p50, same[0].p99),
        (Some(0.0), None, None)
    );
}

#[test]
fn requests_in_the_open_bucket_show_the_highest_bound() {
    let counts = [(0.005, 0), (10.0, 0), (f64::INFINITY, 4)];
    assert_eq!(quantile(&counts, 0.5), Some(Duration::from_secs(10)));
    assert_eq!(quantile(&[(0.005, 0), (f64::INFINITY, 0)], 0.5), None);
}

#[test]
fn the_screen_shows_caps_queue_restarts_memory_and_the_slowest_request_with_its_id() {
    let mut status = www();
    status.recycled = drover::control::Recycled {
        crash: 2,
        max_requests: 5,
        ..Default::default()
    };
    let pools = sample(&[status, blind()]);
    let rows = rows(None, &pools);
    let lines = screen(&frame(&pools, &rows, true), &View::default(), 200, None);
    let text = lines.join("\n");
    assert!(
        lines[0].starts_with(
            "drover top - 06/Dec/2026:23:59:00 +0000 - 2 pools - every 1s - sort: pool - pool: all"
        ),
        "{text}"
    );
    assert!(lines[1].starts_with("keys: "), "{text}");
    let www_line = pool_line(&lines, "www");
    let cells: Vec<&str> = www_line.split_whitespace().collect();
    // POOL RUNTIME PM BUSY IDLE TOTAL/MAX REQ/S P50 P99 QUEUE WAIT WAIT99 503 MEMORY
    // RESTARTS...
    assert_eq!(
        &cells[..6],
        ["www", "php", "dynamic", "1", "1", "2/10"],
        "{www_line}"
    );
    assert_eq!(cells[9], "2", "listen queue: {www_line}");
    assert_eq!(cells[10], "1.50s", "oldest wait: {www_line}");
    // The 9.9th of 10 waits: 0.9 of the way from 1 s to 2.5 s.
    assert_eq!(cells[11], "2.35s", "queue-wait p99: {www_line}");
    assert_eq!(cells[13], "50.0M", "30 + 20 MiB of RSS: {www_line}");
    assert!(www_line.ends_with("crash 2, max_requests 5"), "{www_line}");
    // A pool whose workers count nothing: dashes, never zeros.
    let blind_line = pool_line(&lines, "leg\"acy");
    let cells: Vec<&str> = blind_line.split_whitespace().collect();
    assert_eq!(&cells[6..9], ["-", "-", "-"], "{blind_line}");
    assert_eq!(cells[11], "-", "no queue-wait histogram: {blind_line}");
    assert!(blind_line.ends_with(" -"), "no restarts: {blind_line}");
    let slowest = lines
        .iter()
        .position(|l| l == "SLOWEST REQUESTS IN FLIGHT")
        .unwrap();
    let flight = &lines[slowest + 2];
    // The URI's line break is a `?`: nothing a client sends reaches the terminal raw.
    assert!(
        flight.contains("www") && flight.contains("4242") && flight.contains("1.50s"),
        "{flight}"
    );
    assert!(flight.contains("POST    /a\"b\\c?d?q=\"x\""), "{flight}");
    assert!(flight.ends_with(" 4f1c9e0a"), "{flight}");
    assert_eq!(lines.len(), slowest + 3, "one request in flight:\n{text}");
}

#[test]
fn batch_frames_have_no_keys_line_and_a_terminal_cuts_to_its_size() {
    let pools = sample(&[www()]);
    let rows = rows(None, &pools);
    let plain = screen(
        &frame(&pools, &rows, false),
        &View::default(),
        usize::MAX,
        None,
    );
    assert!(!plain.iter().any(|l| l.starts_with("keys:")));
    let small = screen(&frame(&pools, &rows, true), &View::default(), 30, Some(5));
    assert_eq!(small.len(), 5);
    assert!(small.iter().all(|l| l.chars().count() <= 30), "{small:#?}");
}

/// Two pools: `b` busier and bigger than `a`.
fn two_pools() -> Vec<Pool> {
    let mut a = www();
    a.pool = "a".into();
    a.active_processes = 0;
    a.workers.truncate(1);
    let mut b = www();
    b.pool = "b".into();
    b.active_processes = 3;
    sample(&[a, b])
}

fn order(view: &View, rows: &[Row]) -> Vec<String> {
    view.order(rows).iter().map(|r| r.name.clone()).collect()
}

#[test]
fn keys_sort_reverse_and_pick_a_pool() {
    let pools = two_pools();
    let rows = rows(None, &pools);
    let mut view = View::default();
    assert_eq!(order(&view, &rows), ["a", "b"]);
    assert_eq!(view.key(Key::Char('s'), &rows), Action::Redraw);
    assert_eq!(view.sort, Sort::Busy);
    assert_eq!(order(&view, &rows), ["b", "a"]);
    view.key(Key::Char('r'), &rows);
    assert_eq!(order(&view, &rows), ["a", "b"]);
    view.key(Key::Char('r'), &rows);
    view.key(Key::Char('S'), &rows);
    assert_eq!(view.sort, Sort::Name);
    view.key(Key::Char('S'), &rows);
    assert_eq!(view.sort, Sort::Memory, "back around");
    assert_eq!(order(&view, &rows), ["b", "a"], "b has two workers' RSS");

    // Picking follows the screen's order, then comes back to every pool.
    view.key(Key::Char('p'), &rows);
    assert_eq!(view.pick.as_deref(), Some("b"));
    view.key(Key::Tab, &rows);
    assert_eq!(view.pick.as_deref(), Some("a"));
    view.key(Key::Tab, &rows);
    assert_eq!(view.pick, None);
    view.key(Key::BackTab, &rows);
    assert_eq!(view.pick.as_deref(), Some("a"));
    view.key(Key::Esc, &rows);
    assert_eq!(view.pick, None);
    view.key(Key::Char('P'), &rows);
    assert_eq!(view.pick.as_deref(), Some("a"));
    view.key(Key::Char('a'), &rows);
    assert_eq!(view.pick, None);

    assert_eq!(view.key(Key::Char('x'), &rows), Action::Redraw);
    assert_eq!(view.key(Key::Char('q'), &rows), Action::Quit);
    assert_eq!(view.key(Key::Interrupt, &rows), Action::Quit);
    assert_eq!(View::default().key(Key::Char('p'), &[]), Action::Redraw);
}

#[test]
fn a_picked_pool_is_marked_and_its_workers_listed_busy_first() {
    let pools = two_pools();
    let rows = rows(None, &pools);
    let view = View {
        pick: Some("b".into()),
        ..View::default()
    };
    let lines = screen(&frame(&pools, &rows, true), &view, 200, None);
    let text = lines.join("\n");
    assert!(lines[0].ends_with("pool: b"), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("> b ")), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("  a ")), "{text}");
    let at = lines.iter().position(|l| l == "WORKERS OF b").expect(&text);
    let busy = &lines[at + 2];
    let idle = &lines[at + 3];
    assert!(
        busy.contains("4242") && busy.contains("Running") && busy.contains("4f1c9e0a"),
        "{busy}"
    );
    // An idle worker's last request is not shown as if it ran now.
    assert!(
        idle.contains("4243") && idle.contains("Idle") && !idle.contains("GET"),
        "{idle}"
    );
    assert!(!text.contains("SLOWEST"), "{text}");
    let gone = View {
        pick: Some("c".into()),
        ..View::default()
    };
    let lines = screen(&frame(&pools, &rows, true), &gone, 200, None);
    assert_eq!(lines.last().map(String::as_str), Some("pool c is gone"));
}

#[test]
fn durations_and_sizes_read_in_their_unit() {
    let ms = Duration::from_millis;
    assert_eq!(duration(Duration::ZERO), "0");
    assert_eq!(duration(Duration::from_micros(850)), "850us");
    assert_eq!(duration(Duration::from_micros(12_500)), "12ms");
    assert_eq!(duration(Duration::from_micros(2_500)), "2.5ms");
    assert_eq!(duration(ms(340)), "340ms");
    assert_eq!(duration(ms(2_345)), "2.35s");
    assert_eq!(duration(ms(245_000)), "4m05s");
    assert_eq!(bytes(812 * 1024), "812K");
    assert_eq!(bytes(37_853_594), "36.1M");
    assert_eq!(bytes(3 << 30), "3.0G");
}

#[test]
fn the_queue_wait_p99_comes_from_the_deltas_and_reads_below_the_first_bound() {
    let mut before = www();
    let waits = before.queue.waits.as_mut().unwrap();
    waits.buckets = [0; 10];
    waits.count = 0;
    let mut after = before.clone();
    // 200 more connections, all taken within a tick: no wait, to the estimate's 0.1 s.
    let waits = after.queue.waits.as_mut().unwrap();
    waits.buckets[0] = 200;
    waits.count = 200;
    let mut later = after.clone();
    // Then 100 more, 98 at once and 2 after 0.5 to 1 s.
    let waits = later.queue.waits.as_mut().unwrap();
    waits.buckets[0] += 98;
    waits.buckets[3] = 2;
    waits.count += 100;
    let (before, after, later) = (sample(&[before]), sample(&[after]), sample(&[later]));
    let second = Duration::from_secs(1);
    let quiet = &rows(Some((&before, second)), &after)[0];
    assert!(quiet.wait_p99.unwrap() <= Duration::from_millis(100));
    let lines = screen(
        &frame(&after, std::slice::from_ref(quiet), false),
        &View::default(),
        200,
        None,
    );
    let line = pool_line(&lines, "www");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[11], "<100ms", "{line}");
    // The 99th of the 100 new ones is the first of the 2: half way from 0.5 s to 1 s.
    let busy = &rows(Some((&after, second)), &later)[0];
    let p99 = busy.wait_p99.unwrap().as_secs_f64();
    assert!((p99 - 0.75).abs() < 1e-9, "{p99}");
    // Nothing left the queue since: no figure.
    assert_eq!(rows(Some((&later, second)), &later)[0].wait_p99, None);
}
