//! Status under load. A static PHP pool of 3 has 2 requests held busy (`hold.php` waits for
//! the test's release file): `drover ctl status` in JSON and text, and the pool's
//! `status_listen` in JSON (`?json&full`, each worker's request) and OpenMetrics (parsed by
//! prometheus_client, Prometheus' reference parser) all show 2 active, 1 idle, 3 in all.
//! With every worker busy, the connections nginx has queued show as the listen queue.

use std::process::{Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{Pool, Setup, number, site, start, text_field};
use crate::common::{Site, TIMEOUT, http, proc, run_bounded, wait_until};

/// `status_listen` on a port the kernel picks; the log says which.
const STATUS_LISTEN: &str = "status_listen = \"127.0.0.1:0\"";

/// Requests to `hold.php`, each holding a worker until [`Held::release`].
struct Held {
    clients: Vec<(u32, JoinHandle<Result<http::Reply, String>>)>,
}

impl Held {
    /// Sends `/hold.php?n=N` for each of `ns` at once; returns without waiting.
    fn send(setup: &Setup, ns: &[u32]) -> Held {
        let clients = ns
            .iter()
            .map(|&n| {
                let url = setup.stack.url(&format!("/hold.php?n={n}"));
                (n, thread::spawn(move || http::try_get(&url)))
            })
            .collect();
        Held { clients }
    }

    /// Creates the release file; every held request must then answer `released N`.
    fn release(self, setup: &Setup) {
        setup.stack.site.write("release", "");
        for (n, client) in self.clients {
            let reply = client.join().expect("client thread");
            let reply = reply.unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", setup.log()));
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (200, format!("released {n}").as_str()),
                "{reply:?}; drover's log:\n{}",
                setup.log()
            );
        }
    }
}

/// Waits for `hold.php?n=N` to have started in a worker; that worker's pid.
fn held_pid(site: &Site, n: u32) -> i32 {
    let path = site.path().join(format!("held-{n}"));
    wait_until(TIMEOUT, &format!("hold.php?n={n} to start"), || {
        std::fs::read_to_string(&path).ok()?.trim().parse().ok()
    })
}

/// The `127.0.0.1:PORT` the pool's status_listen was bound to, from `status on ADDR`.
pub(super) fn status_addr(setup: &Setup, pool: &str) -> String {
    let needle = format!("pool {pool}: status on ");
    let line = setup.stack.drover.log.wait_for_line(&needle, TIMEOUT);
    line.split(&needle)
        .nth(1)
        .expect("an address")
        .trim()
        .to_string()
}

/// GET `http://ADDR/PATH` on a status listener, asserting a 200.
pub(super) fn get_status(setup: &Setup, addr: &str, path: &str) -> http::Reply {
    let url = format!("http://{addr}{path}");
    let reply =
        http::try_get(&url).unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", setup.log()));
    assert_eq!(reply.status, 200, "GET {url}: {reply:?}");
    reply
}

/// Polls `drover ctl status POOL --json` until `active processes` is `active`; the status.
fn wait_active(setup: &Setup, pool: &str, active: u64) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let reached = proc::poll(TIMEOUT, || {
        last = setup.status(pool);
        number(&last, "active processes") == active
    });
    assert!(
        reached,
        "status never showed {active} active processes; the last one:\n{last:#}\ndrover's log:\n{}",
        setup.log()
    );
    last
}

#[test]
fn status_in_text_json_and_openmetrics_shows_two_busy_workers_of_three() {
    let pool = Pool::php("www").max_children(3).top(STATUS_LISTEN);
    let setup = start(site(), &[&pool]);
    let addr = status_addr(&setup, "www");
    let held = Held::send(&setup, &[1, 2]);
    let busy = [
        held_pid(&setup.stack.site, 1),
        held_pid(&setup.stack.site, 2),
    ];

    let json = wait_active(&setup, "www", 2);
    let counts = |s: &serde_json::Value| {
        let n = |key| number(s, key);
        (
            n("active processes"),
            n("idle processes"),
            n("total processes"),
        )
    };
    assert_eq!(counts(&json), (2, 1, 3), "ctl status www --json: {json:#}");
    assert_eq!(json["pool"], "www", "{json:#}");
    assert_eq!(json["process manager"], "static", "{json:#}");
    assert!(number(&json, "max active processes") >= 2, "{json:#}");

    let text = setup.ctl.ok(&["status", "www"], &setup.log());
    let text_counts: Vec<&str> = ["active processes", "idle processes", "total processes"]
        .iter()
        .map(|label| text_field(&text, label))
        .collect();
    assert_eq!(text_counts, ["2", "1", "3"], "ctl status www:\n{text}");
    assert_eq!(text_field(&text, "pool"), "www", "{text}");

    // The status_listen page, as nginx or Prometheus reach it.
    let full = get_status(&setup, &addr, "/status?json&full");
    let full: serde_json::Value = serde_json::from_str(&full.body)
        .unwrap_or_else(|e| panic!("/status?json&full is not JSON ({e}): {full:?}"));
    assert_eq!(counts(&full), (2, 1, 3), "/status?json&full: {full:#}");
    assert_busy_workers(&setup, &full, &busy);

    let metrics = get_status(&setup, &addr, "/status?openmetrics");
    let content_type = metrics.header("Content-Type");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type:?}"
    );
    println!("/status?openmetrics:\n{}", metrics.body);
    {
        let samples = openmetrics_samples(&setup.stack.site, &metrics.body);
        let value = |name: &str| sample(&samples, name, "www");
        assert_eq!(value("drover_active_processes"), 2.0, "{}", metrics.body);
        assert_eq!(value("drover_idle_processes"), 1.0, "{}", metrics.body);
        assert_eq!(value("drover_total_processes"), 3.0, "{}", metrics.body);
        assert_eq!(value("drover_up"), 1.0, "{}", metrics.body);
        assert_eq!(value("drover_limit_max_children"), 3.0, "{}", metrics.body);
    }

    let ping = get_status(&setup, &addr, "/ping");
    assert_eq!(ping.body.trim(), "pong", "{ping:?}");

    held.release(&setup);
}

