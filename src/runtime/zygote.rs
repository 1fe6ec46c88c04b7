//! What the master tells every zygote it execs (`drover-python`, `drover-php`) on its
//! command line: the flags of `drover_proto::zygote::ZygoteArgs`, built here once for both
//! runtimes' plans ([`super::python`], [`super::php::embed`]), which add their own.

use std::ffi::OsString;
use std::path::PathBuf;

use drover_proto::zygote::{ACCESS_LOG_FD, SCOREBOARD_FD, TLS_FD};

use crate::config::{ListenAddr, Pool};
use crate::pm;

/// `--pool`, `--workers`, `--max-requests`, `--max-requests-jitter`, `--scoreboard-fd`,
/// and when set `--max-memory`, `--request-read-timeout-ms` and `--access-log-fd` (the file
/// the master opens, [`crate::logging::access`], named by `--access-log`, with
/// `--access-format` and each `--access-suppress-path`), and an HTTP pool's `--protocol http`
/// with its `--keepalive-timeout-ms`, `--forwarded-allow-ip`s and `--max-request-body`
/// (and with `certfile`, `--tls-fd` for the memfd the master writes, and the TLS settings); the
/// `--status-path` (with `--status-from`, where the master serves the status) and
/// `--ping-path` (with `--ping-response`) the workers answer themselves; `--dumpable` for
/// `process_dumpable = true`.
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
        args.push("--access-log-fd".into());
        args.push(ACCESS_LOG_FD.to_string().into());
        args.push("--access-log".into());
        args.push(path.clone().into());
        args.push("--access-format".into());
        args.push(pool.access_format.clone().into());
        for uri in &pool.access_suppress_path {
            args.push("--access-suppress-path".into());
            args.push(uri.clone().into());
        }
    }
    if let (Some(path), Some(from)) = (&pool.status_path, &pool.status_listen) {
        args.push("--status-path".into());
        args.push(path.into());
        args.push("--status-from".into());
        args.push(status_from(from).into());
    }
    if let Some(path) = &pool.ping_path {
        args.push("--ping-path".into());
        args.push(path.into());
        args.push("--ping-response".into());
        args.push(pool.ping_response.clone().into());
    }
    if pool.process_dumpable {
        args.push("--dumpable".into());
    }
    if let Some(http) = &pool.http {
        args.push("--protocol".into());
        args.push("http".into());
        args.push("--keepalive-timeout-ms".into());
        args.push(http.keepalive_timeout.as_millis().to_string().into());
        args.push("--send-timeout-ms".into());
        args.push(http.send_timeout.as_millis().to_string().into());
        for ip in &http.forwarded_allow_ips {
            args.push("--forwarded-allow-ip".into());
            args.push(ip.into());
        }
        if let Some(max) = http.max_request_body {
            args.push("--max-request-body".into());
            args.push(max.to_string().into());
        }
        if let Some(tls) = &http.tls {
            // The certificate and key go in the memfd at TLS_FD, never on this line.
            args.push("--tls-fd".into());
            args.push(TLS_FD.to_string().into());
            args.push("--cert-reqs".into());
            args.push(tls.settings.cert_reqs.name().into());
            for name in &tls.settings.ciphers {
                args.push("--cipher".into());
                args.push(name.into());
            }
            args.push("--ssl-version".into());
            args.push(tls.settings.min_version.name().into());
        }
    }
    args
}

/// Where a worker reaches the master's `status_listen`: its socket path, or its TCP address
/// (an address bound to every interface is reached on loopback).
fn status_from(addr: &ListenAddr) -> String {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let loopback = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    match addr {
        ListenAddr::Unix(path) => path.display().to_string(),
        ListenAddr::Tcp(at) if at.ip().is_unspecified() => loopback(at.port()).to_string(),
        ListenAddr::Tcp(at) => at.to_string(),
        ListenAddr::AnyAddress(port) => loopback(*port).to_string(),
        ListenAddr::NoSocket => String::new(),
    }
}

/// Where the master finds a runtime's `program`: beside the running `drover`, so that the
/// zygote is the same version as the master.
pub fn beside_drover(program: &str) -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(program),
        Err(_) => PathBuf::from(program),
    }
}
