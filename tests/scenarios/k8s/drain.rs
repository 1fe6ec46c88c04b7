//! TERM with `shutdown_delay`, as Kubernetes ends a pod: `/readyz` turns 503 at once, the
//! pools keep serving through nginx for the delay (no request fails), then drover stops
//! accepting, lets the request in flight finish and exits 0. The time from TERM to exit is
//! printed for the figures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{curl, start_with_health};
use crate::common::{Nginx, PhpPool, Site, TIMEOUT, http, wait_until};

/// One request of the client's loop: when it was sent, and its status (0: no answer).
type Sent = (Instant, u16);

/// A client sending GETs to `url` one after another until told to stop.
fn keep_sending(
    url: String,
    stop: Arc<AtomicBool>,
) -> (thread::JoinHandle<()>, Arc<Mutex<Vec<Sent>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    let client = thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let at = Instant::now();
            let status = http::try_get(&url).map_or(0, |r| r.status);
            record.lock().unwrap().push((at, status));
        }
    });
    (client, sent)
}

#[test]
fn term_with_shutdown_delay_serves_on_then_finishes_in_flight_and_exits_0() {
    let delay = Duration::from_secs(2);
    let site = Site::new();
    site.script("hello.php", "<?php echo 'hello';");
    let started = site.path().join("slow.started");
    site.script(
        "slow.php",
        &format!(
            "<?php touch('{}'); usleep(1500000); echo 'done';",
            started.display()
        ),
    );
    let pool = PhpPool::new("www").max_children(3);
    let (mut drover, health) = start_with_health(
        &site,
        "shutdown_delay = \"2s\"\nprocess_control_timeout = \"10s\"\n",
        &[&pool],
    );
    let nginx = Nginx::start(&site, &site.socket("www"));
    let readyz = format!("http://{health}/readyz");
    assert_eq!(curl(&readyz, None).0, 200);

    let stop = Arc::new(AtomicBool::new(false));
    let (client, sent) = keep_sending(nginx.url("/hello.php"), stop.clone());
    wait_until(TIMEOUT, "the client's first answers", || {
        (sent.lock().unwrap().len() >= 20).then_some(())
    });
    let term = Instant::now();
    drover.signal(Signal::SIGTERM);
    let (status, body) = curl(&readyz, None);
    let readyz_after = term.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("[-]stopping"), "{body}");
    // A request that starts within the delay and runs past its end finishes.
    let slow_url = nginx.url("/slow.php");
    wait_until(TIMEOUT, "1 s into the delay", || {
        (term.elapsed() >= Duration::from_secs(1)).then_some(())
    });
    let slow = thread::spawn(move || http::get(&slow_url));
    let status = drover.wait_exit(TIMEOUT);
    let exited = term.elapsed();
    stop.store(true, Ordering::SeqCst);
    client.join().unwrap();
    let slow = slow.join().unwrap();
    let log = drover.log.text();

    assert_eq!(status.code(), Some(0), "exit status {status}; log:\n{log}");
    assert_eq!(
        (slow.status, slow.body.as_str()),
        (200, "done"),
        "log:\n{log}"
    );
    let sent = sent.lock().unwrap().clone();
    // Within the delay (less a margin for the 100 ms tick that ends it), every request was
    // answered 200; the pool served on.
    let margin = Duration::from_millis(150);
    let within: Vec<Sent> = sent
        .iter()
        .copied()
        .filter(|(at, _)| *at >= term && *at < term + delay - margin)
        .collect();
    let failed: Vec<u16> = within.iter().map(|s| s.1).filter(|&s| s != 200).collect();
    assert!(
        failed.is_empty(),
        "failed within the delay: {failed:?}; log:\n{log}"
    );
    assert!(
        within.len() >= 10,
        "only {} requests within the delay",
        within.len()
    );
    let before: Vec<u16> = sent
        .iter()
        .filter(|(at, _)| *at < term)
        .map(|s| s.1)
        .filter(|&s| s != 200)
        .collect();
    assert!(before.is_empty(), "failed before TERM: {before:?}");
    assert!(
        exited >= delay,
        "exited {exited:?} after TERM, before the delay"
    );
    assert!(
        exited < delay + Duration::from_secs(4),
        "exited {exited:?} after TERM; log:\n{log}"
    );
    assert!(log.contains("shutdown_delay 2s"), "log:\n{log}");
    eprintln!(
        "figures: readyz 503 {readyz_after:.1?} after TERM; {} requests answered 200 within \
         shutdown_delay 2s; a 1.5 s request started 1 s in finished; TERM to exit {exited:.2?}",
        within.len()
    );
}

#[test]
fn term_without_a_delay_stops_at_once() {
    let site = Site::new();
    site.script("hello.php", "<?php echo 'hello';");
    let pool = PhpPool::new("www").max_children(2);
    let (mut drover, health) = start_with_health(&site, "", &[&pool]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    assert_eq!(http::get(&nginx.url("/hello.php")).status, 200);
    let term = Instant::now();
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(TIMEOUT);
    let exited = term.elapsed();
    assert_eq!(status.code(), Some(0));
    // No delay: nothing waits for it (the stop itself takes a few ticks).
    assert!(exited < Duration::from_secs(2), "TERM to exit {exited:?}");
    assert!(!drover.log.text().contains("shutdown_delay"));
    let _ = health;
    eprintln!("figures: shutdown_delay 0s, nothing in flight: TERM to exit {exited:.2?}");
}

#[test]
fn a_second_term_ends_the_delay_and_a_reload_within_it_is_refused() {
    let site = Site::new();
    site.script("hello.php", "<?php echo 'hello';");
    let pool = PhpPool::new("www").max_children(2);
    let (mut drover, health) = start_with_health(&site, "shutdown_delay = \"1m\"\n", &[&pool]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let readyz = format!("http://{health}/readyz");
    let term = Instant::now();
    drover.signal(Signal::SIGTERM);
    assert_eq!(curl(&readyz, None).0, 503);
    drover
        .log
        .wait_for_line("stopping: graceful after shutdown_delay 1m", TIMEOUT);
    // Within the delay the pool serves; a reload would only start pools to stop them.
    assert_eq!(http::get(&nginx.url("/hello.php")).status, 200);
    drover.signal(Signal::SIGHUP);
    drover.log.wait_for_line("reload refused", TIMEOUT);
    assert_eq!(http::get(&nginx.url("/hello.php")).status, 200);
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0));
    assert!(term.elapsed() < Duration::from_secs(20));
    assert!(
        drover
            .log
            .text()
            .contains("a second stop signal ends shutdown_delay now")
    );
}