/// `?full`: the two busy workers show their own request; the third is idle.
fn assert_busy_workers(setup: &Setup, full: &serde_json::Value, busy: &[i32; 2]) {
    let processes = full["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes in {full:#}"));
    assert_eq!(processes.len(), 3, "{full:#}");
    let script = setup.stack.site.docroot.join("hold.php");
    for (n, pid) in (1..=2).zip(busy) {
        let worker = processes
            .iter()
            .find(|w| w["pid"] == *pid)
            .unwrap_or_else(|| panic!("no worker {pid} (holding n={n}) in {full:#}"));
        assert_eq!(worker["state"], "Running", "{worker:#}");
        assert_eq!(worker["request method"], "GET", "{worker:#}");
        assert_eq!(
            worker["request uri"],
            format!("/hold.php?n={n}").as_str(),
            "{worker:#}"
        );
        assert_eq!(
            worker["script"],
            script.display().to_string().as_str(),
            "{worker:#}"
        );
    }
    let idle: Vec<_> = processes
        .iter()
        .filter(|w| !busy.iter().any(|pid| w["pid"] == *pid))
        .collect();
    assert_eq!(idle.len(), 1, "{full:#}");
    assert_eq!(idle[0]["state"], "Idle", "{full:#}");
}

/// With both workers held, two more requests wait in the pool's listen queue: status shows
/// `listen queue` 2 (the queue of a unix socket, which php-fpm cannot show), and
/// afterwards `max listen queue` at least 2.
#[test]
fn status_shows_the_connections_waiting_in_the_listen_queue() {
    let pool = Pool::php("www").max_children(2);
    let setup = start(site(), &[&pool]);
    let held = Held::send(&setup, &[1, 2]);
    held_pid(&setup.stack.site, 1);
    held_pid(&setup.stack.site, 2);
    wait_active(&setup, "www", 2);
    let queued = Held::send(&setup, &[3, 4]);

    let mut last = serde_json::Value::Null;
    let reached = proc::poll(Duration::from_secs(10), || {
        last = setup.status("www");
        last["listen queue"] == 2
    });
    let text = setup.ctl.ok(&["status", "www"], &setup.log());
    held.release(&setup);
    queued.release(&setup);
    assert!(
        reached,
        "status never showed 2 connections in the listen queue while both workers were \
         busy and nginx had sent 2 more; the last JSON:\n{last:#}\nthe text:\n{text}"
    );
    assert_eq!(text_field(&text, "listen queue"), "2", "{text}");
    // A high-water mark below a queue the page itself showed would mislead the operator.
    let after = setup.status("www");
    assert!(
        after["max listen queue"].as_u64().is_some_and(|n| n >= 2),
        "status showed listen queue 2 while the requests waited, but after them \
         max listen queue is {}: {after:#}",
        after["max listen queue"]
    );
}

/// One parsed sample.
#[derive(Debug)]
pub(super) struct Sample {
    pub name: String,
    pub labels: serde_json::Map<String, serde_json::Value>,
    pub value: f64,
}

/// The value of sample `name` with label pool=`pool`.
fn sample(samples: &[Sample], name: &str, pool: &str) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && s.labels.get("pool").is_some_and(|p| p == pool))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "samples {name}{{pool={pool:?}}}: {found:#?}"
    );
    found[0].value
}

/// `text` parsed by prometheus_client's OpenMetrics parser (`tests/apps/openmetrics_samples.py`);
/// a parse error fails the test, and so does a python3 without prometheus_client.
fn openmetrics_samples(site: &Site, text: &str) -> Vec<Sample> {
    parsed_samples(site, text, "openmetrics")
}

/// [`openmetrics_samples`], with the parser of `format`: `"openmetrics"` or
/// `"prometheus"` (the 0.0.4 text format).
pub(super) fn parsed_samples(site: &Site, text: &str, format: &str) -> Vec<Sample> {
    require_prometheus_client();
    let script = site.write(
        "openmetrics_samples.py",
        include_str!("../../apps/openmetrics_samples.py"),
    );
    let input = site.write("metrics.txt", text);
    let out = run_bounded(Command::new("python3").arg(&script).arg(&input).arg(format));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "prometheus_client refused the {format} output: {}\nthe output:\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("the parser's JSON");
            Sample {
                name: v["name"].as_str().expect("name").to_string(),
                labels: v["labels"].as_object().expect("labels").clone(),
                value: v["value"].as_f64().expect("value"),
            }
        })
        .collect()
}

/// Fails the test unless `python3` can import prometheus_client, which parses what
/// Prometheus would scrape: a metrics test that cannot parse must not pass unnoticed.
/// `scripts/test.sh` installs it (`ensure_prometheus_client`).
fn require_prometheus_client() {
    let imports = Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match imports {
        Ok(status) if status.success() => {}
        Ok(_) => panic!(
            "python3 cannot import prometheus_client, which parses /metrics here: run \
             scripts/test.sh, or python3 -m pip install prometheus_client"
        ),
        Err(e) => panic!("python3, which parses /metrics with prometheus_client: {e}"),
    }
}
