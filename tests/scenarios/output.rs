//! What workers print, and drover's own log: with `decorate_workers_output = false` a line
//! a Python app prints to stdout or a PHP script writes to stderr reaches drover's log byte
//! for byte and whole, even when many workers print long lines at once; by default it is
//! tagged with the pool and the pid; with `log_format = "json"` every line of drover's log
//! is a JSON object, and a reload switches the layout.

use std::thread;

use nix::sys::signal::Signal;

use crate::common::{
    Drover, Location, Nginx, PhpPool, PoolFile, PythonPool, Site, Stack, TIMEOUT, http, python,
};

/// A pool file with `decorate_workers_output = false` in front of the pool's own keys.
struct Undecorated<P>(P);

impl<P: PoolFile> PoolFile for Undecorated<P> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn toml(&self, site: &Site) -> String {
        format!("decorate_workers_output = false\n{}", self.0.toml(site))
    }
}

/// drover serving the WSGI fixture as pool `py` (its file from `pool`), nginx passing `/`.
fn python_stack(pool: &dyn PoolFile) -> Stack {
    let site = Site::new();
    python::install_apps(&site);
    let drover = Drover::start(&site, &[pool]);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("py"))]);
    Stack {
        nginx,
        drover,
        site,
    }
}

/// A PHP site whose `/json.php` writes one JSON line to stderr and answers with it.
fn php_site() -> Site {
    let site = Site::new();
    site.script(
        "json.php",
        r#"<?php
$line = json_encode(['event' => 'marker-php-json', 'pid' => getmypid(), 'text' => "tab\there, \"quoted\""]);
file_put_contents('php://stderr', $line . "\n");
echo $line;"#,
    );
    site
}

/// GET `path`: asserts a 200 and returns the body, the line the app printed.
fn printed(stack: &Stack, path: &str) -> String {
    let reply = http::get(&stack.url(path));
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    assert!(reply.body.starts_with('{'), "not a JSON line: {reply:?}");
    reply.body
}

#[test]
fn an_undecorated_python_line_arrives_byte_for_byte() {
    let stack = python_stack(&Undecorated(PythonPool::wsgi("py")));
    let line = printed(&stack, "/print-json?id=one");
    let found = stack.drover.log.wait_for_line("\"id\": \"one\"", TIMEOUT);
    assert_eq!(
        found, line,
        "the log line differs from what the app printed"
    );
}

#[test]
fn an_undecorated_php_line_arrives_byte_for_byte() {
    let stack = Stack::start(php_site(), Undecorated(PhpPool::new("www")));
    let line = printed(&stack, "/json.php");
    let found = stack.drover.log.wait_for_line("marker-php-json", TIMEOUT);
    assert_eq!(
        found, line,
        "the log line differs from what the script wrote"
    );
}

#[test]
fn by_default_a_printed_line_is_tagged_with_pool_and_pid() {
    let stack = python_stack(&PythonPool::wsgi("py"));
    let line = printed(&stack, "/print-json?id=two");
    let pid: serde_json::Value = serde_json::from_str(&line).unwrap();
    let found = stack.drover.log.wait_for_line("\"id\": \"two\"", TIMEOUT);
    let tagged = format!("pool py: worker {}: {line}", pid["pid"]);
    assert!(
        found.ends_with(&tagged),
        "line {found:?}, expected it to end with {tagged:?}"
    );
}

