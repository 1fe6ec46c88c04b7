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
