//! Stopping: TERM lets the request in flight finish, then drover exits 0 leaving no worker.

use crate::common::{PhpPool, Site, Stack, term_lets_the_request_finish};

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
    let pool = PhpPool::new("www").max_children(2);
    let comm = pool.worker_comm();
    let stack = Stack::start(site, pool);
    term_lets_the_request_finish(stack, "/slow.php", &started, comm);
}
