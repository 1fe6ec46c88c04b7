//! A dynamic pool's workers are forked from one PHP: one OPcache, one APCu. (With
//! php-cgi, each worker of a dynamic pool is its own PHP with its own caches.)

use super::Embed;
use crate::common::{Site, Stack, http};

#[test]
fn a_dynamic_pool_shares_one_opcache_and_one_apcu() {
    let site = Site::new();
    site.script(
        "store.php",
        "<?php apcu_store('shared', 'from ' . getmypid()); echo getmypid();",
    );
    site.script("target.php", "<?php echo getmypid();");
    let target = site.docroot.join("target.php");
    site.script(
        "probe.php",
        &format!(
            "<?php echo getmypid(), ' ', apcu_fetch('shared'), ' ', opcache_is_script_cached({:?}) ? 'cached' : 'cold';",
            target.display()
        ),
    );
    let pool = Embed::new("www", 0)
        .pm("mode = \"dynamic\"\nmax_children = 4\nstart_servers = 3\nmin_spare_servers = 1\nmax_spare_servers = 3\n")
        // A script written just now is older than 0 s: cache it at once.
        .ini("\"opcache.file_update_protection\" = 0\n\"apc.enabled\" = 1\n");
    let stack = Stack::start(site, pool);

    let stored_by = http::get(&stack.url("/store.php")).body;
    let compiled_by = http::get(&stack.url("/target.php")).body;
    let mut seen = Vec::new();
    let other = (0..60).find_map(|_| {
        let reply = http::get(&stack.url("/probe.php")).body;
        seen.push(reply.clone());
        let pid = reply.split(' ').next().unwrap().to_string();
        (pid != stored_by && pid != compiled_by).then_some(reply)
    });
    let other = other.unwrap_or_else(|| {
        panic!("no third worker answered: store {stored_by}, target {compiled_by}, {seen:?}")
    });

    let pid = other.split(' ').next().unwrap();
    assert_eq!(
        other,
        format!("{pid} from {stored_by} cached"),
        "a worker that stored nothing and compiled nothing sees the APCu value and the cached script"
    );
}