#[test]
fn undecorated_long_lines_from_many_workers_stay_whole() {
    let stack = python_stack(&Undecorated(PythonPool::wsgi("py").max_children(4)));
    let url = |i: usize| stack.url(&format!("/print-json?id=long-{i}&pad=6000"));
    let urls: Vec<String> = (0..40).map(url).collect();
    let bodies: Vec<String> = thread::scope(|s| {
        let handles: Vec<_> = urls
            .chunks(10)
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|u| {
                            let reply = http::get(u);
                            assert_eq!(reply.status, 200, "reply: {reply:?}");
                            reply.body
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let log = &stack.drover.log;
    let lines = log.wait_for_lines(
        0,
        "40 long lines",
        |l| l.contains("\"id\": \"long-"),
        40,
        TIMEOUT,
    );
    for body in &bodies {
        assert!(
            lines.contains(body),
            "a printed line is missing or torn: {}…",
            &body[..80]
        );
    }
}

#[test]
fn a_json_log_has_one_object_per_line_and_a_reload_switches_it_back() {
    let site = php_site();
    let pool = PhpPool::new("www");
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\nlog_format = \"json\"\n",
    );
    site.write("pools.d/www.toml", &pool.toml(&site));
    let drover = Drover::spawn(&site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let stack = Stack {
        nginx,
        drover,
        site,
    };
    let line = printed(&stack, "/json.php");
    let log = &stack.drover.log;
    let found = log.wait_for_line("marker-php-json", TIMEOUT);
    let record: serde_json::Value = serde_json::from_str(&found).unwrap();
    assert_eq!(record["message"], line.as_str(), "{found}");
    assert_eq!(record["pool"], "www", "{found}");
    assert!(record["pid"].as_i64().is_some_and(|p| p > 0), "{found}");

    let mut ready = false;
    for l in log.lines() {
        let record: serde_json::Value =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
        for key in ["time", "level", "message"] {
            assert!(record[key].is_string(), "no {key}: {l}");
        }
        ready |= record["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("ready:"));
    }
    assert!(ready, "no ready: message in {}", log.text());

    stack.site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\nlog_format = \"text\"\n",
    );
    stack.drover.signal(Signal::SIGHUP);
    let switched = log.wait_for_line("log_format: text", TIMEOUT);
    assert!(!switched.starts_with('{'), "still JSON: {switched}");
}

/// A WSGI app whose `/flood?s=S` writes batches of lines to stderr for S seconds and
/// answers how many, and whose `/mark?id=ID` writes one marker line.
const FLOOD_APP: &str = r#"
import os, time

def application(environ, start_response):
    query = dict(p.split("=", 1) for p in environ["QUERY_STRING"].split("&") if "=" in p)
    if environ["PATH_INFO"] == "/flood":
        batch = ("flood " + "x" * 90 + "\n").encode() * 1000
        end, written = time.monotonic() + float(query["s"]), 0
        while time.monotonic() < end:
            os.write(2, batch)
            written += 1000
        body = str(written)
    else:
        body = "quiet-marker-" + query["id"]
        os.write(2, (body + "\n").encode())
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body.encode()]
"#;

/// The master's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Issue 34: a pool writing to stderr in a loop took the root master from 3 MiB to
/// 1,776 MiB, and another pool's lines were lost meanwhile. The master keeps at most a
/// quota of each pool's lines waiting: its memory stays bounded, the flooding pool's
/// excess is counted in a warning, and every line of the quiet pool is logged.
#[test]
fn a_pool_flooding_its_output_leaves_the_master_bounded_and_other_pools_logged() {
    let site = Site::new();
    site.write("apps/flood_app.py", FLOOD_APP);
    let flood = PythonPool::new("flood", "flood_app:application").max_children(1);
    let quiet = PythonPool::new("quiet", "flood_app:application").max_children(1);
    let log_file = site.path().join("drover.log");
    site.write(
        "drover.toml",
        &format!(
            "error_log = \"{}\"\nlog_level = \"info\"\n",
            log_file.display()
        ),
    );
    for pool in [&flood, &quiet] {
        site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(&site));
    }
    let drover = Drover::spawn(&site);
    let log_text = || std::fs::read_to_string(&log_file).unwrap_or_default();
    crate::common::wait_until(TIMEOUT, "drover's ready: line", || {
        log_text().contains("ready:").then_some(())
    });
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location::prefix("/flood", &site.socket("flood")),
            Location::prefix("/mark", &site.socket("quiet")),
        ],
    );
    let before = peak_rss_kib(drover.pid());
    let written: u64 = thread::scope(|s| {
        let flooding = s.spawn(|| {
            let reply = http::get(&nginx.url("/flood?s=3"));
            assert_eq!(reply.status, 200, "{reply:?}");
            reply.body.trim().parse::<u64>().unwrap()
        });
        for id in 0..20 {
            let reply = http::get(&nginx.url(&format!("/mark?id={id}")));
            assert_eq!(reply.status, 200, "{reply:?}");
            thread::sleep(std::time::Duration::from_millis(100));
        }
        flooding.join().unwrap()
    });
    // Every marker is logged, and every flood line logged or counted, once the log caught up.
    let tally = |text: &str| {
        let logged = text.matches("flood xxx").count() as u64;
        let dropped: u64 = text
            .lines()
            .filter_map(|l| {
                l.split("pool flood: ")
                    .nth(1)?
                    .split_once(" lines of output dropped")
            })
            .filter_map(|(n, _)| n.parse::<u64>().ok())
            .sum();
        (logged, dropped)
    };
    let mut text = String::new();
    crate::common::proc::poll(TIMEOUT, || {
        text = log_text();
        let (logged, dropped) = tally(&text);
        logged + dropped == written
            && (0..20).all(|id| text.contains(&format!("quiet-marker-{id}\n")))
    });
    let (logged, dropped) = tally(&text);
    // The peak over the flood and the log's catching up.
    let peak = peak_rss_kib(drover.pid());
    let markers = (0..20)
        .filter(|id| text.contains(&format!("quiet-marker-{id}\n")))
        .count();
    eprintln!(
        "flood: {written} lines written, {logged} logged, {dropped} counted dropped; \
         the quiet pool's markers logged: {markers} of 20; \
         master peak RSS {before} KiB before, {peak} KiB after"
    );
    for id in 0..20 {
        assert!(
            text.contains(&format!("quiet-marker-{id}\n")),
            "the quiet pool's line {id} is missing"
        );
    }
    assert!(written > 100_000, "the flood wrote only {written} lines");
    assert!(
        peak < before + 64 * 1024,
        "the master's peak RSS grew from {before} KiB to {peak} KiB under the flood"
    );
    assert_eq!(
        logged + dropped,
        written,
        "lines neither logged nor counted as dropped"
    );
}

