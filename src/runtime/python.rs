//! Python WSGI pools, the master's side: the master execs `drover-python` (the [`PROGRAM`]
//! beside `drover`, built from the `drover-python` crate) as the pool's zygote; the zygote
//! loads CPython and the app once, then forks the workers, which share the loaded app
//! copy-on-write (docs/ARCHITECTURE.md, "Why a zygote").
//!
//! Only `drover-python` links libpython: the master, and the php-cgi pools it runs, never
//! map it (it cost a PHP-only drover 2.3 MiB of PSS, 1.2 MiB of it dirty relocations).
//!
//! Here: the zygote's command line for a pool ([`plan`]); the signal that sets its worker
//! count is [`super::kind::set_target`]. What both sides read and write (fds, report lines, exit codes) is
//! `drover_proto::zygote`.

use std::ffi::OsString;
use std::path::PathBuf;

use drover_proto::zygote::SCOREBOARD_FD;

use super::allowed_clients_env;
use crate::config::{Pool, Python};
use crate::pm;

/// The Python runtime's binary, installed beside `drover`.
pub const PROGRAM: &str = "drover-python";

/// Where the master finds [`PROGRAM`]: beside the running `drover`, so that the zygote is
/// the same version as the master.
pub fn program() -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(PROGRAM),
        Err(_) => PathBuf::from(PROGRAM),
    }
}

/// The master's plan for a Python pool: one zygote, `max_children` workers.
pub fn plan(pool: &Pool, python: &Python) -> (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let workers = pm::initial_workers(&pool.pm);
    let mut args: Vec<OsString> = vec![
        "--pool".into(),
        pool.name.clone().into(),
        "--app".into(),
        format!("{}:{}", python.module, python.callable).into(),
        "--workers".into(),
        workers.to_string().into(),
        "--max-requests".into(),
        pool.pm.max_requests.to_string().into(),
        "--max-requests-jitter".into(),
        pool.pm.max_requests_jitter.to_string().into(),
        "--mount".into(),
        python.mount.clone().into(),
        "--scoreboard-fd".into(),
        SCOREBOARD_FD.to_string().into(),
    ];
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
    for path in &python.warmup {
        args.push("--warmup".into());
        args.push(path.into());
    }
    if let Some(limit) = pool.pm.max_memory {
        args.push("--max-memory".into());
        args.push(limit.to_string().into());
    }
    if let Some(timeout) = pool.request_read_timeout {
        args.push("--request-read-timeout-ms".into());
        args.push(timeout.as_millis().to_string().into());
    }
    let env = allowed_clients_env(pool).into_iter().collect();
    (program(), args, env)
}
