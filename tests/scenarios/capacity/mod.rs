//! Capacity: what a saturated pool does, and what an autoscaler reads of it.
//!
//! - `queue_timeout`: with every worker held busy (the status API shows them all active),
//!   a new request gets 503 with `Retry-After` no sooner than `queue_timeout` and soon
//!   after it, through nginx from an embedded-PHP pool (FastCGI) and straight from a
//!   Python pool's HTTP listener; the held requests are then served, and the next one
//!   too. On php-cgi the key is refused at load, named with its reason.
//! - `/metrics`, parsed by prometheus_client: busy and total workers, `max_children`, the
//!   queue's figures, the 503s counted, and workers recycled by cause after a known
//!   sequence (N requests with `max_requests = k`: N/k by max_requests; a reload: every
//!   worker by reload).
//!
//! Fixtures: `tests/apps/hold.php`, `greeting.php` (PHP) and `capacity_app.py` (Python).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{
    Ctl, PoolFile, Site, Stack, TIMEOUT, Tables, check_config, free_port, http, php_table,
    pool_toml, proc, run_bounded, start_with_control, wait_until,
};

/// The pools' `queue_timeout`.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(1);
/// How much later than `queue_timeout` a 503 may come: the master's sampling (100 ms ticks)
/// bounds it at 200 ms; the rest is room for a shared, loaded machine.
const LATE: Duration = Duration::from_millis(1500);

/// A static embedded-PHP pool of `workers`, with `top` keys.
fn php_pool(workers: u32, top: &str, pm: &str) -> Tables {
    Tables {
        name: "www",
        tables: format!(
            "{top}\n[pm]\nmode = \"static\"\nmax_children = {workers}\n{pm}\n{}",
            php_table("embed")
        ),
    }
}

fn php_site() -> Site {
    let site = Site::new();
    site.script("hold.php", include_str!("../../apps/hold.php"));
    site.script("greeting.php", include_str!("../../apps/greeting.php"));
    site
}

/// Starts `/hold.php?n=N` (or the Python pool's `/hold?n=N`) for each of `ns`, each on a
/// thread of its own; returns their answers when joined.
fn hold(urls: Vec<String>) -> Vec<std::thread::JoinHandle<http::Reply>> {
    urls.into_iter()
        .map(|url| std::thread::spawn(move || http::get(&url)))
        .collect()
}

/// Starts `url` (`/hold?n=N`, which writes `held` once a worker has it) on a thread and
/// waits until a worker holds it. On a loaded machine a worker can be slower than
/// `queue_timeout` to take its first connection, which is then rightly answered 503: such
/// a request is sent again (at most 5 times).
fn hold_one(url: String, held: &std::path::Path) -> std::thread::JoinHandle<http::Reply> {
    for _ in 0..5 {
        let thread = std::thread::spawn({
            let url = url.clone();
            move || http::get(&url)
        });
        wait_until(TIMEOUT, "the request held, or answered", || {
            (held.exists() || thread.is_finished()).then_some(())
        });
        if held.exists() {
            return thread;
        }
        let reply = thread.join().unwrap();
        assert_eq!(
            reply.status, 503,
            "{url} answered before it was held: {reply:?}"
        );
    }
    panic!("{url} was answered 503 five times before a worker took it");
}

/// Polls `drover ctl status POOL --json` until `active processes` is `active`.
fn wait_active(ctl: &Ctl, pool: &str, active: u64, log: &dyn Fn() -> String) {
    let mut last = serde_json::Value::Null;
    let reached = proc::poll(TIMEOUT, || {
        last = ctl.status_json(pool, &log());
        last["active processes"].as_u64() == Some(active)
    });
    assert!(
        reached,
        "status never showed {active} active processes; the last one:\n{last:#}\n{}",
        log()
    );
}

