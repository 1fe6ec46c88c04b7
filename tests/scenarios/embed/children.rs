//! The processes a PHP script starts get the signals a child of php-cgi's script gets
//! (issue 34): drover-php keeps SIGTERM blocked while a script runs and SIGUSR2 on the
//! script's thread, and a child used to inherit both, so that `proc_terminate()` on a
//! `sleep 30` waited until the caller gave up (Symfony Process's and Laravel's queue
//! timeouts). A script starts `sleep 30` with `proc_open()`, terminates it and times how
//! long until `proc_get_status()` says it stopped, and reads the mask and the ignored
//! signals of children started by `proc_open()` and `shell_exec()` (fork and popen), on
//! php-cgi for reference, on drover-php, and in worker mode.

use std::collections::BTreeMap;

use super::Embed;
use crate::common::{PhpPool, PoolFile, Site, Stack, http};

/// Answers `key=value` lines: `took` (seconds from proc_terminate() to a stopped status),
/// then `SigBlk` and `SigIgn` of the `proc_open` and the `shell_exec` child.
const SCRIPT: &str = r#"<?php
function signals(string $status, string $how): string {
    preg_match('/^SigBlk:\s*(\S+)/m', $status, $blocked);
    preg_match('/^SigIgn:\s*(\S+)/m', $status, $ignored);
    return "$how.SigBlk={$blocked[1]}\n$how.SigIgn={$ignored[1]}\n";
}
$child = proc_open(['sleep', '30'], [], $pipes);
$pid = proc_get_status($child)['pid'];
$until = microtime(true) + 5;
while (trim((string) @file_get_contents("/proc/$pid/comm")) !== 'sleep' && microtime(true) < $until) {
    usleep(1000);
}
$out = signals((string) file_get_contents("/proc/$pid/status"), 'proc_open');
$asked = microtime(true);
proc_terminate($child);
while (proc_get_status($child)['running'] && microtime(true) < $asked + 5) {
    usleep(10000);
}
$out .= sprintf("took=%.3f\n", microtime(true) - $asked);
proc_close($child);
// The shell popen() started, as popen() started it (dash clears the mask of the commands
// it forks, not its own).
$out .= signals((string) shell_exec('exec cat /proc/self/status'), 'shell_exec');
echo $out;
"#;

/// A worker script whose every request runs [`SCRIPT`].
const WORKER: &str = r#"<?php
while (frankenphp_handle_request(function () {
    require __DIR__ . '/children.php';
})) {
}
"#;

/// The script's answer on `pool`, as a map.
fn children_of(site: Site, pool: impl PoolFile) -> BTreeMap<String, String> {
    site.script("children.php", SCRIPT);
    let stack = Stack::start(site, pool);
    let reply = http::get(&stack.url("/children.php"));
    assert_eq!(reply.status, 200, "{reply:?}\n{}", stack.drover.log.text());
    reply
        .body
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A `SigIgn` or `SigBlk` value without glibc's own signals, 32 and 33 (the threads'
/// cancel and set-id signals), whose disposition glibc sets as the process's threads need,
/// not the app: a drover-php worker runs a thread, php-cgi none.
fn app_signals(hex: &str) -> u64 {
    u64::from_str_radix(hex, 16).expect("a hex signal set") & !(0b11 << 31)
}

/// The seconds from proc_terminate() to a stopped status in `answer`.
fn took(answer: &BTreeMap<String, String>) -> f64 {
    answer["took"].parse().expect("took=SECONDS")
}

#[test]
fn a_scripts_children_start_with_php_cgis_signals_and_stop_on_proc_terminate() {
    let cgi = children_of(Site::new(), PhpPool::new("www").runtime("cgi"));
    assert!(took(&cgi) < 1.0, "php-cgi: {cgi:?}");
    let classic = children_of(Site::new(), Embed::new("www", 1));
    let site = Site::new();
    site.script("worker.php", WORKER);
    let worker = site.docroot.join("worker.php");
    let worker = children_of(
        site,
        Embed::new("www", 1).php(&format!("worker = {worker:?}\n")),
    );
    eprintln!(
        "proc_terminate() until stopped: php-cgi {:.3} s, drover-php {:.3} s, worker mode {:.3} s",
        took(&cgi),
        took(&classic),
        took(&worker)
    );
    for (mode, answer) in [("classic", &classic), ("worker mode", &worker)] {
        assert!(
            took(answer) < 1.0,
            "drover-php, {mode}: proc_terminate() took {} s: {answer:?}",
            took(answer)
        );
        for key in [
            "proc_open.SigBlk",
            "proc_open.SigIgn",
            "shell_exec.SigBlk",
            "shell_exec.SigIgn",
        ] {
            assert_eq!(
                app_signals(&answer[key]),
                app_signals(&cgi[key]),
                "drover-php, {mode}: {key} differs from php-cgi's: {answer:?} against {cgi:?}"
            );
        }
    }
}
