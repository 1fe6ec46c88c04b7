//! The wheel, as a Python user installs it: `pip wheel .` in the checkout builds it with
//! the CPython that runs pip (pyproject.toml, packaging/wheel/drover_wheel.py), `pip
//! install` puts it and FastAPI (from PyPI) into a fresh virtualenv, the virtualenv's own
//! `drover serve --asgi main:app` (first on its PATH, no virtualenv setting, no
//! `$VIRTUAL_ENV`) imports the app and FastAPI from that virtualenv and answers, and `pip
//! uninstall -y drover` leaves nothing of it in the virtualenv. Then the same with another
//! CPython of this machine, built with a shared libpython, when there is one.
//!
//! Nothing is installed outside the test's folder, so DROVER_TEST_PACKAGES=skip does not
//! skip it. The first run builds `drover-python` for each interpreter in a target folder of
//! its own (`target/wheel/`), which later runs reuse.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{Log, Site, Spawned, TIMEOUT, free_port, http, proc, wait_until};

/// `pip wheel .` compiles drover-python (and drover, when the tests' build is stale).
const BUILD_TIMEOUT: Duration = Duration::from_secs(45 * 60);
/// A `pip install` from PyPI, or `python -m venv`.
const PIP_TIMEOUT: Duration = Duration::from_secs(5 * 60);

const APP: &str = r#"
import sys

import fastapi

app = fastapi.FastAPI()


@app.get("/where")
def where():
    return {"fastapi": fastapi.__file__, "prefix": sys.prefix, "version": sys.version}
"#;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `command` to its end within `timeout`, with its output; panics on a failure.
fn run(command: &mut Command, timeout: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let (out, err) = (Log::default(), Log::default());
    out.collect(child.stdout.take().unwrap());
    err.collect(child.stderr.take().unwrap());
    if !proc::poll(timeout, || child.try_wait().unwrap().is_some()) {
        proc::kill_tree(child.id() as i32);
        let _ = child.wait();
        panic!("{command:?} did not finish in {timeout:?}:\n{}", err.text());
    }
    let status = child.wait().unwrap();
    out.wait_closed(TIMEOUT);
    err.wait_closed(TIMEOUT);
    assert!(
        status.success(),
        "{command:?}: {status}\n{}\n{}",
        out.text(),
        err.text()
    );
    Output {
        status,
        stdout: out.text().into_bytes(),
        stderr: err.text().into_bytes(),
    }
}

fn python_says(python: &Path, code: &str) -> String {
    let out = run(Command::new(python).args(["-c", code]), TIMEOUT);
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A CPython and what the wheel it builds must say.
struct Interpreter {
    python: PathBuf,
    /// `cp311`
    tag: String,
    /// `libpython3.11.so.1.0`'s folder and name, as the interpreter reports them.
    libpython: PathBuf,
}

impl Interpreter {
    fn new(python: &Path) -> Interpreter {
        let said = python_says(
            python,
            "import sys, sysconfig; print(f'cp{sys.version_info[0]}{sys.version_info[1]}'); \
             print(sysconfig.get_config_var('LIBDIR')); \
             print(sysconfig.get_config_var('INSTSONAME'))",
        );
        let lines: Vec<&str> = said.lines().collect();
        Interpreter {
            python: python.to_path_buf(),
            tag: lines[0].to_owned(),
            libpython: Path::new(lines[1]).join(lines[2]),
        }
    }

    /// The wheel's tags: `cp311-cp311-manylinux_2_36_x86_64`, this machine's glibc and
    /// architecture.
    fn wheel_tags(&self) -> String {
        let glibc = python_says(
            &self.python,
            "import os; print(os.confstr('CS_GNU_LIBC_VERSION'))",
        );
        let version = glibc.strip_prefix("glibc ").expect("a glibc machine");
        let (major, minor) = version.split_once('.').unwrap();
        let arch = std::env::consts::ARCH;
        format!("{0}-{0}-manylinux_{major}_{minor}_{arch}", self.tag)
    }
}

/// `pip wheel .` of the checkout with `python`, into `into`; the wheel's path.
fn build_wheel(python: &Interpreter, into: &Path) -> PathBuf {
    run(
        Command::new(&python.python)
            .args(["-m", "pip", "wheel", "--no-deps", "-q", "-w"])
            .arg(into)
            .arg(repo()),
        BUILD_TIMEOUT,
    );
    let wheels: Vec<PathBuf> = std::fs::read_dir(into)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel: {wheels:?}");
    let wheel = wheels.into_iter().next().unwrap();
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("drover-"), "{name}");
    let tags = format!("-{}.whl", python.wheel_tags());
    assert!(name.ends_with(&tags), "{name}: tags");
    wheel
}

