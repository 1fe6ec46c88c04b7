//! Python WSGI pools, the master's side: the master execs `drover-python` (the [`PROGRAM`]
//! beside `drover`, built from the `drover-python` crate) as the pool's zygote; the zygote
//! loads CPython and the app once, then forks the workers, which share the loaded app
//! copy-on-write (docs/ARCHITECTURE.md, "Why a zygote").
//!
//! Only `drover-python` links libpython: the master, and the php-cgi pools it runs, never
//! map it (it cost a PHP-only drover 2.3 MiB of PSS, 1.2 MiB of it dirty relocations).
//!
//! Here: the zygote's terms for a pool ([`plan`]); the signal that sets its worker
//! count is [`super::kind::set_target`]. What both sides read and write (fds, report lines,
//! exit codes) is `drover_proto::zygote`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use drover_proto::zygote::{Interface as ZygoteInterface, PythonArgs};

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

/// The master's plan for a Python pool: one zygote, whose terms are every zygote's
/// ([`zygote::args`]) and `drover_proto::zygote::PythonArgs`' own.
pub fn plan(pool: &Pool, python: &Python) -> (PathBuf, PythonArgs, Vec<(OsString, OsString)>) {
    let args = PythonArgs {
        zygote: zygote::args(pool),
        app: format!("{}:{}", python.module, python.callable),
        python_path: python.python_path.clone(),
        virtualenv: python.virtualenv.clone(),
        no_preload: !python.preload,
        mount: python.mount.clone(),
        warmup: python.warmup.clone(),
        hooks: python.hooks.clone(),
        interface: match python.interface {
            Interface::Wsgi => ZygoteInterface::Wsgi,
            Interface::Asgi => ZygoteInterface::Asgi,
        },
        threads: python.threads.max(1),
        // The limit applies to an ASGI app on HTTP; the zygote's default otherwise.
        ws_max_size: match (&pool.http, python.interface) {
            (Some(http), Interface::Asgi) => http.ws_max_size,
            _ => 16 << 20,
        },
    };
    let env = allowed_clients_env(pool).into_iter().collect();
    (program(), args, env)
}
