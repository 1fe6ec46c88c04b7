//! Hostile: processes that die under drover. A Python zygote killed with SIGKILL is
//! replaced, and its successor's workers are watched like the first ones (busy, counted,
//! killed past `request_terminate_timeout`); a worker that segfaults is logged and counted
//! as a crash; an app that cannot be imported refuses connections at once; a removed pool's
//! socket goes with it.

use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::python::wait_started;
use crate::common::{
    Ctl, Drover, Location, Nginx, PoolFile, Site, TIMEOUT, default_php_runtime, http, php_table,
    pool_toml, proc, start_with_control,
};

/// A static `[python]` pool running `tests/apps/lifecycle_app.py` (or `app`).
struct AppPool {
    name: &'static str,
    app: &'static str,
    max_children: u32,
    /// Top-level lines, such as `request_terminate_timeout = "3s"`.
    top: &'static str,
}

impl AppPool {
    fn new(name: &'static str) -> AppPool {
        AppPool {
            name,
            app: "lifecycle_app:application",
            max_children: 2,
            top: "",
        }
    }
}

impl PoolFile for AppPool {
    fn name(&self) -> &str {
        self.name
    }

    fn toml(&self, site: &Site) -> String {
        pool_toml(
            &site.socket(self.name),
            &format!(
                "{}\n[pm]\nmode = \"static\"\nmax_children = {}\n\n[python]\napp = \"{}\"\npython_path = [\"{}\"]\n",
                self.top,
                self.max_children,
                self.app,
                site.path().join("apps").display()
            ),
        )
    }
}

fn site() -> Site {
    let site = Site::new();
    site.write(
        "apps/lifecycle_app.py",
        include_str!("../../apps/lifecycle_app.py"),
    );
    site.write(
        "apps/broken_app.py",
        include_str!("../../apps/broken_app.py"),
    );
    site
}

/// drover with its control socket serving `pools`, nginx passing `/NAME/` to each.
fn start(site: &Site, pools: &[&AppPool]) -> (Drover, Ctl, Nginx) {
    let files: Vec<&dyn PoolFile> = pools.iter().map(|p| *p as &dyn PoolFile).collect();
    let (drover, ctl) = start_with_control(site, &files);
    let locations: Vec<Location> = pools
        .iter()
        .map(|p| Location::prefix(&format!("/{}/", p.name), &site.socket(p.name)))
        .collect();
    let nginx = Nginx::start_locations(site, &locations);
    (drover, ctl, nginx)
}