/// Asserts `reply` is queue_timeout's 503, that it came within the bounds after `sent`.
fn assert_timed_out(reply: &http::Reply, sent: Instant, log: &str) {
    let took = sent.elapsed();
    assert_eq!(reply.status, 503, "{reply:?}\ndrover's log:\n{log}");
    assert_eq!(reply.header("Retry-After"), "1", "{reply:?}");
    assert!(
        reply.body.contains("queue_timeout"),
        "the body says why: {reply:?}"
    );
    assert!(
        took >= QUEUE_TIMEOUT,
        "answered 503 after {took:?}, before queue_timeout"
    );
    assert!(
        took < QUEUE_TIMEOUT + LATE,
        "answered 503 only after {took:?}"
    );
}

#[test]
fn a_saturated_php_pool_answers_503_with_retry_after_within_queue_timeout() {
    let site = php_site();
    let pool = php_pool(
        2,
        "queue_timeout = \"1s\"\nstatus_listen = \"127.0.0.1:0\"",
        "",
    );
    let (stack, ctl) = Stack::with_control(site, pool);
    let log = || stack.drover.log.text();
    let _ = std::fs::remove_file(stack.site.path().join("release"));
    let held = hold(
        (1..=2)
            .map(|n| stack.url(&format!("/hold.php?n={n}")))
            .collect(),
    );
    wait_active(&ctl, "www", 2, &log);

    let sent = Instant::now();
    let reply = http::try_get(&stack.url("/greeting.php"))
        .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", log()));
    assert_timed_out(&reply, sent, &log());
    stack
        .drover
        .log
        .wait_for_line("within queue_timeout 1s: answered 503", TIMEOUT);

    std::fs::write(stack.site.path().join("release"), "").unwrap();
    for (n, thread) in held.into_iter().enumerate() {
        let reply = thread.join().unwrap();
        assert_eq!(reply.status, 200, "held request {}: {reply:?}", n + 1);
        assert_eq!(reply.body, format!("released {}", n + 1));
    }
    let reply = http::get(&stack.url("/greeting.php"));
    assert_eq!(reply.status, 200, "after the release: {reply:?}");
    let status = ctl.status_json("www", &log());
    assert_eq!(status["queue"]["timed out"], 1, "{status:#}");
    assert_eq!(status["queue"]["timeout"], 1.0, "{status:#}");
}

/// A Python pool with `protocol = "http"` on a loopback port.
struct HttpPool {
    port: u16,
    site: std::path::PathBuf,
}

impl PoolFile for HttpPool {
    fn name(&self) -> &str {
        "web"
    }

    fn toml(&self, site: &Site) -> String {
        let text = pool_toml(
            &site.socket("web"),
            &format!(
                "protocol = \"http\"\nqueue_timeout = \"1s\"\n\n[pm]\nmode = \"static\"\n\
                 max_children = 2\n\n[env]\nHOLD_DIR = \"{}\"\n\n[python]\n\
                 app = \"capacity_app:application\"\npython_path = [\"{}\"]\n",
                self.site.display(),
                site.path().join("apps").display()
            ),
        );
        text.replace(
            &format!(
                "listen = \"{}\"\nlisten_mode = \"0666\"\n",
                site.socket("web").display()
            ),
            &format!("listen = \"127.0.0.1:{}\"\n", self.port),
        )
    }
}

