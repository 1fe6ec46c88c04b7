//! The log files drover writes, laid out as php-fpm's usually are: `error_log`, a pool's
//! `slowlog` and `access_log` in a folder only root may write (`/var/log/php-fpm/`).
//!
//! - Every file drover creates is mode 0600 (php-fpm's), the error log reopened on USR1
//!   too: a token a script of one pool logs cannot be read by another pool's user
//!   (`nobody`).
//! - The master opens them all, the access log before it execs the zygote: a pool of
//!   `nobody` serves and logs there, its slowlog gets its entry, and after logrotate's
//!   rename and USR1 the next lines land in a fresh file at the path.
//! - `drover -t` names the key (with its file and line) of a log whose folder is missing.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::signal::Signal;

use super::Embed;
use crate::common::{
    AsUser, Drover, Nginx, PoolFile, Site, TIMEOUT, check_config, http, proc, run_bounded,
    wait_until,
};

/// `<site>/log`, a folder as /var/log/php-fpm is: root's, mode 0755.
fn log_folder(site: &Site) -> PathBuf {
    let folder = site.path().join("log");
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    folder
}

/// Writes drover.toml with `error_log` at `file` and the pools, as `Drover::start` would.
fn write_config(site: &Site, error_log: &Path, pools: &[&dyn PoolFile]) {
    site.write(
        "drover.toml",
        &format!(
            "error_log = \"{}\"\nlog_level = \"info\"\n",
            error_log.display()
        ),
    );
    for pool in pools {
        site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(site));
    }
}

/// The text of `file` once it contains `needle`.
fn once_in(file: &Path, needle: &str) -> String {
    wait_until(
        TIMEOUT,
        &format!("{needle:?} in {}", file.display()),
        || {
            let text = std::fs::read_to_string(file).ok()?;
            text.contains(needle).then_some(text)
        },
    )
}

fn mode(file: &Path) -> u32 {
    std::fs::metadata(file).unwrap().permissions().mode() & 0o777
}

/// `cat FILE` as nobody: what it read, or why it could not.
fn read_as_nobody(file: &Path) -> Result<String, String> {
    let out = run_bounded(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat"])
            .arg(file),
    );
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A pool's log keys: `access_log` (the query shown) and `slowlog` (a second's timeout) in
/// `folder`.
fn logging(name: &str, folder: &Path) -> String {
    format!(
        "access_log = \"{}/{name}.access\"\nslowlog = \"{}/{name}.slow\"\n\
         request_slowlog_timeout = \"1s\"\naccess_format = \"%m %r%Q%q %s\"\n",
        folder.display(),
        folder.display()
    )
}

#[test]
fn every_log_file_drover_creates_is_0600_and_another_pool_s_user_cannot_read_it() {
    if !proc::running_as_root() {
        println!("skipped: needs root, to read as nobody");
        return;
    }
    let site = Site::new();
    let folder = log_folder(&site);
    // A script that logs a secret (a token) on stderr, in its request's URI, and slowly
    // enough to get a slowlog entry.
    site.script(
        "token.php",
        "<?php error_log('token=' . $_GET['t']); usleep(1500000); echo 'logged';",
    );
    let error_log = folder.join("drover.log");
    let pool = Embed::new("b", 1).top(&logging("b", &folder));
    write_config(&site, &error_log, &[&pool]);
    let drover = Drover::spawn(&site);
    once_in(&error_log, "ready:");
    let nginx = Nginx::start(&site, &site.socket("b"));

    let reply = http::get(&nginx.url("/token.php?t=s3cr3t"));

    assert_eq!(reply.body, "logged", "{reply:?}");
    let access = folder.join("b.access");
    let slow = folder.join("b.slow");
    once_in(&error_log, "token=s3cr3t");
    once_in(&access, "s3cr3t");
    once_in(&slow, "s3cr3t");
    for file in [&error_log, &access, &slow] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
        let read = read_as_nobody(file);
        assert!(
            read.as_ref()
                .is_err_and(|e| e.contains("Permission denied")),
            "nobody read {}: {read:?}",
            file.display()
        );
    }
    // logrotate's rename, then USR1: the new error log is 0600 too.
    std::fs::rename(&error_log, folder.join("drover.log.1")).unwrap();
    drover.signal(Signal::SIGUSR1);
    once_in(&error_log, "error log reopened");
    assert_eq!(mode(&error_log), 0o600);
    drop(nginx);
    drop(drover);
}

/// The lines of `file` that contain `needle`.
fn count(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .matches(needle)
        .count()
}

