//! `drover import gunicorn` on a real gunicorn.conf.py, evaluated by drover-python.

use std::process::Command;

use super::{stdout, text};
use crate::common::python::install_apps;
use crate::common::{
    Drover, Location, Nginx, Site, TIMEOUT, bin, check_config, http, php_runtime, python_runtime,
    run_bounded,
};

/// `drover import gunicorn ARGS...` run from `folder`, as gunicorn was.
fn import_from(folder: &std::path::Path, args: &[&str]) -> std::process::Output {
    python_runtime();
    php_runtime();
    run_bounded(
        Command::new(bin())
            .current_dir(folder)
            .args(["import", "gunicorn"])
            .args(args),
    )
}

#[test]
fn a_gunicorn_config_imports_to_a_pool_that_serves_the_app() {
    let site = Site::new();
    let apps = install_apps(&site);
    let socket = site.socket("app");
    let config = site.write(
        "gunicorn.conf.py",
        &format!(
            "import multiprocessing\n\
             bind = \"unix:{socket}\"\n\
             workers = 2\n\
             max_requests = 100\n\
             pythonpath = \"{apps}\"\n\
             print(\"the config ran\")\n\
             \n\
             def post_fork(server, worker):\n\
             \x20   import os\n\
             \x20   server.log.info(\"post_fork DATABASE_URL=%s %s\", os.environ.get(\"DATABASE_URL\"), worker.pid)\n",
            socket = socket.display(),
            apps = apps.display(),
        ),
    );
    let out = import_from(
        site.path(),
        &[
            "-o",
            ".",
            "-c",
            "gunicorn.conf.py",
            "--threads",
            "2",
            "-n",
            "app",
            "wsgi_app:application",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report = stdout(&out);
    assert!(
        report.contains(&format!("fastcgi_pass unix:{};", socket.display())),
        "{report}"
    );
    assert!(!report.contains("--threads"), "{report}");
    // The file ran in drover-python (its print went to stderr, not into the JSON).
    assert!(text(&out).contains("the config ran"), "{}", text(&out));
    let pool = std::fs::read_to_string(site.path().join("pools.d/app.toml")).unwrap();
    let hooks = format!("\nhooks = \"{}\"", config.display());
    assert!(pool.contains(&hooks), "no {hooks:?} in:\n{pool}");

    let checked = check_config(&site);
    assert!(checked.status.success(), "{}", text(&checked));
    let resolved = stdout(&checked);
    for expected in [
        "max_children = 2",
        "max_requests = 100",
        "app = \"wsgi_app:application\"",
        "preload = false",
        "threads = 2",
        "request_terminate_timeout = \"30s\"",
        "process_control_timeout = \"30s\"",
    ] {
        assert!(resolved.contains(expected), "no {expected} in:\n{resolved}");
    }

    // gunicorn's workers inherit its environment (a unit's Environment=): so do the
    // imported pool's, from drover's.
    let url = std::ffi::OsStr::new("postgres://db/app");
    let drover = Drover::spawn_with_env(&site, &[("DATABASE_URL", url)]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &socket)]);
    let reply = http::get(&nginx.url("/pid"));
    assert_eq!(
        reply.status,
        200,
        "{reply:?}; drover's log:\n{}",
        drover.log.text()
    );
    assert!(reply.body.trim().parse::<i32>().is_ok(), "{reply:?}");
    // The config file is the pool's hooks file: post_fork ran in each worker.
    let pids: std::collections::BTreeSet<String> = drover
        .log
        .wait_for_lines(
            0,
            "a post_fork line from each worker",
            |l| l.contains("info: post_fork DATABASE_URL=postgres://db/app "),
            2,
            TIMEOUT,
        )
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(pids.len(), 2, "post_fork lines: {pids:?}");
}

#[test]
fn a_config_that_raises_stops_the_import_with_its_traceback() {
    let site = Site::new();
    site.write(
        "gunicorn.conf.py",
        "workers = 2\nraise RuntimeError(\"no config today\")\n",
    );
    let out = import_from(
        site.path(),
        &["-o", ".", "-c", "gunicorn.conf.py", "app:app"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("RuntimeError: no config today"),
        "{}",
        text(&out)
    );
    assert!(!site.path().join("drover.toml").exists());
}
