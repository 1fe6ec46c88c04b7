//! A reload renews, as php-fpm's USR2 and gunicorn's HUP do: a deploy changes the app, not
//! the pool files. A PHP pool whose OPcache never revalidates (`validate_timestamps = 0`,
//! so only a new generation can see a changed script) and a Python pool (a module is
//! imported once) keep serving the old code after the files on disk change; `drover ctl
//! reload --changed` leaves every worker as it was; HUP, USR2 and `drover ctl reload` each
//! give both pools new workers, and they serve the new code.

use nix::sys::signal::Signal;

use super::{Pool, Setup, site, start};
use crate::common::{TIMEOUT, proc, wait_until};

/// How many GETs of each path: enough to reach every worker of a 2-worker pool.
const TRIES: usize = 20;

/// The version a deploy brings.
const V2: &str = "v2-deployed";

/// The PHP script a deploy changes.
fn script(version: &str) -> String {
    format!("<?php echo 'deploy={version}';")
}

/// The Python app with a `/deploy` route answering `deploy=VERSION`.
fn module(version: &str) -> String {
    format!(
        "{}\n\ndef deploy(environ, start_response):\n    start_response(\"200 OK\", TEXT)\n    \
         return [b\"deploy={version}\"]\n\n\nROUTES[\"/deploy\"] = deploy\n",
        include_str!("../../apps/control_app.py")
    )
}

/// Every one of [`TRIES`] GETs of `path` answers `expected`.
fn assert_serves(setup: &Setup, path: &str, expected: &str, when: &str) {
    let bodies: Vec<String> = (0..TRIES).map(|_| setup.get_ok(path)).collect();
    let other: Vec<&String> = bodies.iter().filter(|b| *b != expected).collect();
    assert!(
        other.is_empty(),
        "{when}: GET {path} answered {other:?}, not {expected:?}; drover's log:\n{}",
        setup.log()
    );
}

/// The pids `drover ctl status --full` lists, sorted.
fn workers(setup: &Setup) -> Vec<i32> {
    let mut pids = setup.ctl.listed_workers(&setup.log());
    pids.sort();
    pids
}

/// What renews the pools after the deploy.
#[derive(Debug, Clone, Copy)]
enum Renew {
    Signal(Signal),
    /// `drover ctl reload`, without `--changed`.
    Ctl,
}

#[test]
fn hup_renews_every_worker_and_serves_the_deployed_code_and_reload_changed_does_not() {
    deploy_then(Renew::Signal(Signal::SIGHUP));
}

#[test]
fn usr2_renews_every_worker_and_serves_the_deployed_code() {
    deploy_then(Renew::Signal(Signal::SIGUSR2));
}

#[test]
fn ctl_reload_renews_every_worker_and_serves_the_deployed_code() {
    deploy_then(Renew::Ctl);
}

/// A deploy (the code changes, not the pool files), then `renew`: every worker is new and
/// serves the new code. `drover ctl reload --changed` before it changes nothing.
fn deploy_then(renew: Renew) {
    let site = site();
    site.script("deploy.php", &script("v1"));
    site.write("apps/control_app.py", &module("v1"));
    let php = Pool::php("www").max_children(2).php_ini(
        // Only a new generation (a new OPcache) can see a changed script; a script written
        // just now is cached at once.
        "\"opcache.validate_timestamps\" = 0\n\"opcache.file_update_protection\" = 0\n",
    );
    let python = Pool::python("py").mount("/py").max_children(2);
    let setup = start(site, &[&php, &python]);
    let log = &setup.stack.drover.log;
    assert_serves(&setup, "/deploy.php", "deploy=v1", "at start");
    assert_serves(&setup, "/py/deploy", "deploy=v1", "at start");
    let first = wait_until(TIMEOUT, "4 workers listed", || {
        let pids = workers(&setup);
        (pids.len() == 4).then_some(pids)
    });

    // --changed, nothing changed: no new generation, the same workers.
    let from = log.len();
    let summary = setup.ctl.ok(&["reload", "--changed"], &setup.log());
    assert!(
        summary.contains("www: unchanged") && summary.contains("py: unchanged"),
        "ctl reload --changed with no file changed: {summary:?}"
    );
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    assert_eq!(
        workers(&setup),
        first,
        "ctl reload --changed replaced workers; drover's log:\n{}",
        setup.log()
    );

    // A deploy: the code changes, the pool files do not. The running generation keeps
    // serving the old code (this is what the renewal is for). The new module's size
    // differs, as a real deploy's does: Python trusts a cached .pyc whose source has the
    // same mtime (in seconds) and size.
    setup.stack.site.script("deploy.php", &script(V2));
    setup.stack.site.write("apps/control_app.py", &module(V2));
    assert_serves(&setup, "/deploy.php", "deploy=v1", "deployed, not reloaded");
    assert_serves(&setup, "/py/deploy", "deploy=v1", "deployed, not reloaded");
    assert_eq!(workers(&setup), first);

    let from = log.len();
    match renew {
        Renew::Signal(signal) => setup.stack.drover.signal(signal),
        Renew::Ctl => {
            // ctl prints what the log sums up, and returns before the new workers are up.
            let printed = setup.ctl.ok(&["reload"], &setup.log());
            assert!(
                printed.contains("www: new generation (renewed)")
                    && printed.contains("py: new generation (renewed)"),
                "ctl reload with no file changed printed {printed:?}"
            );
        }
    }
    let summary = log.wait_for(
        from,
        "the reload's summary",
        |l| {
            (l.contains("reload: ") && !l.contains("reload: reading"))
                || l.contains("reload refused")
        },
        TIMEOUT,
    );
    assert!(
        summary.contains("www: new generation (renewed)")
            && summary.contains("py: new generation (renewed)"),
        "{renew:?} with no file changed: {summary:?}"
    );
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    let renewed = wait_until(TIMEOUT, "4 workers, every one new", || {
        let pids = workers(&setup);
        (pids.len() == 4 && pids.iter().all(|p| !first.contains(p))).then_some(pids)
    });
    println!("{renew:?} renewed the workers: {first:?} → {renewed:?}");
    let gone = proc::poll(TIMEOUT, || first.iter().all(|&p| !proc::is_running(p)));
    assert!(
        gone,
        "old workers still run: {:?}; drover's log:\n{}",
        first
            .iter()
            .filter(|&&p| proc::is_running(p))
            .collect::<Vec<_>>(),
        setup.log()
    );
    let expected = format!("deploy={V2}");
    let when = format!("after {renew:?}");
    assert_serves(&setup, "/deploy.php", &expected, &when);
    assert_serves(&setup, "/py/deploy", &expected, &when);
}
