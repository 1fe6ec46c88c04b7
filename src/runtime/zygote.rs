//! What the master tells every zygote it execs (`drover-python`, `drover-php`) on its
//! command line: the flags of `drover_proto::zygote::ZygoteArgs`, built here once for both
//! runtimes' plans ([`super::python`], [`super::php::embed`]), which add their own.

use std::ffi::OsString;
use std::path::PathBuf;

use drover_proto::zygote::SCOREBOARD_FD;

use crate::config::Pool;
use crate::pm;

/// `--pool`, `--workers`, `--max-requests`, `--max-requests-jitter`, `--scoreboard-fd`,
/// and when set `--max-memory`, `--request-read-timeout-ms` and `--access-log` (with
/// `--access-format` and each `--access-suppress-path`), and an HTTP pool's `--protocol http`
/// with its `--keepalive-timeout-ms`, `--forwarded-allow-ip`s and `--max-request-body`.
pub fn args(pool: &Pool) -> Vec<OsString> {
    let workers = pm::initial_workers(&pool.pm);
    let mut args: Vec<OsString> = vec![
        "--pool".into(),
        pool.name.clone().into(),
        "--workers".into(),
        workers.to_string().into(),
        "--max-requests".into(),
        pool.pm.max_requests.to_string().into(),
        "--max-requests-jitter".into(),
        pool.pm.max_requests_jitter.to_string().into(),
        "--scoreboard-fd".into(),
        SCOREBOARD_FD.to_string().into(),
    ];
    if let Some(limit) = pool.pm.max_memory {
        args.push("--max-memory".into());
        args.push(limit.to_string().into());
    }
    if let Some(timeout) = pool.request_read_timeout {
        args.push("--request-read-timeout-ms".into());
        args.push(timeout.as_millis().to_string().into());
    }
    if let Some(path) = &pool.access_log {
        args.push("--access-log".into());
        args.push(path.clone().into());
        args.push("--access-format".into());
        args.push(pool.access_format.clone().into());
        for uri in &pool.access_suppress_path {
            args.push("--access-suppress-path".into());
            args.push(uri.clone().into());
        }
    }
    if let Some(http) = &pool.http {
        args.push("--protocol".into());
        args.push("http".into());
        args.push("--keepalive-timeout-ms".into());
        args.push(http.keepalive_timeout.as_millis().to_string().into());
        for ip in &http.forwarded_allow_ips {
            args.push("--forwarded-allow-ip".into());
            args.push(ip.into());
        }
        if let Some(max) = http.max_request_body {
            args.push("--max-request-body".into());
            args.push(max.to_string().into());
        }
    }
    args
}

/// Where the master finds a runtime's `program`: beside the running `drover`, so that the
/// zygote is the same version as the master.
pub fn beside_drover(program: &str) -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(program),
        Err(_) => PathBuf::from(program),
    }
}