#[test]
fn a_pool_of_nobody_logs_in_a_root_only_folder_and_usr1_follows_logrotate() {
    if !proc::running_as_root() {
        println!("skipped: needs root, to run a pool as nobody");
        return;
    }
    let site = Site::new();
    let folder = log_folder(&site);
    site.script("index.php", "<?php echo 'served by ', posix_geteuid();");
    site.script("slow.php", "<?php usleep(1500000); echo 'slept';");
    let error_log = folder.join("drover.log");
    let pool = AsUser {
        pool: Embed::new("www", 2).top(&logging("www", &folder)),
        user: "nobody",
        group: "nogroup",
    };
    write_config(&site, &error_log, &[&pool]);
    let drover = Drover::spawn_reachable(&site);
    // Before the master opened it, the zygote (as nobody) could not: the pool never came up.
    once_in(&error_log, "ready:");
    let nginx = Nginx::start(&site, &site.socket("www"));

    let served = http::get(&nginx.url("/index.php?before=1"));
    let slept = http::get(&nginx.url("/slow.php"));

    assert_eq!(served.status, 200, "{served:?}");
    assert_ne!(served.body, "served by 0", "the pool must not run as root");
    assert_eq!(slept.body, "slept");
    let access = folder.join("www.access");
    let slow = folder.join("www.slow");
    once_in(&access, "/index.php?before=1");
    once_in(&slow, "/slow.php");
    let meta = std::fs::metadata(&access).unwrap();
    assert_eq!((meta.uid(), mode(&access)), (0, 0o600));

    // logrotate: rename, then USR1. The pool gets a new generation on a new file; until it
    // is up the old workers serve, and write to the renamed file.
    let old_workers = drover.workers();
    let rotated = folder.join("www.access.1");
    std::fs::rename(&access, &rotated).unwrap();
    drover.signal(Signal::SIGUSR1);
    let mut after = 0;
    wait_until(TIMEOUT, "a line in a new access log at the path", || {
        after += 1;
        http::get(&nginx.url(&format!("/index.php?after={after}")));
        (count(&access, &format!("after={after} ")) == 1).then_some(())
    });
    once_in(&error_log, "access_log");
    assert_eq!(mode(&access), 0o600);
    wait_until(TIMEOUT, "the old workers to exit", || {
        (!old_workers.iter().any(|&pid| proc::is_running(pid))).then_some(())
    });
    for i in 0..6 {
        http::get(&nginx.url(&format!("/index.php?later={i}")));
    }
    wait_until(TIMEOUT, "6 later lines in the new file", || {
        (count(&access, "later=") == 6).then_some(())
    });
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("before=1"), "{old}");
    assert!(!old.contains("later="), "{old}");
    // Every request has its line, in one file or the other: none was lost.
    for n in 1..=after {
        let needle = format!("after={n} ");
        assert_eq!(
            count(&access, &needle) + count(&rotated, &needle),
            1,
            "{needle}"
        );
    }
    drop(nginx);
    drop(drover);
}

