//! The slowlog: a request three functions deep in a 3 s sleep, with
//! `request_slowlog_timeout = "1s"`, gets exactly one entry. Its header names the pool, the
//! worker, the method, the URI with its query and the script; its stack, innermost first,
//! names level3, level2 and level1 with the file and the line each one is at. PHP (read
//! from the php-cgi worker's memory) and Python (faulthandler), in the text format and in
//! `slowlog_format = "json"`, which must parse as JSON with the same content.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{Pool, Runtime, Setup, line_of, number, site, start};
use crate::common::{TIMEOUT, wait_until};

const SLOW_PHP: &str = include_str!("../../apps/slow.php");
const CONTROL_APP: &str = include_str!("../../apps/control_app.py");

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Text,
    Json,
}

/// One slowlog entry, from either format.
#[derive(Debug)]
struct Entry {
    /// The text format's first line, or the JSON object as written.
    raw: String,
    time: SystemTime,
    pool: String,
    pid: i32,
    method: String,
    /// URI, then `?query` when there is one.
    target: String,
    script: String,
    elapsed: f64,
    frames: Vec<String>,
}

/// php-fpm's layout: a blank line, `[TIME] [pool P] pid N`, `request: M TARGET (Ss)`,
/// `script_filename = S`, then one frame a line.
fn parse_text(file: &str) -> Vec<Entry> {
    file.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            text_entry(block)
                .unwrap_or_else(|| panic!("not a slowlog entry: {block:?} in the file:\n{file}"))
        })
        .collect()
}

fn text_entry(block: &str) -> Option<Entry> {
    let lines: Vec<&str> = block.lines().filter(|l| !l.is_empty()).collect();
    let [first, request, script, rest @ ..] = lines.as_slice() else {
        return None;
    };
    // A request id's line, from a worker that gives one (docs/logs.md, "Request ids").
    let frames = match rest {
        [id, frames @ ..] if id.starts_with("request_id = ") => frames,
        frames => frames,
    };
    let (time, rest) = first.strip_prefix('[')?.split_once("] [pool ")?;
    let (pool, pid) = rest.split_once("] pid ")?;
    let (method, rest) = request.strip_prefix("request: ")?.split_once(' ')?;
    let (target, elapsed) = rest.rsplit_once(" (")?;
    Some(Entry {
        raw: first.to_string(),
        time: humantime::parse_rfc3339(time).ok()?,
        pool: pool.to_string(),
        pid: pid.parse().ok()?,
        method: method.to_string(),
        target: target.to_string(),
        script: script.strip_prefix("script_filename = ")?.to_string(),
        elapsed: elapsed.strip_suffix("s)")?.parse().ok()?,
        frames: frames.iter().map(|f| f.to_string()).collect(),
    })
}

/// One JSON object a line.
fn parse_json(file: &str) -> Vec<Entry> {
    file.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a slowlog line is not JSON ({e}): {line:?}"));
            let text = |key: &str| {
                v[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("no string {key:?} in {line}"))
                    .to_string()
            };
            let query = text("query");
            let target = match query.as_str() {
                "" => text("uri"),
                _ => format!("{}?{query}", text("uri")),
            };
            let frames = v["frames"]
                .as_array()
                .unwrap_or_else(|| panic!("no frames array in {line}"));
            Entry {
                raw: line.to_string(),
                time: humantime::parse_rfc3339(&text("time"))
                    .unwrap_or_else(|e| panic!("time: {e} in {line}")),
                pool: text("pool"),
                pid: v["pid"].as_i64().expect("pid") as i32,
                method: text("method"),
                target,
                script: text("script"),
                elapsed: v["elapsed"].as_f64().expect("elapsed"),
                frames: frames
                    .iter()
                    .map(|f| f.as_str().expect("a frame is a string").to_string())
                    .collect(),
            }
        })
        .collect()
}

/// A pool `name` of `runtime` with the slowlog at `<site>/NAME.slow`.
fn slow_pool(site: &crate::common::Site, name: &str, runtime: &Runtime, format: Format) -> Pool {
    let pool = match runtime {
        Runtime::Php => Pool::php(name),
        Runtime::Python { .. } => Pool::python(name),
    };
    let slowlog = site.path().join(format!("{name}.slow"));
    let pool = pool
        .top("request_slowlog_timeout = \"1s\"")
        .top(&format!("slowlog = \"{}\"", slowlog.display()));
    match format {
        Format::Text => pool,
        Format::Json => pool.top("slowlog_format = \"json\""),
    }
}

/// Sends `path` (3 s three functions deep), waits until drover has seen it end, and returns
/// the worker's pid (from the body) and the slowlog's entries.
fn slow_request(setup: &Setup, pool: &str, path: &str, format: Format) -> (i32, Vec<Entry>) {
    let started = std::time::Instant::now();
    let body = setup.get_ok(path);
    // Asking for the stack must not stop the request: its 3 s sleep runs to its end.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2900),
        "GET {path} took {took:?}: the stack dump cut the script's sleep short"
    );
    let pid: i32 = body
        .strip_prefix("slept ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: {body:?}"));
    // Once the pool shows no request running, no further entry can come for this one.
    let status = wait_until(TIMEOUT, "the pool to show the request over", || {
        let status = setup.status(pool);
        (number(&status, "active processes") == 0).then_some(status)
    });
    assert_eq!(
        number(&status, "slow requests"),
        1,
        "status {status:#}; drover's log:\n{}",
        setup.log()
    );
    let file = setup.stack.site.path().join(format!("{pool}.slow"));
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}; drover's log:\n{}", file.display(), setup.log()));
    println!("slowlog {} ({format:?}):\n{text}", file.display());
    let entries = match format {
        Format::Text => parse_text(&text),
        Format::Json => parse_json(&text),
    };
    (pid, entries)
}

