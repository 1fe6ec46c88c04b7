//! Python WSGI pools, the master's side: the master execs `drover-python` (the [`PROGRAM`]
//! beside `drover`, built from the `drover-python` crate) as the pool's zygote; the zygote
//! loads CPython and the app once, then forks the workers, which share the loaded app
//! copy-on-write (docs/ARCHITECTURE.md, "Why a zygote").
//!
//! Only `drover-python` links libpython: the master, and the php-cgi pools it runs, never
//! map it (it cost a PHP-only drover 2.3 MiB of PSS, 1.2 MiB of it dirty relocations).
//!
//! Here: the zygote's command line for a pool ([`plan`]); the signal that sets its worker
//! count is [`super::kind::set_target`]. What both sides read and write (fds, report lines,
//! exit codes) is `drover_proto::zygote`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{allowed_clients_env, zygote};
use crate::config::{Interface, Pool, Python};

/// The Python runtime's binary, installed beside `drover`.
pub const PROGRAM: &str = "drover-python";

/// Where the master finds [`PROGRAM`]: beside the running `drover`.
pub fn program() -> PathBuf {
    zygote::beside_drover(PROGRAM)
}

/// The virtualenv drover is installed in: the folder above drover's own when it holds a
/// `pyvenv.cfg`, as `python -m venv` makes one and `pip install drover` puts the binaries
/// in its `bin/`. `drover serve` uses it when no virtualenv is active (`$VIRTUAL_ENV`).
pub fn installed_virtualenv() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    virtualenv_of(&exe)
}

/// The virtualenv whose `bin/` holds `exe`, if any.
pub fn virtualenv_of(exe: &Path) -> Option<PathBuf> {
    let venv = exe.parent()?.parent()?;
    venv.join("pyvenv.cfg")
        .is_file()
        .then(|| venv.to_path_buf())
}

/// The master's plan for a Python pool: one zygote, with every zygote's flags
/// ([`zygote::args`]) and `drover_proto::zygote::PythonArgs`' own.
pub fn plan(pool: &Pool, python: &Python) -> (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let mut args = zygote::args(pool);
    args.push("--app".into());
    args.push(format!("{}:{}", python.module, python.callable).into());
    args.push("--mount".into());
    args.push(python.mount.clone().into());
    for dir in &python.python_path {
        args.push("--python-path".into());
        args.push(dir.into());
    }
    if let Some(venv) = &python.virtualenv {
        args.push("--virtualenv".into());
        args.push(venv.into());
    }
    if !python.preload {
        args.push("--no-preload".into());
    }
    if python.interface == Interface::Asgi {
        args.push("--interface".into());
        args.push("asgi".into());
        if let Some(http) = &pool.http {
            args.push("--ws-max-size".into());
            args.push(http.ws_max_size.to_string().into());
        }
    }
    if python.threads > 1 {
        args.push("--threads".into());
        args.push(python.threads.to_string().into());
    }
    for path in &python.warmup {
        args.push("--warmup".into());
        args.push(path.into());
    }
    if let Some(hooks) = &python.hooks {
        args.push("--hooks".into());
        args.push(hooks.into());
    }
    let env = allowed_clients_env(pool).into_iter().collect();
    (program(), args, env)
}
