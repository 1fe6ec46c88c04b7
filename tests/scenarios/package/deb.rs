//! The Debian packages, as an operator uses them: `scripts/package.sh` builds them,
//! `lintian` finds no error, `apt-get install ./drover_*.deb` installs them on this
//! machine, the packaged example pools serve through nginx, a newer build installs over
//! them keeping the edited conffiles, and `dpkg --purge` leaves nothing of them.
//! drover-php's postinst makes the direct-call copy of libphp, its pools run on it, and
//! its file trigger makes it again when libphp changes.
//!
//! The packages are built from the binaries of the profile the tests run (CI: release), so
//! only drover-python is compiled again (against Debian's python3, in target/debian/cargo).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::proc::{self, running_as_root};
use crate::common::{Location, Log, Nginx, Site, bin, free_port, http, wait_until};

const TIMEOUT: Duration = Duration::from_secs(20);
const PACKAGES: [&str; 3] = ["drover", "drover-php", "drover-python"];
/// The copy of Debian's libphp that drover-php's postinst makes (`drover-php --bind-direct`).
const DIRECT_COPY: &str = "/var/lib/drover/libphp/libphp8.2.so";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The cargo profile of the drover binary under test.
fn profile() -> String {
    let dir = Path::new(bin()).parent().and_then(Path::file_name);
    match dir.and_then(|d| d.to_str()) {
        Some("debug") => "dev".into(),
        Some(profile) => profile.into(),
        None => panic!("no profile folder in {}", bin()),
    }
}

fn run(command: &mut Command) -> Output {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Builds the packages as `version` and moves them to `into`; returns their paths.
fn build(version: &str, into: &Path) -> Vec<PathBuf> {
    run(Command::new(repo().join("scripts/package.sh"))
        .args(["--version", version, "--profile", &profile()])
        .current_dir(repo()));
    std::fs::create_dir_all(into).unwrap();
    let arch =
        String::from_utf8(run(Command::new("dpkg").arg("--print-architecture")).stdout).unwrap();
    PACKAGES
        .iter()
        .map(|pkg| {
            let name = format!("{pkg}_{version}_{}.deb", arch.trim());
            let to = into.join(&name);
            std::fs::rename(repo().join("target/debian").join(&name), &to)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            to
        })
        .collect()
}

fn apt_install(debs: &[PathBuf]) {
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(["-o", "DPkg::Lock::Timeout=300"])
        .args(["-o", "Dpkg::Options::=--force-confdef"])
        .args(["-o", "Dpkg::Options::=--force-confold"])
        .args(debs)
        .env("DEBIAN_FRONTEND", "noninteractive"));
}

fn installed_version(pkg: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status} ${Version}", pkg])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_prefix("install ok installed ")
        .map(str::to_owned)
}

/// What this host has of an installation of drover: the packages in any state dpkg knows
/// (installed, or their conffiles left), and the paths they own or make. The test installs
/// and purges the packages, and the purge removes `/var/lib/drover` (the bound libphp) and
/// `/etc/drover`: over an operator's installation it would remove theirs (issue 34).
fn installation_here() -> Vec<String> {
    let mut found: Vec<String> = PACKAGES
        .iter()
        .filter_map(|pkg| {
            let out = Command::new("dpkg-query")
                .args(["-W", "-f", "${db:Status-Abbrev}", pkg])
                .output()
                .ok()?;
            let status = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            // "un": dpkg knows the name only; "ii", "rc" and the rest: something is there.
            (out.status.success() && !status.is_empty() && !status.starts_with("un"))
                .then(|| format!("the package {pkg} ({status})"))
        })
        .collect();
    for path in [
        "/etc/drover",
        "/var/lib/drover",
        "/usr/sbin/drover",
        "/usr/lib/drover",
    ] {
        if std::fs::symlink_metadata(path).is_ok() {
            found.push(path.to_owned());
        }
    }
    found
}

/// Why the test does not run over `found`, and what to do.
fn refusal(found: &[String]) -> String {
    format!(
        "this host has drover installed ({}): the package test installs and purges drover's \
         packages, which would replace and remove that installation. Run the tests on a \
         throwaway machine (as CI does), or set DROVER_TEST_PACKAGES=skip to leave this test \
         out; if these are an interrupted test's own leftovers, remove them with `dpkg \
         --purge drover-php drover-python drover` and `rm -rf /etc/drover /var/lib/drover`",
        found.join(", ")
    )
}

/// Purges the packages whatever happens to the test, so that a failure leaves nothing.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "drover-php", "drover-python", "drover"])
            .stdin(Stdio::null())
            .output();
    }
}

