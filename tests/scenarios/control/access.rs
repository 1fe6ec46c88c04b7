//! The access log (`access_log`), written by the workers of a Python and an embedded PHP
//! pool: each line says what the client saw (status, a 404 and a 500 included, method, URI
//! with its query, a request header); `json` lines parse; under 8 concurrent clients every
//! line is whole and none is missing; `access_suppress_path` leaves the health check out;
//! after logrotate's rename and USR1 the next lines land in a new file at the path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use super::{Pool, Setup, site, start, start_sized};
use crate::common::{TIMEOUT, default_php_runtime, http, wait_until};

const FORMAT: &str = r#"access_format = "%R %m %r%Q%q %s \"%{User-Agent}i\" %n %{micro}d""#;

/// A pool whose access log is `<site>/NAME.access`, health checks at `/health` suppressed.
fn logged(pool: Pool, site: &crate::common::Site, format: &str) -> (Pool, PathBuf) {
    let file = site.path().join(format!("{}.access", pool.name));
    let pool = pool
        .top(&format!("access_log = \"{}\"", file.display()))
        .top(format)
        .top("access_suppress_path = [\"/health\", \"/health.php\"]");
    (pool, file)
}

/// The file's lines once it holds at least `n` (the worker writes a line after it sent the
/// response, so the client may see the response first).
fn lines_once(setup: &Setup, file: &Path, n: usize) -> Vec<String> {
    let lines = wait_until(TIMEOUT, &format!("{n} lines in {}", file.display()), || {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        (lines.len() >= n).then_some(lines)
    });
    assert_eq!(lines.len(), n, "{lines:#?}; drover's log:\n{}", setup.log());
    lines
}

/// GET `path` with a User-Agent, asserting the status the client sees.
fn get(setup: &Setup, path: &str, status: u16) {
    let reply = http::get_with(&setup.stack.url(path), &[("User-Agent", "access-test/1")]);
    assert_eq!(reply.status, status, "GET {path}: {reply:?}");
}

/// Sends 200, suppressed, 404 and 500 requests; the lines of the three logged ones, in
/// order (one worker serves them one after another).
fn check_lines(setup: &Setup, file: &Path, pool: &str, requests: [(&str, &str, u16); 4]) {
    for (path, _, status) in requests {
        get(setup, path, status);
    }
    let lines = lines_once(setup, file, 3);
    let logged: Vec<_> = requests.iter().filter(|r| !r.1.is_empty()).collect();
    for (line, (path, uri, status)) in lines.iter().zip(logged) {
        let expected = format!("127.0.0.1 GET {uri} {status} \"access-test/1\" {pool} ");
        assert!(
            line.starts_with(&expected),
            "GET {path}: {line:?} should start with {expected:?}"
        );
        let micros = &line[expected.len()..];
        assert!(micros.parse::<u64>().is_ok(), "a duration in µs: {line:?}");
    }
}

#[test]
fn a_python_pool_logs_each_request_as_the_client_saw_it() {
    let site = site();
    let (pool, file) = logged(Pool::python("py"), &site, FORMAT);
    let setup = start(site, &[&pool]);
    check_lines(
        &setup,
        &file,
        "py",
        [
            ("/greeting?x=1&y=2", "/greeting?x=1&y=2", 200),
            ("/health", "", 404),
            ("/nothing-here", "/nothing-here", 404),
            ("/fail", "/fail", 500),
        ],
    );
}

#[test]
fn an_embedded_php_pool_logs_each_request_as_the_client_saw_it() {
    if default_php_runtime() != "embed" {
        println!("skipped: php-cgi pools have no access log (refused at load)");
        return;
    }
    let site = site();
    site.script("fail.php", "<?php http_response_code(500); echo 'failed';");
    site.script("health.php", "<?php echo 'ok';");
    let (pool, file) = logged(Pool::php("www"), &site, FORMAT);
    let setup = start(site, &[&pool]);
    check_lines(
        &setup,
        &file,
        "www",
        [
            ("/greeting.php?x=1", "/greeting.php?x=1", 200),
            ("/health.php", "", 200),
            ("/missing.php", "/missing.php", 404),
            ("/fail.php", "/fail.php", 500),
        ],
    );
}