#[test]
fn a_saturated_http_pool_answers_503_with_retry_after_within_queue_timeout() {
    let site = Site::new();
    site.write(
        "apps/capacity_app.py",
        include_str!("../../apps/capacity_app.py"),
    );
    let pool = HttpPool {
        port: free_port(),
        site: site.path().to_path_buf(),
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let log = || drover.log.text();
    let url = |path: &str| format!("http://127.0.0.1:{}{path}", pool.port);
    let held: Vec<_> = (1..=2)
        .map(|n| {
            hold_one(
                url(&format!("/hold?n={n}")),
                &site.path().join(format!("held-{n}")),
            )
        })
        .collect();
    wait_active(&ctl, "web", 2, &log);

    let sent = Instant::now();
    let reply =
        http::try_get(&url("/hello")).unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", log()));
    assert_timed_out(&reply, sent, &log());
    assert_eq!(reply.header("Connection"), "close", "{reply:?}");

    std::fs::write(site.path().join("release"), "").unwrap();
    for thread in held {
        let reply = thread.join().unwrap();
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    assert_eq!(http::get(&url("/hello")).body, "hello");
}

#[test]
fn queue_timeout_is_refused_at_load_on_php_cgi() {
    let site = php_site();
    let pool = Tables {
        name: "www",
        tables: format!(
            "queue_timeout = \"1s\"\n\n[pm]\nmode = \"static\"\nmax_children = 2\n\n{}",
            php_table("cgi")
        ),
    };
    let text = pool.toml(&site);
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("queue_timeout"))
        .unwrap();
    site.write("pools.d/www.toml", &text);
    site.write("drover.toml", "error_log = \"stderr\"\n");
    let out = check_config(&site);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drover -t accepted it:\n{stderr}");
    assert!(
        stderr.contains(&format!("www.toml:{line}")) && stderr.contains("queue_timeout"),
        "the error names the file, line and key:\n{stderr}"
    );
    assert!(
        stderr.contains("do not count the connections they accept"),
        "the error says why:\n{stderr}"
    );
}

/// `/metrics` of the pool's `status_listen`, parsed by prometheus_client: (name, labels,
/// value) of every sample.
fn metrics(
    site: &Site,
    addr: &str,
) -> Vec<(String, serde_json::Map<String, serde_json::Value>, f64)> {
    let page = http::get(&format!("http://{addr}/metrics")).body;
    let script = site.write(
        "openmetrics_samples.py",
        include_str!("../../apps/openmetrics_samples.py"),
    );
    let input = site.write("metrics.txt", &page);
    let out = run_bounded(
        Command::new("python3")
            .arg(&script)
            .arg(&input)
            .arg("prometheus"),
    );
    assert!(
        out.status.success(),
        "prometheus_client refused /metrics: {}\n{page}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["name"].as_str().unwrap().to_string(),
                v["labels"].as_object().unwrap().clone(),
                v["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The value of `name` whose labels include `labels`.
fn sample(
    samples: &[(String, serde_json::Map<String, serde_json::Value>, f64)],
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).and_then(|x| x.as_str()) == Some(*v))
        })
        .map(|(_, _, v)| *v)
}