/// A WSGI app that sleeps 1.5 s (30 s on a path under `/long`), then answers its
/// `PATH_INFO`.
const SLOW_APP: &str = r#"
import time

def application(environ, start_response):
    time.sleep(30 if environ["PATH_INFO"].startswith("/long") else 1.5)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [environ["PATH_INFO"].encode("latin-1")]
"#;

/// Issue 34: the slow-request and kill lines and the slowlog printed the URI nginx had
/// decoded, so `/x%0A<a line>` wrote a log line of the client's choosing, and the access
/// log's `%u` the decoded Basic-auth user. What a request brings is shown with its control
/// characters escaped (`\x0A`): the forged text stays inside the slow-request line and the
/// kill line in the error log, the slowlog's entry and the access log's line.
#[test]
fn a_uri_with_an_encoded_line_break_cannot_forge_a_log_line() {
    let site = Site::new();
    site.write("apps/slow_app.py", SLOW_APP);
    let slowlog = site.path().join("py.slow");
    let access = site.path().join("py.access");
    let pool = PythonPool::new("py", "slow_app:application")
        .max_children(1)
        .key("request_slowlog_timeout", "\"1s\"")
        .key("request_terminate_timeout", "\"3s\"")
        .key("slowlog", &format!("\"{}\"", slowlog.display()))
        .key("access_log", &format!("\"{}\"", access.display()))
        .key("access_format", r#""%u \"%m %r%Q%q\" %s""#);
    let drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("py"))]);

    let forged = "pool%20py:%20worker%201:%20FORGED";
    // A Basic-auth user whose name ends the line and writes an access line of its own:
    // `x\n127.0.0.1 admin "GET /FORGED-USER" 200` (password `pw`), base64.
    let user = "eAoxMjcuMC4wLjEgYWRtaW4gIkdFVCAvRk9SR0VELVVTRVIiIDIwMDpwdw==";
    let reply = http::get_with(
        &nginx.url(&format!("/x%0A{forged}?q=%0D%0AFORGED-TOO")),
        &[("Authorization", &format!("Basic {user}"))],
    );

    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body, "/x\npool py: worker 1: FORGED",
        "the app gets the URI as sent"
    );
    let line = drover.log.wait_for_line("slow request", TIMEOUT);
    assert!(
        line.contains("/x\\x0Apool py: worker 1: FORGED"),
        "the slow line does not show the escaped URI: {line}"
    );
    let entry = crate::common::wait_until(TIMEOUT, "the slowlog entry", || {
        let text = std::fs::read_to_string(&slowlog).ok()?;
        text.contains("request:").then_some(text)
    });
    let line = crate::common::wait_until(TIMEOUT, "the access log's line", || {
        let text = std::fs::read_to_string(&access).ok()?;
        text.contains("FORGED-USER").then_some(text)
    });
    assert_eq!(
        line,
        format!(
            "x\\x0A127.0.0.1 admin \"GET /FORGED-USER\" 200 \
         \"GET /x%0A{forged}?q=%0D%0AFORGED-TOO\" 200\n"
        ),
        "the access log's line (the URI as the client sent it, nginx's $request_uri)"
    );
    // A request the master ends (request_terminate_timeout): its kill line too. A Python
    // worker is asked to abort the request first (a 500), a PHP one may be killed (a 502).
    let killed = http::get(&nginx.url(&format!("/long%0A{forged}-KILLED")));
    assert!(matches!(killed.status, 500 | 502 | 504), "{killed:?}");
    let line = drover.log.wait_for_line("killing worker", TIMEOUT);
    assert!(
        line.contains("/long\\x0Apool py: worker 1: FORGED-KILLED"),
        "the kill line does not show the escaped URI: {line}"
    );
    let access_text = std::fs::read_to_string(&access).unwrap_or_default();
    // No line of any log starts with what the client wrote after a line break.
    let forgeries = ["pool py: worker 1: FORGED", "FORGED-TOO", "127.0.0.1 admin"];
    for (what, text) in [
        ("error log", drover.log.text()),
        ("slowlog", entry),
        ("access log", access_text),
    ] {
        for l in text.lines() {
            assert!(
                !forgeries.iter().any(|f| l.starts_with(f)),
                "a line of the client's in the {what}: {l:?}"
            );
        }
    }
}
