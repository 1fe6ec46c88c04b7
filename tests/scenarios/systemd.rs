//! Under systemd (`Type=notify`, `WatchdogSec=`): drover says READY=1 once its pools are
//! up, RELOADING=1 with MONOTONIC_USEC when a reload begins and READY=1 when it is done,
//! WATCHDOG=1 while it runs, and STOPPING=1 on TERM. A datagram socket stands in for
//! systemd's notify socket. Socket activation: the test binds the pool's socket and passes
//! it as systemd does (fd 3, LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID).

use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::time::Instant;

use nix::sys::signal::Signal;

use crate::common::{Drover, Nginx, PhpPool, PoolFile, Site, TIMEOUT, http};

/// What drover sends to the notify socket, one datagram at a time.
struct Notifications(UnixDatagram);

impl Notifications {
    /// Reads datagrams until one satisfies `wanted`, for [`TIMEOUT`] at most (the watchdog's
    /// pings keep coming, so a read alone would never time out); returns it and the ones
    /// before it.
    fn until(&self, what: &str, wanted: impl Fn(&str) -> bool) -> (String, Vec<String>) {
        let mut before = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(
                Instant::now() < deadline,
                "no {what} within {TIMEOUT:?}; got {:?}",
                before
                    .iter()
                    .filter(|m: &&String| m.as_str() != "WATCHDOG=1")
                    .collect::<Vec<_>>()
            );
            let n = self
                .0
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no {what} ({e}); got {before:?}"));
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            if wanted(&message) {
                return (message, before);
            }
            before.push(message);
        }
    }
}

#[test]
fn drover_tells_systemd_ready_reloading_watchdog_and_stopping() {
    let site = Site::new();
    let path = site.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let notes = Notifications(socket);
    site.write("drover.toml", "error_log = \"stderr\"\n");
    let pool = PhpPool::new("www").max_children(2);
    site.write("pools.d/www.toml", &pool.toml(&site));
    let mut drover = Drover::spawn_with_env(
        &site,
        &[
            ("NOTIFY_SOCKET", path.as_os_str()),
            ("WATCHDOG_USEC", "400000".as_ref()),
        ],
    );
    let is = |state: &'static str| move |m: &str| m.lines().any(|l| l == state);

    let (ready, _) = notes.until("READY=1", is("READY=1"));
    assert!(
        ready.contains("STATUS=ready: 1 pools, 2 workers"),
        "{ready:?}"
    );
    // The watchdog keeps being pinged (every 200 ms for a 400 ms WatchdogSec).
    for _ in 0..3 {
        notes.until("WATCHDOG=1", is("WATCHDOG=1"));
    }
    // STATUS= follows the workers' activity (php-fpm's words), with the request counted
    // where the runtime counts requests.
    site.script("hello.php", "<?php echo 'hello';");
    let nginx = Nginx::start(&site, &site.socket("www"));
    assert_eq!(http::get(&nginx.url("/hello.php")).status, 200);
    let (status, _) = notes.until("STATUS= with the activity after a request", |m| {
        m.lines().any(|l| {
            l.starts_with("STATUS=Processes active: 0, idle: 2, ")
                && (!l.contains("Requests:") || l.contains("Requests: 1,"))
        })
    });
    assert!(status.contains("slow: 0"), "{status:?}");

    site.write("pools.d/www.toml", &pool.max_children(3).toml(&site));
    drover.signal(Signal::SIGHUP);
    let (reloading, _) = notes.until("RELOADING=1", is("RELOADING=1"));
    let usec = reloading
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC with RELOADING=1: {reloading:?}"));
    assert!(usec.parse::<u64>().is_ok_and(|u| u > 0), "{usec:?}");
    let (done, _) = notes.until("READY=1 after the reload", is("READY=1"));
    assert!(
        done.contains("STATUS=ready: 1 pools, 3 workers"),
        "{done:?}"
    );
    drover
        .log
        .wait_for_line("reload done: ready: 1 pools, 3 workers", TIMEOUT);
    let activity = |m: &str| {
        m.lines()
            .any(|l| l.starts_with("STATUS=Processes active: 0, idle: 3, "))
    };
    let (after, _) = notes.until("STATUS= with the activity after the reload", activity);

    // A reload that changes nothing leaves the activity as it was (the same workers
    // count, the request still counted): STATUS= must still come back to it from the
    // "ready: ..." line, on an idle host too.
    drover.signal(Signal::SIGHUP);
    notes.until("RELOADING=1 (no change)", is("RELOADING=1"));
    let (done, _) = notes.until("READY=1 after the second reload", is("READY=1"));
    assert!(
        done.contains("STATUS=ready: 1 pools, 3 workers"),
        "{done:?}"
    );
    let (again, _) = notes.until("STATUS= with the activity after a reload", activity);
    let line = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("STATUS="))
            .map(str::to_owned)
    };
    assert_eq!(line(&again), line(&after));

    drover.signal(Signal::SIGTERM);
    notes.until("STOPPING=1", is("STOPPING=1"));
    assert!(drover.wait_exit(TIMEOUT).success());
}

