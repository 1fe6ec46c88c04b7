//! Live changes: `drover ctl set www pm.max_children=8` on a static pool of 2 gives 8
//! workers without a restart (the same drover process; a new generation, then the old one
//! retired); the effective configuration says 8. An invalid value or a misspelt key is
//! refused with a non-zero exit and the key named, and nothing changes: still 8 workers,
//! the same ones. `drover ctl workers www +N|-N` moves the count relatively. Checking a
//! change writes nothing: not a file appears, even for a moment, beside drover.toml or the
//! pool files.

use std::path::Path;

use super::{Pool, Setup, number, site, start};
use crate::common::{FolderWatch, TIMEOUT, proc};

/// Waits until status shows `n` workers and `pm.max_children` `n`, and drover has exactly
/// `n` php-cgi workers (the old generation gone); their pids.
fn wait_workers(setup: &Setup, n: u64) -> Vec<i32> {
    let mut last = serde_json::Value::Null;
    let settled = proc::poll(TIMEOUT, || {
        last = setup.status("www");
        number(&last, "total processes") == n
            && last["limits"]["max_children"] == n
            && setup.stack.drover.workers().len() as u64 == n
    });
    assert!(
        settled,
        "never {n} workers; the last status:\n{last:#}\nphp-cgi workers {:?}\ndrover's log:\n{}",
        setup.stack.drover.workers(),
        setup.log()
    );
    let mut pids = setup.stack.drover.workers();
    pids.sort();
    pids
}

/// A request through nginx is served.
fn assert_serves(setup: &Setup) {
    assert_eq!(setup.get_ok("/greeting.php"), "greeting=live");
}

#[test]
fn ctl_set_max_children_resizes_a_static_pool_without_a_restart_and_refuses_bad_values() {
    let pool = Pool::php("www").max_children(2).greeting("live");
    let setup = start(site(), &[&pool]);
    let drover_pid = setup.stack.drover.pid();
    wait_workers(&setup, 2);

    let said = setup
        .ctl
        .ok(&["set", "www", "pm.max_children=8"], &setup.log());
    println!("ctl set www pm.max_children=8: {said}");

    let workers = wait_workers(&setup, 8);
    assert!(
        proc::is_running(drover_pid),
        "drover exited:\n{}",
        setup.log()
    );
    assert_eq!(setup.stack.drover.pid(), drover_pid);
    let config = setup.ctl.ok(&["config", "www"], &setup.log());
    assert!(
        config.lines().any(|l| l.trim() == "max_children = 8"),
        "ctl config www after the change:\n{config}"
    );
    assert_serves(&setup);

    let log_before = setup.stack.drover.log.len();
    for (change, key) in [
        ("pm.max_children=0", "pm.max_children"),
        ("pm.max_chidren=3", "pm.max_chidren"),
    ] {
        let run = setup.ctl.run(&["set", "www", change]);
        println!(
            "ctl set www {change}: exit {:?}, {}",
            run.code,
            run.stderr.trim()
        );
        assert!(
            run.code.is_some_and(|c| c != 0),
            "ctl set www {change} was accepted: {run:#?}"
        );
        assert!(
            run.stderr.contains(key),
            "ctl set www {change}: the message does not name {key}: {run:#?}"
        );
    }
    // Nothing changed: the same 8 workers, the limit still 8, no new generation.
    let status = setup.status("www");
    assert_eq!(number(&status, "total processes"), 8, "{status:#}");
    assert_eq!(status["limits"]["max_children"], 8, "{status:#}");
    let mut after = setup.stack.drover.workers();
    after.sort();
    assert_eq!(
        after,
        workers,
        "the workers changed; drover's log:\n{}",
        setup.log()
    );
    let started: Vec<String> = setup.stack.drover.log.lines()[log_before..]
        .iter()
        .filter(|l| l.contains("started") || l.contains("live change"))
        .cloned()
        .collect();
    assert!(
        started.is_empty(),
        "a refused change started something: {started:#?}"
    );
    assert_serves(&setup);
}

#[test]
fn ctl_workers_adds_and_removes_workers_of_a_static_pool() {
    let pool = Pool::php("www").max_children(2).greeting("live");
    let setup = start(site(), &[&pool]);
    wait_workers(&setup, 2);

    setup.ctl.ok(&["workers", "www", "+2"], &setup.log());
    wait_workers(&setup, 4);
    setup.ctl.ok(&["workers", "www", "-3"], &setup.log());
    wait_workers(&setup, 1);
    assert_serves(&setup);

    let run = setup.ctl.run(&["workers", "www", "-1"]);
    assert!(
        run.code.is_some_and(|c| c != 0),
        "a pool of 0 workers was accepted: {run:#?}"
    );
    let status = setup.status("www");
    assert_eq!(number(&status, "total processes"), 1, "{status:#}");
}

/// The names in `folder`, sorted.
fn listing(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn ctl_set_validates_in_memory_and_writes_nothing_beside_the_configuration() {
    let pool = Pool::php("www").max_children(2).greeting("live");
    let setup = start(site(), &[&pool]);
    wait_workers(&setup, 2);
    // drover.toml's folder and the pool files' folder.
    let folders = [
        setup.stack.site.path().to_path_buf(),
        setup.stack.site.path().join("pools.d"),
    ];
    let before: Vec<Vec<String>> = folders.iter().map(|f| listing(f)).collect();
    let mut watches: Vec<FolderWatch> = folders.iter().map(|f| FolderWatch::new(f)).collect();

    let refused = setup.ctl.run(&["set", "www", "pm.max_children=0"]);
    assert!(
        refused.code.is_some_and(|c| c != 0),
        "ctl set www pm.max_children=0 was accepted: {refused:#?}"
    );
    setup
        .ctl
        .ok(&["set", "www", "pm.max_children=3"], &setup.log());
    wait_workers(&setup, 3);
    assert_serves(&setup);

    for ((folder, watch), before) in folders.iter().zip(&mut watches).zip(&before) {
        assert_eq!(
            watch.changes(),
            Vec::<String>::new(),
            "ctl set touched {}",
            folder.display()
        );
        assert_eq!(&listing(folder), before, "{}", folder.display());
    }
}
