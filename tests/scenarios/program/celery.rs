//! A real Celery worker (`tests/apps/celery/tasks.py`) run by a background pool instead of
//! supervisord: `python3 -m celery -A tasks worker --pool solo`, one Celery worker per copy,
//! on kombu's filesystem transport (the queue is a folder of the test's site, so no broker
//! service runs). The test process sends the tasks (`enqueue.py`); each task run leaves a
//! file of its own, so the test sees which tasks ran, in which copy, and whether one ran
//! twice.
//!
//! - the copies take the tasks sent, and a reload in the middle of them (the copies are
//!   renewed, the old ones get TERM: Celery's warm shutdown) loses none and runs none
//!   twice (`task_acks_late`, one task prefetched per worker); the status counts the two
//!   old copies under `recycled reload`;
//! - drover's stop is Celery's warm shutdown: the task in hand finishes, the copy exits 0,
//!   and the tasks not started stay in the queue for the next worker.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::files;
use crate::common::{
    Drover, PoolFile, Site, TIMEOUT, proc, root_user, run_bounded, start_with_control,
};

/// The app's files, copied into the site.
const TASKS_PY: &str = include_str!("../../apps/celery/tasks.py");
const ENQUEUE: &str = include_str!("../../apps/celery/enqueue.py");

/// The Celery app in `site/celery`, its queue in `site/broker`.
struct App {
    dir: PathBuf,
    broker: PathBuf,
}

impl App {
    fn new(site: &Site) -> App {
        let tasks = site.write("celery/tasks.py", TASKS_PY);
        site.write("celery/enqueue.py", ENQUEUE);
        App {
            dir: tasks.parent().expect("a folder").to_path_buf(),
            broker: site.path().join("broker"),
        }
    }

    /// Sends `record(n, seconds)` for n in `first..first + count`, from this process.
    fn enqueue(&self, first: u32, count: u32, seconds: f64) {
        let out = run_bounded(
            Command::new("python3")
                .arg("enqueue.py")
                .args([first.to_string(), count.to_string(), seconds.to_string()])
                .current_dir(&self.dir)
                .env("CELERY_QUEUE_DIR", &self.broker),
        );
        assert!(
            out.status.success(),
            "enqueue.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The runs so far: task number -> the pids of the copies that ran it, once per run.
    fn runs(&self) -> BTreeMap<u32, Vec<i32>> {
        let mut runs: BTreeMap<u32, Vec<i32>> = BTreeMap::new();
        for entry in files(&self.broker.join("done")) {
            let name = entry.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                continue;
            }
            let mut parts = name.split('.');
            let number = parts.next().and_then(|n| n.parse().ok());
            let pid = parts.next().and_then(|p| p.parse().ok());
            if let (Some(number), Some(pid)) = (number, pid) {
                runs.entry(number).or_default().push(pid);
            }
        }
        runs
    }

    /// Messages still waiting in the queue.
    fn queued(&self) -> usize {
        files(&self.broker.join("queue"))
            .iter()
            .filter(|p| p.to_string_lossy().ends_with(".msg"))
            .count()
    }
}

/// The background pool an operator would write for this app (docs/programs.md, "Celery
/// workers"), with `copies` copies and `extra` lines in `[program]`.
struct Pool<'a> {
    app: &'a App,
    copies: u32,
    extra: &'a str,
}

impl PoolFile for Pool<'_> {
    fn name(&self) -> &str {
        "celery"
    }

    fn toml(&self, _site: &Site) -> String {
        let user = root_user();
        format!(
            "{user}chdir = \"{dir}\"\nclear_env = false\n\n[env]\nCELERY_QUEUE_DIR = \"{broker}\"\n\
             # Celery refuses to run as root unless told.\nC_FORCE_ROOT = \"1\"\n\n\
             [pm]\nmode = \"static\"\nmax_children = {copies}\n\n[program]\n\
             command = [\"python3\", \"-m\", \"celery\", \"-A\", \"tasks\", \"worker\", \
             \"--pool\", \"solo\", \"--without-gossip\", \"--without-mingle\", \
             \"--without-heartbeat\", \"--loglevel\", \"INFO\"]\n\
             stop_signal = \"TERM\"\n{extra}",
            dir = self.app.dir.display(),
            broker = self.app.broker.display(),
            copies = self.copies,
            extra = self.extra,
        )
    }
}

/// Waits for `n` Celery workers to say they are ready, from log line `from` on.
fn wait_ready(drover: &Drover, from: usize, n: usize) {
    drover.log.wait_for_lines(
        from,
        "celery workers ready",
        |l| l.contains("ready."),
        n,
        TIMEOUT,
    );
}