#[test]
fn metrics_give_an_autoscaler_workers_caps_queue_and_restarts_by_cause() {
    const REQUESTS: u32 = 12;
    const MAX_REQUESTS: u32 = 3;
    let site = php_site();
    let pool = php_pool(
        1,
        "queue_timeout = \"2s\"\nstatus_listen = \"127.0.0.1:0\"",
        &format!("max_requests = {MAX_REQUESTS}\nmax_requests_jitter = 0"),
    );
    let (stack, _ctl) = Stack::with_control(site, pool);
    let needle = "pool www: status on ";
    let line = stack.drover.log.wait_for_line(needle, TIMEOUT);
    let addr = line.split(needle).nth(1).unwrap().trim().to_string();
    for _ in 0..REQUESTS {
        let reply = http::get(&stack.url("/greeting.php"));
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    let www = [("pool", "www")];
    let recycled = |cause: &'static str| [("pool", "www"), ("cause", cause)];
    let expected = f64::from(REQUESTS / MAX_REQUESTS);
    let samples = wait_until(TIMEOUT, "restarts by max_requests", || {
        let samples = metrics(&stack.site, &addr);
        let total = sample(&samples, "drover_total_processes", &www);
        (sample(
            &samples,
            "drover_workers_recycled_total",
            &recycled("max_requests"),
        ) == Some(expected)
            && total == Some(1.0))
        .then_some(samples)
    });
    let got = |name: &str, labels: &[(&str, &str)]| {
        sample(&samples, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}"))
    };
    assert_eq!(got("drover_limit_max_children", &www), 1.0);
    assert_eq!(got("drover_active_processes", &www), 0.0);
    assert_eq!(got("drover_limit_queue_timeout_seconds", &www), 2.0);
    assert_eq!(got("drover_queue_timeouts_total", &www), 0.0);
    assert_eq!(got("drover_queue_oldest_wait_seconds", &www), 0.0);
    assert_eq!(got("drover_listen_queue", &www), 0.0);
    assert_eq!(got("drover_busy_ratio", &www), 0.0);
    for cause in ["max_memory", "terminate", "crash", "reload", "max_lifetime"] {
        assert_eq!(
            got("drover_workers_recycled_total", &recycled(cause)),
            0.0,
            "{cause}"
        );
    }

    // A reload renews the one worker: one recycled by reload, nothing else moves.
    stack.drover.signal(nix::sys::signal::Signal::SIGHUP);
    let samples = wait_until(TIMEOUT, "a restart by reload", || {
        let samples = metrics(&stack.site, &addr);
        (sample(
            &samples,
            "drover_workers_recycled_total",
            &recycled("reload"),
        ) == Some(1.0))
        .then_some(samples)
    });
    assert_eq!(
        sample(
            &samples,
            "drover_workers_recycled_total",
            &recycled("max_requests")
        ),
        Some(expected)
    );
    assert_eq!(
        sample(
            &samples,
            "drover_workers_recycled_total",
            &recycled("crash")
        ),
        Some(0.0)
    );
}

/// The queue-wait histogram moves with a saturated pool: with both workers held, four
/// requests wait in the listen queue until the oldest has waited a second; once released,
/// all are served, and the histogram has counted them, the four above 0.5 s (its estimate
/// is to about 0.1 s).
#[test]
fn the_queue_wait_histogram_counts_what_waited_in_a_saturated_pool() {
    let site = php_site();
    let pool = php_pool(2, "status_listen = \"127.0.0.1:0\"", "");
    let (stack, _ctl) = Stack::with_control(site, pool);
    let needle = "pool www: status on ";
    let line = stack.drover.log.wait_for_line(needle, TIMEOUT);
    let addr = line.split(needle).nth(1).unwrap().trim().to_string();
    let www = [("pool", "www")];
    let count = |samples: &[_]| sample(samples, "drover_queue_wait_seconds_count", &www);
    let before = wait_until(TIMEOUT, "the histogram", || {
        count(&metrics(&stack.site, &addr))
    });
    let _ = std::fs::remove_file(stack.site.path().join("release"));
    let held = hold(
        (1..=2)
            .map(|n| stack.url(&format!("/hold.php?n={n}")))
            .collect(),
    );
    let (stack_ref, addr_ref) = (&stack, &addr);
    wait_until(TIMEOUT, "both workers busy", || {
        let samples = metrics(&stack_ref.site, addr_ref);
        (sample(&samples, "drover_active_processes", &www) == Some(2.0)).then_some(())
    });
    let queued = hold((0..4).map(|_| stack.url("/greeting.php")).collect());
    wait_until(TIMEOUT, "the oldest waiting a second", || {
        let samples = metrics(&stack_ref.site, addr_ref);
        (sample(&samples, "drover_queue_oldest_wait_seconds", &www) >= Some(1.0)).then_some(())
    });
    std::fs::write(stack.site.path().join("release"), "").unwrap();
    for thread in held.into_iter().chain(queued) {
        assert_eq!(thread.join().unwrap().status, 200);
    }
    let samples = wait_until(TIMEOUT, "six more counted", || {
        let samples = metrics(&stack.site, &addr);
        (count(&samples) >= Some(before + 6.0)).then_some(samples)
    });
    let bucket = |le: &str| {
        sample(
            &samples,
            "drover_queue_wait_seconds_bucket",
            &[("pool", "www"), ("le", le)],
        )
        .unwrap_or_else(|| panic!("no bucket {le}"))
    };
    let total = count(&samples).unwrap();
    let sum = sample(&samples, "drover_queue_wait_seconds_sum", &www).unwrap();
    eprintln!(
        "queue wait: {total} counted, sum {sum:.2} s, le=0.1: {}, le=0.5: {}, le=2.5: {}",
        bucket("0.1"),
        bucket("0.5"),
        bucket("2.5")
    );
    assert_eq!(bucket("+Inf"), total);
    assert!(
        total - bucket("0.5") >= 4.0,
        "four waited past 0.5 s: {samples:?}"
    );
    assert!(sum >= 4.0 * 0.9, "sum {sum}");
}
