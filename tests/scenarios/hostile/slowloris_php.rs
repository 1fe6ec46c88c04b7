//! Slowloris at PHP pools, on the runtime under test (`DROVER_TEST_PHP_RUNTIME`): 3 ×
//! max_children raw connections trickle a FastCGI request at the pool's socket, a byte
//! every 400 ms. The status shows the workers `Reading headers`, a dynamic pool grows to
//! max_children, each trickler is dropped at `request_read_timeout` (3 s here) with a log
//! line, and a normal request through nginx is answered as soon as the tricklers before it
//! in the socket's queue have been dropped. php-cgi cannot be changed, so the master sees
//! such a worker blocked reading and kills it (a WARN line with how long it waited);
//! drover-php's worker drops the connection itself ("dropped a connection") and lives on.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{
    Ctl, Drover, Nginx, PoolFile, Site, TIMEOUT, default_php_runtime, http, php_table, pool_toml,
    proc, start_with_control, wait_until,
};

const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Past this a trickler gives up by itself: before the fix, the only way a worker got free.
const TRICKLE_FOR: Duration = Duration::from_secs(30);

/// A PHP pool with `request_read_timeout = "3s"`: static, or dynamic from one worker.
struct Pool {
    dynamic: bool,
    max_children: u32,
}

impl PoolFile for Pool {
    fn name(&self) -> &str {
        "www"
    }

    fn toml(&self, site: &Site) -> String {
        let pm = if self.dynamic {
            "mode = \"dynamic\"\nstart_servers = 1\nmin_spare_servers = 1\nmax_spare_servers = 1\n"
        } else {
            "mode = \"static\"\n"
        };
        pool_toml(
            &site.socket("www"),
            &format!(
                "request_read_timeout = \"3s\"\n\n[pm]\n{pm}max_children = {}\n\n{}",
                self.max_children,
                php_table(default_php_runtime())
            ),
        )
    }
}

/// Connects to `socket` and sends a FastCGI BEGIN_REQUEST and PARAMS one byte at a time,
/// never finishing. Returns how long the connection lived (queued, then read by a worker)
/// until the worker closed it; `None` if it was still open after [`TRICKLE_FOR`].
fn trickle(socket: PathBuf) -> Option<Duration> {
    let mut stream = UnixStream::connect(&socket).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(400)))
        .ok()?;
    let begin = [1u8, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    let params_header = [1u8, 4, 0, 1, 0x10, 0, 0, 0];
    let bytes = begin
        .iter()
        .chain(params_header.iter())
        .chain(std::iter::repeat(&b'x'));
    let started = Instant::now();
    for &byte in bytes {
        if stream.write_all(&[byte]).is_err() {
            return Some(started.elapsed());
        }
        // A read returning (EOF, or an error other than the timeout) means the worker let go.
        let mut buf = [0u8; 64];
        match stream.read(&mut buf) {
            Ok(_) => return Some(started.elapsed()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Some(started.elapsed()),
        }
        if started.elapsed() > TRICKLE_FOR {
            return None;
        }
    }
    None
}

/// The workers' states from `ctl status www --json --full`.
fn states(ctl: &Ctl, drover: &Drover) -> Vec<String> {
    let text = ctl.ok(&["status", "www", "--json", "--full"], &drover.log.text());
    let json: serde_json::Value = serde_json::from_str(&text).expect("status JSON");
    json["processes"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|w| w["state"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The lines of drover-php workers that dropped a connection at `request_read_timeout`.
fn worker_drops(drover: &Drover) -> usize {
    drover
        .log
        .lines()
        .iter()
        .filter(|l| l.contains("dropped a connection:") && l.contains("request_read_timeout"))
        .count()
}

/// The `waited` durations of the master's read-timeout kills (php-cgi) the log shows.
fn read_timeout_kills(drover: &Drover) -> Vec<Duration> {
    drover
        .log
        .lines()
        .iter()
        .filter(|l| l.contains("past request_read_timeout"))
        .filter_map(|l| {
            // "waited 3.1s for its client ...": past the timeout, always in seconds.
            let waited = l.split("waited ").nth(1)?.split(' ').next()?;
            let seconds: f64 = waited.strip_suffix('s')?.parse().ok()?;
            Some(Duration::from_secs_f64(seconds))
        })
        .collect()
}

fn tricklers_are_dropped_and_a_request_gets_through(pool: Pool) {
    let site = Site::new();
    site.script("hello.php", "<?php echo 'hello';");
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let max = pool.max_children as usize;

    let tricklers: Vec<_> = (0..3 * max)
        .map(|_| {
            let socket = site.socket("www");
            thread::spawn(move || trickle(socket))
        })
        .collect();
    // Every worker there is, max_children of them, waiting on a trickler.
    let seen = wait_until(TIMEOUT, "max_children workers Reading headers", || {
        let states = states(&ctl, &drover);
        let reading = states.iter().filter(|s| *s == "Reading headers").count();
        (reading == max).then_some(states)
    });
    let url = nginx.url("/hello.php");
    let asked = Instant::now();
    let reply = thread::spawn(move || http::get(&url));
    let reply = reply.join().expect("request thread");
    let answered = asked.elapsed();
    let lived: Vec<Option<Duration>> = tricklers.into_iter().map(|t| t.join().unwrap()).collect();
    let kills = read_timeout_kills(&drover);
    eprintln!(
        "dynamic={} max_children={max}: states {seen:?}; normal request answered in {answered:.1?}; tricklers lived {lived:?}; kills waited {kills:?}",
        pool.dynamic
    );

    assert_eq!((reply.status, reply.body.as_str()), (200, "hello"));
    assert!(
        lived.iter().all(Option::is_some),
        "a trickler was never dropped: {lived:?}\n{}",
        drover.log.text()
    );
    // The request queues behind the tricklers not yet taken: at most three rounds of them.
    assert!(
        answered < 3 * (READ_TIMEOUT + Duration::from_millis(1500)),
        "answered after {answered:?}"
    );
    if default_php_runtime() == "cgi" {
        assert!(kills.len() >= 3 * max, "{} kills: {kills:?}", kills.len());
        for waited in &kills {
            assert!(
                *waited >= READ_TIMEOUT && *waited < READ_TIMEOUT + Duration::from_secs(1),
                "a trickler dropped after {waited:?}"
            );
        }
    } else {
        // Every drop is the worker's own (its line reaches the log through the master,
        // just after the trickler saw the close); the master killed none.
        let logged = proc::poll(TIMEOUT, || worker_drops(&drover) >= 3 * max);
        assert!(
            logged && kills.is_empty(),
            "{} drops, master kills {kills:?}\n{}",
            worker_drops(&drover),
            drover.log.text()
        );
    }
}

#[test]
fn slowloris_at_a_static_php_pool_is_dropped_at_request_read_timeout() {
    tricklers_are_dropped_and_a_request_gets_through(Pool {
        dynamic: false,
        max_children: 2,
    });
}

#[test]
fn slowloris_at_a_dynamic_php_pool_grows_it_and_is_dropped_at_request_read_timeout() {
    tricklers_are_dropped_and_a_request_gets_through(Pool {
        dynamic: true,
        max_children: 3,
    });
}
