//! Issue 22's Kubernetes lifecycle and one-line start, run as an operator runs them: real
//! drover, real nginx, real curl.
//!
//! - `probes`: `/livez` and `/readyz` on `health_listen` and on the control socket; busy
//!   and failed pools.
//! - `drain`: TERM with `shutdown_delay` while a client keeps sending through nginx.
//! - `manifests`: deploy/kubernetes/ against the Kubernetes schema, and the commands and
//!   paths it names.
//! - `serve`: `drover serve`, from flags to a first answer.

mod drain;
mod manifests;
mod probes;
mod serve;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::common::{Drover, PoolFile, Site, TIMEOUT, run_bounded};

/// `curl` as kubelet's httpGet probe would ask (`-s`, no proxy, bounded): (status, body).
/// `unix`: the socket to talk over instead of TCP.
pub fn curl(url: &str, unix: Option<&Path>) -> (u16, String) {
    let mut command = Command::new("curl");
    command
        .args(["-s", "--noproxy", "*", "--max-time", "5"])
        .args(["-o", "-", "-w", "\n%{http_code}"]);
    if let Some(socket) = unix {
        command.arg("--unix-socket").arg(socket);
    }
    let out = run_bounded(command.arg(url));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Writes `drover.toml` with `global` (TOML lines) and `health_listen` on a port the kernel
/// picks, the pool files, starts drover and waits for "ready:". Returns drover and the
/// health address from its log line.
pub fn start_with_health(
    site: &Site,
    global: &str,
    pools: &[&dyn PoolFile],
) -> (Drover, SocketAddr) {
    site.write(
        "drover.toml",
        &format!(
            "error_log = \"stderr\"\nlog_level = \"info\"\nhealth_listen = \"127.0.0.1:0\"\n{global}"
        ),
    );
    for pool in pools {
        site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(site));
    }
    let drover = Drover::spawn(site);
    let line = drover
        .log
        .wait_for_line("health (/livez, /readyz) on ", TIMEOUT);
    let addr = line
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    drover.log.wait_for_line("ready:", TIMEOUT);
    (drover, addr)
}