#[test]
fn json_lines_parse_with_the_request_in_them() {
    let site = site();
    let (pool, file) = logged(Pool::python("py"), &site, "access_format = \"json\"");
    let setup = start(site, &[&pool]);
    get(&setup, "/greeting?x=1", 200);
    get(&setup, "/fail", 500);
    let lines = lines_once(&setup, &file, 2);
    let objects: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let fields = |v: &serde_json::Value| {
        (
            v["method"].as_str().map(str::to_owned),
            v["uri"].as_str().map(str::to_owned),
            v["query"].as_str().map(str::to_owned),
            v["status"].as_u64(),
            v["user_agent"].as_str().map(str::to_owned),
            v["pool"].as_str().map(str::to_owned),
        )
    };
    let s = |x: &str| Some(x.to_owned());
    assert_eq!(
        fields(&objects[0]),
        (
            s("GET"),
            s("/greeting"),
            s("x=1"),
            Some(200),
            s("access-test/1"),
            s("py")
        )
    );
    assert_eq!(
        fields(&objects[1]),
        (
            s("GET"),
            s("/fail"),
            s(""),
            Some(500),
            s("access-test/1"),
            s("py")
        )
    );
    assert!(objects[0]["duration"].as_f64().is_some(), "{}", lines[0]);
}

#[test]
fn under_load_every_line_is_whole_and_none_is_missing() {
    const CLIENTS: usize = 8;
    const EACH: usize = 50;
    let site = site();
    let (pool, file) = logged(Pool::python("py").max_children(4), &site, FORMAT);
    let setup = start_sized(site, &[&pool], 64);
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let setup = &setup;
            scope.spawn(move || {
                for i in 0..EACH {
                    get(setup, &format!("/greeting?n={client}-{i}"), 200);
                }
            });
        }
    });
    let lines = lines_once(&setup, &file, CLIENTS * EACH);
    let mut seen = BTreeSet::new();
    for line in &lines {
        let rest = line
            .strip_prefix("127.0.0.1 GET /greeting?n=")
            .unwrap_or_else(|| panic!("not a whole line: {line:?}"));
        let (n, rest) = rest.split_once(' ').unwrap();
        assert!(
            rest.starts_with("200 \"access-test/1\" py ")
                && rest["200 \"access-test/1\" py ".len()..]
                    .parse::<u64>()
                    .is_ok(),
            "not a whole line: {line:?}"
        );
        assert!(seen.insert(n.to_owned()), "{n} logged twice");
    }
    assert_eq!(seen.len(), CLIENTS * EACH);
}

#[test]
fn after_logrotate_renames_the_file_usr1_makes_the_workers_write_a_new_one() {
    let site = site();
    let (pool, file) = logged(Pool::python("py").max_children(2), &site, FORMAT);
    let setup = start(site, &[&pool]);
    get(&setup, "/greeting?before=1", 200);
    lines_once(&setup, &file, 1);
    let rotated = file.with_extension("access.1");
    std::fs::rename(&file, &rotated).unwrap();
    setup.stack.drover.signal(Signal::SIGUSR1);
    // The master bumps the generation when it takes the signal: until then a line may
    // still go to the renamed file. Requests go on until the new file appears.
    let mut after = 0;
    wait_until(TIMEOUT, "a new access log at the path", || {
        after += 1;
        get(&setup, &format!("/greeting?after={after}"), 200);
        let text = std::fs::read_to_string(&file).ok()?;
        text.contains(&format!("after={after} ")).then_some(())
    });
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("?before=1 200"), "{old}");
    assert!(!old.contains(&format!("after={after} ")), "{old}");
    let new = std::fs::read_to_string(&file).unwrap();
    assert!(!new.contains("before=1"), "{new}");
    // Both workers follow: every later request lands in the new file.
    for i in 0..6 {
        get(&setup, &format!("/greeting?later={i}"), 200);
    }
    let lines = wait_until(TIMEOUT, "the later lines", || {
        let text = std::fs::read_to_string(&file).ok()?;
        (text.matches("later=").count() == 6).then_some(text)
    });
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(!old.contains("later="), "old: {old}\nnew: {lines}");
}
