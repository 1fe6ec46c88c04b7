//! Files that are not files among the pool files: a FIFO, a device, a directory named
//! `x.toml`, a socket, a symlink loop, a file past the size bound. A running drover refuses
//! the reload that would read one (naming the file and what it is) and goes on serving,
//! answering its control socket, reaping and stopping on SIGTERM; `drover -t` refuses each
//! at once.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::{PhpPool, Site, TIMEOUT, check_config, proc, start_with_control, wait_until};

/// An odd file: its name in the log, how to make it at a path, and what drover must call it.
struct Odd {
    name: &'static str,
    make: fn(&Path),
    says: &'static str,
}

const ODD: &[Odd] = &[
    Odd {
        name: "fifo",
        make: |p| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap(),
        says: "is a FIFO (named pipe)",
    },
    Odd {
        name: "dev-zero",
        make: |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        says: "is a character device",
    },
    Odd {
        name: "directory",
        make: |p| std::fs::create_dir(p).unwrap(),
        says: "is a directory",
    },
    Odd {
        name: "socket",
        // The listener is dropped at once; its file stays, which is what a pool glob finds.
        make: |p| drop(UnixListener::bind(p).unwrap()),
        says: "is a socket",
    },
    Odd {
        name: "symlink-loop",
        make: |p| std::os::unix::fs::symlink(p, p).unwrap(),
        says: "is a symlink loop",
    },
    Odd {
        name: "huge",
        make: |p| std::fs::write(p, vec![b'#'; 3 << 20]).unwrap(),
        says: "is larger than 1048576 bytes",
    },
];

/// A master that still answers and reaps: `ctl status` exits 0, and a worker SIGKILLed now
/// is replaced with no zombie left. The worker killed is one past its start-up window: one
/// killed sooner counts as a failed start, whose replacement the respawn backoff delays
/// (1 s, then doubling), which is right but not what this checks.
fn assert_alive(drover: &crate::common::Drover, ctl: &crate::common::Ctl, case: &str) {
    ctl.ok(&["status"], &drover.log.text());
    let worker = wait_until(TIMEOUT, &format!("{case}: a worker past its start"), || {
        let settled = drover_proto::STARTUP_WINDOW + Duration::from_millis(300);
        drover
            .workers()
            .into_iter()
            .find(|&pid| proc::age(pid).is_some_and(|age| age > settled))
    });
    proc::signal(worker, Signal::SIGKILL);
    wait_until(
        TIMEOUT,
        &format!("{case}: the killed worker reaped"),
        || {
            let below = drover.descendants();
            let zombie = below
                .iter()
                .any(|&p| proc::stat(p).is_some_and(|s| s.state == 'Z'));
            (!below.contains(&worker) && !zombie && drover.workers().len() == 2).then_some(())
        },
    );
}

/// The master's resident memory in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[test]
fn odd_pool_files_are_refused_on_reload_and_the_master_carries_on() {
    let site = Site::new();
    let (mut drover, ctl) = start_with_control(&site, &[&PhpPool::new("www")]);
    for odd in ODD {
        let path = site.path().join("pools.d/odd.toml");
        (odd.make)(&path);
        let from = drover.log.len();
        drover.signal(Signal::SIGHUP);
        let line = drover.log.wait_for(
            from,
            &format!("{}: reload refused", odd.name),
            |l| l.contains("reload refused"),
            TIMEOUT,
        );
        assert!(
            line.contains("pools.d/odd.toml") && line.contains(odd.says),
            "{}: the refusal does not name the file and say {:?}: {line}",
            odd.name,
            odd.says
        );
        assert_alive(&drover, &ctl, odd.name);
        let rss = rss_kib(drover.pid());
        assert!(rss < 64 * 1024, "{}: master RSS {rss} KiB", odd.name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir(&path).unwrap(),
            _ => std::fs::remove_file(&path).unwrap(),
        }
    }
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "log:\n{}", drover.log.text());
}

#[test]
fn drover_t_refuses_each_odd_pool_file_at_once() {
    for odd in ODD {
        let site = Site::new();
        site.write("drover.toml", "error_log = \"stderr\"\n");
        std::fs::create_dir_all(site.path().join("pools.d")).unwrap();
        (odd.make)(&site.path().join("pools.d/odd.toml"));
        let started = Instant::now();
        let out = check_config(&site);
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", odd.name);
        assert!(
            stderr.contains("pools.d/odd.toml:1:1: ") && stderr.contains(odd.says),
            "{}: stderr does not name the file and say {:?}:\n{stderr}",
            odd.name,
            odd.says
        );
        assert!(
            took < Duration::from_secs(5),
            "{}: drover -t took {took:?}",
            odd.name
        );
    }
}
