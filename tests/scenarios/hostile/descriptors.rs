//! Descriptors: a client holding thousands of idle connections to the TCP listeners the
//! master serves itself (`health_listen`, a pool's `status_listen`) must not take the
//! descriptors the master needs. Issue 34: 1,100 idle connections made `/livez` stop
//! answering (kubelet then restarts the pod) and a zygote respawn fail with EMFILE, under
//! the soft limit of 1024 a service starts with.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::{Drover, PoolFile, PythonPool, Site, TIMEOUT, free_port, proc, python};

/// `Max open files` of a process: (soft, hard).
fn open_files_limit(pid: i32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files in /proc/PID/limits");
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// GET `path` on `addr`, answered within a second: the status, or None. Prints how long
/// the answer took.
fn answered(addr: &str, path: &str) -> Option<u16> {
    let started = Instant::now();
    let status = answered_quietly(addr, path);
    eprintln!(
        "GET {path} on {addr}: {status:?} in {:.2} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    status
}

fn answered_quietly(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.get(9..12)?.parse().ok()?;
    (started.elapsed() < Duration::from_secs(1)).then_some(status)
}

#[test]
fn two_thousand_idle_connections_on_each_tcp_listener_leave_livez_and_respawns_working() {
    let site = Site::new();
    python::install_apps(&site);
    let health = format!("127.0.0.1:{}", free_port());
    let status = format!("127.0.0.1:{}", free_port());
    let pool = PythonPool::wsgi("py")
        .max_children(2)
        .key("status_listen", &format!("\"{status}\""));
    site.write(
        "drover.toml",
        &format!("error_log = \"stderr\"\nlog_level = \"info\"\nhealth_listen = \"{health}\"\n"),
    );
    site.write("pools.d/py.toml", &pool.toml(&site));
    let drover = Drover::spawn_with_nofile(&site, 1024);
    drover.log.wait_for_line("ready:", TIMEOUT);

    // Checked at the end: the master raised its own soft limit; what it starts gets the
    // one it was given.
    let (soft, hard) = open_files_limit(drover.pid());
    let workers = python::wait_started(&drover.log, 0, "py", "worker", 2, TIMEOUT);
    let worker = workers[0];
    let worker_soft = open_files_limit(worker).0;

    let mut idle = Vec::new();
    for addr in [&health, &status] {
        for _ in 0..2000 {
            idle.push(TcpStream::connect(addr.as_str()).expect("connect"));
        }
    }
    assert_eq!(
        answered(&health, "/livez"),
        Some(200),
        "{}",
        drover.log.text()
    );
    assert_eq!(
        answered(&status, "/status"),
        Some(200),
        "{}",
        drover.log.text()
    );

    // A worker killed now is replaced: the master has the descriptors for it.
    let from = drover.log.len();
    proc::signal(worker, Signal::SIGKILL);
    python::wait_started(&drover.log, from, "py", "worker", 1, TIMEOUT);
    assert!(
        !drover.log.text().contains("EMFILE"),
        "{}",
        drover.log.text()
    );
    assert!(
        !drover.log.text().contains("Too many open files"),
        "{}",
        drover.log.text()
    );
    // The pool's zygote killed too: the master execs a new one, which forks two workers.
    let zygote = python::wait_started(&drover.log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    let from = drover.log.len();
    proc::signal(zygote, Signal::SIGKILL);
    let new_zygote = python::wait_started(&drover.log, from, "py", "python zygote", 1, TIMEOUT)[0];
    assert_ne!(new_zygote, zygote);
    python::wait_started(&drover.log, from, "py", "worker", 2, TIMEOUT);
    for said in ["EMFILE", "Too many open files"] {
        assert!(!drover.log.text().contains(said), "{}", drover.log.text());
    }
    assert_eq!(answered(&health, "/livez"), Some(200));
    drop(idle);
    assert_eq!(
        soft,
        hard.min(1 << 20),
        "the master's soft limit was not raised"
    );
    assert_eq!(worker_soft, 1024, "a worker's soft limit");
}