/// Every file under `dir`, relative to it, but Python's byte-code caches.
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(folder) = todo.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path.clone());
            }
            found.insert(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    found
}

/// The installed wheel's `Tag:` (its WHEEL file) and the files its RECORD lists, absolute.
fn installed(venv: &Path) -> (String, Vec<PathBuf>) {
    let site = python_says(
        &venv.join("bin/python"),
        "import sysconfig; print(sysconfig.get_path('platlib'))",
    );
    let info = std::fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("drover-") && name.ends_with(".dist-info")
        })
        .expect("drover's .dist-info in site-packages");
    let wheel = std::fs::read_to_string(info.join("WHEEL")).unwrap();
    let tag = wheel
        .lines()
        .find_map(|line| line.strip_prefix("Tag: "))
        .unwrap_or_else(|| panic!("no Tag in WHEEL:\n{wheel}"));
    let record = std::fs::read_to_string(info.join("RECORD")).unwrap();
    let files = record
        .lines()
        .map(|line| Path::new(&site).join(line.split(',').next().unwrap()))
        .map(|p| std::path::absolute(p).unwrap())
        .collect();
    (tag.to_owned(), files)
}

/// How the test installs drover into the virtualenv.
enum Install {
    /// `pip wheel .` with the interpreter, then `pip install drover-*.whl`.
    Wheel,
    /// `pip install .` with the virtualenv's pip, from the checkout.
    Checkout,
}

/// The whole round: build, install with FastAPI, serve, stop, uninstall.
fn install_serve_uninstall(python: &Path, how: Install) {
    let python = Interpreter::new(python);
    let site = Site::new();
    let venv = site.path().join("venv");
    run(
        Command::new(&python.python).args(["-m", "venv"]).arg(&venv),
        PIP_TIMEOUT,
    );
    let pip = |args: &[&str]| {
        run(
            Command::new(venv.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "-q",
                    "--disable-pip-version-check",
                    "--no-input",
                ])
                .args(args),
            PIP_TIMEOUT,
        )
    };
    pip(&["install", "--timeout", "60", "fastapi"]);
    let before = tree(&venv);
    match how {
        Install::Wheel => {
            let wheel = build_wheel(&python, &site.path().join("dist"));
            pip(&["install", wheel.to_str().unwrap()]);
        }
        Install::Checkout => {
            run(
                Command::new(venv.join("bin/python"))
                    .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                    .arg(repo()),
                BUILD_TIMEOUT,
            );
        }
    }
    let (tag, record) = installed(&venv);
    assert_eq!(tag, python.wheel_tags());
    // What pip put in bin/: the three binaries, the master's runtimes beside it.
    let bin: Vec<PathBuf> = tree(&venv)
        .difference(&before)
        .filter(|p| p.starts_with("bin"))
        .cloned()
        .collect();
    let expected: Vec<PathBuf> = ["bin/drover", "bin/drover-admin", "bin/drover-python"]
        .map(PathBuf::from)
        .to_vec();
    assert_eq!(bin, expected);
    let ldd = run(
        Command::new("ldd").arg(venv.join("bin/drover-python")),
        TIMEOUT,
    );
    let ldd = String::from_utf8_lossy(&ldd.stdout).into_owned();
    let libpython = python.libpython.canonicalize().unwrap();
    assert!(
        ldd.lines().any(|l| {
            l.split("=>")
                .nth(1)
                .and_then(|to| to.split_whitespace().next())
                .is_some_and(|to| Path::new(to).canonicalize().ok().as_ref() == Some(&libpython))
        }),
        "drover-python loads {}:\n{ldd}",
        libpython.display()
    );

    // The app's folder, outside the virtualenv; no $VIRTUAL_ENV to go by. drover as
    // `source venv/bin/activate` finds it (first on PATH), and by its path as a unit file
    // or a cron job runs it (the virtualenv not on PATH, so the embedded CPython's own
    // search from PATH does not find it either).
    let app = site.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("main.py"), APP).unwrap();
    let inherited = std::env::var("PATH").unwrap_or_default();
    let on_path = format!("{}:{inherited}", venv.join("bin").display());
    let without: Vec<&str> = inherited
        .split(':')
        .filter(|dir| !Path::new(dir).starts_with(&venv))
        .collect();
    let ways = [
        (PathBuf::from("drover"), on_path),
        (venv.join("bin/drover"), without.join(":")),
    ];
    for (drover, path) in ways {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(&drover);
        command
            .args(["serve", "--asgi", "main:app", "--http", &addr])
            .current_dir(&app)
            .env("PATH", path)
            .env_remove("VIRTUAL_ENV")
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONHOME")
            // drover serve's files go into the test's folder.
            .env("XDG_RUNTIME_DIR", site.path());
        let mut serving = Spawned::new(&mut command);
        serving.log.wait_for_line("ready:", TIMEOUT);
        let reply = http::try_get(&format!("http://{addr}/where"))
            .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", serving.log.text()));
        let log = serving.log.text();
        assert_eq!(reply.status, 200, "{drover:?}: {}\nlog:\n{log}", reply.body);
        let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        let fastapi = Path::new(answer["fastapi"].as_str().unwrap());
        assert!(
            fastapi.starts_with(&venv),
            "{drover:?}: FastAPI imported from {}, not from the virtualenv {}",
            fastapi.display(),
            venv.display()
        );
        let version = answer["version"].as_str().unwrap();
        assert!(
            version.replacen('.', "", 1).starts_with(&python.tag[2..]),
            "the app runs on Python {version}, the wheel was built for {}",
            python.tag
        );
        proc::signal(serving.child.id() as i32, Signal::SIGTERM);
        let child = &mut serving.child;
        let status = wait_until(TIMEOUT, "drover serve to exit", || {
            child.try_wait().unwrap()
        });
        assert_eq!(status.code(), Some(0), "log:\n{}", serving.log.text());
    }

    pip(&["uninstall", "-y", "drover"]);
    let left: Vec<&PathBuf> = record.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "left after uninstall: {left:?}");
    let after = tree(&venv);
    assert_eq!(
        after.symmetric_difference(&before).collect::<Vec<_>>(),
        Vec::<&PathBuf>::new(),
        "the virtualenv after uninstall differs from before install"
    );
}

