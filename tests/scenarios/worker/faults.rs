//! A fault in worker mode costs one request: the request is answered as classic mode
//! answers it, and a fresh worker boots the script again, at once (a request's fault never
//! holds the pool back); only a worker that dies before its first request backs off.

use std::time::{Duration, Instant};

use super::{for_each_boot, lines, logs_env, pool};
use crate::common::{
    Drover, FpmPool, Nginx, PhpFpm, Site, Stack, TIMEOUT, check_config, http, proc,
};

/// An uncaught exception and a fatal error each answer 500 with what the handler wrote,
/// end the worker (code 255, as PHP's CLI after a fatal error), and the next request is
/// served by a freshly booted worker.
#[test]
fn an_exception_or_a_fatal_error_costs_one_request_and_a_fresh_worker_boots() {
    let site = Site::new();
    let env = logs_env(&site);
    let stack = Stack::start(site, pool(1).env(&env));
    let first = http::get(&stack.url("/index.php"));

    let thrown = http::get(&stack.url("/throw.php"));
    let next = http::get(&stack.url("/index.php"));
    let fatal = http::get(&stack.url("/fatal.php"));
    let last = http::get(&stack.url("/index.php"));

    assert_eq!(thrown.status, 500, "{thrown:?}");
    assert_eq!(thrown.body, "before the exception");
    assert_eq!(fatal.status, 500, "{fatal:?}");
    assert_eq!(fatal.body, "before the fatal error");
    let log = &stack.drover.log;
    log.wait_for_line("Uncaught RuntimeException: boom from the handler", TIMEOUT);
    log.wait_for_line(
        "Call to undefined function undefined_function_of_the_test()",
        TIMEOUT,
    );
    log.wait_for_line("exited with code 255", TIMEOUT);
    for reply in [&first, &next, &last] {
        assert!(
            reply.body.starts_with("handled=1 "),
            "a fresh script: {reply:?}"
        );
    }
    assert_ne!(
        first.body, next.body,
        "the worker after the exception is a new one"
    );
    assert_ne!(
        next.body, last.body,
        "the worker after the fatal error is a new one"
    );
    proc::wait_until(TIMEOUT, "three boots", || {
        (lines(&stack.site, "boots.log").len() == 3).then_some(())
    });
    // The abandoned scripts never reached the end of their loop.
    assert!(lines(&stack.site, "ends.log").is_empty());
}

/// `exit()` in a handler delivers what was written, then the script ends (the worker
/// exits with exit()'s code) and a fresh one boots.
#[test]
fn exit_delivers_its_output_and_restarts_the_script() {
    let stack = Stack::start(Site::new(), pool(1));
    let first = http::get(&stack.url("/index.php"));
    let exited = http::get(&stack.url("/exit.php"));
    let next = http::get(&stack.url("/index.php"));

    assert_eq!(exited.status, 200, "{exited:?}");
    assert_eq!(exited.body, "said goodbye");
    stack
        .drover
        .log
        .wait_for_line("exited with code 3", TIMEOUT);
    assert!(next.body.starts_with("handled=1 "), "{next:?}");
    assert_ne!(first.body, next.body);
}

/// A segfault costs the request it happened in (nginx answers 502); the pool serves on.
#[test]
fn a_segfault_costs_one_request() {
    let stack = Stack::start(Site::new(), pool(2));
    let crashed = http::get(&stack.url("/segv.php"));
    assert_eq!(crashed.status, 502, "{crashed:?}");
    stack.drover.log.wait_for_line("SIGSEGV", TIMEOUT);
    for _ in 0..6 {
        assert_eq!(http::get(&stack.url("/index.php")).status, 200);
    }
}

