//! Slowloris against a WSGI pool: three times `max_children` raw connections straight at
//! the pool's socket, each trickling a FastCGI request one byte a second. Each must be
//! dropped `request_read_timeout` after its accept, with a log line; meanwhile the workers
//! they hold show "Reading headers" (busy), a dynamic or ondemand pool grows for them, and a normal
//! request through nginx is answered once the tricklers ahead of it are dropped.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{
    Ctl, Drover, Location, Nginx, PoolFile, Site, http, pool_toml, python, start_with_control,
    wait_until,
};

/// The pools' `request_read_timeout`.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Room for a loaded machine on top of the timeout, for a drop or an answer.
const SLACK: Duration = Duration::from_millis(2500);

/// A trickler gives up after this: long enough to hold a worker for the whole test when
/// nothing drops it.
const TRICKLE_FOR: Duration = Duration::from_secs(40);

/// A WSGI pool (the plain fixture app) with `request_read_timeout`.
struct SlowPool {
    name: &'static str,
    pm: &'static str,
    read_timeout: Duration,
    /// Extra top-level keys.
    keys: &'static str,
}

impl PoolFile for SlowPool {
    fn name(&self) -> &str {
        self.name
    }

    fn toml(&self, site: &Site) -> String {
        let apps = site.path().join("apps");
        pool_toml(
            &site.socket(self.name),
            &format!(
                "request_read_timeout = \"{}s\"\n{}\n[pm]\n{}\n[python]\napp = \"wsgi_app:application\"\npython_path = [\"{}\"]\n",
                self.read_timeout.as_secs(),
                self.keys,
                self.pm,
                apps.display()
            ),
        )
    }
}

struct Setup {
    nginx: Nginx,
    drover: Drover,
    ctl: Ctl,
    site: Site,
}

fn start(pool: SlowPool) -> Setup {
    let site = Site::new();
    python::install_apps(&site);
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket(pool.name));
    let nginx = Nginx::start_locations(&site, &[location]);
    Setup {
        nginx,
        drover,
        ctl,
        site,
    }
}