fn number(status: &serde_json::Value, key: &str) -> u64 {
    status[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {key:?} in status {status:#}"))
}

#[test]
fn a_killed_zygotes_successor_is_watched_like_the_first() {
    let site = site();
    let pool = AppPool {
        top: "request_terminate_timeout = \"3s\"\n",
        ..AppPool::new("py")
    };
    let (drover, ctl, nginx) = start(&site, &[&pool]);
    let log = &drover.log;
    let zygote = wait_started(log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    let from = log.len();
    proc::signal(zygote, Signal::SIGKILL);
    wait_started(log, from, "py", "python zygote", 1, TIMEOUT);
    wait_started(log, from, "py", "worker", 2, TIMEOUT);
    // The old workers finish and go; the status then lists only the new ones.
    ctl.wait_all_tracked(drover.pid(), log);

    let accepted_before = number(&ctl.status_json("py", &log.text()), "accepted conn");
    for _ in 0..3 {
        assert_eq!(http::get(&nginx.url("/py/pid")).status, 200);
    }
    let counted = proc::poll(TIMEOUT, || {
        number(&ctl.status_json("py", &log.text()), "accepted conn") >= accepted_before + 3
    });
    assert!(
        counted,
        "accepted conn stayed at {accepted_before} after 3 requests\n{}",
        log.text()
    );

    let url = nginx.url("/py/sleep?s=15");
    let started = Instant::now();
    let hung = thread::spawn(move || (http::get(&url).status, started.elapsed()));
    let mut status = String::new();
    let running = proc::poll(TIMEOUT, || {
        status = ctl.ok(&["status", "py", "--full", "--json"], &log.text());
        status.contains("\"state\":\"Running\"")
    });
    assert!(
        running,
        "no worker shown Running during a 15 s request: {status}\n{}",
        log.text()
    );
    let (status, took) = hung.join().unwrap();
    // 500: the graceful abort raised in the request and the worker answered; 502: the
    // worker was killed before it could.
    assert!(
        status == 500 || status == 502,
        "{status} past request_terminate_timeout\n{}",
        log.text()
    );
    assert!(
        took < Duration::from_secs(10),
        "the request past request_terminate_timeout (3s) took {took:?}\n{}",
        log.text()
    );
}

#[test]
fn a_segfaulting_worker_is_logged_and_counted_as_a_crash() {
    let site = site();
    let (drover, ctl, nginx) = start(&site, &[&AppPool::new("py")]);
    let log = &drover.log;
    let from = log.len();
    assert_eq!(http::get(&nginx.url("/py/segv")).status, 502);
    let line = log.wait_for(
        from,
        "worker N exited on SIGSEGV",
        |l| l.contains("pool py: worker ") && l.contains("exited on SIGSEGV"),
        TIMEOUT,
    );
    println!("{line}");
    let counted = proc::poll(TIMEOUT, || {
        ctl.status_json("py", &log.text())["recycled"]["crash"].as_u64() == Some(1)
    });
    assert!(counted, "recycled crash is not 1\n{}", log.text());
    let raw: Vec<String> = log.lines()[from..]
        .iter()
        .filter(|l| l.contains("exited ") && !l.contains(" after "))
        .cloned()
        .collect();
    assert!(raw.is_empty(), "raw report lines in the log: {raw:?}");
    assert!(!log.text().contains("seen only by its"), "{}", log.text());
}

#[test]
fn a_pool_whose_app_cannot_load_refuses_at_once_and_serves_after_a_fix_and_reload() {
    let site = site();
    let broken = AppPool {
        app: "broken_app:application",
        ..AppPool::new("py")
    };
    site.write("pools.d/py.toml", &broken.toml(&site));
    let (drover, ctl, nginx) = start(&site, &[&broken]);
    let log = &drover.log;
    log.wait_for_line("the app failed to load", TIMEOUT);
    for _ in 0..3 {
        let started = Instant::now();
        let status = http::get(&nginx.url("/py/pid")).status;
        let took = started.elapsed();
        assert_eq!(status, 502, "{}", log.text());
        assert!(
            took < Duration::from_secs(1),
            "a stopped pool's answer took {took:?}\n{}",
            log.text()
        );
    }
    site.write(
        "apps/broken_app.py",
        include_str!("../../apps/lifecycle_app.py"),
    );
    let from = log.len();
    ctl.ok(&["reload"], &log.text());
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    let reply = http::get(&nginx.url("/py/pid"));
    assert_eq!(reply.status, 200, "{reply:?}\n{}", log.text());
}

#[test]
fn a_removed_pools_socket_goes_once_it_drained() {
    let site = site();
    let (drover, ctl, _nginx) = start(&site, &[&AppPool::new("py"), &AppPool::new("gone")]);
    let log = &drover.log;
    let socket = site.socket("gone");
    assert!(socket.exists());
    std::fs::remove_file(site.path().join("pools.d/gone.toml")).unwrap();
    let from = log.len();
    ctl.ok(&["reload"], &log.text());
    log.wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    let removed = proc::poll(TIMEOUT, || !socket.exists());
    assert!(removed, "{} still there\n{}", socket.display(), log.text());
    assert!(site.socket("py").exists());
}

/// Every `pipe:[INODE]` link among `pid`'s open descriptors, with the fd number.
fn pipes_of(pid: i32) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                target.to_string_lossy().into_owned(),
            ))
        })
        .collect()
}

