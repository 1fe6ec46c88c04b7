//! The C side of the SAPI (`sapi.c`, and `worker.c` for worker mode), as Rust sees it. The layouts here mirror the structs
//! there field for field; the functions Rust exports to it are in [`super::request`].

use std::ffi::{c_char, c_double, c_int, c_longlong};

/// One FastCGI param, name and value NUL-terminated.
#[repr(C)]
pub struct Param {
    pub name: *const c_char,
    pub name_len: usize,
    pub value: *const c_char,
    pub value_len: usize,
}

/// A request as `drover_php_run` takes it; every string NUL-terminated or null.
#[repr(C)]
pub struct Request {
    pub params: *const Param,
    pub params_len: usize,
    pub method: *const c_char,
    pub query: *const c_char,
    pub request_uri: *const c_char,
    pub content_type: *const c_char,
    pub content_length: c_longlong,
    pub cookie: *const c_char,
    pub authorization: *const c_char,
    pub protocol: *const c_char,
    pub script_filename: *const c_char,
    pub php_self: *const c_char,
    pub php_value: *const c_char,
    pub php_admin_value: *const c_char,
}

/// php-fpm's settings that decide the script (`cgi.*`, `doc_root`), as the worker has them.
#[repr(C)]
pub struct PathSettings {
    pub fix_pathinfo: c_int,
    pub discard_path: c_int,
    pub fcgi_logging: c_int,
    /// php.ini's `doc_root`; null when unset.
    pub doc_root: *const c_char,
}

unsafe extern "C" {
    /// Reads [`PathSettings`] (PHP started; the pointer stays valid while PHP runs).
    pub fn drover_php_path_settings(out: *mut PathSettings);
    /// Starts PHP once (module startup): 0 on success.
    pub fn drover_php_startup(ini_path: *const c_char, ini_entries: *const c_char) -> c_int;
    /// Sets and locks one `[php.admin_ini]` value (and applies `disable_functions` and
    /// `disable_classes`): 0, -1 for a name PHP has no setting for, -2 for a value the
    /// setting refuses.
    pub fn drover_php_admin_ini(name: *const c_char, value: *const c_char) -> c_int;
    /// Whether the extension a php.ini `extension=` value names is loaded (1) or not (0).
    pub fn drover_php_extension_loaded(value: *const c_char) -> c_int;
    /// Runs one request; the HTTP status it answered, or -1 if PHP could not start it.
    pub fn drover_php_run(request: *const Request, now: c_double) -> c_int;
    /// The peak memory of the request `drover_php_run` ran last, in bytes; 0 when PHP did
    /// not run it (it could not start the request).
    pub fn drover_php_peak_memory() -> usize;
    pub fn drover_php_version() -> *const c_char;
    /// SIGUSR2 writes the running script's stack to stderr as frame lines, and the script
    /// goes on; SIGUSR1 writes it, then waits for SIGKILL (see `drover_proto::zygote`).
    pub fn drover_php_install_stack_dump();
    /// In a worker: SIGUSR2 is taken by a thread of its own, which reads the stack without
    /// interrupting the script. 0, or -1 if the thread could not start.
    pub fn drover_php_start_stack_thread() -> c_int;
    /// Every child a script starts (fork, popen) starts with `mask` (children.c); call once,
    /// in the zygote, before PHP starts.
    pub fn drover_php_child_signals(mask: *const libc::sigset_t);

    /// Worker mode: runs the worker script `file` on a stack of its own until its first
    /// `frankenphp_handle_request()`, with `boot`'s params as its `$_SERVER`. 0 when it
    /// waits for a request; 1 when it ended (or could not run) before (the log says why).
    pub fn drover_php_worker_boot(
        file: *const c_char,
        boot: *const Request,
        now: c_double,
    ) -> c_int;
    /// Worker mode: hands one request to the waiting script; returns once the script asks
    /// for the next one or ends. The request's HTTP status, or -1 if PHP could not start it.
    pub fn drover_php_worker_handle(request: *const Request, now: c_double) -> c_int;
    /// Worker mode: whether the script has ended (a fatal error, an uncaught exception,
    /// `exit()`, or its own end); the worker then takes no further request.
    pub fn drover_php_worker_ended() -> c_int;
    /// Worker mode: the waiting `frankenphp_handle_request()` returns false and the script
    /// runs to its end. The script's exit status (255 after a fatal error).
    pub fn drover_php_worker_stop() -> c_int;
    /// Worker mode, booted in the zygote: in each forked worker, before its first request,
    /// PHP's random generators are unseeded, so that each worker seeds its own.
    pub fn drover_php_worker_after_fork();
}