/// Waits until every task of `0..count` has run, and returns the runs.
fn wait_all_ran(app: &App, count: u32, drover: &Drover) -> BTreeMap<u32, Vec<i32>> {
    let mut runs = BTreeMap::new();
    let done = proc::poll(TIMEOUT, || {
        runs = app.runs();
        runs.len() as u32 >= count
    });
    assert!(
        done,
        "{} of {count} tasks ran ({} still queued): {runs:?}\ndrover's log:\n{}",
        runs.len(),
        app.queued(),
        drover.log.text()
    );
    runs
}

#[test]
fn celery_workers_lose_no_task_and_run_none_twice_across_a_reload() {
    let site = Site::new();
    let app = App::new(&site);
    let pool = Pool {
        app: &app,
        copies: 2,
        extra: "stop_timeout = \"30s\"\n",
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    wait_ready(&drover, 0, 2);
    let old = ctl.listed_workers(&drover.log.text());
    assert_eq!(old.len(), 2, "{old:?}");
    let tasks: u32 = 40;
    app.enqueue(0, tasks, 0.1);
    // Both copies take tasks.
    let started = drover
        .log
        .wait_for_lines(0, "tasks done", |l| l.contains("done by"), 6, TIMEOUT);
    let from = drover.log.len();
    ctl.ok(&["reload"], &drover.log.text());
    // Each old copy gets TERM: Celery's warm shutdown, ending the task in hand.
    for pid in &old {
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let shutdowns = drover
        .log
        .lines()
        .iter()
        .skip(from)
        .filter(|l| l.contains("Warm shutdown"))
        .count();
    assert_eq!(shutdowns, 2, "{}", drover.log.text());
    wait_ready(&drover, from, 2);
    let runs = wait_all_ran(&app, tasks, &drover);
    let twice: Vec<_> = runs.iter().filter(|(_, pids)| pids.len() > 1).collect();
    assert!(twice.is_empty(), "tasks run twice: {twice:?}");
    assert_eq!(
        runs.keys().copied().collect::<Vec<u32>>(),
        (0..tasks).collect::<Vec<u32>>()
    );
    assert_eq!(app.queued(), 0);
    // Old and new copies both worked.
    let by_old = runs.values().filter(|p| old.contains(&p[0])).count();
    let new = ctl.listed_workers(&drover.log.text());
    let by_new = runs.values().filter(|p| new.contains(&p[0])).count();
    assert!(
        by_old >= started.len() && by_new > 0,
        "old {by_old}, new {by_new}: {runs:?}"
    );
    eprintln!("celery reload: {by_old} tasks by the old copies, {by_new} by the new ones");
    let status = ctl.status_json("celery", &drover.log.text());
    assert_eq!(status["recycled"]["reload"], 2, "{status:#}");
    assert_eq!(status["total processes"], 2, "{status:#}");
}

#[test]
fn drovers_stop_is_celerys_warm_shutdown_and_leaves_the_rest_queued() {
    let site = Site::new();
    let app = App::new(&site);
    let pool = Pool {
        app: &app,
        copies: 1,
        extra: "stop_timeout = \"30s\"\n",
    };
    let (mut drover, _ctl) = start_with_control(&site, &[&pool]);
    wait_ready(&drover, 0, 1);
    let tasks: u32 = 4;
    let seconds: f64 = 1.5;
    app.enqueue(0, tasks, seconds);
    drover.log.wait_for_line("received", TIMEOUT);
    let t0 = Instant::now();
    drover.signal(Signal::SIGTERM);
    assert!(drover.wait_exit(TIMEOUT).success());
    let stopped = t0.elapsed();
    let log = drover.log.text();
    assert!(log.contains("Warm shutdown"), "{log}");
    let exited = drover.log.wait_for_line("exited with code", TIMEOUT);
    assert!(exited.contains("with code 0"), "{exited}");
    assert!(!log.contains("killing worker"), "{log}");
    // The task in hand ran to its end (its file says how long it worked)...
    let runs = app.runs();
    assert!(!runs.is_empty(), "no task finished: {log}");
    for entry in files(&app.broker.join("done")) {
        let took: f64 = std::fs::read_to_string(&entry)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(took >= seconds, "{entry:?} worked {took}s");
    }
    // ...none ran twice, and the ones not run are back in the queue: none lost.
    assert!(runs.values().all(|pids| pids.len() == 1), "{runs:?}");
    assert_eq!(
        runs.len() + app.queued(),
        tasks as usize,
        "{runs:?}, {} queued",
        app.queued()
    );
    eprintln!(
        "celery warm shutdown: {} of {tasks} tasks finished, {} left queued, stopped in {stopped:.2?}",
        runs.len(),
        app.queued()
    );
    assert!(
        stopped < Duration::from_secs(2 * tasks as u64),
        "{stopped:?}"
    );
}
