//! The access log (`access_log`), written by the workers of a Python and an embedded PHP
//! pool: each line says what the client saw (status, a 404 and a 500 included, method, URI
//! with its query, a request header); `json` lines parse; under 8 concurrent clients every
//! line is whole and none is missing; `access_suppress_path` leaves out only a successful
//! GET without query or body (a failing health check, a POST or a query is logged); after
//! logrotate's rename and USR1 the pool's new generation writes a new file at the path, the
//! old workers' last lines going to the renamed one; php-fpm's own
//! sample format gives its fields for a PHP request; `%{Name}o` shows a response header and
//! `%T` the end of the request.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use super::{Pool, Setup, site, start, start_sized};
use crate::common::{TIMEOUT, default_php_runtime, http, wait_until};

const FORMAT: &str = r#"access_format = "%R %m %r%Q%q %s \"%{User-Agent}i\" %n %{micro}d""#;

/// php-fpm's sample `access.format` (the one its `www.conf` suggests), in TOML.
const PHP_FPM_SAMPLE: &str =
    r#"access_format = "%R - %u %t \"%m %r%Q%q\" %s %f %{mili}d %{kilo}M %C%%""#;

/// Whether this run's PHP pools have an access log (drover-php; php-cgi's is refused).
fn php_logs() -> bool {
    let embed = default_php_runtime() == "embed";
    if !embed {
        println!("skipped: php-cgi pools have no access log (refused at load)");
    }
    embed
}

/// A pool whose access log is `<site>/NAME.access`; successful health checks (`/health`,
/// `/health.php`) and a bare `/greeting` are suppressed.
fn logged(pool: Pool, site: &crate::common::Site, format: &str) -> (Pool, PathBuf) {
    let file = site.path().join(format!("{}.access", pool.name));
    let pool = pool
        .top(&format!("access_log = \"{}\"", file.display()))
        .top(format)
        .top("access_suppress_path = [\"/health\", \"/health.php\", \"/greeting\"]");
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

const AGENT: (&str, &str) = ("User-Agent", "access-test/1");

/// GET `path` with a User-Agent, asserting the status the client sees.
fn get(setup: &Setup, path: &str, status: u16) {
    let reply = http::get_with(&setup.stack.url(path), &[AGENT]);
    assert_eq!(reply.status, status, "GET {path}: {reply:?}");
}

/// One request of [`check_lines`]: method, path, the URI its line shows ("" when it is
/// suppressed), the status.
type Sent<'a> = (&'a str, &'a str, &'a str, u16);

