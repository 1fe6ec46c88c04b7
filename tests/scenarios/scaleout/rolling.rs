//! A rolling deploy across the three hosts under load loses no request: host by host, the
//! app's code is renewed while nginx's clients keep asking, first by SIGTERM (drover stops
//! taking connections, finishes those in hand, exits 0) and a new start, then by `drover
//! ctl reload` (a new generation on the same sockets, the old one drained). The operator's
//! step between two hosts: the renewed host answers at the new version.

use super::{HOSTS, Host, Load, PATHS, first_failures, front, nginx_errors, retries};
use crate::common::Site;

/// Between two hosts the operator waits for the renewed one to serve: here, until it has
/// answered this many requests at the new version.
const SERVED: u64 = 100 * PATHS.len() as u64;

#[test]
fn a_rolling_deploy_by_sigterm_then_by_reload_loses_no_request() {
    let mut hosts: Vec<Host> = (1..=HOSTS).map(|n| Host::start(n, "v1")).collect();
    let site = Site::new();
    let nginx = front(&site, &hosts);
    let load = Load::start(&nginx.url(""), "");
    let served_by_all = |version: &'static str| {
        move |t: &super::Tally| (1..=HOSTS).all(|n| t.count(n, version) >= SERVED)
    };
    load.wait("every host to answer at v1", served_by_all("v1"));

    // SIGTERM and start again, host by host.
    let mut stops = Vec::new();
    for host in &mut hosts {
        host.deploy("v2");
        stops.push(host.stop());
        host.spawn();
        let n = host.n;
        load.wait(&format!("host {n} to answer at v2"), |t| {
            t.count(n, "v2") >= SERVED
        });
    }
    let restarted = load.tally.lock().expect("tally").requests;
    // drover ctl reload, host by host.
    for host in &hosts {
        host.deploy("v3");
        host.reload();
        let n = host.n;
        load.wait(&format!("host {n} to answer at v3"), |t| {
            t.count(n, "v3") >= SERVED
        });
    }
    load.wait("every host to answer at v3", served_by_all("v3"));
    let (tally, elapsed) = load.finish();
    let nginx_log = retries(&site);
    let per_host: Vec<String> = (1..=HOSTS)
        .map(|n| {
            let versions: Vec<String> = ["v1", "v2", "v3"]
                .iter()
                .map(|v| format!("{v} {}", tally.count(n, v)))
                .collect();
            format!("host {n}: {}", versions.join(", "))
        })
        .collect();
    println!(
        "rolling deploy: {} requests from {} clients in {elapsed:.1?} ({:.0}/s), {} failed; \
         {restarted} by the end of the SIGTERM round; {}; SIGTERM to exit {:?}; nginx \
         logged {} requests, {} tried on a second host",
        tally.requests,
        super::CLIENTS,
        tally.requests as f64 / elapsed.as_secs_f64(),
        tally.failures.len(),
        per_host.join("; "),
        stops,
        nginx_log.logged,
        nginx_log.retried,
    );
    assert!(
        tally.failures.is_empty(),
        "{} of {} requests failed over the rolling deploy; the first ones:\n{}\n\
         nginx's errors:\n{}",
        tally.failures.len(),
        tally.requests,
        first_failures(&tally),
        nginx_errors(&site),
    );
    drop(nginx);
}
