//! The scenario harness: real drover, real nginx, real php-cgi, one temp dir per test.
//!
//! - [`Site`]: the test's temp dir (0755, so nginx's worker can reach the socket) and docroot.
//! - [`Drover`]: writes `drover.toml` and the pools, runs the binary, collects its log.
//! - [`Nginx`]: nginx on a free loopback port, passing `*.php` to a pool's unix socket.
//! - [`Stack`]: the three together, as an operator runs them.
//! - [`http`]: GET/POST returning (status, body), with 4xx/5xx as values, not errors.
//! - [`proc`]: pids from `/proc`, signals, and [`wait_until`] — every wait is bounded and
//!   polls a condition; nothing sleeps as a means of synchronisation.

// Each scenario module uses a different part of the harness.
#![allow(dead_code)]

mod drover;
pub mod http;
mod log;
mod nginx;
pub mod proc;
mod site;

pub use drover::{BIN, Drover, PhpPool, check_config, pool_toml, run_bounded};
pub use log::Log;
pub use nginx::Nginx;
pub use proc::wait_until;
pub use site::Site;

use std::time::Duration;

/// The bound on every wait for something that should take well under a second.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// drover and nginx serving one PHP pool from a site. Fields drop in order: nginx, then
/// drover (and its workers), then the temp dir.
pub struct Stack {
    pub nginx: Nginx,
    pub drover: Drover,
    pub site: Site,
}

impl Stack {
    pub fn start(site: Site, pool: PhpPool) -> Stack {
        let drover = Drover::start(&site, &[&pool]);
        let nginx = Nginx::start(&site, &site.socket(&pool.name));
        Stack {
            nginx,
            drover,
            site,
        }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        self.nginx.url(path_and_query)
    }
}