/// The one entry of the request: header and stack as expected.
fn assert_one_entry(entries: &[Entry], expected: &Entry, started: SystemTime, log: &str) {
    assert_eq!(
        entries.len(),
        1,
        "one entry for one slow request: {entries:#?}; drover's log:\n{log}"
    );
    let entry = &entries[0];
    assert_eq!(
        (
            &entry.pool,
            entry.pid,
            &entry.method,
            &entry.target,
            &entry.script
        ),
        (
            &expected.pool,
            expected.pid,
            &expected.method,
            &expected.target,
            &expected.script
        ),
        "the header of {:?}",
        entry.raw
    );
    // Written when the request passed the 1 s limit, not when it ended at 3 s.
    assert!(
        (1.0..2.9).contains(&entry.elapsed),
        "elapsed {} in {:?}",
        entry.elapsed,
        entry.raw
    );
    let now = SystemTime::now() + Duration::from_secs(1);
    assert!(
        entry.time + Duration::from_secs(1) >= started && entry.time <= now,
        "time of {:?}",
        entry.raw
    );
    assert_eq!(
        entry.frames, expected.frames,
        "the stack of {:?}",
        entry.raw
    );
}

/// `function() FILE:LINE`, LINE the only line of `source` containing `at`.
fn frame(function: &str, file: &Path, source: &str, at: &str) -> String {
    format!("{function}() {}:{}", file.display(), line_of(source, at))
}

fn php_slowlog(format: Format, depth: Option<usize>) {
    let started = SystemTime::now();
    let site = site();
    let mut pool = slow_pool(&site, "www", &Runtime::Php, format);
    if let Some(depth) = depth {
        pool = pool.top(&format!("request_slowlog_trace_depth = {depth}"));
    }
    let setup = start(site, &[&pool]);
    let query = format!("format={format:?}");

    let (pid, entries) = slow_request(&setup, "www", &format!("/slow.php?{query}"), format);

    let script = setup.stack.site.docroot.join("slow.php");
    // An internal function's frame: drover-php writes its caller's line, as php-fpm's
    // slowlog does; the php-cgi sampler has no line for it.
    let sleep = match crate::common::default_php_runtime() {
        "embed" => frame("sleep", &script, SLOW_PHP, "    sleep(3);"),
        _ => "sleep() (internal)".to_string(),
    };
    let mut frames = vec![
        sleep,
        frame("level3", &script, SLOW_PHP, "    sleep(3);"),
        frame("level2", &script, SLOW_PHP, "    level3();"),
        frame("level1", &script, SLOW_PHP, "    level2();"),
        frame("{main}", &script, SLOW_PHP, "level1();"),
    ];
    frames.truncate(depth.unwrap_or(frames.len()));
    let expected = Entry {
        raw: String::new(),
        time: started,
        pool: "www".into(),
        pid,
        method: "GET".into(),
        target: format!("/slow.php?{query}"),
        script: script.display().to_string(),
        elapsed: 0.0,
        frames,
    };
    assert_one_entry(&entries, &expected, started, &setup.log());
}

fn python_slowlog(format: Format) {
    let started = SystemTime::now();
    let site = site();
    let pool = slow_pool(&site, "py", &Runtime::Python { mount: None }, format);
    let setup = start(site, &[&pool]);
    let query = format!("format={format:?}");

    let (pid, entries) = slow_request(&setup, "py", &format!("/slow?{query}"), format);

    let app = setup.stack.site.path().join("apps/control_app.py");
    let expected = Entry {
        raw: String::new(),
        time: started,
        pool: "py".into(),
        pid,
        method: "GET".into(),
        target: format!("/slow?{query}"),
        script: "control_app:application".into(),
        elapsed: 0.0,
        frames: vec![
            frame("level3", &app, CONTROL_APP, "    time.sleep(3)"),
            frame("level2", &app, CONTROL_APP, "    level3()"),
            frame("level1", &app, CONTROL_APP, "    level2()"),
            frame("slow", &app, CONTROL_APP, "    level1()"),
            frame("application", &app, CONTROL_APP, "    return route(environ"),
        ],
    };
    assert_one_entry(&entries, &expected, started, &setup.log());
}

#[test]
fn a_slow_php_request_gets_one_text_entry_naming_its_three_functions() {
    php_slowlog(Format::Text, None);
}

#[test]
fn a_slow_php_request_gets_one_json_entry_naming_its_three_functions() {
    php_slowlog(Format::Json, None);
}

#[test]
fn a_slow_python_request_gets_one_text_entry_naming_its_three_functions() {
    python_slowlog(Format::Text);
}

#[test]
fn a_slow_python_request_gets_one_json_entry_naming_its_three_functions() {
    python_slowlog(Format::Json);
}

/// `request_slowlog_trace_depth = 2`: the innermost two frames only.
#[test]
fn the_slowlog_stack_stops_at_request_slowlog_trace_depth() {
    php_slowlog(Format::Text, Some(2));
}
