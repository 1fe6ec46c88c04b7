//! Hostile: reloads in quick succession. Two HUPs 10 ms apart, the second reverting the
//! first change, leave the pool as the files say; two HUPs 10 ms apart with different
//! php.ini settings leave no worker of the superseded generation serving, on php-cgi and on
//! drover-php (`DROVER_TEST_PHP_RUNTIME`).

use std::thread;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{
    Ctl, Drover, Location, Nginx, PoolFile, Site, TIMEOUT, check_config, default_php_runtime, http,
    php_table, pool_toml, proc, start_with_control,
};

/// A static PHP pool, on the runtime under test, with a `memory_limit` in its `[php.ini]`.
pub struct IniPool {
    pub max_children: u32,
    pub memory_limit: &'static str,
}

impl PoolFile for IniPool {
    fn name(&self) -> &str {
        "www"
    }

    fn toml(&self, site: &Site) -> String {
        pool_toml(
            &site.socket("www"),
            &format!(
                "[pm]\nmode = \"static\"\nmax_children = {}\n\n{}\n[php.ini]\nmemory_limit = \"{}\"\n",
                self.max_children,
                php_table(default_php_runtime()),
                self.memory_limit
            ),
        )
    }
}

/// Replaces the pool file in one step (rename), so that a reload never reads half of it.
pub fn replace_pool_file(site: &Site, pool: &dyn PoolFile) {
    let name = pool.name();
    let temp = site.write(&format!("pools.d/.{name}.toml.new"), &pool.toml(site));
    std::fs::rename(&temp, site.path().join(format!("pools.d/{name}.toml")))
        .expect("rename the pool file into place");
}

/// Sends HUP, and 10 ms later (the files changed meanwhile) HUP again; waits for the second
/// reload's summary and then for "reload done".
fn two_reloads(drover: &Drover, site: &Site, first: &dyn PoolFile, second: &dyn PoolFile) {
    let from = drover.log.len();
    replace_pool_file(site, first);
    drover.signal(Signal::SIGHUP);
    // Pacing, not synchronisation: the second reload must come while the first still rolls.
    thread::sleep(Duration::from_millis(10));
    replace_pool_file(site, second);
    drover.signal(Signal::SIGHUP);
    let summaries = drover.log.wait_for_lines(
        from,
        "two reload summaries",
        |l| l.contains("reload: www:"),
        2,
        TIMEOUT,
    );
    let second_at = drover
        .log
        .lines()
        .iter()
        .position(|l| l.contains(&summaries[1]))
        .unwrap();
    drover.log.wait_for(
        second_at,
        "reload done",
        |l| l.contains("reload done"),
        TIMEOUT,
    );
}

/// `drover ctl config` (the running configuration) equals `drover -t` (the files).
fn assert_running_config_is_the_files(ctl: &Ctl, site: &Site, log: &str) {
    let running = ctl.ok(&["config"], log);
    let files = check_config(site);
    let files = String::from_utf8_lossy(&files.stdout);
    assert_eq!(
        running.trim(),
        files.trim(),
        "ctl config differs from drover -t\ndrover's log:\n{log}"
    );
}

#[test]
fn a_reload_reverting_one_10ms_before_leaves_the_pool_as_the_files_say() {
    let site = Site::new();
    let three = IniPool {
        max_children: 3,
        memory_limit: "64M",
    };
    let four = IniPool {
        max_children: 4,
        ..three
    };
    let (drover, ctl) = start_with_control(&site, &[&three]);
    for round in 1..=3 {
        two_reloads(&drover, &site, &four, &three);
        assert_running_config_is_the_files(&ctl, &site, &drover.log.text());
        let settled = proc::poll(TIMEOUT, || drover.workers().len() == 3);
        assert!(
            settled,
            "round {round}: {} PHP workers, the files say 3\ndrover's log:\n{}",
            drover.workers().len(),
            drover.log.text()
        );
        ctl.wait_all_tracked(drover.pid(), &drover.log);
    }
}

#[test]
fn two_reloads_10ms_apart_leave_only_the_last_php_ini_serving() {
    let site = Site::new();
    site.script("limit.php", "<?php echo ini_get('memory_limit');");
    let first = IniPool {
        max_children: 3,
        memory_limit: "64M",
    };
    let (drover, ctl) = start_with_control(&site, &[&first]);
    let nginx = Nginx::start_locations(&site, &[Location::php(&site.socket("www"))]);
    let middle = IniPool {
        memory_limit: "96M",
        ..first
    };
    let last = IniPool {
        memory_limit: "128M",
        ..first
    };
    two_reloads(&drover, &site, &middle, &last);
    ctl.wait_all_tracked(drover.pid(), &drover.log);
    let mut stale = Vec::new();
    for _ in 0..200 {
        let reply = http::get(&nginx.url("/limit.php"));
        if reply.status != 200 || reply.body != "128M" {
            stale.push(format!("{} {:?}", reply.status, reply.body));
        }
    }
    assert!(
        stale.is_empty(),
        "{} of 200 answers not from the last php.ini: {:?}\ndrover's log:\n{}",
        stale.len(),
        &stale[..stale.len().min(10)],
        drover.log.text()
    );
}