/// The start of a FastCGI request whose params never end: BEGIN_REQUEST (responder, no
/// keep-conn), then a PARAMS record that announces more bytes than will ever come.
fn endless_request() -> Vec<u8> {
    let mut bytes = vec![1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    bytes.extend_from_slice(&[1, 4, 0, 1, 0xff, 0xff, 0, 0]);
    bytes.extend(std::iter::repeat_n(b'x', 0xffff));
    bytes
}

/// Connects to `socket` and sends one byte a second until the other side closes, for at
/// most [`TRICKLE_FOR`]. Returns how long the connection lived, or None if it outlived that.
fn trickle(socket: PathBuf) -> Option<Duration> {
    let started = Instant::now();
    let mut stream = UnixStream::connect(&socket).expect("connect to the pool's socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    for byte in endless_request() {
        if started.elapsed() > TRICKLE_FOR {
            return None;
        }
        if stream.write_all(&[byte]).is_err() {
            return Some(started.elapsed());
        }
        let mut buf = [0u8; 64];
        match stream.read(&mut buf) {
            // Closed (or reset) by the worker.
            Ok(0) => return Some(started.elapsed()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(started.elapsed());
            }
            // The second passed with nothing to read.
            Ok(_) | Err(_) => {}
        }
    }
    None
}

/// Starts `n` tricklers at `socket`.
fn tricklers(socket: &Path, n: usize) -> Vec<thread::JoinHandle<Option<Duration>>> {
    (0..n)
        .map(|_| {
            let socket = socket.to_path_buf();
            thread::spawn(move || trickle(socket))
        })
        .collect()
}

/// `status POOL --full --json`.
fn status(setup: &Setup, pool: &str) -> serde_json::Value {
    let text = setup.ctl.ok(
        &["status", pool, "--full", "--json"],
        &setup.drover.log.text(),
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

fn states(status: &serde_json::Value) -> Vec<String> {
    let processes = status["processes"].as_array().cloned().unwrap_or_default();
    processes
        .iter()
        .map(|p| p["state"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// GET /pid through nginx in a thread: (status or error, time taken).
fn timed_get(url: String) -> thread::JoinHandle<(Result<u16, String>, Duration)> {
    thread::spawn(move || {
        let started = Instant::now();
        let reply = http::try_get(&url).map(|r| r.status);
        (reply, started.elapsed())
    })
}

fn dropped_lines(setup: &Setup) -> Vec<String> {
    let what = format!(
        "did not arrive within request_read_timeout ({}s)",
        READ_TIMEOUT.as_secs()
    );
    setup
        .drover
        .log
        .lines()
        .into_iter()
        .filter(|l| l.contains("dropped a connection:") && l.contains(&what))
        .collect()
}

/// Joins the tricklers; their lifetimes, sorted. Panics, with drover's log, when one was
/// never dropped.
fn lifetimes(setup: &Setup, tricklers: Vec<thread::JoinHandle<Option<Duration>>>) -> Vec<Duration> {
    let mut lived: Vec<Duration> = tricklers
        .into_iter()
        .map(|t| {
            t.join().unwrap().unwrap_or_else(|| {
                panic!(
                    "a trickler was still connected after {TRICKLE_FOR:?}; drover's log:\n{}",
                    setup.drover.log.text()
                )
            })
        })
        .collect();
    lived.sort();
    lived
}

#[test]
fn static_pool_drops_tricklers_shows_them_reading_and_serves_the_next_request() {
    let workers = 2;
    let setup = start(SlowPool {
        name: "py",
        pm: "mode = \"static\"\nmax_children = 2\n",
        read_timeout: READ_TIMEOUT,
        keys: "",
    });
    let socket = setup.site.socket("py");

    let tricklers = tricklers(&socket, 3 * workers);
    let status = wait_until(READ_TIMEOUT, "every worker reading a trickler", || {
        let status = status(&setup, "py");
        let states = states(&status);
        let reading = states.len() == workers && states.iter().all(|s| s == "Reading headers");
        // The counts come from the master's last look (every tick), the states from now.
        (reading && status["active processes"] == workers).then_some(status)
    });
    let request = timed_get(setup.nginx.url("/pid"));

    assert_eq!(status["idle processes"], 0, "{status:#}");
    let lived = lifetimes(&setup, tricklers);
    let (answer, took) = request.join().unwrap();
    eprintln!(
        "tricklers lived {lived:.2?}; the request sent behind them was answered in {took:.2?}"
    );
    // Accepted in waves of `workers`, each wave dropped READ_TIMEOUT after its accept.
    for (i, lived) in lived.iter().enumerate() {
        let wave = (i / workers + 1) as u32;
        assert!(
            *lived >= READ_TIMEOUT - Duration::from_millis(50)
                && *lived <= READ_TIMEOUT * wave + SLACK,
            "trickler {i} (wave {wave}) lived {lived:.2?}; drover's log:\n{}",
            setup.drover.log.text()
        );
    }
    assert_eq!(answer, Ok(200));
    assert!(
        took <= READ_TIMEOUT * 3 + SLACK,
        "answered after {took:.2?}"
    );
    let dropped = wait_until(SLACK, "a log line per dropped trickler", || {
        let lines = dropped_lines(&setup);
        (lines.len() >= 3 * workers).then_some(lines)
    });
    eprintln!("{}", dropped[0]);
}

#[test]
fn dynamic_pool_grows_to_max_children_for_tricklers_and_drops_them() {
    grows_to_max_children_for_tricklers_and_drops_them(
        "mode = \"dynamic\"\nmax_children = 3\nstart_servers = 1\nmin_spare_servers = 1\nmax_spare_servers = 1\n",
    );
}

#[test]
fn ondemand_pool_grows_to_max_children_for_tricklers_and_drops_them() {
    grows_to_max_children_for_tricklers_and_drops_them(
        "mode = \"ondemand\"\nmax_children = 3\nprocess_idle_timeout = \"10s\"\n",
    );
}

/// A pool with 3 `max_children` (`pm`: its `[pm]` keys) that starts below them.
fn grows_to_max_children_for_tricklers_and_drops_them(pm: &'static str) {
    let max_children = 3;
    let setup = start(SlowPool {
        name: "dyn",
        pm,
        read_timeout: READ_TIMEOUT,
        keys: "",
    });
    let socket = setup.site.socket("dyn");
    let started = Instant::now();

    let tricklers = tricklers(&socket, 3 * max_children);
    let grown = wait_until(READ_TIMEOUT * 3, "the pool to grow to max_children", || {
        let status = status(&setup, "dyn");
        // Never past max_children, however many connections wake the master at once.
        let total = status["total processes"].as_u64().unwrap_or_default() as usize;
        assert!(total <= max_children, "{total} workers: {status:#}");
        (total == max_children && status["idle processes"] == 0)
            .then(|| (status, started.elapsed()))
    });
    let request = timed_get(setup.nginx.url("/pid"));

    eprintln!("grew to {max_children} workers after {:.2?}", grown.1);
    let lived = lifetimes(&setup, tricklers);
    let (answer, took) = request.join().unwrap();
    eprintln!(
        "tricklers lived {lived:.2?}; the request sent behind them was answered in {took:.2?}"
    );
    for (i, lived) in lived.iter().enumerate() {
        assert!(
            *lived >= READ_TIMEOUT - Duration::from_millis(50)
                && *lived <= READ_TIMEOUT * 4 + SLACK,
            "trickler {i} lived {lived:.2?}; drover's log:\n{}",
            setup.drover.log.text()
        );
    }
    assert_eq!(answer, Ok(200));
    assert!(
        took <= READ_TIMEOUT * 4 + SLACK,
        "answered after {took:.2?}"
    );
    wait_until(SLACK, "a log line per dropped trickler", || {
        (dropped_lines(&setup).len() >= 3 * max_children).then_some(())
    });
}

#[test]
fn waiting_for_a_trickler_counts_toward_request_terminate_timeout() {
    let terminate = Duration::from_secs(2);
    let setup = start(SlowPool {
        name: "py",
        pm: "mode = \"static\"\nmax_children = 1\n",
        // Well past the terminate timeout, so that only the terminate can end the wait.
        read_timeout: Duration::from_secs(20),
        keys: "request_terminate_timeout = \"2s\"\n",
    });

    let lived = lifetimes(&setup, tricklers(&setup.site.socket("py"), 1));

    eprintln!("the trickler lived {:.2?}", lived[0]);
    assert!(
        lived[0] >= terminate && lived[0] <= terminate + SLACK,
        "the trickler lived {:.2?}; drover's log:\n{}",
        lived[0],
        setup.drover.log.text()
    );
    setup
        .drover
        .log
        .wait_for_line("past request_terminate_timeout", SLACK);
}
