//! SIGKILL of one host's whole process tree (drover and every worker at once, as when the
//! machine fails) under load: the requests in flight on that host may fail, nothing else
//! does, since nginx takes the host out (`max_fails`) and tries each request that found it
//! gone on another (`fastcgi_next_upstream error`, `proxy_next_upstream error`). Each
//! request sleeps 20 ms in the app, so that some are in flight on every host when it dies.

use super::{HOSTS, Host, Load, PATHS, first_failures, front, nginx_errors, retries};
use crate::common::{Site, proc};

#[test]
fn sigkill_of_one_host_fails_at_most_its_requests_in_flight() {
    let mut hosts: Vec<Host> = (1..=HOSTS).map(|n| Host::start(n, "v1")).collect();
    let site = Site::new();
    let nginx = front(&site, &hosts);
    let load = Load::start(&nginx.url(""), "?ms=20");
    let each = PATHS.len() as u64 * 3;
    load.wait("every host to answer", |t| {
        (1..=HOSTS).all(|n| t.count(n, "v1") >= each)
    });

    // What the killed host can hold in flight: one request per worker.
    let victim = &mut hosts[1];
    let workers = workers(victim);
    let at_kill = load.tally.lock().expect("tally").requests;
    let in_flight = load.in_flight.load(std::sync::atomic::Ordering::SeqCst);
    victim.crash();
    // The others carry the load: each answers more than before.
    let served_at_kill = load.tally.lock().expect("tally").by_host();
    load.wait("the other hosts to carry the load", |t| {
        let now = t.by_host();
        t.requests >= at_kill + 600 && now[0] > served_at_kill[0] && now[2] > served_at_kill[2]
    });
    let after_kill = load.tally.lock().expect("tally").failures.len();
    // Started again, host 2 takes its share once nginx tries it (fail_timeout).
    let victim = &mut hosts[1];
    victim.spawn();
    let before = load.tally.lock().expect("tally").by_host()[1];
    load.wait("host 2 to serve again", |t| t.by_host()[1] >= before + 30);
    let (tally, elapsed) = load.finish();
    let nginx_log = retries(&site);
    let by_host = tally.by_host();
    println!(
        "SIGKILL of host 2: {} requests from {} clients in {elapsed:.1?}, {} failed; in \
         flight at the kill: {in_flight} from all clients, host 2 had {workers} workers; \
         answers by host {by_host:?} (host 2 started again); {after_kill} failed by the time \
         the others carried the load; nginx tried {} of {} requests on a second host",
        tally.requests,
        super::CLIENTS,
        tally.failures.len(),
        nginx_log.retried,
        nginx_log.logged,
    );
    assert_eq!(workers, PATHS.len() * 2, "host 2's workers: 2 per pool");
    assert!(
        tally.failures.len() <= workers,
        "{} requests failed, more than host 2's {workers} workers had in flight; the first \
         ones:\n{}\nnginx's errors:\n{}",
        tally.failures.len(),
        first_failures(&tally),
        nginx_errors(&site),
    );
    assert!(
        nginx_log.retried > 0,
        "nginx tried no request on a second host: was host 2 serving?"
    );
    drop(nginx);
}

/// The workers of `host`'s drover: the processes below its zygotes (each runs one request
/// at a time, so they bound what the host holds in flight).
fn workers(host: &Host) -> usize {
    let drover = host.drover();
    let below = proc::descendants(drover.pid());
    below
        .iter()
        .filter(|&&pid| proc::stat(pid).is_some_and(|s| s.ppid != drover.pid() && s.state != 'Z'))
        .count()
}
