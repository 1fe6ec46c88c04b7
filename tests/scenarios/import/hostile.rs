//! Every importer on hostile input, run as the operator runs it (often as root): names
//! that are paths (`[program:../../x]`, `[program:/abs/x]`, `[../../x]`, gunicorn's
//! `proc_name`), in the named files and in the files they include, and links planted in
//! the output folder. Nothing may be written outside `-o`, and a refusal names the file
//! and line of each name.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::text;
use crate::common::{Drover, Site, TIMEOUT, bin, python_runtime, run_bounded};

/// `drover import ARGS...` run from the site's folder, as an operator runs it there.
fn import_in(site: &Site, args: &[&str]) -> Output {
    run_bounded(
        Command::new(bin())
            .current_dir(site.path())
            .arg("import")
            .args(args),
    )
}

/// Every `.toml` file under `dir`, links included, not followed.
fn tomls(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            out.extend(tomls(&path));
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn supervisord_program_names_that_are_paths_refuse_the_import_and_write_nothing() {
    let site = Site::new();
    let abs = site.path().join("abs/x");
    site.write(
        "etc/supervisord.conf",
        &format!(
            "[include]\nfiles = conf.d/*.conf\n[program:ok]\ncommand=/bin/sleep 60\nuser=root\n\
             [program:{}]\ncommand=/bin/sh -c id\nuser=root\n",
            abs.display()
        ),
    );
    std::fs::create_dir_all(site.path().join("abs")).expect("mkdir abs");
    site.write(
        "etc/conf.d/evil.conf",
        "[program:../../x]\ncommand=/bin/sh -c id\nuser=root\n\n[program:./ok]\ncommand=/bin/sh\n",
    );
    let out = import_in(
        &site,
        &["supervisord", "-o", "out/drover", "etc/supervisord.conf"],
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (place, name) in [
        (
            "etc/supervisord.conf:6",
            format!("[program:{}]", abs.display()),
        ),
        ("etc/conf.d/evil.conf:1", "[program:../../x]".to_owned()),
        ("etc/conf.d/evil.conf:5", "[program:./ok]".to_owned()),
    ] {
        assert!(
            stderr.contains(&format!("{place}: {name}: refused")),
            "{place} {name}: {shown}"
        );
    }
    assert!(stderr.contains("[A-Za-z0-9_.-]+"), "{shown}");
    assert!(
        stderr.contains("3 refused (above): nothing written"),
        "{shown}"
    );
    assert_eq!(tomls(site.path()), Vec::<PathBuf>::new(), "{shown}");
    assert!(!site.path().join("out").exists(), "{shown}");
}

#[test]
fn php_fpm_pool_names_that_are_paths_refuse_the_import_and_write_nothing() {
    let site = Site::new();
    // An absolute name inside the site, where the check below looks.
    let abs = site.path().join("abs/x");
    std::fs::create_dir_all(site.path().join("abs")).expect("mkdir abs");
    site.write(
        "fpm/php-fpm.conf",
        "[global]\nerror_log = /proc/self/fd/2\ninclude = pool.d/*.conf\n",
    );
    site.write(
        "fpm/pool.d/www.conf",
        &format!(
            "[www]\nlisten = 9000\n[../../x]\nlisten = 9001\nuser = root\n[{}]\nlisten = 9002\n",
            abs.display()
        ),
    );
    let out = import_in(&site, &["php-fpm", "-o", "out/drover", "fpm/php-fpm.conf"]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fpm/pool.d/www.conf:3: [../../x]: refused"),
        "{shown}"
    );
    assert!(
        stderr.contains(&format!(
            "fpm/pool.d/www.conf:6: [{}]: refused",
            abs.display()
        )),
        "{shown}"
    );
    assert_eq!(tomls(site.path()), Vec::<PathBuf>::new(), "{shown}");
}

#[test]
fn a_gunicorn_proc_name_that_is_a_path_is_not_the_pools_file_name() {
    python_runtime();
    let site = Site::new();
    site.write("gunicorn.conf.py", "proc_name = \"../../x\"\nworkers = 2\n");
    let out = import_in(
        &site,
        &[
            "gunicorn",
            "-o",
            "out/drover",
            "-c",
            "gunicorn.conf.py",
            "site_app:app",
        ],
    );
    let shown = text(&out);
    let written = tomls(site.path());
    let pools = site.path().join("out/drover/pools.d");
    assert_eq!(
        written,
        [
            site.path().join("out/drover/drover.toml"),
            pools.join("site_app.toml")
        ],
        "{shown}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("gunicorn.conf.py:1: proc_name"), "{shown}");
}

#[test]
fn links_planted_in_the_output_folder_are_replaced_never_followed() {
    use std::os::unix::fs::symlink;
    let site = Site::new();
    site.write(
        "supervisord.conf",
        "[program:ok]\ncommand=/bin/sleep 60\nuser=root\n",
    );
    let victim = site.write("victim", "root's own\n");
    let pools = site.path().join("out/pools.d");
    std::fs::create_dir_all(&pools).expect("mkdir");
    symlink(&victim, pools.join("ok.toml")).expect("plant a link");
    let out = import_in(&site, &["supervisord", "-o", "out", "supervisord.conf"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = import_in(
        &site,
        &["supervisord", "-o", "out", "--force", "supervisord.conf"],
    );
    let shown = text(&out);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's own\n",
        "{shown}"
    );
    let written = pools.join("ok.toml");
    assert!(!written.symlink_metadata().unwrap().is_symlink(), "{shown}");
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .contains("[program]")
    );
    // pools.d itself a link to another folder: refused before drover.toml is written.
    let elsewhere = site.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::fs::create_dir(site.path().join("out2")).expect("mkdir");
    symlink(&elsewhere, site.path().join("out2/pools.d")).expect("plant a link");
    let out = import_in(
        &site,
        &["supervisord", "-o", "out2", "--force", "supervisord.conf"],
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
        "{shown}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "{shown}");
    assert!(!site.path().join("out2/drover.toml").exists(), "{shown}");
}

#[test]
fn an_imported_program_runs_with_the_environment_it_had_under_supervisord() {
    let site = Site::new();
    site.write(
        "supervisord.conf",
        "[supervisord]\nenvironment=SHARED=\"from-supervisord\"\n\
         [program:env]\n\
         command=/bin/sh -c 'echo \"seen PATH=$PATH APP=$APP SHARED=$SHARED HOME=%(ENV_HOME)s\"; exec sleep 60' # a comment\n\
         environment=APP=\"100%%\"\nuser=root\n",
    );
    let out = import_in(&site, &["supervisord", "-o", ".", "supervisord.conf"]);
    let shown = text(&out);
    let pool = std::fs::read_to_string(site.path().join("pools.d/env.toml")).expect(&shown);
    assert!(!pool.contains("# a comment\""), "{pool}");
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\n",
    );
    let drover = Drover::spawn(&site);
    let line = drover.log.wait_for_line("seen PATH=", TIMEOUT);
    let home = std::env::var("HOME").unwrap_or_default();
    assert!(
        line.contains(&format!("APP=100% SHARED=from-supervisord HOME={home}")),
        "{line}\n{pool}"
    );
    let path = line
        .split("PATH=")
        .nth(1)
        .unwrap_or("")
        .split(' ')
        .next()
        .unwrap_or("");
    assert!(path.contains("/bin"), "{line}");
}