/// The `python3` on PATH: the interpreter the tests' drover is built against.
#[test]
fn pip_installs_the_wheel_into_a_virtualenv_that_serves_fastapi_and_uninstalls_it_all() {
    install_serve_uninstall(Path::new("python3"), Install::Wheel);
}

/// Another CPython minor version than `python3`'s, with a shared libpython (which pyo3
/// embeds), when this machine has one: the newest of pyenv's versions and `/usr/bin`'s.
/// Installed from the checkout (`pip install .`), by the virtualenv's pip.
#[test]
fn pip_install_from_the_checkout_embeds_the_cpython_of_the_virtualenv() {
    let first = Interpreter::new(Path::new("python3")).tag;
    let Some(other) = other_cpython(&first) else {
        eprintln!("skipped: no CPython but {first} with a shared libpython here");
        return;
    };
    install_serve_uninstall(&other, Install::Checkout);
}

/// The newest CPython 3.9+ but `tag`, built with `--enable-shared`.
fn other_cpython(tag: &str) -> Option<PathBuf> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".pyenv")))?;
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    let candidates = std::fs::read_dir(pyenv.join("versions"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path().join("bin/python3"))
        .chain((9..=20).map(|minor| PathBuf::from(format!("/usr/bin/python3.{minor}"))));
    for python in candidates.filter(|p| p.is_file()) {
        let Ok(out) = Command::new(&python)
            .args([
                "-c",
                "import sys, sysconfig; print(sys.implementation.name, sys.version_info[1], \
                 sysconfig.get_config_var('Py_ENABLE_SHARED'))",
            ])
            .output()
        else {
            continue;
        };
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let fields: Vec<&str> = said.split_whitespace().collect();
        if let ["cpython", minor, "1"] = fields[..]
            && let Ok(minor) = minor.parse::<u32>()
            && minor >= 9
            && format!("cp3{minor}") != tag
        {
            found.push((minor, python));
        }
    }
    found.sort();
    found.pop().map(|(_, python)| python)
}
