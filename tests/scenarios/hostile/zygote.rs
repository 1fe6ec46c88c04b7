//! Hostile: a pool's own code speaks for its zygote (issue 24). The zygote runs as the
//! pool's user; a process of that user attaches to it with gdb and makes it write a report
//! line, `started PID`, naming a root process outside drover. The master must not take it
//! for a worker: by default the zygote cannot be attached to at all (it is not dumpable),
//! and with `process_dumpable = true` the master refuses the pid, which is no child of the
//! zygote, so that the reload and the stop that follow leave the victim alive.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::Signal;

use super::super::embed::Embed;
use crate::common::python::install_apps;
use crate::common::{
    Drover, PoolFile, PythonPool, Site, TIMEOUT, proc, python_runtime, run_bounded, wait_until,
};

/// The pool's user: not root, so that the attach is the app's, not an operator's.
const POOL_USER: &str = "www-data";

/// A root process outside drover, stopped when the test ends.
struct Victim(Child);

impl Victim {
    fn start() -> Victim {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        Victim(child)
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A pool file run as [`POOL_USER`] instead of root.
struct AsPoolUser<P>(P);

impl<P: PoolFile> PoolFile for AsPoolUser<P> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn toml(&self, site: &Site) -> String {
        self.0.toml(site).replace(
            "user = \"root\"",
            &format!("user = \"{POOL_USER}\"\ngroup = \"{POOL_USER}\""),
        )
    }
}

/// The pool's zygote: drover's only child.
fn zygote_of(drover: &Drover) -> i32 {
    wait_until(TIMEOUT, "the zygote", || {
        let below = drover.descendants();
        let zygotes: Vec<i32> = below
            .into_iter()
            .filter(|&pid| proc::stat(pid).is_some_and(|s| s.ppid == drover.pid()))
            .collect();
        (zygotes.len() == 1).then(|| zygotes[0])
    })
}

/// As the pool's user, gdb attaches to `zygote` and makes it write `started VICTIM` on its
/// stderr, the master's report socket. Returns gdb's output.
fn inject_started(zygote: i32, victim: i32) -> String {
    let user = nix::unistd::User::from_name(POOL_USER)
        .expect("getpwnam")
        .unwrap_or_else(|| panic!("no user {POOL_USER}"));
    let line = format!("\u{1e}started {victim}\n");
    let call = format!(
        "call (long)write(2, \"\\036started {victim}\\n\", {})",
        line.len()
    );
    let mut gdb = Command::new("gdb");
    gdb.args(["-nx", "-batch", "-p", &zygote.to_string(), "-ex", &call])
        .env("HOME", "/tmp")
        .uid(user.uid.as_raw())
        .gid(user.gid.as_raw());
    let out = run_bounded(&mut gdb);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether the test can run: as root (it starts a pool as another user), with gdb.
fn can_run() -> bool {
    if !proc::running_as_root() {
        println!("skipped: the pool must run as {POOL_USER}, which needs root");
        return false;
    }
    if Command::new("gdb").arg("--version").output().is_err() {
        println!("skipped: no gdb");
        return false;
    }
    true
}

/// The zygotes under test: drover-php, drover-python.
#[derive(Clone, Copy)]
enum Zygote {
    Php,
    Python,
}

/// The site and a one-worker pool of `zygote` run as [`POOL_USER`], with `top` keys, and
/// drover started from binaries that user can run.
fn start(zygote: Zygote, top: &str) -> (Site, Drover) {
    let site = Site::new();
    let drover = match zygote {
        Zygote::Php => {
            site.script("index.php", "<?php echo 'ok';");
            let pool = AsPoolUser(Embed::new("www", 1).top(top));
            Drover::start_reachable(&site, &[&pool])
        }
        Zygote::Python => {
            install_apps(&site);
            let mut pool = PythonPool::wsgi("www");
            pool.max_children = 1;
            pool.keys = top.to_string();
            // Beside the copy of drover that start_reachable runs.
            let bin = site.path().join("bin");
            std::fs::create_dir_all(&bin).expect("create <site>/bin");
            std::fs::copy(python_runtime(), bin.join("drover-python")).expect("copy drover-python");
            Drover::start_reachable(&site, &[&AsPoolUser(pool)])
        }
    };
    (site, drover)
}

#[test]
fn a_drover_php_zygote_is_not_dumpable_so_its_user_cannot_attach_to_it() {
    not_dumpable(Zygote::Php);
}

#[test]
fn a_drover_python_zygote_is_not_dumpable_so_its_user_cannot_attach_to_it() {
    not_dumpable(Zygote::Python);
}

fn not_dumpable(zygote: Zygote) {
    if !can_run() {
        return;
    }
    let (_site, drover) = start(zygote, "");
    let zygote = zygote_of(&drover);
    let mut victim = Victim::start();

    let gdb = inject_started(zygote, victim.pid());
    println!("gdb: {gdb}");

    assert!(
        gdb.contains("ptrace: Operation not permitted"),
        "the pool's user attached to its zygote {zygote}:\n{gdb}\ndrover's log:\n{}",
        drover.log.text()
    );
    // Every worker is non-dumpable too (inherited across the fork).
    let worker = wait_until(TIMEOUT, "a worker", || {
        proc::descendants(zygote).first().copied()
    });
    let gdb = inject_started(worker, victim.pid());
    assert!(
        gdb.contains("ptrace: Operation not permitted"),
        "the pool's user attached to its worker {worker}:\n{gdb}"
    );
    let started = format!("worker {} started", victim.pid());
    assert!(
        !drover.log.text().contains(&started),
        "{}",
        drover.log.text()
    );
    assert!(victim.alive());
}

#[test]
fn a_dumpable_drover_php_zygotes_forged_report_names_no_worker_and_the_victim_survives() {
    forged_report(Zygote::Php);
}

#[test]
fn a_dumpable_drover_python_zygotes_forged_report_names_no_worker_and_the_victim_survives() {
    forged_report(Zygote::Python);
}

/// The same forged line written without gdb: as the pool's user, `pidfd_getfd(2)` takes a
/// copy of the zygote's stderr (the report socket), which the kernel allows exactly when
/// ptrace would be (the zygote dumpable, the same user), and the line is written on it.
/// For machines where gdb attaches but cannot make the call ("Couldn't write extended
/// state status": its register writes fail on some kernels and CPUs). Returns what it said.
fn inject_by_pidfd(zygote: i32, victim: i32) -> String {
    let user = nix::unistd::User::from_name(POOL_USER)
        .expect("getpwnam")
        .unwrap_or_else(|| panic!("no user {POOL_USER}"));
    let script = "import ctypes, os, sys\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  pidfd = os.pidfd_open(int(sys.argv[1]))\n\
                  fd = libc.syscall(438, pidfd, 2, 0)\n\
                  if fd < 0:\n    sys.exit('pidfd_getfd: ' + os.strerror(ctypes.get_errno()))\n\
                  os.write(fd, ('\\x1estarted ' + sys.argv[2] + '\\n').encode())\n\
                  print('written')\n";
    let mut python = Command::new("python3");
    python
        .args(["-c", script, &zygote.to_string(), &victim.to_string()])
        .uid(user.uid.as_raw())
        .gid(user.gid.as_raw());
    let out = run_bounded(&mut python);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn forged_report(zygote: Zygote) {
    if !can_run() {
        return;
    }
    let (_site, mut drover) = start(zygote, "process_dumpable = true\n");
    let zygote = zygote_of(&drover);
    let mut victim = Victim::start();
    let pid = victim.pid();

    let gdb = inject_started(zygote, pid);
    println!("gdb: {gdb}");
    assert!(
        !gdb.contains("ptrace: Operation not permitted"),
        "process_dumpable = true, yet the pool's user cannot attach:\n{gdb}"
    );
    // gdb attached but could not make the call: the same line, written another way (by
    // another process on the zygote's socket, which the master shows as that process's
    // output and never takes as a report).
    let by_pidfd = !gdb.contains("$1 = ");
    if by_pidfd {
        let written = inject_by_pidfd(zygote, pid);
        println!("pidfd_getfd: {written}");
        assert!(written.contains("written"), "{written}");
    }
    // The master's answer to the report: a refusal (or, unfixed, a new worker).
    let answer = drover.log.wait_for(
        0,
        "the master's answer to the forged report",
        |l| {
            l.contains(&format!("worker {pid} started"))
                || l.contains(&format!("{pid}: refused"))
                || (by_pidfd && l.ends_with(&format!("started {pid}")))
        },
        TIMEOUT,
    );
    println!("{answer}");
    let from = drover.log.len();
    drover.signal(Signal::SIGHUP);
    drover
        .log
        .wait_for(from, "the reload", |l| l.contains("reload done"), TIMEOUT);
    drover.signal(Signal::SIGTERM);
    let status = drover.wait_exit(TIMEOUT);
    println!("drover exited: {status}");

    assert!(
        victim.alive(),
        "drover killed {pid}, a root process it never started; drover's log:\n{}",
        drover.log.text()
    );
    assert!(
        answer.contains("refused")
            || (by_pidfd && !answer.contains(&format!("worker {pid} started"))),
        "{answer}"
    );
}
