//! `worker_boot = "zygote"`: the worker script boots once, in the pool's zygote, and every
//! worker is forked from the booted app (copy-on-write), as gunicorn's `preload` forks
//! workers from an imported app.

use super::{lines, logs_env, pool};
use crate::common::{Drover, Site, Stack, TIMEOUT, http, proc};

/// One boot for the pool, whatever the number of workers and recycles; each worker its own
/// process with its own random numbers.
#[test]
fn workers_fork_from_the_script_the_zygote_booted() {
    let site = Site::new();
    let env = logs_env(&site);
    let stack = Stack::start(
        site,
        pool(2)
            .pm("mode = \"static\"\nmax_children = 2\nmax_requests = 4\n")
            .php(&format!(
                "worker = {:?}\nworker_boot = \"zygote\"\n",
                super::worker_script()
            ))
            .env(&env),
    );
    let draws: Vec<String> = (0..12)
        .map(|_| http::get(&stack.url("/rand.php")).body)
        .collect();

    let pids: std::collections::BTreeSet<&str> =
        draws.iter().map(|d| d.split(' ').next().unwrap()).collect();
    assert!(
        pids.len() >= 3,
        "max_requests = 4 recycled no worker: {draws:?}"
    );
    let numbers: std::collections::BTreeSet<&str> =
        draws.iter().map(|d| d.split(' ').nth(1).unwrap()).collect();
    assert_eq!(
        numbers.len(),
        draws.len(),
        "two workers drew the same numbers: {draws:?}"
    );
    let boots = lines(&stack.site, "boots.log");
    assert_eq!(boots.len(), 1, "the script booted once: {boots:?}");
    assert!(
        !pids.contains(boots[0].as_str()),
        "the boot ran in the zygote, not in a worker: {boots:?} {pids:?}"
    );
    let ends = proc::wait_until(TIMEOUT, "recycled scripts ended", || {
        let ends = lines(&stack.site, "ends.log");
        (!ends.is_empty()).then_some(ends)
    });
    assert!(ends.iter().all(|l| l.ends_with(" handled 4")), "{ends:?}");
}

/// A boot that leaves a socket open (a database connection every forked worker would talk
/// on) is refused: the pool stops with the reason.
#[test]
fn a_boot_that_leaves_a_socket_open_is_refused() {
    let site = Site::new();
    let pool = pool(2)
        .php(&format!(
            "worker = {:?}\nworker_boot = \"zygote\"\n",
            super::worker_script()
        ))
        .env("BOOT_SOCKET = \"1\"\n");
    let drover = Drover::start(&site, &[&pool]);
    drover.log.wait_for_line("boot left sockets open", TIMEOUT);
    drover
        .log
        .wait_for_line("pool www: the app failed to load", TIMEOUT);
}
