//! Stopping: TERM lets the request in flight finish, then drover exits 0 leaving no worker.

use std::thread;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{PhpPool, Site, Stack, TIMEOUT, http, proc, wait_until};

#[test]
fn term_during_a_two_second_request_lets_it_finish() {
    let site = Site::new();
    let started = site.path().join("slow.started");
    // usleep, not sleep: a signal to the worker would cut sleep() short and hide the bug.
    site.script(
        "slow.php",
        &format!(
            "<?php touch('{}'); usleep(2000000); echo 'done';",
            started.display()
        ),
    );
    let mut stack = Stack::start(site, PhpPool::new("www").max_children(2));

    let url = stack.url("/slow.php");
    let request = thread::spawn(move || http::get(&url));
    wait_until(TIMEOUT, "the slow request to start", || {
        started.exists().then_some(())
    });
    let processes = stack.drover.descendants();
    stack.drover.signal(Signal::SIGTERM);

    let reply = request.join().expect("request thread");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "done"),
        "log:\n{}",
        stack.drover.log.text()
    );
    let status = stack.drover.wait_exit(TIMEOUT);
    assert_eq!(
        status.code(),
        Some(0),
        "exit status {status}; log:\n{}",
        stack.drover.log.text()
    );
    let left = || {
        processes
            .iter()
            .copied()
            .filter(|&pid| still_ours(pid))
            .collect::<Vec<_>>()
    };
    // A worker signalled just before drover exits may take a moment to die.
    proc::poll(Duration::from_secs(5), || left().is_empty());
    assert_eq!(
        left(),
        Vec::<i32>::new(),
        "php-cgi processes of {processes:?} still running after drover's exit"
    );
}

/// Still running as a php-cgi (a recycled pid would be some other program, or not running).
fn still_ours(pid: i32) -> bool {
    proc::is_running(pid) && proc::stat(pid).is_some_and(|s| s.comm == "php-cgi")
}
