//! `drover ctl probe`, the health check without nginx: one FastCGI request straight to a
//! pool's socket, read from the configuration, or asked of the master through the control
//! socket (`drover ctl --socket PATH probe`). Exit 0 for a healthy PHP pool (by
//! `--root` and by `--script`) and a healthy Python pool under its mount, the status and
//! headers printed (and the body with `--body`); 1 for a script or an app that answers
//! 500, and 1, saying so, once nothing listens on the socket.
//!
//! `listen = "PORT"`, a bare port as in the official php-fpm image: the pool answers on
//! 127.0.0.1:PORT (and on [::1]:PORT where the host has IPv6: php-fpm's dual stack).

use std::net::TcpListener;
use std::path::Path;

use super::{Pool, site};
use crate::common::{CtlRun, PoolFile, TIMEOUT, probe, proc, start_with_control};

/// `probe ARGS` with a timeout that a loaded test machine meets.
fn run(config: &Path, args: &[&str]) -> CtlRun {
    let timeout = format!("{}s", TIMEOUT.as_secs());
    let mut all = args.to_vec();
    all.extend(["--timeout", &timeout]);
    let run = probe(config, &all);
    println!(
        "probe {}: exit {:?}\n{}{}",
        run.args, run.code, run.stdout, run.stderr
    );
    run
}

fn assert_exit(run: &CtlRun, code: i32, status: &str, log: &str) {
    assert_eq!(
        run.code,
        Some(code),
        "probe {}: {run:#?}\ndrover's log:\n{log}",
        run.args
    );
    assert!(
        run.stdout.starts_with(&format!("{status} in ")),
        "probe {}: status {status} expected first: {run:#?}",
        run.args
    );
}

#[test]
fn ctl_probe_answers_0_for_healthy_pools_and_1_for_a_500_or_a_silent_socket() {
    let site = site();
    site.script(
        "fail.php",
        "<?php http_response_code(500); header('X-Probe: failing'); echo 'failed';",
    );
    let php = Pool::php("www").greeting("probed");
    let python = Pool::python("app").mount("/py").greeting("probed");
    let (drover, ctl) = start_with_control(&site, &[&php, &python]);
    let config = site.path().join("drover.toml");
    let log = || drover.log.text();
    let root = site.docroot.display().to_string();
    let script = site.docroot.join("greeting.php").display().to_string();

    let ok = run(
        &config,
        &["www", "/greeting.php", "--root", &root, "--body"],
    );
    assert_exit(&ok, 0, "200", &log());
    assert!(
        ok.stdout.ends_with("\ngreeting=probed"),
        "the body of greeting.php: {ok:#?}"
    );
    let ok = run(&config, &["www", "/any/path?x=1", "--script", &script]);
    assert_exit(&ok, 0, "200", &log());
    assert!(
        !ok.stdout.contains("greeting="),
        "a body without --body: {ok:#?}"
    );
    let failed = run(&config, &["www", "/fail.php", "--root", &root]);
    assert_exit(&failed, 1, "500", &log());
    assert!(
        failed.stdout.lines().any(|l| l == "X-Probe: failing"),
        "the script's headers: {failed:#?}"
    );
    let no_script = run(&config, &["www"]);
    assert_eq!(no_script.code, Some(1), "{no_script:#?}");
    assert!(no_script.stderr.contains("--script"), "{no_script:#?}");

    let ok = run(&config, &["app", "/py/greeting", "--body"]);
    assert_exit(&ok, 0, "200", &log());
    assert!(
        ok.stdout.ends_with("\ngreeting=probed"),
        "the app's body under its mount: {ok:#?}"
    );
    assert!(
        ok.stdout
            .lines()
            .any(|l| l.eq_ignore_ascii_case("content-type: text/plain; charset=utf-8")),
        "the app's headers: {ok:#?}"
    );
    assert_exit(&run(&config, &["app", "/py/fail"]), 1, "500", &log());
    let unknown = run(&config, &["nosuch"]);
    assert_eq!(unknown.code, Some(1), "{unknown:#?}");

    // Given the control socket, the probe asks the master where each pool listens: no
    // drover.toml is read (ctl's default /etc/drover/drover.toml is not there).
    let timeout = format!("{}s", TIMEOUT.as_secs());
    let asked = ctl.run(&[
        "probe",
        "www",
        "/greeting.php",
        "--root",
        &root,
        "--body",
        "--timeout",
        &timeout,
    ]);
    assert_exit(&asked, 0, "200", &log());
    assert!(asked.stdout.ends_with("\ngreeting=probed"), "{asked:#?}");
    let asked = ctl.run(&["probe", "app", "/py/fail", "--timeout", &timeout]);
    assert_exit(&asked, 1, "500", &log());
    let unknown = ctl.run(&["probe", "nosuch"]);
    assert_eq!(unknown.code, Some(1), "{unknown:#?}");
    assert!(unknown.stderr.contains("nosuch"), "{unknown:#?}");

    let pid = drover.pid();
    drop(drover);
    assert!(!proc::is_running(pid), "drover still runs");
    let silent = run(&config, &["app", "/py/greeting"]);
    assert_eq!(silent.code, Some(1), "{silent:#?}");
    // Nothing answers: refused, or, while a draining worker still holds the listener for
    // a moment, accepted then reset. Either way the message names the pool and its socket.
    assert!(
        silent.stdout.is_empty() && silent.stderr.contains("pool app at "),
        "a clear message when nothing listens: {silent:#?}"
    );
}

/// A pool file written out whole.
struct Written(String);

impl PoolFile for Written {
    fn name(&self) -> &str {
        "tcp"
    }
    fn toml(&self, _: &crate::common::Site) -> String {
        self.0.clone()
    }
}

#[test]
fn a_bare_port_listens_on_every_address_as_php_fpm_does() {
    let site = site();
    let port = {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        taken.local_addr().expect("local addr").port()
    };
    let pool = Pool::php("tcp").greeting("on a port");
    let toml = pool
        .toml(&site)
        .replace(
            &format!("listen = \"{}\"", site.socket("tcp").display()),
            &format!("listen = \"{port}\""),
        )
        .replace("listen_mode = \"0666\"\n", "");
    assert!(
        toml.starts_with(&format!("listen = \"{port}\"\n")),
        "{toml}"
    );
    let (drover, ctl) = start_with_control(&site, &[&Written(toml)]);
    let log = || drover.log.text();
    let config = site.path().join("drover.toml");
    let root = site.docroot.display().to_string();

    // The probe connects to 127.0.0.1 for a bare port.
    let ok = run(
        &config,
        &["tcp", "/greeting.php", "--root", &root, "--body"],
    );
    assert_exit(&ok, 0, "200", &log());
    assert!(ok.stdout.ends_with("\ngreeting=on a port"), "{ok:#?}");
    let shown = ctl.ok(&["config", "tcp"], &log());
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == format!("listen = \"{port}\"")),
        "ctl config shows the port as written:\n{shown}"
    );
    // Dual stack where the host has IPv6 (php-fpm's `[::]:PORT`).
    if TcpListener::bind("[::1]:0").is_ok() {
        std::net::TcpStream::connect(("::1", port))
            .unwrap_or_else(|e| panic!("[::1]:{port}: {e}\ndrover's log:\n{}", log()));
    }
}