/// A worker script that throws while it boots stops the pool with its error, as a Python
/// app that cannot be imported does, and `drover -t` does not hide a missing script.
#[test]
fn a_script_that_cannot_boot_stops_the_pool_with_its_error() {
    let site = Site::new();
    site.script("hello.php", "<?php echo 'classic serves';");
    let broken = pool(2).env("BOOT_FAILS = \"no database\"\n");
    let classic = crate::embed::Embed::new("ok", 1);
    let drover = Drover::start(&site, &[&broken, &classic]);
    let log = &drover.log;
    log.wait_for_line("the app cannot boot: no database", TIMEOUT);
    log.wait_for_line("ended before its first request", TIMEOUT);
    log.wait_for_line(
        "pool www: the app failed to load (traceback above); the pool is stopped until a reload",
        TIMEOUT,
    );
    // The other pool serves on.
    let nginx = Nginx::start(&site, &site.socket("ok"));
    let reply = http::get(&nginx.url("/hello.php"));
    assert_eq!((reply.status, reply.body.as_str()), (200, "classic serves"));
    assert!(proc::is_running(drover.pid()));

    let missing = crate::embed::Embed::new("www", 1).php("worker = \"no/such/worker.php\"\n");
    site.write(
        "pools.d/www.toml",
        &crate::common::PoolFile::toml(&missing, &site),
    );
    let checked = check_config(&site);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    assert!(
        said.contains("worker") && said.contains("no/such/worker.php"),
        "{said}"
    );
}

/// Worker mode needs drover-php: on php-cgi the key is refused at load, with the reason.
#[test]
fn worker_mode_is_refused_on_php_cgi() {
    let site = Site::new();
    let pool = crate::common::pool_toml(
        &site.socket("www"),
        &format!(
            "[pm]\nmode = \"static\"\nmax_children = 1\n[php]\nruntime = \"cgi\"\nworker = {:?}\n",
            super::worker_script()
        ),
    );
    site.write("drover.toml", "error_log = \"stderr\"\n");
    site.write("pools.d/www.toml", &pool);
    let checked = check_config(&site);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success(), "{said}");
    assert!(
        said.contains("www.toml") && said.contains("worker") && said.contains("drover-php"),
        "{said}"
    );
}

/// How long the next plain request may take after a flood of requests that each killed
/// their worker: a fork and a boot of tests/apps/worker.php, with room for a busy machine.
/// Before drover told a request's fault from a start-up failure, eight of them made it 32 s.
pub const AFTER_FLOOD: Duration = Duration::from_secs(2);

/// The time of php-fpm's answer to a plain request after eight requests whose script threw,
/// on a pool of one child (the reference the flood's figure is read against: a classic
/// worker survives an uncaught exception).
fn php_fpm_after_flood(site: &Site) -> Duration {
    site.script(
        "throw.php",
        "<?php echo 'before the exception'; throw new RuntimeException('boom');",
    );
    site.script("plain.php", "<?php echo 'plain';");
    let pool = FpmPool::new(site, "fpm", "");
    let _fpm = PhpFpm::start(site, std::slice::from_ref(&pool));
    let nginx = Nginx::start(site, &pool.socket);
    assert_eq!(http::get(&nginx.url("/plain.php")).status, 200);
    for _ in 0..8 {
        let thrown = http::get(&nginx.url("/throw.php"));
        assert_eq!(thrown.status, 500, "{thrown:?}");
    }
    let started = Instant::now();
    let next = http::get(&nginx.url("/plain.php"));
    let took = started.elapsed();
    assert_eq!(next.body, "plain", "{next:?}");
    took
}

