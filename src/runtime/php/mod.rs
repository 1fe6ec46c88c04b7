//! PHP pools. Two runtimes run them (`[php] runtime`):
//!
//! - [`embed`]: `drover-php`, a zygote that links libphp, in every pm mode; [`direct`]:
//!   whether it loads the copy of libphp whose calls to its own functions are direct.
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

pub mod direct;
pub mod embed;
pub mod sample;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Kind;
use crate::config::{Php, Pool};

/// What drover passes php-cgi (`-d`, after the pool's ini file and before its `[php.ini]`)
/// so that it runs the script the web server names and no other file. php-cgi's defaults
/// (`cgi.fix_pathinfo = 1`: a `SCRIPT_FILENAME` that is no file is walked up to the first
/// file, so `/uploads/evil.jpg/x.php` runs the .jpg behind an nginx without `try_files`;
/// `cgi.discard_path = 0`: with fix_pathinfo off, a `PATH_TRANSLATED` the web server sends
/// is the script) are php-fpm's too, but php-fpm then refuses a script whose name does not
/// end in `.php` (`security.limit_extensions`), which php-cgi cannot. The cost, as php-fpm
/// with `cgi.fix_pathinfo = 0`: `PHP_SELF` is the `PATH_INFO` the web server sent (even
/// empty), not `SCRIPT_NAME` + `PATH_INFO`; and a location that leaves the path info in
/// `SCRIPT_FILENAME` (no `fastcgi_split_path_info`) answers 404.
pub const SCRIPT_ONLY: [(&str, &str); 2] = [("cgi.fix_pathinfo", "0"), ("cgi.discard_path", "1")];

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
    let mut args = Vec::with_capacity(php.ini.len() * 2 + 6);
    if let Some(path) = &php.ini_file {
        args.push("-c".into());
        args.push(path.into());
    }
    // php-cgi runs exactly the script the web server names, as php-fpm's
    // security.limit_extensions makes it, unless the pool's [php.ini] says otherwise (which
    // the loader refuses without limit_extensions = []).
    for (key, value) in SCRIPT_ONLY {
        if !php.ini.contains_key(key) {
            args.push("-d".into());
            args.push(format!("{key}={value}").into());
        }
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
