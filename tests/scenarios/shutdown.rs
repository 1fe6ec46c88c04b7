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
    let stack = Stack::start(site, PhpPool::new("www").max_children(2));
    term_lets_the_request_finish(stack, "/slow.php", &started, "php-cgi");
}