/// The packaged drover, started as the unit starts it (no systemd here).
fn start_drover() -> (std::process::Child, Log) {
    // What the unit's RuntimeDirectory= (or the tmpfiles.d entry at boot) makes.
    std::fs::create_dir_all("/run/drover").unwrap();
    let (child, log) =
        Log::spawn(Command::new("/usr/sbin/drover").args(["-c", "/etc/drover/drover.toml"]));
    log.wait_for_line("ready:", TIMEOUT);
    (child, log)
}

fn stop_drover(mut child: std::process::Child, log: &Log) {
    proc::signal(child.id() as i32, Signal::SIGTERM);
    let status = wait_until(TIMEOUT, "drover to exit", || child.try_wait().unwrap());
    assert!(status.success(), "{status}\n{}", log.text());
}

/// packaging/container/Containerfile, checked without a container runtime: what it copies
/// exists, the entry point is a file of the drover package, `-c container.toml` passes
/// `drover -t`, and each image's default command (its `CMD`, `drover serve`), run with the
/// installed packages as a user that is not root, in its `WORKDIR`, answers: the python
/// image over HTTP, the php image through nginx. The image's /srv and /run/drover are
/// folders of the site, and its port 8000 a free one.
fn container_recipe_matches_the_packages(site: &Site, debs: &[PathBuf]) {
    let recipe = std::fs::read_to_string(repo().join("packaging/container/Containerfile")).unwrap();
    for line in recipe.lines().filter(|l| l.starts_with("COPY ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for source in &words[1..words.len() - 1] {
            let found = glob::glob(&repo().join(source).display().to_string())
                .unwrap()
                .count();
            assert!(
                found > 0 || source.starts_with("target/debian/"),
                "{line}: no {source}"
            );
        }
    }
    let listing =
        String::from_utf8(run(Command::new("dpkg-deb").arg("-c").arg(&debs[0])).stdout).unwrap();
    assert!(
        recipe.contains("ENTRYPOINT [\"/usr/sbin/drover\"]"),
        "{recipe}"
    );
    assert!(listing.contains(" ./usr/sbin/drover -> "), "{listing}");
    let etc = site.path().join("container-etc");
    std::fs::create_dir_all(etc.join("container.d")).unwrap();
    let srv = site.path().join("srv");
    for (from, to) in [
        ("examples/app/hello.py", "app/hello.py"),
        ("examples/www/index.php", "www/index.php"),
    ] {
        std::fs::create_dir_all(srv.join(to).parent().unwrap()).unwrap();
        std::fs::copy(repo().join(from), srv.join(to)).unwrap();
    }
    // The image's /run/drover: its user's (nobody's here, uid 10001's in the image).
    let run_dir = site.path().join("run-drover");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::os::unix::fs::chown(&run_dir, Some(65534), Some(65534)).unwrap();
    let port = free_port();
    let in_site = |text: &str| {
        text.replace("/srv/", &format!("{}/", srv.display()))
            .replace("/run/drover/", &format!("{}/", run_dir.display()))
            .replace("0.0.0.0:8000", &format!("127.0.0.1:{port}"))
    };
    let with_srv = |name: &str| {
        in_site(&std::fs::read_to_string(repo().join("packaging/container").join(name)).unwrap())
    };
    std::fs::write(etc.join("container.toml"), with_srv("drover.toml")).unwrap();
    for runtime in ["php", "python"] {
        std::fs::write(
            etc.join(format!("container.d/{runtime}.toml")),
            with_srv(&format!("{runtime}.toml")),
        )
        .unwrap();
    }
    // As the image runs it: not as root (nobody here, uid 10001 in the image).
    run(Command::new("/usr/sbin/drover")
        .arg("-t")
        .arg("-c")
        .arg(etc.join("container.toml"))
        .uid(65534)
        .gid(65534));

    for (stage, workdir, cmd) in image_commands(&recipe) {
        let args: Vec<String> = cmd.iter().map(|a| in_site(a)).collect();
        assert_eq!(
            args.first().map(String::as_str),
            Some("serve"),
            "{stage}: {cmd:?}"
        );
        let (child, log) = Log::spawn(
            Command::new("/usr/sbin/drover")
                .args(&args)
                .current_dir(in_site(&format!("{workdir}/")))
                .env("XDG_RUNTIME_DIR", &run_dir)
                .uid(65534)
                .gid(65534),
        );
        log.wait_for_line("ready:", TIMEOUT);
        let page = match stage.as_str() {
            "python" => http::get(&format!("http://127.0.0.1:{port}/")),
            "php" => {
                let socket = run_dir.join("www.sock");
                let root = format!("root {}/www;", srv.display());
                let nginx = Nginx::start_locations(site, &[Location::php(&socket).with(&root)]);
                http::get(&nginx.url("/index.php"))
            }
            other => panic!("a stage with a CMD that this test does not know: {other}"),
        };
        assert_eq!(page.status, 200, "{stage}: {}\n{}", page.body, log.text());
        assert!(
            run_dir.join("control.sock").exists(),
            "{stage}: no control socket\n{}",
            log.text()
        );
        stop_drover(child, &log);
    }
}

