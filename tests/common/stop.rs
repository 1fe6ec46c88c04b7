//! The graceful-stop scenario every runtime must pass: TERM while a request is in flight.

use std::path::Path;
use std::thread;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{Stack, TIMEOUT, http, proc, wait_until};

/// Requests `path` (which touches `started`, then answers "done" some time later), sends
/// TERM to drover once the request runs, and asserts what an operator expects: the request
/// completes with 200 "done", drover exits 0, and none of its processes named `comm` (the
/// workers, and their parent) is left running.
pub fn term_lets_the_request_finish(mut stack: Stack, path: &str, started: &Path, comm: &str) {
    let url = stack.url(path);
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
    // Still running under that name: a recycled pid would be some other program.
    let ours =
        |&pid: &i32| proc::is_running(pid) && proc::stat(pid).is_some_and(|s| s.comm == comm);
    let left = || processes.iter().copied().filter(ours).collect::<Vec<_>>();
    // A worker signalled just before drover exits may take a moment to die.
    proc::poll(Duration::from_secs(5), || left().is_empty());
    assert_eq!(
        left(),
        Vec::<i32>::new(),
        "{comm} processes of {processes:?} still running after drover's exit"
    );
}