/// Sends `requests`; the lines of the logged ones, in order (one worker serves them one
/// after another), show what the client saw.
fn check_lines(setup: &Setup, file: &Path, pool: &str, requests: &[Sent<'_>]) {
    for (method, path, _, status) in requests {
        if *method == "POST" {
            let url = setup.stack.url(path);
            let reply = http::post_with(&url, &[AGENT], "text/plain", b"a body");
            assert_eq!(reply.status, *status, "POST {path}: {reply:?}");
        } else {
            get(setup, path, *status);
        }
    }
    let logged: Vec<_> = requests.iter().filter(|r| !r.2.is_empty()).collect();
    let lines = lines_once(setup, file, logged.len());
    for (line, (method, path, uri, status)) in lines.iter().zip(logged) {
        let expected = format!("127.0.0.1 {method} {uri} {status} \"access-test/1\" {pool} ");
        assert!(
            line.starts_with(&expected),
            "{method} {path}: {line:?} should start with {expected:?}"
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
        &[
            ("GET", "/greeting?x=1&y=2", "/greeting?x=1&y=2", 200),
            // A successful GET of a suppressed path, as a health check: left out.
            ("GET", "/greeting", "", 200),
            // On the same path, a request with a body, and one with a query: logged.
            ("POST", "/greeting", "/greeting", 200),
            ("GET", "/greeting?x=1", "/greeting?x=1", 200),
            // A failing health check is logged (php-fpm 8.2 logs it too).
            ("GET", "/health", "/health", 404),
            ("GET", "/nothing-here", "/nothing-here", 404),
            ("GET", "/fail", "/fail", 500),
        ],
    );
}

#[test]
fn an_embedded_php_pool_logs_each_request_as_the_client_saw_it() {
    if !php_logs() {
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
        &[
            ("GET", "/greeting.php?x=1", "/greeting.php?x=1", 200),
            ("GET", "/health.php", "", 200),
            ("GET", "/health.php?full=1", "/health.php?full=1", 200),
            ("POST", "/health.php", "/health.php", 200),
            ("GET", "/missing.php", "/missing.php", 404),
            ("GET", "/fail.php", "/fail.php", 500),
        ],
    );
}

/// `work.php`: sets a response header, holds 4 MiB, and spins for 30 ms.
const WORK_PHP: &str = "<?php header('X-Request-Id: req-42');
$s = str_repeat('x', 4 << 20);
$t = microtime(true);
while (microtime(true) - $t < 0.03) {}
echo strlen($s);";

#[test]
fn php_fpms_sample_format_gives_its_fields_for_a_php_request() {
    if !php_logs() {
        return;
    }
    let site = site();
    site.script("work.php", WORK_PHP);
    let (pool, file) = logged(Pool::php("www"), &site, PHP_FPM_SAMPLE);
    let setup = start(site, &[&pool]);
    // alice:secret
    let reply = http::get_with(
        &setup.stack.url("/work.php?x=1"),
        &[("Authorization", "Basic YWxpY2U6c2VjcmV0")],
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let line = lines_once(&setup, &file, 1).remove(0);
    // 127.0.0.1 - alice 01/Dec/2026:04:30:00 +0000 "GET /work.php?x=1" 200 /…/work.php
    // 31.204 4231 97.31%
    let rest = line
        .strip_prefix("127.0.0.1 - alice ")
        .unwrap_or_else(|| panic!("%R - %u: {line:?}"));
    let (time, rest) = rest
        .split_once(" \"GET /work.php?x=1\" 200 ")
        .unwrap_or_else(|| panic!("\"%m %r%Q%q\" %s: {line:?}"));
    assert_eq!(
        (time.matches('/').count(), time.matches(':').count()),
        (2, 3),
        "%t: {line:?}"
    );
    let fields: Vec<&str> = rest.split(' ').collect();
    let [script, millis, kilobytes, cpu] = fields[..] else {
        panic!("%f %{{mili}}d %{{kilo}}M %C%%: {line:?}");
    };
    assert!(script.ends_with("/work.php"), "%f: {line:?}");
    assert_eq!(
        millis.split('.').nth(1).map(str::len),
        Some(3),
        "%{{mili}}d: {line:?}"
    );
    let millis: f64 = millis.parse().unwrap();
    assert!(
        millis >= 30.0,
        "%{{mili}}d, the script spun 30 ms: {line:?}"
    );
    let kilobytes: u64 = kilobytes
        .parse()
        .unwrap_or_else(|_| panic!("%{{kilo}}M: {line:?}"));
    assert!(
        (4096..1024 * 1024).contains(&kilobytes),
        "%{{kilo}}M, 4 MiB held: {line:?}"
    );
    let cpu = cpu
        .strip_suffix('%')
        .unwrap_or_else(|| panic!("%%: {line:?}"));
    assert_eq!(cpu.split('.').nth(1).map(str::len), Some(2), "%C: {line:?}");
    let cpu: f64 = cpu.parse().unwrap();
    assert!(cpu > 0.0 && cpu <= 100.5, "%C, a spinning script: {line:?}");
}

/// `%{Name}o`, `%l`, `%p`/`%P` and `%t`/`%T`, from the line of one request.
const HEADERS_FORMAT: &str =
    r#"access_format = "%{X-Request-Id}o|%{Content-Type}o|%{X-Absent}o|%l|%p|%P|%{%s}t|%{%s}T""#;

/// The fields of a [`HEADERS_FORMAT`] line; asserts `%P` is `%p`'s parent.
fn header_fields(line: &str) -> Vec<String> {
    let fields: Vec<String> = line.split('|').map(str::to_owned).collect();
    assert_eq!(fields.len(), 8, "{line:?}");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", fields[4])).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let ppid = after_name.split(' ').nth(1).unwrap();
    assert_eq!(fields[5], ppid, "%P is the worker's parent: {line:?}");
    fields
}

#[test]
fn a_php_line_shows_a_response_header_and_when_the_request_ended() {
    if !php_logs() {
        return;
    }
    let site = site();
    site.script(
        "work.php",
        "<?php header('X-Request-Id: req-42'); usleep(1200000); echo 'done';",
    );
    let (pool, file) = logged(Pool::php("www"), &site, HEADERS_FORMAT);
    let setup = start(site, &[&pool]);
    get(&setup, "/work.php", 200);
    let line = lines_once(&setup, &file, 1).remove(0);
    let fields = header_fields(&line);
    // PHP's default header is `Content-type`: matched without regard to case.
    assert_eq!(
        fields[..4],
        ["req-42", "text/html; charset=UTF-8", "-", "0"],
        "{line:?}"
    );
    let (start, end): (u64, u64) = (fields[6].parse().unwrap(), fields[7].parse().unwrap());
    assert!(
        (1..=2).contains(&(end - start)),
        "%t is the start, %T the end of a 1.2 s request: {line:?}"
    );
}

#[test]
fn a_python_line_shows_a_response_header_and_the_content_length() {
    let site = site();
    let (pool, file) = logged(Pool::python("py"), &site, HEADERS_FORMAT);
    let setup = start(site, &[&pool]);
    let reply = http::post(&setup.stack.url("/greeting"), "text/plain", b"12345");
    assert_eq!(reply.status, 200, "{reply:?}");
    let line = lines_once(&setup, &file, 1).remove(0);
    let fields = header_fields(&line);
    assert_eq!(
        fields[..4],
        ["-", "text/plain; charset=utf-8", "-", "5"],
        "{line:?}"
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

/// 8 clients send 50 requests each to `prefix` + a number: every line is whole, none
/// missing.
fn under_load(pool: Pool, prefix: &str, name: &str) {
    const CLIENTS: usize = 8;
    const EACH: usize = 50;
    let site = site();
    let (pool, file) = logged(pool.max_children(4), &site, FORMAT);
    let setup = start_sized(site, &[&pool], 64);
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let setup = &setup;
            scope.spawn(move || {
                for i in 0..EACH {
                    get(setup, &format!("{prefix}{client}-{i}"), 200);
                }
            });
        }
    });
    let lines = lines_once(&setup, &file, CLIENTS * EACH);
    let mut seen = BTreeSet::new();
    let tail = format!("200 \"access-test/1\" {name} ");
    for line in &lines {
        let rest = line
            .strip_prefix(&format!("127.0.0.1 GET {prefix}"))
            .unwrap_or_else(|| panic!("not a whole line: {line:?}"));
        let (n, rest) = rest.split_once(' ').unwrap();
        assert!(
            rest.starts_with(&tail) && rest[tail.len()..].parse::<u64>().is_ok(),
            "not a whole line: {line:?}"
        );
        assert!(seen.insert(n.to_owned()), "{n} logged twice");
    }
    assert_eq!(seen.len(), CLIENTS * EACH);
}

#[test]
fn under_load_every_line_is_whole_and_none_is_missing() {
    under_load(Pool::python("py"), "/greeting?n=", "py");
}

#[test]
fn under_load_every_line_of_an_embedded_php_pool_is_whole_and_none_is_missing() {
    if php_logs() {
        under_load(Pool::php("www"), "/greeting.php?n=", "www");
    }
}

/// Renames the access log and sends USR1: the pool's new generation writes a new file at
/// the path; the old one keeps what came before, and the old workers' last lines.
fn logrotate(pool: Pool, path: &str) {
    let site = site();
    let (pool, file) = logged(pool.max_children(2), &site, FORMAT);
    let setup = start(site, &[&pool]);
    get(&setup, &format!("{path}?before=1"), 200);
    lines_once(&setup, &file, 1);
    let old_workers = setup.ctl.listed_workers(&setup.log());
    let rotated = file.with_extension("access.1");
    std::fs::rename(&file, &rotated).unwrap();
    setup.stack.drover.signal(Signal::SIGUSR1);
    // The old workers serve until the new generation is up, writing to the renamed file.
    // Requests go on until the new file has one.
    let mut after = 0;
    wait_until(TIMEOUT, "a new access log at the path", || {
        after += 1;
        get(&setup, &format!("{path}?after={after}"), 200);
        let text = std::fs::read_to_string(&file).ok()?;
        text.contains(&format!("after={after} ")).then_some(())
    });
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("?before=1 200"), "{old}");
    assert!(!old.contains(&format!("after={after} ")), "{old}");
    let new = std::fs::read_to_string(&file).unwrap();
    assert!(!new.contains("before=1"), "{new}");
    setup
        .stack
        .drover
        .log
        .wait_for_line("was moved: a new generation writes to a new file", TIMEOUT);
    wait_until(TIMEOUT, "the old workers to exit", || {
        (!old_workers
            .iter()
            .any(|&pid| crate::common::proc::is_running(pid)))
        .then_some(())
    });
    // Once they are gone, every later request lands in the new file.
    for i in 0..6 {
        get(&setup, &format!("{path}?later={i}"), 200);
    }
    let lines = wait_until(TIMEOUT, "the later lines", || {
        let text = std::fs::read_to_string(&file).ok()?;
        (text.matches("later=").count() == 6).then_some(text)
    });
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(!old.contains("later="), "old: {old}\nnew: {lines}");
}

#[test]
fn after_logrotate_renames_the_file_usr1_gives_the_python_pool_a_new_file() {
    logrotate(Pool::python("py"), "/greeting");
}

#[test]
fn after_logrotate_usr1_gives_the_embedded_php_pool_a_new_file() {
    if php_logs() {
        logrotate(Pool::php("www"), "/greeting.php");
    }
}
