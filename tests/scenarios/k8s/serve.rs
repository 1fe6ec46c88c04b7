//! `drover serve`: one pool from flags, run from the app's folder as gunicorn is; `--print`
//! writes files `drover -t` takes; errors name the flag.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use nix::sys::signal::Signal;

use super::curl;
use crate::common::{
    Site, Spawned, TIMEOUT, bin, free_port, proc, python_runtime, run_bounded, wait_until,
};

const APP: &str = r#"
import os

def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"hello from {os.getcwd()} {os.environ.get('GREETING', '-')}".encode()]
"#;

fn serve(site: &Site, args: &[&str]) -> Command {
    serve_from(Path::new(bin()), site, args)
}

/// [`serve`] with the `drover` at `program` (its runtimes beside it).
fn serve_from(program: &Path, site: &Site, args: &[&str]) -> Command {
    python_runtime();
    let mut command = Command::new(program);
    command
        .arg("serve")
        .args(args)
        .current_dir(site.path())
        // The generated files go into the test's own folder.
        .env("XDG_RUNTIME_DIR", site.path())
        .env_remove("VIRTUAL_ENV");
    command
}

fn spawn(mut command: Command) -> Spawned {
    Spawned::new(&mut command)
}

#[test]
fn serve_runs_the_app_of_the_current_directory_over_http() {
    let site = Site::new();
    site.write("hello.py", APP);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut command = serve(
        &site,
        &["--python", "hello:app", "--http", &addr, "-w", "2"],
    );
    command.env("GREETING", "hi");
    if proc::running_as_root() {
        command.args(["--set", "user=root"]);
    }
    let mut serving = spawn(command);
    serving.log.wait_for_line("ready:", TIMEOUT);
    let (status, body) = curl(&format!("http://{addr}/"), None);
    let cwd = site.path().canonicalize().unwrap();
    assert_eq!(
        (status, body.as_str()),
        (200, format!("hello from {} hi", cwd.display()).as_str()),
        "log:\n{}",
        serving.log.text()
    );
    assert!(serving.log.text().contains("ready: 1 pools, 2 workers"));
    // The files it runs are in a private folder that `drover -t` reads like any other.
    let folder = std::fs::read_dir(site.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("drover-serve-")
        })
        .expect("the generated folder");
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(folder.join("pools.d/app.toml").is_file());
    proc::signal(serving.child.id() as i32, Signal::SIGTERM);
    let child = &mut serving.child;
    let status = wait_until(TIMEOUT, "drover serve to exit", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0));
}

#[test]
fn print_writes_files_drover_takes_as_they_are() {
    let site = Site::new();
    site.write("hello.py", APP);
    let mut args = vec![
        "--asgi",
        "hello:app",
        "-w",
        "3",
        "--set",
        "pm.max_requests=100",
    ];
    args.extend(["--health", "127.0.0.1:8081", "--print"]);
    if proc::running_as_root() {
        args.extend(["--set", "user=root"]);
    }
    let out = run_bounded(&mut serve(&site, &args));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (global, pool) = text
        .split_once("# pools.d/app.toml\n")
        .unwrap_or_else(|| panic!("two files in:\n{text}"));
    assert!(
        global.contains("health_listen = \"127.0.0.1:8081\""),
        "{global}"
    );
    assert!(pool.contains("app = \"hello:app\"") && pool.contains("interface = \"asgi\""));
    assert!(pool.contains("max_children = 3") && pool.contains("max_requests = 100"));
    site.write("drover.toml", global);
    site.write("pools.d/app.toml", pool);
    let checked = run_bounded(
        Command::new(bin())
            .arg("-t")
            .arg("-c")
            .arg(site.path().join("drover.toml")),
    );
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "{stderr}");
    assert!(stderr.contains("is valid"), "{stderr}");
}