/// Requests that end their worker (an uncaught exception, which abandons the worker script)
/// cost those requests and the forks of fresh workers, never a back-off: after eight of
/// them on a 2-worker pool the next plain request is answered at once, and the log names no
/// start-up failure. Prints that request's time, and php-fpm's after the same flood.
#[test]
fn throwing_requests_never_hold_the_pool_back() {
    let (stack, ctl) = Stack::with_control(Site::new(), pool(2));
    assert_eq!(http::get(&stack.url("/index.php")).status, 200);
    for _ in 0..8 {
        let thrown = http::get(&stack.url("/throw.php"));
        assert_eq!(thrown.status, 500, "{thrown:?}");
    }
    let started = Instant::now();
    let next = http::get(&stack.url("/index.php"));
    let took = started.elapsed();
    println!("the plain request after eight that threw: {took:?}");
    println!(
        "php-fpm, the same eight requests on its classic pool, then the plain one: {:?}",
        php_fpm_after_flood(&stack.site)
    );
    let log = stack.drover.log.text();
    assert_eq!(next.status, 200, "{next:?}");
    assert!(
        took < AFTER_FLOOD,
        "the request after the flood took {took:?}\n{log}"
    );
    assert!(!log.contains("failed to start"), "{log}");
    let status = ctl.status_json("www", &log);
    assert_eq!(status["backoff"]["start-up failures"], 0, "{status:#}");
    assert_eq!(status["recycled"]["crash"], 8, "{status:#}");
}

/// A worker that dies in its boot (here of SIGSEGV, before its first
/// `frankenphp_handle_request()`) is a start-up failure: the zygote holds its next fork
/// back, doubling, and each hold is in the log with its cause and length, and in the
/// status and `/metrics`.
#[test]
fn a_worker_that_dies_in_its_boot_backs_off_with_its_cause() {
    let site = Site::new();
    let (stack, ctl) = Stack::with_control(site, pool(1).env("BOOT_SEGV = \"1\"\n"));
    let log = &stack.drover.log;
    let first = log.wait_for_line("failed to start (worker ", TIMEOUT);
    assert!(
        first.contains("exited on SIGSEGV after")
            && first.contains("before its first request")
            && first.contains("forks again in 1.00s (1 failure in a row)"),
        "{first}"
    );
    let second = log.wait_for_line("(2 failures in a row)", TIMEOUT);
    assert!(second.contains("forks again in 2.00s"), "{second}");
    let status = ctl.status_json("www", &log.text());
    assert!(
        status["backoff"]["start-up failures"].as_u64() >= Some(2),
        "{status:#}"
    );
    let cause = status["backoff"]["last cause"].as_str().unwrap_or_default();
    assert!(cause.contains("before its first request"), "{status:#}");
    let metrics = ctl.ok(&["status", "--openmetrics"], &log.text());
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("drover_startup_failures_total{pool=\"www\"} ")),
        "{metrics}"
    );
}

/// `set_exception_handler()` then `throw` in a request: the handler answers, as in classic
/// mode (the app's error page, its status), and the request ends as any other, the worker
/// serving on; a shutdown function the request registers runs at that request's end, its
/// output in the response, and not again.
#[test]
fn a_requests_exception_handler_and_shutdown_functions_run_as_in_classic_mode() {
    for_each_boot(|pool| {
        let site = Site::new();
        let stack = Stack::start(site, pool);
        let first = http::get(&stack.url("/index.php"));
        let handled = http::get(&stack.url("/handled.php"));
        assert_eq!(handled.status, 503, "{handled:?}");
        assert_eq!(
            handled.body,
            "before the exception; the app's error page: boom"
        );
        let marker = stack.site.path().join("shutdown-ran");
        let shutdown = http::get(&stack.url(&format!("/shutdown.php?marker={}", marker.display())));
        assert_eq!(
            (shutdown.status, shutdown.body.as_str()),
            (200, "registered, then the shutdown function")
        );
        assert!(marker.exists(), "the shutdown function ran by the response");
        std::fs::remove_file(&marker).unwrap();
        let next = http::get(&stack.url("/index.php"));
        let pid = |body: &str| body.split("pid=").nth(1).map(str::to_owned);
        assert_eq!(pid(&first.body), pid(&next.body), "one worker: {next:?}");
        assert!(next.body.starts_with("handled=4 "), "{next:?}");
        assert!(!marker.exists(), "the shutdown function ran once");
    });
}