/// Each build stage of `recipe` that has a `CMD`: (its name, its `WORKDIR`, the command's
/// words).
fn image_commands(recipe: &str) -> Vec<(String, String, Vec<String>)> {
    let mut found = Vec::new();
    let (mut stage, mut workdir) = (String::new(), String::from("/"));
    for line in recipe.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["FROM", _, "AS", name] => (stage, workdir) = (name.to_string(), "/".into()),
            ["WORKDIR", dir] => workdir = dir.to_string(),
            ["CMD", ..] => {
                let cmd: Vec<String> = serde_json::from_str(line["CMD".len()..].trim())
                    .unwrap_or_else(|e| panic!("{line}: not an exec-form CMD: {e}"));
                found.push((stage.clone(), workdir.clone(), cmd));
            }
            _ => {}
        }
    }
    let stages: Vec<&str> = found.iter().map(|(s, _, _)| s.as_str()).collect();
    assert_eq!(
        stages,
        ["php", "python"],
        "the images with a default command"
    );
    found
}

#[test]
fn packages_pass_lintian_install_serve_upgrade_and_purge() {
    if !running_as_root() || !Path::new("/usr/bin/dpkg").exists() {
        eprintln!("skipped: needs root and dpkg");
        return;
    }
    if std::env::var_os("DROVER_TEST_PACKAGES").is_some_and(|v| v == "skip") {
        eprintln!("skipped: DROVER_TEST_PACKAGES=skip");
        return;
    }
    let found = installation_here();
    assert!(found.is_empty(), "{}", refusal(&found));
    let site = Site::new();
    let first = build("0.1.0+test1", &site.path().join("v1"));

    // lintian: no error (warnings are printed, for the reader of the log).
    let lintian = Command::new("lintian")
        .args(["--fail-on", "error", "--tag-display-limit", "0"])
        .args(&first)
        .output()
        .expect("run lintian (apt-get install lintian)");
    let said = String::from_utf8_lossy(&lintian.stdout);
    eprintln!("lintian:\n{said}");
    assert!(
        lintian.status.success(),
        "lintian: {}\n{said}",
        lintian.status
    );

    // The split: only drover-php needs libphp, only drover-python libpython.
    let depends = |deb: &PathBuf| {
        String::from_utf8(
            run(Command::new("dpkg-deb")
                .arg("--field")
                .arg(deb)
                .arg("Depends"))
            .stdout,
        )
        .unwrap()
    };
    let (core, php, python) = (depends(&first[0]), depends(&first[1]), depends(&first[2]));
    assert!(
        !core.contains("libphp") && !core.contains("libpython"),
        "{core}"
    );
    assert!(
        php.contains("libphp8.2-embed") && !php.contains("libpython"),
        "{php}"
    );
    assert!(
        python.contains("libpython3") && !python.contains("libphp"),
        "{python}"
    );

    let _purge = Purge;
    apt_install(&first);
    for pkg in PACKAGES {
        assert_eq!(
            installed_version(pkg).as_deref(),
            Some("0.1.0+test1"),
            "{pkg}"
        );
    }
    assert!(Path::new("/usr/lib/drover/drover-admin").is_file());
    assert!(Path::new("/lib/systemd/system/drover.service").is_file());
    assert!(Path::new("/etc/logrotate.d/drover").is_file());
    run(Command::new("man").args(["-w", "drover"]));
    run(Command::new("man").args(["-w", "5", "drover.toml"]));
    // The shell completions: bash's parses, and names drover's commands.
    let bash = "/usr/share/bash-completion/completions/drover";
    run(Command::new("bash").args(["-n", bash]));
    let script = std::fs::read_to_string(bash).unwrap();
    assert!(
        ["ctl", "serve", "import", "completions"]
            .iter()
            .all(|c| script.contains(c))
    );
    assert!(Path::new("/usr/share/zsh/vendor-completions/_drover").is_file());
    assert!(Path::new("/usr/share/fish/vendor_completions.d/drover.fish").is_file());

    container_recipe_matches_the_packages(&site, &first);

    // The example pools, enabled as the files say: copy, then check and start.
    for pool in ["www", "app"] {
        std::fs::copy(
            format!("/etc/drover/pools.d/{pool}.toml.example"),
            format!("/etc/drover/pools.d/{pool}.toml"),
        )
        .unwrap();
    }
    run(Command::new("/usr/sbin/drover").args(["-t", "-c", "/etc/drover/drover.toml"]));
    let (drover, log) = start_drover();
    for script in ["index.php", "info.php"] {
        let source =
            std::fs::read_to_string(format!("/usr/share/drover/examples/www/{script}")).unwrap();
        site.script(script, &source);
    }
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location::prefix("/app/", Path::new("/run/drover/app.sock")),
            Location::php(Path::new("/run/drover/www.sock")),
        ],
    );
    let page = http::get(&nginx.url("/index.php"));
    assert_eq!(page.status, 200, "{}\n{}", page.body, log.text());
    // The postinst made the direct-call copy of libphp, and the PHP pool runs on it.
    assert!(Path::new(DIRECT_COPY).is_file(), "{DIRECT_COPY} is missing");
    assert!(
        log.text()
            .contains("pool www: drover-php: PHP's calls bound directly (/var/lib/drover/libphp/"),
        "{}",
        log.text()
    );
    let app = http::get(&nginx.url("/app/"));
    assert_eq!(app.status, 200, "{}\n{}", app.body, log.text());
    assert!(app.body.contains("SCRIPT_NAME"), "{}", app.body);
    // The packaged drover.toml has a control socket: drover ctl works as installed.
    let status = run(Command::new("/usr/sbin/drover").args([
        "ctl",
        "-c",
        "/etc/drover/drover.toml",
        "status",
    ]));
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("www") && status.contains("app"), "{status}");
    stop_drover(drover, &log);
    drop(nginx);

    // A package that installs libphp again fires drover-php's file trigger, which makes
    // the copy again (here: activated by hand, as dpkg does when it unpacks the file).
    std::fs::remove_file(DIRECT_COPY).unwrap();
    let libphp = std::fs::canonicalize("/usr/lib/libphp.so").unwrap();
    run(Command::new("dpkg-trigger").arg("--no-await").arg(&libphp));
    run(Command::new("dpkg").args(["--triggers-only", "--pending"]));
    assert!(
        Path::new(DIRECT_COPY).is_file(),
        "the trigger did not make {DIRECT_COPY} again"
    );

    // An edited conffile survives the upgrade; so do the operator's pool files.
    let edited = format!(
        "{}\n# edited by the upgrade test\n",
        std::fs::read_to_string("/etc/drover/drover.toml").unwrap()
    );
    std::fs::write("/etc/drover/drover.toml", &edited).unwrap();
    let second = build("0.1.0+test2", &site.path().join("v2"));
    apt_install(&second);
    for pkg in PACKAGES {
        assert_eq!(
            installed_version(pkg).as_deref(),
            Some("0.1.0+test2"),
            "{pkg}"
        );
    }
    assert_eq!(
        std::fs::read_to_string("/etc/drover/drover.toml").unwrap(),
        edited
    );
    assert!(Path::new("/etc/drover/pools.d/www.toml").is_file());
    let (drover, log) = start_drover();
    stop_drover(drover, &log);

    // Purge: the operator's own pool files first (dpkg keeps files it did not install).
    for pool in ["www", "app"] {
        std::fs::remove_file(format!("/etc/drover/pools.d/{pool}.toml")).unwrap();
    }
    run(Command::new("dpkg").args(["--purge", "drover-php", "drover-python", "drover"]));
    for pkg in PACKAGES {
        assert_eq!(installed_version(pkg), None, "{pkg}");
    }
    let left: Vec<&str> = [
        "/etc/drover",
        "/usr/lib/drover",
        "/usr/sbin/drover",
        "/usr/share/drover",
        "/usr/share/doc/drover",
        "/usr/share/doc/drover-php",
        "/usr/share/doc/drover-python",
        "/usr/share/man/man8/drover.8.gz",
        "/usr/share/man/man5/drover.toml.5.gz",
        "/usr/share/bash-completion/completions/drover",
        "/usr/share/zsh/vendor-completions/_drover",
        "/usr/share/fish/vendor_completions.d/drover.fish",
        "/lib/systemd/system/drover.service",
        "/etc/systemd/system/drover.service",
        "/etc/systemd/system/multi-user.target.wants/drover.service",
        "/var/lib/systemd/deb-systemd-helper-enabled/drover.service.dsh-also",
        "/var/lib/systemd/deb-systemd-helper-masked/drover.service",
        "/etc/logrotate.d/drover",
        "/usr/lib/tmpfiles.d/drover.conf",
        "/var/log/drover",
        "/run/drover",
        "/var/lib/drover",
    ]
    .into_iter()
    .filter(|path| Path::new(path).symlink_metadata().is_ok())
    .collect();
    assert!(left.is_empty(), "left after dpkg --purge: {left:?}");
}
