//! Sizing by memory (docs/memory.md): a pool with `max_children = "auto"` in a real 512 MiB
//! memory cgroup made by the test, overloaded with requests that each build a large string
//! and hold it, is never OOM-killed: the cgroup's OOM-kill counter stays 0, the master and
//! its zygote stay up and every request is answered 200. The same overload against a pool
//! whose fixed `max_children` is too high, and against php-fpm, is measured by
//! `benches/memory.py` (what happens to them is a figure, not an assertion).
//!
//! Needs root and a memory controller (cgroup v1 at /sys/fs/cgroup/memory, or v2): the
//! tests say so and pass without running where there is neither.

mod cgroup;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::http::try_get;
use crate::common::{Drover, Location, Nginx, Site, TIMEOUT, Tables, check_config, php_table};
use cgroup::MemoryCgroup;

const MIB: u64 = 1024 * 1024;

/// What each request allocates and holds: more than a worker's own size, so that a pool
/// sized from idle workers alone would not fit.
const HELD_MIB: u64 = 40;

fn auto_pm() -> String {
    "[pm]\nmode = \"dynamic\"\nmax_children = \"auto\"\nmin_spare_servers = 1\n\
     max_spare_servers = 4\nstart_servers = 2\n"
        .to_owned()
}

fn php_pool(site: &Site) -> Tables {
    site.script(
        "hold.php",
        &format!(
            "<?php $s = str_repeat('x', {HELD_MIB} * 1024 * 1024); usleep(700000); \
             echo getmypid(), ' ', strlen($s);"
        ),
    );
    Tables {
        name: "www",
        tables: format!("{}\n{}", auto_pm(), php_table("embed")),
    }
}

fn python_pool(site: &Site) -> Tables {
    site.write(
        "apps/hold_app.py",
        &format!(
            "import os, time\n\n\
             def application(environ, start_response):\n    \
                 held = bytearray({HELD_MIB} * 1024 * 1024)\n    \
                 time.sleep(0.7)\n    \
                 start_response('200 OK', [('Content-Type', 'text/plain')])\n    \
                 return [b'%d %d' % (os.getpid(), len(held))]\n"
        ),
    );
    Tables {
        name: "py",
        tables: format!(
            "{}\n[python]\napp = \"hold_app:application\"\npython_path = [\"{}\"]\n",
            auto_pm(),
            site.path().join("apps").display()
        ),
    }
}

