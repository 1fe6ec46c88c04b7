//! A real Laravel queue worker run by a background pool instead of supervisord: `php
//! artisan queue:work` of a minimal Laravel 8 app (`tests/apps/laravel`) on Debian's
//! packaged framework (php-laravel-framework), with Laravel's `database` queue driver on
//! SQLite. The test dispatches the jobs with an artisan command of the app
//! (`jobs:dispatch`); each job run leaves a file of its own, so the test sees which jobs
//! ran, in which copy, and whether one ran twice.
//!
//! - the copies run the jobs dispatched, and a reload in the middle of them (the old copies
//!   get TERM, on which `queue:work` finishes the job in hand) loses none and runs none
//!   twice;
//! - drover's stop lets `queue:work` finish the job in hand (exit 0, no SIGKILL), and the
//!   jobs not started stay in the table, unreserved, for the next worker;
//! - `--max-jobs`: a copy that exits 0 after its jobs is replaced at once, counted in the
//!   status as `recycled max_requests`; so is each copy after `php artisan queue:restart`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nix::sys::signal::Signal;

use super::files;
use crate::common::{
    Drover, PoolFile, Site, TIMEOUT, proc, root_user, run_bounded, start_with_control,
};

/// Debian's autoloader for the framework, which the app requires.
const FRAMEWORK: &str = "/usr/share/php/Illuminate/autoload.php";

/// The app, in the repository (run as it is: what it writes goes to the site).
fn app_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apps/laravel")
}

/// The app's writable folders in `site`: its storage (the queue's SQLite database, the
/// cache `queue:restart` uses, the jobs' files) and its bootstrap cache.
struct App {
    storage: PathBuf,
    cache: PathBuf,
}

impl App {
    fn new(site: &Site) -> App {
        assert!(
            Path::new(FRAMEWORK).exists(),
            "{FRAMEWORK} is missing: install php-laravel-framework (scripts/common.sh)"
        );
        let storage = site.path().join("storage");
        let cache = site.path().join("bootstrap-cache");
        std::fs::create_dir_all(storage.join("framework/cache")).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(storage.join("queue.sqlite"), b"").unwrap();
        App { storage, cache }
    }

