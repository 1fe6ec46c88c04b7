//! `drover import supervisord` on a realistic configuration: Debian's supervisord.conf
//! including Laravel's documented queue worker and a Celery worker (Celery's own
//! celeryd.conf). The written pool files and the report are compared with golden files
//! (`DROVER_BLESS=1` rewrites them); the pools load, but for what only the operator can
//! fix (a program that is not installed here, a user that does not exist).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Site, bin, run_bounded};

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/program")
}

/// `text` against the golden file `name`, or written to it with `DROVER_BLESS=1`.
fn golden(name: &str, text: &str) {
    let path = here().join("golden").join(name);
    if std::env::var_os("DROVER_BLESS").is_some() {
        std::fs::write(&path, text).expect("write the golden file");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (DROVER_BLESS=1 writes it)", path.display()));
    assert_eq!(
        text,
        want,
        "{} differs (DROVER_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn laravels_queue_worker_and_a_celery_worker_import_to_background_pools() {
    let site = Site::new();
    let conf = site.path().join("supervisor");
    std::fs::create_dir_all(conf.join("conf.d")).expect("mkdir");
    for file in [
        "supervisord.conf",
        "conf.d/laravel-worker.conf",
        "conf.d/celery.conf",
    ] {
        std::fs::copy(here().join("supervisord").join(file), conf.join(file)).expect("copy");
    }
    // Relative paths, so that the report's FILE:LINE is the same in every run.
    let out = run_bounded(Command::new(bin()).current_dir(site.path()).args([
        "import",
        "supervisord",
        "-o",
        "drover",
        "supervisor/supervisord.conf",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The report, up to the check of the written files (which names this machine's users).
    let report = stdout.split("\n`drover -t").next().unwrap_or_default();
    golden("report.txt", report);
    for pool in ["laravel-worker", "celery"] {
        let written =
            std::fs::read_to_string(site.path().join(format!("drover/pools.d/{pool}.toml")))
                .unwrap_or_else(|e| panic!("{pool}.toml: {e}\n{stdout}\n{stderr}"));
        golden(&format!("{pool}.toml"), &written);
    }
    // The check runs, and stops only on what the operator must fix: Celery's virtualenv
    // is not installed here.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("/home/app/venv/bin/celery"), "{stderr}");
}

#[test]
fn a_file_without_programs_writes_nothing() {
    let site = Site::new();
    site.write("only.conf", "[supervisord]\nnodaemon=true\n");
    let out = run_bounded(Command::new(bin()).current_dir(site.path()).args([
        "import",
        "supervisord",
        "-o",
        "drover",
        "only.conf",
    ]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no [program:NAME] section"), "{stderr}");
    assert!(!site.path().join("drover").exists());
}