/// `clients` threads each sending `each` requests through nginx: (answered 200, others).
fn overload(url: &str, clients: u32, each: u32) -> (u32, Vec<String>) {
    let ok = Arc::new(AtomicU32::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (url, ok, failures) = (url.to_owned(), ok.clone(), failures.clone());
            std::thread::spawn(move || {
                for _ in 0..each {
                    match try_get(&url) {
                        Ok(reply) if reply.status == 200 => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(reply) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{} {}", reply.status, reply.body)),
                        Err(err) => failures.lock().unwrap().push(err),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a client thread");
    }
    let failures = failures.lock().unwrap().clone();
    (ok.load(Ordering::Relaxed), failures)
}

/// The `max_children = N from ...` sizing lines the pool logged.
fn sizings(log: &str, pool: &str) -> Vec<String> {
    let prefix = format!("pool {pool}: max_children = ");
    log.lines()
        .filter_map(|l| l.find(&prefix).map(|at| l[at..].to_owned()))
        .collect()
}

fn computed(line: &str) -> u32 {
    line.split("max_children = ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

/// Runs `pool` in a 512 MiB cgroup behind nginx, overloads it, and checks that nothing in
/// the cgroup was OOM-killed and that every request was served.
fn survives_overload(site: Site, pool: Tables, path: &str) {
    let Some(cgroup) = MemoryCgroup::create(512 * MIB) else {
        eprintln!("skipped: needs root and a memory cgroup controller");
        return;
    };
    Drover::write_files(&site, &[&pool]);
    let drover = Drover::spawn_in_cgroup(&site, &cgroup.procs());
    let log = &drover.log;
    log.wait_for_line("ready:", TIMEOUT);
    let first = log.wait_for_line(&format!("pool {}: max_children = ", pool.name), TIMEOUT);
    assert!(
        first.contains(&format!("from {} 512.0 MiB", cgroup.source())),
        "sized from another limit: {first:?}"
    );
    let socket = site.socket(pool.name);
    // Room for every client and its connection to the pool (the default 64 is not).
    let location = if path.ends_with(".php") {
        Location::php(&socket)
    } else {
        Location::prefix("/", &socket)
    };
    let nginx = Nginx::start_sized(&site, &[location], 512);
    let url = nginx.url(path);
    // Warm-up: a few requests, so that the workers' PSS is measured with a held string.
    let (ok, failures) = overload(&url, 2, 3);
    assert!(failures.is_empty() && ok == 6, "{failures:?}");
    log.wait_for(
        0,
        "a sizing from a measured worker",
        |l| l.contains("measured worker"),
        TIMEOUT,
    );

    let (ok, failures) = overload(&url, 32, 3);
    let text = log.text();
    let lines = sizings(&text, pool.name);
    let counts: Vec<u32> = lines.iter().map(|l| computed(l)).collect();
    println!(
        "memory: pool {} in a 512 MiB cgroup: {ok} of 96 answered 200; sized {counts:?}; \
         cgroup peak {:.1} MiB, OOM kills {}; last sizing: {}",
        pool.name,
        cgroup.peak() as f64 / MIB as f64,
        cgroup.oom_kills(),
        lines.last().map_or("-", String::as_str)
    );
    assert_eq!(
        cgroup.oom_kills(),
        0,
        "OOM-killed in the cgroup; the log:\n{text}"
    );
    assert!(
        failures.is_empty() && ok == 96,
        "{} failed: {failures:?}; the log:\n{text}",
        failures.len()
    );
    assert!(
        !text.contains("exited on SIGKILL"),
        "a process was killed; the log:\n{text}"
    );
    // Sized from the memory: a held string is 40 MiB, so 512 MiB holds fewer than 12.
    let last = *counts.last().expect("a sizing line");
    assert!(
        (2..12).contains(&last),
        "max_children = {last} for 40 MiB requests in 512 MiB: {lines:?}"
    );
    assert!(drover_alive(&drover), "drover exited; the log:\n{text}");
}

fn drover_alive(drover: &Drover) -> bool {
    Path::new(&format!("/proc/{}", drover.pid())).exists()
}

#[test]
fn an_auto_sized_php_pool_in_a_512_mib_cgroup_is_never_oom_killed_under_overload() {
    let site = Site::new();
    let pool = php_pool(&site);
    survives_overload(site, pool, "/hold.php");
}

#[test]
fn an_auto_sized_python_pool_in_a_512_mib_cgroup_is_never_oom_killed_under_overload() {
    let site = Site::new();
    let pool = python_pool(&site);
    survives_overload(site, pool, "/");
}

#[test]
fn drover_t_says_what_auto_computes_and_from_what() {
    let site = Site::new();
    let pool = php_pool(&site);
    Drover::write_files(&site, &[&pool]);
    let out = check_config(&site);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("max_children = \"auto\""), "{stdout}");
    assert!(stdout.contains("auto_max_children = 128"), "{stdout}");
    let line = stderr
        .lines()
        .find(|l| l.contains("pool www: max_children = "))
        .unwrap_or_else(|| panic!("no sizing line in:\n{stderr}"));
    assert!(
        line.contains(" − reserve ")
            && line.contains("64.0 MiB per worker (starting estimate: none measured yet)"),
        "{line}"
    );
}

#[test]
fn auto_is_refused_in_a_static_pool_with_the_reason() {
    let site = Site::new();
    let pool = Tables {
        name: "www",
        tables: format!(
            "[pm]\nmode = \"static\"\nmax_children = \"auto\"\n\n{}",
            php_table("embed")
        ),
    };
    Drover::write_files(&site, &[&pool]);
    let out = check_config(&site);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("pools.d/www.toml:")
            && stderr.contains("pm.max_children: \"auto\" needs pm.mode = \"dynamic\""),
        "{stderr}"
    );
}

#[test]
fn a_fixed_max_children_too_high_for_the_cgroup_is_warned_about_with_figures() {
    let Some(cgroup) = MemoryCgroup::create(512 * MIB) else {
        eprintln!("skipped: needs root and a memory cgroup controller");
        return;
    };
    let site = Site::new();
    site.script(
        "hold.php",
        // Long enough for the master to sample the worker while the request holds the string
        // (it samples once a second).
        "<?php $s = str_repeat('x', 40 * 1024 * 1024); usleep(2500000); echo strlen($s);",
    );
    let pool = Tables {
        name: "www",
        tables: format!(
            "[pm]\nmode = \"dynamic\"\nmax_children = 40\nmin_spare_servers = 1\n\
                 max_spare_servers = 2\n\n{}",
            php_table("embed")
        ),
    };
    Drover::write_files(&site, &[&pool]);
    let drover = Drover::spawn_in_cgroup(&site, &cgroup.procs());
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let (ok, failures) = overload(&nginx.url("/hold.php"), 1, 1);
    assert!(ok == 1, "{failures:?}");
    let line = drover
        .log
        .wait_for_line("pool www: max_children = 40 does not fit", TIMEOUT);
    assert!(
        line.contains(" × ") && line.contains(" fit (max_children = \"auto\" sizes it)"),
        "{line}"
    );
    assert!(line.contains(&cgroup.source()), "{line}");
}