    /// The environment the app reads, as `NAME = "value"` lines and as pairs.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("APP_STORAGE", self.storage.display().to_string()),
            (
                "APP_SERVICES_CACHE",
                self.cache.join("services.php").display().to_string(),
            ),
            (
                "APP_PACKAGES_CACHE",
                self.cache.join("packages.php").display().to_string(),
            ),
        ]
    }

    /// `php artisan jobs:dispatch FIRST COUNT SECONDS`, from this process.
    fn dispatch(&self, first: u32, count: u32, seconds: f64) {
        let mut command = Command::new("php");
        command
            .arg("artisan")
            .arg("jobs:dispatch")
            .args([first.to_string(), count.to_string(), seconds.to_string()])
            .current_dir(app_dir());
        for (name, value) in self.env() {
            command.env(name, value);
        }
        let out = run_bounded(&mut command);
        assert!(
            out.status.success(),
            "jobs:dispatch failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The runs so far: job number -> the pids of the copies that ran it, once per run.
    fn runs(&self) -> BTreeMap<u32, Vec<i32>> {
        let mut runs: BTreeMap<u32, Vec<i32>> = BTreeMap::new();
        for path in files(&self.storage.join("done")) {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
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

    /// The rows of the `jobs` table: (waiting, reserved by a worker).
    fn table(&self) -> (u32, u32) {
        let db = self.storage.join("queue.sqlite");
        let out = run_bounded(Command::new("php").arg("-r").arg(format!(
            "$db = new PDO('sqlite:{}'); \
             echo $db->query('select count(*) from jobs where reserved_at is null')->fetchColumn(), ' ', \
             $db->query('select count(*) from jobs where reserved_at is not null')->fetchColumn();",
            db.display()
        )));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut counts = text
            .split_whitespace()
            .map(|n| n.parse().unwrap_or(u32::MAX));
        match (counts.next(), counts.next()) {
            (Some(waiting), Some(reserved)) => (waiting, reserved),
            _ => panic!(
                "cannot read the jobs table: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

/// The background pool an operator would write for this app (docs/programs.md, "Laravel
/// queue workers"), with `copies` copies and `options` after `queue:work`.
struct Pool<'a> {
    app: &'a App,
    copies: u32,
    options: &'a str,
}

impl PoolFile for Pool<'_> {
    fn name(&self) -> &str {
        "queue"
    }

    fn toml(&self, _site: &Site) -> String {
        let user = root_user();
        let env: String = self
            .app
            .env()
            .iter()
            .map(|(name, value)| format!("{name} = \"{value}\"\n"))
            .collect();
        let options: String = self
            .options
            .split_whitespace()
            .map(|o| format!(", \"{o}\""))
            .collect();
        format!(
            "{user}chdir = \"{dir}\"\n\n[env]\n{env}\n[pm]\nmode = \"static\"\nmax_children = {copies}\n\n\
             [program]\ncommand = [\"php\", \"artisan\", \"queue:work\", \"--sleep=1\", \"--tries=3\"{options}]\n\
             stop_signal = \"TERM\"\nstop_timeout = \"30s\"\n",
            dir = app_dir().display(),
            copies = self.copies,
        )
    }
}

/// Waits until every job of `0..count` has run, and returns the runs.
fn wait_all_ran(app: &App, count: u32, drover: &Drover) -> BTreeMap<u32, Vec<i32>> {
    let mut runs = BTreeMap::new();
    let done = proc::poll(TIMEOUT, || {
        runs = app.runs();
        runs.len() as u32 >= count
    });
    assert!(
        done,
        "{} of {count} jobs ran: {runs:?}\ndrover's log:\n{}",
        runs.len(),
        drover.log.text()
    );
    runs
}

#[test]
fn laravel_queue_workers_lose_no_job_and_run_none_twice_across_a_reload() {
    let site = Site::new();
    let app = App::new(&site);
    // The table first, so that the workers find it when they start.
    app.dispatch(0, 0, 0.0);
    let pool = Pool {
        app: &app,
        copies: 2,
        options: "",
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let old = proc::wait_until(TIMEOUT, "two copies listed", || {
        let listed = ctl.listed_workers(&drover.log.text());
        (listed.len() == 2).then_some(listed)
    });
    let jobs: u32 = 30;
    app.dispatch(0, jobs, 0.1);
    let started = drover
        .log
        .wait_for_lines(0, "jobs done", |l| l.contains("done by"), 4, TIMEOUT);
    ctl.ok(&["reload"], &drover.log.text());
    for pid in &old {
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let runs = wait_all_ran(&app, jobs, &drover);
    let twice: Vec<_> = runs.iter().filter(|(_, pids)| pids.len() > 1).collect();
    assert!(twice.is_empty(), "jobs run twice: {twice:?}");
    assert_eq!(
        runs.keys().copied().collect::<Vec<u32>>(),
        (0..jobs).collect::<Vec<u32>>()
    );
    // A job's row goes once its handler has returned, just after its file.
    let mut table = (0, 0);
    let emptied = proc::poll(TIMEOUT, || {
        table = app.table();
        table == (0, 0)
    });
    assert!(
        emptied,
        "jobs left in the table (waiting, reserved): {table:?}\ndrover's log:\n{}",
        drover.log.text()
    );
    let new = ctl.listed_workers(&drover.log.text());
    let by_old = runs.values().filter(|p| old.contains(&p[0])).count();
    let by_new = runs.values().filter(|p| new.contains(&p[0])).count();
    assert!(
        by_old >= started.len() && by_new > 0,
        "old {by_old}, new {by_new}: {runs:?}"
    );
    eprintln!("laravel reload: {by_old} jobs by the old copies, {by_new} by the new ones");
    let status = ctl.status_json("queue", &drover.log.text());
    assert_eq!(status["recycled"]["reload"], 2, "{status:#}");
}

#[test]
fn drovers_stop_lets_queue_work_finish_the_job_in_hand() {
    let site = Site::new();
    let app = App::new(&site);
    app.dispatch(0, 0, 0.0);
    let pool = Pool {
        app: &app,
        copies: 1,
        options: "",
    };
    let (mut drover, _ctl) = start_with_control(&site, &[&pool]);
    let jobs: u32 = 3;
    let seconds: f64 = 1.5;
    app.dispatch(0, jobs, seconds);
    drover
        .log
        .wait_for_line("Processing: App\\Jobs\\Record", TIMEOUT);
    let t0 = Instant::now();
    drover.signal(Signal::SIGTERM);
    assert!(drover.wait_exit(TIMEOUT).success());
    let stopped = t0.elapsed();
    let log = drover.log.text();
    let exited = drover.log.wait_for_line("exited with code", TIMEOUT);
    assert!(exited.contains("with code 0"), "{exited}");
    assert!(!log.contains("killing worker"), "{log}");
    // The job in hand ran to its end; the others wait in the table, not reserved.
    let runs = app.runs();
    assert_eq!(runs.len(), 1, "{runs:?}\n{log}");
    for path in files(&app.storage.join("done")) {
        let took: f64 = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(took >= seconds, "{path:?} worked {took}s");
    }
    assert_eq!(app.table(), (jobs - 1, 0));
    eprintln!("laravel queue:work on TERM: the job in hand finished, stopped in {stopped:.2?}");
}

#[test]
fn a_copy_that_ends_at_max_jobs_is_replaced_and_counted() {
    let site = Site::new();
    let app = App::new(&site);
    app.dispatch(0, 0, 0.0);
    // Each copy lives past the 2 s a copy must run not to count as a failed start.
    let pool = Pool {
        app: &app,
        copies: 1,
        options: "--max-jobs=4",
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let jobs: u32 = 12;
    app.dispatch(0, jobs, 0.6);
    let runs = wait_all_ran(&app, jobs, &drover);
    let mut copies: Vec<i32> = runs.values().map(|p| p[0]).collect();
    copies.sort();
    copies.dedup();
    assert_eq!(copies.len(), 3, "4 jobs per copy: {runs:?}");
    let log = drover.log.text();
    assert!(!log.contains("failed to start"), "{log}");
    let status = proc::wait_until(TIMEOUT, "two clean exits counted", || {
        let status = ctl.status_json("queue", &drover.log.text());
        (status["recycled"]["max_requests"].as_u64() >= Some(2)).then_some(status)
    });
    assert_eq!(status["recycled"]["crash"], 0, "{status:#}");
}

#[test]
fn after_queue_restart_every_copy_exits_and_is_replaced() {
    let site = Site::new();
    let app = App::new(&site);
    app.dispatch(0, 0, 0.0);
    let pool = Pool {
        app: &app,
        copies: 2,
        options: "",
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    // Past the 2 s within which an exit is a failed start.
    let old = proc::wait_until(TIMEOUT, "two copies running 3 s", || {
        let text = ctl.ok(&["status", "queue", "--full", "--json"], &drover.log.text());
        let status: serde_json::Value = serde_json::from_str(&text).unwrap();
        let copies = status["processes"].as_array()?.clone();
        (copies.len() == 2 && copies.iter().all(|c| c["start since"].as_u64() >= Some(3))).then(
            || {
                copies
                    .iter()
                    .map(|c| c["pid"].as_i64().unwrap() as i32)
                    .collect::<Vec<_>>()
            },
        )
    });
    let mut command = Command::new("php");
    command
        .args(["artisan", "queue:restart"])
        .current_dir(app_dir());
    for (name, value) in app.env() {
        command.env(name, value);
    }
    assert!(run_bounded(&mut command).status.success());
    for pid in &old {
        let exited = drover
            .log
            .wait_for_line(&format!("worker {pid} exited"), TIMEOUT);
        assert!(exited.contains("with code 0"), "{exited}");
    }
    let status = proc::wait_until(TIMEOUT, "two new copies", || {
        let status = ctl.status_json("queue", &drover.log.text());
        (status["total processes"] == 2 && status["recycled"]["max_requests"] == 2)
            .then_some(status)
    });
    assert_eq!(status["recycled"]["crash"], 0, "{status:#}");
    assert!(!drover.log.text().contains("failed to start"));
    app.dispatch(0, 2, 0.0);
    let runs = wait_all_ran(&app, 2, &drover);
    assert!(
        runs.values().all(|p| !old.contains(&p[0])),
        "{runs:?} {old:?}"
    );
}
