//! The PHP runtime, run as the binary `drover-php`: the master execs it once per PHP pool
//! (`[php] runtime = "embed"`) as that pool's zygote; the zygote starts PHP once and forks
//! the workers, which serve FastCGI through drover's own SAPI.
//!
//! This is the only crate that links the PHP embed library (libphp, NTS). Its `build.rs`
//! finds it with `php-config`; without it the crate builds with cfg `no_php`, and
//! `drover-php --probe` says why it cannot run PHP, so the master falls back to php-cgi.
//!
//! - [`zygote`]: PHP's module startup, `[php.admin_ini]`, then the fork loop
//!   (`drover_worker::zygote`).
//! - [`request`]: one request: the script, the 404/403 answers, PHP's callbacks; in worker
//!   mode, the worker script's boot and the hand-over of each request to it.
//! - [`direct`]: `drover-php --bind-direct`, the copy of libphp whose calls to its own
//!   functions are direct (`elfbind`), installed once [`selftest`] found that it runs PHP
//!   as the libphp it was made from does.
//! - [`script`]: which script a request runs (php-fpm's `cgi.fix_pathinfo`, Apache's
//!   `proxy:fcgi://`, `security.limit_extensions`): pure policy.
//! - `ffi` and `sapi.c`: the SAPI module, in C where PHP's macros and longjmps are;
//!   `worker.c`: worker mode (`[php] worker`), the worker script on a stack of its own and
//!   `frankenphp_handle_request()`; `children.c`: the signal mask every child a script
//!   starts (proc_open, exec) gets, php-cgi's, not the worker's.
//!
//! docs/ARCHITECTURE.md, "Embedded PHP", has the process tree and the reasons.

pub mod direct;
#[cfg(not(no_php))]
mod ffi;
#[cfg(not(no_php))]
pub mod request;
pub mod script;
pub mod selftest;
#[cfg(not(no_php))]
pub mod zygote;
