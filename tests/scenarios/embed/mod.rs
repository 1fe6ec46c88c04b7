//! PHP pools on drover's own SAPI (`[php] runtime = "embed"`, the `drover-php` zygote),
//! behind real nginx (and Apache httpd in [`apache`]): what php-fpm gives PHP apps that
//! php-cgi does not.
//!
//! - [`sapi`]: `fastcgi_finish_request()`, `flush()`, `PHP_VALUE`, `[php.admin_ini]`,
//!   `security.limit_extensions`, "File not found.", `php_sapi_name()`, uploads, sessions,
//!   a worker that segfaults.
//! - [`shared`]: a dynamic pool's workers share one OPcache and one APCu.
//! - [`memory`]: the status shows each worker's last request memory, as php-fpm's does.
//! - [`direct`]: a pool on the copy of libphp `drover-php --bind-direct` binds directly.
//! - [`counts`]: the master counts a drover-php pool's requests, CPU, recycles and crashes.
//! - [`apache`]: Apache httpd with Debian's stock php-fpm wiring (`proxy:unix:…|fcgi://`).
//! - [`settings`]: where a script's settings and `$_SERVER` come from, as under php-fpm:
//!   `disable_functions` in `[php.admin_ini]`, `PHP_VALUE` read by the request's startup,
//!   `.user.ini` and php.ini's `[PATH=]` sections, `[env]` in `$_SERVER`, and an unknown
//!   `[php.admin_ini]` name at `drover -t` and at a reload.
//! - [`headers`]: every response header against a real php-fpm behind nginx (a 304
//!   without Content-Type).
//! - [`logs`]: the log files in a folder only root may write, as php-fpm's usually are:
//!   created 0600, opened by the master (a pool of `nobody` logs), followed across
//!   logrotate's USR1, a missing folder named by `drover -t`.
//! - [`apps`]: WordPress on MariaDB, MediaWiki and DokuWiki from Debian's packages, each
//!   response (status line, headers in order, body) against a real php-fpm behind the
//!   same nginx configuration.
//! - [`children`]: the processes a script starts (`proc_open()`, `shell_exec()`) get
//!   php-cgi's signal mask, so that `proc_terminate()` stops them at once.
//! - [`paths`]: `$_SERVER`'s path variables against a real php-fpm behind nginx, with
//!   `cgi.fix_pathinfo` 1 and 0.

mod apache;
mod apps;
mod children;
mod counts;
mod direct;
mod headers;
mod logs;
mod memory;
mod paths;
mod sapi;
mod settings;
mod shared;

use crate::common::{PoolFile, Site, pool_toml};

/// An embedded-PHP pool: `[pm]`, `[php]` with `runtime = "embed"`, `[php.ini]` and
/// `[php.admin_ini]` and `[env]` lines as the test gives them.
pub struct Embed {
    pub name: String,
    /// Top-level keys of the pool file, before its tables.
    pub top: String,
    pub pm: String,
    pub php: String,
    pub ini: String,
    pub admin: String,
    pub env: String,
}

impl Embed {
    /// A static pool of `workers`.
    pub fn new(name: &str, workers: u32) -> Embed {
        Embed {
            name: name.to_string(),
            top: String::new(),
            pm: format!("mode = \"static\"\nmax_children = {workers}\n"),
            php: String::new(),
            ini: String::new(),
            admin: String::new(),
            env: String::new(),
        }
    }

    /// Top-level keys (`access_log = "..."`), one per line.
    pub fn top(mut self, lines: &str) -> Embed {
        self.top = lines.to_string();
        self
    }

    pub fn pm(mut self, lines: &str) -> Embed {
        self.pm = lines.to_string();
        self
    }

    pub fn ini(mut self, lines: &str) -> Embed {
        self.ini = lines.to_string();
        self
    }

    pub fn admin(mut self, lines: &str) -> Embed {
        self.admin = lines.to_string();
        self
    }

    /// `[php]` lines besides `runtime`, such as `ini_file = "..."`.
    pub fn php(mut self, lines: &str) -> Embed {
        self.php = lines.to_string();
        self
    }

    pub fn env(mut self, lines: &str) -> Embed {
        self.env = lines.to_string();
        self
    }
}

impl PoolFile for Embed {
    fn name(&self) -> &str {
        &self.name
    }

    fn toml(&self, site: &Site) -> String {
        crate::common::php_runtime();
        pool_toml(
            &site.socket(&self.name),
            &format!(
                "{}\n[pm]\n{}\n[php]\nruntime = \"embed\"\n{}\n[php.ini]\n{}\n[php.admin_ini]\n{}\n[env]\n{}\n",
                self.top, self.pm, self.php, self.ini, self.admin, self.env
            ),
        )
    }
}
