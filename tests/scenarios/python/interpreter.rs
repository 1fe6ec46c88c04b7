//! The embedded CPython's prefix, whatever `python3` is first on `PATH`: a virtualenv `B`
//! whose `bin/` is first on `PATH` (as an activated one of another project is) must not
//! become the app's `sys.prefix`. drover run from the build folder gives the app the
//! interpreter it was built against (`sys.prefix` is `sys.base_prefix`, and the standard
//! library and the loaded libpython are that prefix's); drover installed in a virtualenv
//! `A` (its binaries in `A/bin`, as `pip install drover` puts them) gives the app `A`,
//! with `A/bin/python3` as `sys.executable`, as `A`'s own python would.

use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::signal::Signal;

use crate::common::{
    Site, Spawned, TIMEOUT, admin_bin, bin, free_port, http, proc, python_runtime, run_bounded,
    wait_until,
};

const APP: &str = r#"
import json, os, sys

def app(environ, start_response):
    with open("/proc/self/maps") as maps:
        lib = next((l.split()[-1] for l in maps if "libpython" in l), "")
    body = json.dumps({
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "executable": sys.executable,
        "libpython": os.path.realpath(lib),
        "os": os.path.realpath(os.__file__),
    })
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body.encode()]
"#;

/// `python3 -m venv --without-pip DIR`.
fn venv(dir: &Path) {
    let out = run_bounded(
        Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(dir),
    );
    assert!(out.status.success(), "{out:?}");
}

/// What the app of `drover serve`, run as `drover` with `other` first on PATH, says of its
/// interpreter.
fn seen(site: &Site, drover: &Path, other: &Path) -> serde_json::Value {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![other.join("bin")];
    paths.extend(std::env::split_paths(&path));
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut serving = Spawned::new(
        Command::new(drover)
            .args(["serve", "--python", "where:app", "--http", &addr])
            .current_dir(site.path())
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("XDG_RUNTIME_DIR", site.path())
            .env_remove("VIRTUAL_ENV"),
    );
    serving.log.wait_for_line("ready:", TIMEOUT);
    let reply = http::get(&format!("http://{addr}/"));
    assert_eq!(reply.status, 200, "{}", serving.log.text());
    proc::signal(serving.child.id() as i32, Signal::SIGTERM);
    let child = &mut serving.child;
    wait_until(TIMEOUT, "drover serve to exit", || {
        child.try_wait().unwrap()
    });
    serde_json::from_str(&reply.body).expect("the app's JSON")
}

fn text<'v>(seen: &'v serde_json::Value, key: &str) -> &'v str {
    seen[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {seen}"))
}

/// The standard library and the libpython the app runs on are those of its base prefix.
fn assert_one_python(seen: &serde_json::Value) {
    let base = PathBuf::from(text(seen, "base_prefix"))
        .canonicalize()
        .unwrap();
    for key in ["libpython", "os"] {
        assert!(
            Path::new(text(seen, key)).starts_with(&base),
            "{key} is not under the base prefix: {seen}"
        );
    }
}

#[test]
fn the_app_gets_drovers_python_or_virtualenv_whatever_python3_is_first_on_path() {
    python_runtime();
    let site = Site::new();
    site.write("where.py", APP);
    let other = site.path().join("other-venv");
    venv(&other);

    let built = seen(&site, Path::new(bin()), &other);
    assert_eq!(built["prefix"], built["base_prefix"], "{built}");
    assert_ne!(Path::new(text(&built, "prefix")), other, "{built}");
    assert_one_python(&built);

    // drover installed in a virtualenv: its three binaries in the virtualenv's bin/.
    let installed = site.path().join("drover-venv");
    venv(&installed);
    for bin in [bin(), admin_bin(), python_runtime().to_str().unwrap()] {
        let name = Path::new(bin).file_name().unwrap();
        std::fs::copy(bin, installed.join("bin").join(name)).unwrap();
    }
    let inside = seen(&site, &installed.join("bin/drover"), &other);
    assert_eq!(Path::new(text(&inside, "prefix")), installed, "{inside}");
    assert_eq!(
        Path::new(text(&inside, "executable")),
        installed.join("bin/python3"),
        "{inside}"
    );
    assert_eq!(inside["base_prefix"], built["base_prefix"], "{inside}");
    assert_one_python(&inside);
}
