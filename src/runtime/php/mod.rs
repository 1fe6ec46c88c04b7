//! PHP pools. Two runtimes run them (`[php] runtime`):
//!
//! - [`embed`]: `drover-php`, a zygote that links libphp, in every pm mode.
//! - php-cgi (`runtime = "cgi"`, here), for PHP builds drover-php was not built against,
//!   given the pool's listening socket as fd 0, and read from outside by [`sample`].
//!
//! A static pool runs one php-cgi *parent* with `PHP_FCGI_CHILDREN = max_children`:
//! php-cgi starts PHP once, then forks that many workers that accept on fd 0 and share its
//! OPcache, as php-fpm's children share the master's (measured: 4 independent php-cgi
//! use twice the PSS of one parent with 4 children; docs/ARCHITECTURE.md, "Why php-cgi
//! parents for static PHP pools"). php-cgi replaces a worker that exits. Dynamic and
//! ondemand pools, which the master resizes one worker at a time, run one php-cgi per
//! worker. The trade-off: php-cgi reads `PHP_FCGI_MAX_REQUESTS` once, so every worker
//! of one parent has the same limit; the jitter is drawn per parent. A recycled worker is
//! forked from the warm parent, so workers recycling together cost a fork each, not a
//! cold start.

pub mod embed;
pub mod sample;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Kind;
use crate::config::{Php, Pool};

/// Where php-cgi reads how many requests each of its workers serves.
pub const MAX_REQUESTS_ENV: &str = "PHP_FCGI_MAX_REQUESTS";

/// The program (`binary`), arguments and environment of a php-cgi parent
/// ([`Kind::PhpParent`]) or of one php-cgi worker ([`Kind::PhpWorkers`]).
pub fn plan(
    kind: Kind,
    pool: &Pool,
    php: &Php,
    binary: &Path,
    max_requests: u32,
) -> (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let mut args = Vec::with_capacity(php.ini.len() * 2 + 2);
    if let Some(path) = &php.ini_file {
        args.push("-c".into());
        args.push(path.into());
    }
    for (key, value) in &php.ini {
        args.push("-d".into());
        args.push(format!("{key}={value}").into());
    }
    // A parent forks max_children workers that share its OPcache; a php-cgi the master
    // execs as one worker forks none ([`Kind::of`] says which).
    let children = if kind.has_parent() {
        pool.pm.max_children
    } else {
        0
    };
    // php-cgi's own default is 500 when unset: always say what the pool means (0 = never).
    // No FCGI_WEB_SERVER_ADDRS: php-cgi ignores it on a socket it did not bind, which is
    // why the loader refuses listen_allowed_clients in a PHP pool.
    let env: Vec<(OsString, OsString)> = vec![
        ("PHP_FCGI_CHILDREN".into(), children.to_string().into()),
        (MAX_REQUESTS_ENV.into(), max_requests.to_string().into()),
    ];
    (binary.to_path_buf(), args, env)
}