#[test]
fn serve_refuses_what_a_pool_file_refuses_naming_the_flag() {
    let site = Site::new();
    site.write("hello.py", APP);
    let run = |args: &[&str]| {
        let out = run_bounded(&mut serve(&site, args));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--python", "hello:app", "-w", "0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("drover serve: -w: pm.max_children: "),
        "{err}"
    );
    let (code, err) = run(&["--python", "hello:app", "--set", "pm.max_requests=-1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("drover serve: --set pm.max_requests=-1: pm.max_requests: "),
        "{err}"
    );
    let (code, err) = run(&["--php", ".", "--http", "127.0.0.1:8080"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--http: "), "{err}");
    let (code, err) = run(&[
        "--python",
        "hello:app",
        "--fastcgi",
        "x.sock",
        "--http",
        ":1",
    ]);
    assert_eq!(code, Some(2), "clap refuses both: {err}");
    let (code, err) = run(&["-w", "2"]);
    assert_eq!(code, Some(2), "no app: {err}");
    // PHP worker mode's script must exist, as `[php] worker` in a pool file.
    let (code, err) = run(&["--worker", "worker.php"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--worker: php.worker: ") && err.contains("worker.php: No such file"),
        "{err}"
    );
}

/// The folder's name follows from the command line, so another local user can make it
/// first (issue 34): root's `drover serve` must neither write into it nor refuse to start.
#[test]
fn serve_starts_when_another_user_made_its_folder_first() {
    if !proc::running_as_root() {
        println!("skipped: the folder must belong to another user, which needs root");
        return;
    }
    let site = Site::new();
    site.write("hello.py", APP);
    let addr = format!("127.0.0.1:{}", free_port());
    let args = [
        "--python",
        "hello:app",
        "--http",
        &addr,
        "--set",
        "user=root",
    ];
    let folder = {
        let serving = spawn(serve(&site, &args));
        serving.log.wait_for_line("ready:", TIMEOUT);
        serve_folders(&site).pop().expect("the serve folder")
    };
    std::fs::remove_dir_all(&folder).expect("remove the folder");
    std::fs::create_dir(&folder).expect("make the folder as the other user would");
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    let other = nix::unistd::User::from_name("www-data")
        .unwrap()
        .expect("www-data");
    nix::unistd::chown(&folder, Some(other.uid), Some(other.gid)).expect("chown");

    let serving = spawn(serve(&site, &args));
    serving.log.wait_for_line("ready:", TIMEOUT);
    let (status, _) = curl(&format!("http://{addr}/"), None);
    assert_eq!(status, 200, "log:\n{}", serving.log.text());
    assert!(
        serving
            .log
            .text()
            .contains("is not a private folder of this user; the files go to"),
        "log:\n{}",
        serving.log.text()
    );
    let squatted: Vec<_> = std::fs::read_dir(&folder).unwrap().collect();
    assert!(squatted.is_empty(), "written into the other user's folder");
    assert_eq!(serve_folders(&site).len(), 2, "{:?}", serve_folders(&site));
}

/// The `drover-serve-*` folders in the site (the tests' `XDG_RUNTIME_DIR`).
fn serve_folders(site: &Site) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(site.path())
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("drover-serve-"))
        })
        .collect();
    found.sort();
    found
}

/// An app that cannot be imported leaves `drover serve` nothing to serve: it exits 3, as
/// gunicorn does (issue 34), with the traceback in its log, instead of running on.
#[test]
fn serve_exits_3_when_the_app_cannot_be_imported() {
    let site = Site::new();
    site.write(
        "broken.py",
        "raise RuntimeError('no database configured')\n",
    );
    let addr = format!("127.0.0.1:{}", free_port());
    let mut command = serve(&site, &["--python", "broken:app", "--http", &addr]);
    if proc::running_as_root() {
        command.args(["--set", "user=root"]);
    }
    let mut serving = spawn(command);
    let child = &mut serving.child;
    let status = wait_until(TIMEOUT, "drover serve to exit", || {
        child.try_wait().expect("try_wait")
    });
    let log = serving.log.text();
    assert_eq!(status.code(), Some(3), "log:\n{log}");
    assert!(log.contains("no database configured"), "log:\n{log}");
}

/// Issue 33: run as root in the app's folder (a container, a CI job), `drover serve`
/// refused with an error about a file the user never wrote. It serves, as gunicorn does,
/// with one line saying the app runs as root; `-u nobody -g nogroup` runs it as nobody.
#[test]
fn as_root_serve_runs_the_app_as_root_or_as_u() {
    if !proc::running_as_root() {
        println!("skipped: needs root");
        return;
    }
    let site = Site::new();
    site.write(
        "who.py",
        "import os\n\ndef app(environ, start_response):\n    \
         start_response('200 OK', [('Content-Type', 'text/plain')])\n    \
         return [str(os.geteuid()).encode()]\n",
    );
    // The site is where nobody may read the app from.
    std::fs::set_permissions(site.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        site.path().join("who.py"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // The binaries, where nobody may run them from: the checkout may be in a folder only
    // root enters (/root, a `mktemp -d`), and `-u nobody` execs drover-python as nobody.
    let bin_dir = site.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    python_runtime();
    let built = Path::new(bin()).parent().unwrap();
    for name in ["drover", "drover-admin", "drover-python"] {
        std::fs::copy(built.join(name), bin_dir.join(name)).unwrap();
        std::fs::set_permissions(bin_dir.join(name), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    for (flags, uid) in [
        (&[][..], 0),
        (&["-u", "nobody", "-g", "nogroup"][..], nobody.uid.as_raw()),
    ] {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut args = vec!["--python", "who:app", "--http", &addr];
        args.extend(flags);
        let serving = spawn(serve_from(&bin_dir.join("drover"), &site, &args));
        serving.log.wait_for_line("ready:", TIMEOUT);
        let (status, body) = curl(&format!("http://{addr}/"), None);
        assert_eq!(
            (status, body),
            (200, uid.to_string()),
            "{}",
            serving.log.text()
        );
        let warned = serving.log.text().contains("the app runs as root");
        assert_eq!(warned, uid == 0, "{}", serving.log.text());
    }
}
