//! What the master tells every zygote it execs (`drover-python`, `drover-php`): the
//! [`ZygoteArgs`] part of its terms (`drover_proto::terms`), built here once for both
//! runtimes' plans ([`super::python`], [`super::php::embed`]), which add their own. The terms
//! travel in a sealed memfd (`Terms::memfd`) at `drover_proto::terms::TERMS_FD`; the
//! command line is `--pool NAME` alone ([`command_line`]), what `ps` shows.

use std::ffi::OsString;
use std::path::PathBuf;

use drover_proto::terms::CommandLine;
use drover_proto::zygote::{ACCESS_LOG_FD, Protocol, SCOREBOARD_FD, TLS_FD, ZygoteArgs};

use crate::config::{ListenAddr, Pool};
use crate::pm;

/// A zygote's command line: the pool's name, for `ps`.
pub fn command_line(pool: &Pool) -> Vec<OsString> {
    CommandLine::args(&pool.name)
}

/// The terms every zygote takes: the pool's name, its initial worker count and request
/// limits, the scoreboard's descriptor; and when set, `max_memory`,
/// `request_read_timeout`, the access log (the descriptor of the file the master opens,
/// [`crate::logging::access`], its path for messages, its format and suppressed paths); an
/// HTTP pool's protocol, timeouts, `forwarded_allow_ips` and `max_request_body` (and with
/// `certfile`, the descriptor of the memfd the master writes and the TLS settings); the
/// `status_path` (with where the master serves the status) and the `ping_path` (with its
/// response) the workers answer themselves; `process_dumpable`.
pub fn args(pool: &Pool) -> ZygoteArgs {
    let access_log = pool.access_log.as_ref();
    let status = pool.status_path.as_ref().zip(pool.status_listen.as_ref());
    let http = pool.http.as_ref();
    let tls = http.and_then(|http| http.tls.as_ref());
    ZygoteArgs {
        pool: pool.name.clone(),
        workers: pm::initial_workers(&pool.pm),
        max_requests: pool.pm.max_requests,
        max_requests_jitter: pool.pm.max_requests_jitter,
        scoreboard_fd: Some(SCOREBOARD_FD),
        max_memory: pool.pm.max_memory,
        request_read_timeout_ms: pool.request_read_timeout.map(|t| millis(t.as_millis())),
        access_log_fd: access_log.map(|_| ACCESS_LOG_FD),
        access_log: access_log.cloned(),
        access_format: if access_log.is_some() {
            pool.access_format.clone()
        } else {
            drover_proto::access::DEFAULT_FORMAT.into()
        },
        access_suppress_path: access_log
            .map(|_| pool.access_suppress_path.clone())
            .unwrap_or_default(),
        protocol: if http.is_some() {
            Protocol::Http
        } else {
            Protocol::Fastcgi
        },
        keepalive_timeout_ms: http.map_or(2000, |h| millis(h.keepalive_timeout.as_millis())),
        send_timeout_ms: http.map_or(60_000, |h| millis(h.send_timeout.as_millis())),
        forwarded_allow_ips: http
            .map(|h| h.forwarded_allow_ips.clone())
            .unwrap_or_default(),
        max_request_body: http.and_then(|h| h.max_request_body),
        tls_fd: tls.map(|_| TLS_FD),
        cert_reqs: tls.map(|t| t.settings.cert_reqs).unwrap_or_default(),
        ciphers: tls.map(|t| t.settings.ciphers.clone()).unwrap_or_default(),
        ssl_version: tls.map(|t| t.settings.min_version).unwrap_or_default(),
        status_path: status.map(|(path, _)| path.clone()),
        status_from: status.map(|(_, from)| status_from(from)),
        ping_path: pool.ping_path.clone(),
        ping_response: if pool.ping_path.is_some() {
            pool.ping_response.clone()
        } else {
            "pong".into()
        },
        dumpable: pool.process_dumpable,
    }
}

/// A duration's milliseconds as the terms hold them.
fn millis(ms: u128) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
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