#[test]
fn drover_t_names_each_log_key_whose_folder_is_missing() {
    let site = Site::new();
    let missing = site.path().join("missing");
    let pool = Embed::new("www", 1).top(&logging("www", &missing));
    write_config(&site, &missing.join("drover.log"), &[&pool]);

    let out = check_config(&site);

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let pool_file = site.path().join("pools.d/www.toml");
    let line_of = |file: &Path, key: &str| {
        let text = std::fs::read_to_string(file).unwrap();
        1 + text
            .lines()
            .position(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    for (file, key) in [
        (site.path().join("drover.toml"), "error_log"),
        (pool_file.clone(), "access_log"),
        (pool_file, "slowlog"),
    ] {
        let line = line_of(&file, key);
        let located = format!("{}:{line}:", file.display());
        assert!(
            stderr.lines().any(|l| l.contains(&located)
                && l.contains(key)
                && l.contains(&format!("the folder {} does not exist", missing.display()))),
            "{located} {key}: {stderr}"
        );
    }
}

/// Issue 34: when a pool's user can write its logs' folder (an app's `storage/logs`), it
/// can swap `www.access` and `www.slow` for links to a root-only file. The master follows
/// neither: USR1 keeps the old access log (and says why), the slow entry is refused, and
/// the root-only file is never written; `drover -t` names the link too.
#[test]
fn links_a_pool_user_puts_at_its_log_paths_are_not_followed() {
    if !proc::running_as_root() {
        println!("skipped: needs root, to run a pool as nobody");
        return;
    }
    let site = Site::new();
    let folder = log_folder(&site);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    nix::unistd::chown(&folder, Some(nobody.uid), None).unwrap();
    site.script("index.php", "<?php echo 'served';");
    site.script("slow.php", "<?php usleep(1500000); echo 'slept';");
    let secret = site.path().join("root-only");
    std::fs::write(&secret, "root's\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let error_log = site.path().join("drover.log");
    let pool = AsUser {
        pool: Embed::new("www", 1).top(&logging("www", &folder)),
        user: "nobody",
        group: "nogroup",
    };
    write_config(&site, &error_log, &[&pool]);
    let drover = Drover::spawn_reachable(&site);
    once_in(&error_log, "ready:");
    let nginx = Nginx::start(&site, &site.socket("www"));
    assert_eq!(http::get(&nginx.url("/index.php?before=1")).body, "served");
    let access = folder.join("www.access");
    once_in(&access, "before=1");

    // What the pool's user can do in its own folder: links in place of both files.
    for file in [&access, &folder.join("www.slow")] {
        let _ = std::fs::remove_file(file);
        std::os::unix::fs::symlink(&secret, file).unwrap();
        std::os::unix::fs::lchown(file, Some(nobody.uid.as_raw()), None).unwrap();
    }
    drover.signal(Signal::SIGUSR1);
    once_in(&error_log, "its workers keep the old access log");
    assert_eq!(http::get(&nginx.url("/slow.php")).body, "slept");
    http::get(&nginx.url("/index.php?after=1"));
    let log = once_in(&error_log, "www.slow is a symbolic link");
    assert!(log.contains("www.access is a symbolic link"), "{log}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's\n");

    let out = check_config(&site);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("access_log") && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
    drop(nginx);
    drop(drover);
}

/// `file:line:` of `key = ` in `file`, as drover's errors locate a key.
fn located(file: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with(&format!("{key} =")))
        .unwrap_or_else(|| panic!("no {key} in {text}"));
    format!("{}:{line}:", file.display())
}

/// Issue 34, each log path (`error_log`, `access_log`, `slowlog`) in a folder the pool's
/// user can write, with a symbolic link or a hard link of a root-only file at it: before
/// the start, `drover -t` names each key with its file and line and the start refuses;
/// after logrotate's rename and USR1, hard links in the renamed files' place are refused
/// as links are (the master and the workers keep writing the renamed files, the slow entry
/// is not written). The root-only file is never written.
#[test]
fn links_and_hard_links_at_every_log_path_are_refused_at_the_start_and_at_usr1() {
    if !proc::running_as_root() {
        println!("skipped: needs root, to run a pool as nobody");
        return;
    }
    let site = Site::new();
    let folder = log_folder(&site);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    nix::unistd::chown(&folder, Some(nobody.uid), None).unwrap();
    site.script("index.php", "<?php echo 'served';");
    site.script("slow.php", "<?php usleep(1500000); echo 'slept';");
    let secret = site.path().join("root-only");
    std::fs::write(&secret, "root's\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let error_log = folder.join("drover.log");
    let pool = AsUser {
        pool: Embed::new("www", 1).top(&logging("www", &folder)),
        user: "nobody",
        group: "nogroup",
    };
    write_config(&site, &error_log, &[&pool]);
    let pool_file = site.path().join("pools.d/www.toml");
    let paths = [
        (
            site.path().join("drover.toml"),
            "error_log",
            error_log.clone(),
        ),
        (pool_file.clone(), "access_log", folder.join("www.access")),
        (pool_file, "slowlog", folder.join("www.slow")),
    ];
    let untouched = || assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's\n");

    // Before the start: a link, then a hard link, at each path.
    for (kind, why) in [
        ("link", "is a symbolic link"),
        ("hard link", "has 4 hard links"),
    ] {
        for (_, _, path) in &paths {
            let _ = std::fs::remove_file(path);
            if kind == "link" {
                std::os::unix::fs::symlink(&secret, path).unwrap();
            } else {
                std::fs::hard_link(&secret, path).unwrap();
            }
        }
        let out = check_config(&site);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kind}: {stderr}");
        for (file, key, _) in &paths {
            let at = located(file, key);
            assert!(
                stderr
                    .lines()
                    .any(|l| l.contains(&at) && l.contains(key) && l.contains(why)),
                "{kind}: drover -t does not name {at} {key}: {stderr}"
            );
        }
        let mut refused = Drover::spawn_reachable(&site);
        let status = refused.wait_exit(TIMEOUT);
        assert!(
            !status.success() && refused.log.text().contains(why),
            "{kind}: the start was not refused ({status}): {}",
            refused.log.text()
        );
        untouched();
    }

    // At USR1: logrotate renames each file, the pool's user puts a hard link in its place.
    for (_, _, path) in &paths {
        std::fs::remove_file(path).unwrap();
    }
    let drover = Drover::spawn_reachable(&site);
    once_in(&error_log, "ready:");
    let nginx = Nginx::start(&site, &site.socket("www"));
    assert_eq!(http::get(&nginx.url("/index.php?before=1")).body, "served");
    assert_eq!(http::get(&nginx.url("/slow.php?before=1")).body, "slept");
    let rotated = |path: &Path| {
        path.with_extension(format!("{}.1", path.extension().unwrap().to_str().unwrap()))
    };
    once_in(&paths[1].2, "before=1");
    once_in(&paths[2].2, "/slow.php");
    for (_, _, path) in &paths {
        std::fs::rename(path, rotated(path)).unwrap();
        std::fs::hard_link(&secret, path).unwrap();
    }
    drover.signal(Signal::SIGUSR1);
    let old_error_log = rotated(&error_log);
    once_in(&old_error_log, "its workers keep the old access log");
    assert_eq!(http::get(&nginx.url("/index.php?after=1")).body, "served");
    assert_eq!(http::get(&nginx.url("/slow.php?after=1")).body, "slept");
    let said = once_in(&old_error_log, "cannot write the slowlog");
    for needle in [
        "cannot reopen the error log",
        "drover.log has 4 hard links",
        "www.access has 4 hard links",
        "www.slow has 4 hard links",
    ] {
        assert!(
            said.contains(needle),
            "no {needle:?} in the error log: {said}"
        );
    }
    once_in(&rotated(&paths[1].2), "after=1");
    untouched();
    drop(nginx);
    drop(drover);
}