#[test]
fn a_descriptor_drover_inherited_reaches_no_worker() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    let site = site();
    let (py, www) = (AppPool::new("py"), crate::common::PhpPool::new("www"));
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\n",
    );
    site.write("pools.d/py.toml", &py.toml(&site));
    site.write("pools.d/www.toml", &www.toml(&site));
    let (read, write) = nix::unistd::pipe().unwrap();
    let stray = std::fs::read_link(format!("/proc/self/fd/{}", read.as_raw_fd()))
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let raw = read.as_raw_fd();
    let mut command = Command::new(crate::common::bin());
    command
        .arg("-c")
        .arg(site.path().join("drover.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: dup2 between fork and exec, on descriptors opened before the fork.
    unsafe {
        command.pre_exec(move || {
            // fd 10, without close-on-exec: as a careless parent leaves one.
            if libc::dup2(raw, 10) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop((read, write));
    let log = crate::common::Log::default();
    log.collect(child.stdout.take().unwrap());
    log.collect(child.stderr.take().unwrap());
    let master = child.id() as i32;
    let guard = KillOnDrop(master);
    log.wait_for_line("ready:", TIMEOUT);
    let master_has_it = pipes_of(master).iter().any(|(_, t)| *t == stray);
    assert!(master_has_it, "the test's fd 10 did not reach drover");
    let below = proc::descendants(master);
    assert!(below.len() >= 5, "{below:?}");
    let leaks: Vec<(i32, String)> = below
        .iter()
        .flat_map(|&pid| {
            pipes_of(pid)
                .into_iter()
                .filter(|(_, target)| *target == stray)
                .map(move |(fd, _)| (pid, fd))
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "processes under drover holding the inherited {stray} (pid, fd): {leaks:?}\n{}",
        log.text()
    );
    drop(guard);
    let _ = child.wait();
}

/// SIGKILLs a process tree when the test ends, passed or not.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        proc::kill_tree(self.0);
    }
}

/// A dynamic PHP pool (on the runtime under test) of one worker that exits after
/// `max_requests`.
struct RecyclingPhp;

impl PoolFile for RecyclingPhp {
    fn name(&self) -> &str {
        "www"
    }

    fn toml(&self, site: &Site) -> String {
        pool_toml(
            &site.socket("www"),
            &format!(
                "[pm]\nmode = \"dynamic\"\nmax_children = 2\nstart_servers = 1\nmin_spare_servers = 1\nmax_spare_servers = 1\nmax_requests = 5\n\n{}",
                php_table(default_php_runtime())
            ),
        )
    }
}

#[test]
fn a_dynamic_pools_worker_past_max_requests_is_replaced_at_once() {
    let site = site();
    site.script("hello.php", "<?php echo 'hello';");
    let (drover, _ctl) = start_with_control(&site, &[&RecyclingPhp]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    // 50 requests, one at a time: 10 recycles. Replaced at the next 1 s maintenance tick,
    // each recycle would hold the next request up to a second.
    let started = Instant::now();
    for i in 0..50 {
        let reply = http::get(&nginx.url("/hello.php"));
        assert_eq!(
            reply.status,
            200,
            "request {i}: {reply:?}\n{}",
            drover.log.text()
        );
    }
    let took = started.elapsed();
    println!("50 requests, 10 recycles: {took:?}");
    assert!(
        took < Duration::from_secs(4),
        "50 sequential requests with max_requests = 5 took {took:?}\n{}",
        drover.log.text()
    );
}

/// A worker that crashes the moment it is forked is gone, reaped by its zygote, before the
/// master can verify the zygote's `started` report: its exit must still count as a crash
/// (the status, and the emergency restart, would otherwise never see a crash loop).
#[test]
fn a_worker_crashing_as_it_is_forked_is_counted_as_a_crash() {
    let site = site();
    site.write(
        "apps/forkcrash_app.py",
        "import os\n\
         os.register_at_fork(after_in_child=lambda: os._exit(70))\n\
         def application(environ, start_response):\n    \
             start_response('200 OK', [])\n    \
             return [b'never']\n",
    );
    let pool = AppPool {
        app: "forkcrash_app:application",
        max_children: 1,
        ..AppPool::new("py")
    };
    let files: [&dyn PoolFile; 1] = [&pool];
    let (drover, ctl) = start_with_control(&site, &files);
    let log = &drover.log;
    // Each fork crashes; whether the master sees the worker before its zygote reaps it is
    // a race, so three or more forks are waited for, and every one must be counted.
    let forks = || {
        log.lines()
            .iter()
            .filter(|l| {
                l.contains("pool py: worker ") && l.ends_with(" started")
                    || l.contains("reported a worker started") && l.contains("gone before")
            })
            .count() as u64
    };
    let counted = proc::poll(TIMEOUT, || {
        let n = forks();
        n >= 3
            && ctl.status_json("py", &log.text())["recycled"]["crash"].as_u64() == Some(n)
            && forks() == n
    });
    assert!(counted, "a crash went uncounted\n{}", log.text());
}

/// Requests that crash their Python worker (SIGSEGV mid-request) cost those requests and a
/// fork each, never a back-off: after six of them on a 2-worker pool the next request is
/// answered at once, and the log names no start-up failure.
#[test]
fn crashing_requests_never_hold_a_python_pool_back() {
    let site = site();
    let (drover, ctl, nginx) = start(&site, &[&AppPool::new("py")]);
    let log = &drover.log;
    wait_started(log, 0, "py", "worker", 2, TIMEOUT);
    for _ in 0..6 {
        let crashed = http::get(&nginx.url("/py/segv"));
        assert_eq!(crashed.status, 502, "{crashed:?}");
    }
    let started = Instant::now();
    let next = http::get(&nginx.url("/py/pid"));
    let took = started.elapsed();
    let text = log.text();
    assert_eq!(next.status, 200, "{next:?}\n{text}");
    assert!(
        took < crate::worker::AFTER_FLOOD,
        "the request after the crashes took {took:?}\n{text}"
    );
    assert!(!text.contains("failed to start"), "{text}");
    let status = ctl.status_json("py", &text);
    assert_eq!(status["backoff"]["start-up failures"], 0, "{status:#}");
}
