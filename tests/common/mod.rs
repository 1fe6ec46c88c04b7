//! The scenario harness: real drover, real nginx, real php-cgi and CPython, one temp dir
//! per test.
//!
//! - [`Site`]: the test's temp dir (0755, so nginx's worker can reach the socket) and docroot.
//! - [`Drover`]: writes `drover.toml` and the pools ([`PhpPool`], [`PythonPool`]), runs the
//!   binary (with `drover-python`, and `drover-php` once its crate exists, built beside it),
//!   collects its log. A PHP pool runs on php-cgi, or on drover-php with
//!   `DROVER_TEST_PHP_RUNTIME=embed` ([`default_php_runtime`], [`PhpPool::runtime`]).
//! - [`Nginx`]: nginx on a free loopback port, passing `*.php` (or a [`Location`] prefix) to a
//!   pool's unix socket.
//! - [`Stack`]: the three together, as an operator runs them.
//! - [`http`]: GET/POST returning (status, headers, body), with 4xx/5xx as values, not
//!   errors; [`http::Raw`] for requests written by hand.
//! - [`http1`]: HTTP/1.1 written by hand straight to a `protocol = "http"` pool: responses
//!   off a kept connection, a chunked upload after `100 Continue`, a refusal read to its end.
//! - [`python`]: the fixture apps of `tests/apps/` and the log lines of Python pools.
//! - [`proc`]: pids from `/proc`, signals, and [`wait_until`] — every wait is bounded and
//!   polls a condition; nothing sleeps as a means of synchronisation.
//! - [`Ctl`]: `drover ctl` against the control socket of a drover started by
//!   [`start_with_control`].
//! - [`FolderWatch`]: the entries created or removed in a folder while it was watched.
//! - [`Strace`]: the system calls a running process makes (strace attached to it).
//! - [`PhpFpm`]: a real php-fpm 8.2, for tests that compare drover-php with it.

#![allow(
    dead_code,
    reason = "each scenario module uses a different part of the harness"
)]

pub mod bytes;
mod ctl;
mod drover;
mod fpm;
pub mod http;
pub mod http1;
mod log;
mod nginx;
pub mod proc;
pub mod python;
mod site;
mod stop;
mod strace;
mod watch;

pub use ctl::{Ctl, CtlRun, probe, start_with_control};
pub use drover::{
    AsUser, Drover, PhpPool, PoolFile, Tables, admin_bin, bin, check_config, default_php_runtime,
    php_runtime, php_table, php_worker_comm, pool_toml, python_runtime, root_user, run_bounded,
};
pub use fpm::{FpmPool, PhpFpm, fix_pathinfo_1_and_0};
pub use log::{Log, Spawned};
pub use nginx::{Location, Nginx, free_port};
pub use proc::wait_until;
pub use python::PythonPool;
pub use site::Site;
pub use stop::term_lets_the_request_finish;
pub use strace::Strace;
pub use watch::FolderWatch;

use std::time::Duration;

/// The bound on every wait for something that should take well under a second.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// drover and nginx serving one pool from a site. Fields drop in order: nginx, then
/// drover (and its workers), then the temp dir.
pub struct Stack {
    pub nginx: Nginx,
    pub drover: Drover,
    pub site: Site,
}

impl Stack {
    /// drover serving one PHP pool, nginx passing `*.php` to it.
    pub fn start(site: Site, pool: impl PoolFile) -> Stack {
        let drover = Drover::start(&site, &[&pool]);
        let nginx = Nginx::start(&site, &site.socket(pool.name()));
        Stack {
            nginx,
            drover,
            site,
        }
    }

    /// drover serving one Python pool (the fixture apps installed in the site), nginx
    /// passing every path under the pool's mount (or `/`) to it.
    pub fn python(site: Site, pool: PythonPool) -> Stack {
        python::install_apps(&site);
        let drover = Drover::start(&site, &[&pool]);
        let location = Location::prefix(&pool.location(), &site.socket(&pool.name));
        let nginx = Nginx::start_locations(&site, &[location]);
        Stack {
            nginx,
            drover,
            site,
        }
    }

    /// As [`Stack::start`], with a control socket: the stack, and `drover ctl` on it.
    pub fn with_control(site: Site, pool: impl PoolFile) -> (Stack, Ctl) {
        let (drover, ctl) = start_with_control(&site, &[&pool]);
        let nginx = Nginx::start(&site, &site.socket(pool.name()));
        let stack = Stack {
            nginx,
            drover,
            site,
        };
        (stack, ctl)
    }

    pub fn url(&self, path_and_query: &str) -> String {
        self.nginx.url(path_and_query)
    }
}