/// The socket a `.socket` unit would create: bound and listening at the pool's path,
/// open to nginx's workers.
fn passed_socket(site: &Site, pool: &str) -> UnixListener {
    let path = site.socket(pool);
    let socket = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    socket
}

#[test]
fn a_pool_serves_on_the_socket_systemd_passed_without_binding_its_own() {
    let site = Site::new();
    site.script(
        "hello.php",
        "<?php echo 'hello from ', getenv('LISTEN_FDS') ?: 'a worker';",
    );
    site.write("drover.toml", "error_log = \"stderr\"\n");
    site.write("pools.d/www.toml", &PhpPool::new("www").toml(&site));
    let socket = passed_socket(&site, "www");
    let path = site.socket("www");
    let inode = std::fs::metadata(&path).unwrap().ino();

    let mut drover = Drover::spawn_with_socket(&site, socket.as_fd(), "www");
    drover.log.wait_for_line("ready:", TIMEOUT);
    drover.log.wait_for_line(
        &format!(
            "pool www: listening on {} (fd 3, passed by systemd)",
            path.display()
        ),
        TIMEOUT,
    );
    // Our copy closed: only drover holds the socket now.
    drop(socket);
    let nginx = Nginx::start(&site, &path);
    let reply = http::get(&nginx.url("/hello.php"));
    assert_eq!(reply.status, 200, "{reply:?}");
    // The workers do not see LISTEN_FDS: it was removed once read.
    assert_eq!(reply.body, "hello from a worker");
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        inode,
        "drover bound its own socket"
    );

    // A reload renews the workers on the same socket: it is neither removed nor bound again.
    drover.signal(Signal::SIGHUP);
    drover.log.wait_for_line("reload done:", TIMEOUT);
    assert_eq!(http::get(&nginx.url("/hello.php")).status, 200);
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        inode,
        "the reload rebound it"
    );

    // systemd owns the socket: drover leaves its file when it stops.
    drover.signal(Signal::SIGTERM);
    assert!(drover.wait_exit(TIMEOUT).success());
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
}

#[test]
fn a_passed_socket_no_pool_takes_stops_drover_with_its_name() {
    let site = Site::new();
    site.write("drover.toml", "error_log = \"stderr\"\n");
    site.write("pools.d/www.toml", &PhpPool::new("www").toml(&site));
    let socket = passed_socket(&site, "api");

    let mut drover = Drover::spawn_with_socket(&site, socket.as_fd(), "api");

    assert!(!drover.wait_exit(TIMEOUT).success());
    drover.log.wait_for_line(
        "systemd passed socket \"api\" (fd 3) but no pool is named \"api\"",
        TIMEOUT,
    );
}

#[test]
fn a_passed_socket_elsewhere_than_its_pools_listen_stops_drover() {
    let site = Site::new();
    site.write("drover.toml", "error_log = \"stderr\"\n");
    site.write("pools.d/www.toml", &PhpPool::new("www").toml(&site));
    let socket = passed_socket(&site, "other");

    let mut drover = Drover::spawn_with_socket(&site, socket.as_fd(), "www");

    assert!(!drover.wait_exit(TIMEOUT).success());
    drover.log.wait_for_line(
        &format!(
            "socket \"www\" (fd 3) is unix socket {}, but pool www's listen is {}",
            site.socket("other").display(),
            site.socket("www").display()
        ),
        TIMEOUT,
    );
}
