//! The request scope (issue 30, item 1): what a request changes in PHP's engine and its
//! modules is fresh in the next request, as php-fpm's request shutdown and startup leave
//! it. One script (tests/apps/request_state.php) changes one thing of each class and reads
//! them back, on php-fpm 8.2 (the reference), classic drover-php, worker mode and worker
//! mode booted in the zygote, each pool of one process, so that the next request is
//! served by the process the change was made in.

use std::path::Path;

use serde_json::Value;

use super::Embed;
use crate::common::{Drover, FpmPool, Nginx, PhpFpm, Site, http};

/// The keys of the state read (request_state.php's `$read`) that the dirty request changes
/// in its own request and that must be back in the next: the handlers and the last error,
/// the streams layer, the umask, and the state of the modules whose request hooks hold it.
/// `strtok`, `filesize` and `rand` are checked apart.
const FRESH: &[&str] = &[
    "last_error",
    "error_handler",
    "exception_handler",
    "default_context",
    "wrapper_leak",
    "wrapper_glob",
    "umask",
    "json_last_error",
    "intl_error",
    "mb_internal_encoding",
    "mb_substitute_character",
    "mb_detect_order",
    "mb_http_output",
    "mb_regex_encoding",
    "libxml_internal_errors",
    "libxml_errors",
];

/// One request to request_state.php through `nginx`: its state (the JSON before the form)
/// and the form the URL rewriter saw.
fn request(nginx: &Nginx, op: &str, file: &Path) -> (Value, String) {
    let reply = http::get(&nginx.url(&format!(
        "/request_state.php?op={op}&file={}",
        file.display()
    )));
    assert_eq!(reply.status, 200, "{op}: {reply:?}");
    let (state, form) = reply
        .body
        .split_once('\n')
        .unwrap_or_else(|| panic!("{op}: {}", reply.body));
    let state = serde_json::from_str(state).unwrap_or_else(|e| panic!("{op}: {e}: {state}"));
    (state, form.to_owned())
}

/// Reads, dirties, reads again and dirties again on `backend`'s nginx; between the first
/// dirty request and the read after it, the file the dirty request took the size of (so
/// PHP's stat cache holds it) grows. What differs from php-fpm's semantics, one line each.
fn problems(backend: &str, nginx: &Nginx, site: &Site) -> Vec<String> {
    let file = site.write(&format!("{backend}.size"), "0123456789");
    let (before, _) = request(nginx, "read", &file);
    let (dirty, dirty_form) = request(nginx, "dirty", &file);
    std::fs::write(&file, "0123456789abcdefghij").unwrap();
    let (after, after_form) = request(nginx, "read", &file);
    let (_, again_form) = request(nginx, "dirty", &file);

    let mut problems = Vec::new();
    for key in FRESH {
        if dirty[key] == before[key] {
            problems.push(format!(
                "{backend}: {key}: the dirty request did not change it ({})",
                dirty[key]
            ));
        }
        if after[key] != before[key] {
            problems.push(format!(
                "{backend}: {key}: {} at first, {} after a request set {}",
                before[key], after[key], dirty[key]
            ));
        }
    }
    if !dirty_form.contains("secret-c") {
        problems.push(format!(
            "{backend}: output_add_rewrite_var() had no effect: {dirty_form}"
        ));
    }
    if after_form.contains("secret-c") {
        problems.push(format!(
            "{backend}: the last request's output_add_rewrite_var() rewrote this one's form: {after_form}"
        ));
    }
    if !again_form.contains("secret-c") {
        problems.push(format!(
            "{backend}: output_add_rewrite_var() had no effect in a later request: {again_form}"
        ));
    }
    if after["strtok"] != false {
        problems.push(format!(
            "{backend}: strtok() went on with the last request's string: {}",
            after["strtok"]
        ));
    }
    if after["filesize"] != 20 {
        problems.push(format!(
            "{backend}: filesize() of a file that grew to 20 bytes: {} (the last request's stat cache)",
            after["filesize"]
        ));
    }
    if after["rand"] == dirty["next_rand"] {
        problems.push(format!(
            "{backend}: mt_rand() drew {}, the last request's mt_srand(42) sequence",
            after["rand"]
        ));
    }
    problems
}

#[test]
fn what_a_request_changes_in_the_engine_and_its_modules_is_fresh_in_the_next_as_under_php_fpm() {
    let site = Site::new();
    site.script(
        "request_state.php",
        include_str!("../../apps/request_state.php"),
    );
    let worker = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/request_state_worker.php");

    let mut report = {
        let pool = FpmPool::new(&site, "fpm", "");
        let _fpm = PhpFpm::start(&site, std::slice::from_ref(&pool));
        let nginx = Nginx::start(&site, &pool.socket);
        problems("php-fpm", &nginx, &site)
    };
    assert!(
        report.is_empty(),
        "php-fpm, the reference, keeps some of it:\n{}",
        report.join("\n")
    );

    let pools = [
        Embed::new("classic", 1),
        Embed::new("worker", 1).php(&format!("worker = {worker:?}\n")),
        Embed::new("zygote", 1).php(&format!("worker = {worker:?}\nworker_boot = \"zygote\"\n")),
    ];
    let drover = Drover::start(&site, &[&pools[0], &pools[1], &pools[2]]);
    for pool in &pools {
        let nginx = Nginx::start(&site, &site.socket(&pool.name));
        report.extend(problems(&pool.name, &nginx, &site));
    }
    assert!(
        report.is_empty(),
        "state a request changed reached the next:\n{}\ndrover's log:\n{}",
        report.join("\n"),
        drover.log.text()
    );
}
