//! One request through PHP: the worker loop (`drover_worker::serve`) hands each FastCGI
//! request to [`Php::handle`], which decides the script ([`super::script`]), answers 404
//! or 403 itself as php-fpm does, or runs it in PHP (`sapi.c`). In worker mode (`[php]
//! worker`), every request goes to the booted worker script instead (`worker.c`), with
//! the params rewritten as classic mode rewrites them. While PHP runs, the connection sits
//! in `CURRENT`, where the `drover_php_rs_*` callbacks that `sapi.c` calls find it.
//!
//! The callbacks only move bytes and return a status, and never panic: PHP's errors are
//! longjmps, handled in C, which must never cross a Rust frame.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use drover_fastcgi::{Params, Request};
use drover_worker::serve::{Conn, Handler, Outcome};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use super::ffi;
use super::script::{self, Kind, Settings, Target};

/// The request PHP is running, for the callbacks.
struct Current {
    conn: Conn,
    /// `fastcgi_finish_request()` ended the FastCGI request; output is dropped.
    finished: bool,
    /// Whether the connection stays open (the web server asked to keep it, and the finish
    /// went through).
    keep: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// `fastcgi.logging`: PHP's messages also go to the web server (FCGI_STDERR).
static FCGI_LOGGING: AtomicBool = AtomicBool::new(true);

/// `drover-php --bind-direct`'s self-test ([`run_to_stdout`]): PHP's output (headers and
/// body) goes to this process's stdout, there being no client.
static TO_STDOUT: AtomicBool = AtomicBool::new(false);

/// Runs the script `file` as one GET request with no client, its output (headers and body)
/// on stdout: the child of `drover-php --bind-direct`'s self-test (`crate::selftest`).
/// PHP is started. The HTTP status, or -1 when PHP could not start the request.
pub fn run_to_stdout(file: &CStr) -> c_int {
    TO_STDOUT.store(true, Ordering::Relaxed);
    let name = c"SCRIPT_FILENAME";
    let param = ffi::Param {
        name: name.as_ptr(),
        name_len: name.count_bytes(),
        value: file.as_ptr(),
        value_len: file.count_bytes(),
    };
    let req = ffi::Request {
        params: &raw const param,
        params_len: 1,
        method: c"GET".as_ptr(),
        query: c"".as_ptr(),
        request_uri: std::ptr::null(),
        content_type: std::ptr::null(),
        content_length: 0,
        cookie: std::ptr::null(),
        authorization: std::ptr::null(),
        protocol: c"HTTP/1.1".as_ptr(),
        script_filename: file.as_ptr(),
        php_self: file.as_ptr(),
        php_value: std::ptr::null(),
        php_admin_value: std::ptr::null(),
    };
    // SAFETY: every pointer in `req` is to a NUL-terminated string (or the one param)
    // that outlives the call; the C side keeps none of them after it returns.
    let status = unsafe { ffi::drover_php_run(&req, now()) };
    let _ = std::io::stdout().flush();
    status
}

/// The PHP runtime's request handler, one per worker.
pub struct Php {
    /// `cgi.fix_pathinfo`, `cgi.discard_path`, `doc_root`, `security.limit_extensions`.
    settings: Settings,
    /// The target [`Handler::script`] decided for the request [`Handler::handle`] serves
    /// next, so that a request resolves its script once.
    decided: RefCell<Option<Target>>,
    /// The last request's peak memory, for the scoreboard: None when PHP did not run it
    /// (drover answered 404 or 403 itself), so that no older request's peak shows.
    memory: Option<u64>,
    /// The last response's HTTP status: PHP's (`http_response_code()`), or drover's own
    /// 404, 403 or 500; for the pool's responses by class.
    status: Option<u16>,
    arena: Arena,
    /// Worker mode: the worker script, booted by [`Handler::start`].
    worker: Option<WorkerScript>,
}

/// A worker-mode worker's script.
struct WorkerScript {
    file: CString,
    /// Booted already: in the zygote (`worker_boot = "zygote"`), before this worker was
    /// forked from it.
    booted: bool,
}

impl Php {
    /// A worker's handler; `limit_extensions` empty: any file. PHP's settings that decide
    /// the script (`cgi.fix_pathinfo`, `cgi.discard_path`, `doc_root`, `fastcgi.logging`)
    /// are read now, as php.ini, `[php.ini]` and `[php.admin_ini]` left them.
    /// `worker`: worker mode's script (`[php] worker`), which [`Handler::start`] boots.
    pub fn new(limit_extensions: Vec<String>, worker: Option<&std::path::Path>) -> Php {
        let mut read = ffi::PathSettings {
            fix_pathinfo: 1,
            discard_path: 0,
            fcgi_logging: 1,
            doc_root: std::ptr::null(),
        };
        // SAFETY: PHP is started (the zygote started it before forking this worker);
        // the call fills `read`, whose doc_root points into PHP's ini storage.
        unsafe { ffi::drover_php_path_settings(&mut read) };
        let doc_root = (!read.doc_root.is_null()).then(|| {
            // SAFETY: a NUL-terminated string of PHP's, read once here and copied.
            unsafe { CStr::from_ptr(read.doc_root) }.to_bytes().to_vec()
        });
        FCGI_LOGGING.store(read.fcgi_logging != 0, Ordering::Relaxed);
        Php {
            settings: Settings {
                fix_pathinfo: read.fix_pathinfo != 0,
                discard_path: read.discard_path != 0,
                doc_root,
                limit_extensions,
            },
            decided: RefCell::new(None),
            memory: None,
            status: None,
            arena: Arena::default(),
            worker: worker.map(|file| WorkerScript {
                // A path from the command line holds no NUL byte.
                file: CString::new(file.as_os_str().as_bytes()).unwrap_or_default(),
                booted: false,
            }),
        }
    }

    /// The worker's exit code once its loop is over (`code`: the loop's): in worker mode,
    /// the script is told to stop (`frankenphp_handle_request()` returns false) and runs
    /// to its end, and a script that ended in a fatal error exits 255, as PHP's CLI does.
    pub fn finish(&mut self, code: i32) -> i32 {
        if self.worker.is_none() {
            return code;
        }
        // SAFETY: no request runs; the script, if it still waits, is resumed to its end.
        let status = unsafe { ffi::drover_php_worker_stop() };
        if code != 0 { code } else { status }
    }

    /// Worker mode: runs the worker script up to its first `frankenphp_handle_request()`,
    /// once: in the zygote (`worker_boot = "zygote"`, whose workers are forked from the
    /// booted script), or in each worker by [`Handler::start`]. `Err`: the exit code.
    pub fn boot(&mut self) -> Result<(), i32> {
        let Some(worker) = &self.worker else {
            return Ok(());
        };
        if worker.booted {
            // A worker forked from the zygote's booted script.
            // SAFETY: PHP's request state is this process's copy; no request runs.
            unsafe { ffi::drover_php_worker_after_fork() };
            return Ok(());
        }
        let file = worker.file.as_bytes().to_vec();
        let dir = match file.iter().rposition(|&b| b == b'/') {
            Some(0) => b"/".to_vec(),
            Some(at) => file[..at].to_vec(),
            None => b".".to_vec(),
        };
        let name = match file.iter().rposition(|&b| b == b'/') {
            Some(at) => file[at..].to_vec(),
            None => [b"/".as_slice(), &file].concat(),
        };
        // The boot's $_SERVER: the process's environment and the script's own names, as
        // FrankenPHP gives a worker script (Symfony Runtime reads SCRIPT_FILENAME).
        let a = &mut self.arena;
        a.clear();
        for (param, value) in [
            (b"SCRIPT_FILENAME".as_slice(), file.as_slice()),
            (b"SCRIPT_NAME", &name),
            (b"PHP_SELF", &name),
            (b"DOCUMENT_ROOT", &dir),
        ] {
            let pair = [a.push(param), a.push(value)];
            a.params.push(pair);
        }
        let script = a.keep(Some(&file));
        a.point();
        let null = std::ptr::null();
        let boot = ffi::Request {
            params: a.ffi.as_ptr(),
            params_len: a.ffi.len(),
            method: null,
            query: null,
            request_uri: null,
            content_type: null,
            content_length: 0,
            cookie: null,
            authorization: null,
            protocol: null,
            script_filename: a.ptr(script),
            php_self: null,
            php_value: null,
            php_admin_value: null,
        };
        let booted = with_sigterm_blocked(|| {
            // SAFETY: `boot` and `file` point into buffers that outlive the call; the C
            // side keeps `file` for the script's life (it is in `self.worker`, never
            // changed) and `boot` only for the boot, which ends before the call returns.
            unsafe { ffi::drover_php_worker_boot(worker.file.as_ptr(), &boot, now()) }
        });
        if booted == 0 {
            if let Some(worker) = &mut self.worker {
                worker.booted = true;
            }
            return Ok(());
        }
        // SAFETY: the script has ended; this only reads its exit status.
        let status = unsafe { ffi::drover_php_worker_stop() };
        let _ = writeln!(
            std::io::stderr(),
            "the worker script {} ended before its first request (exit status {status}): it must \
             boot, then call frankenphp_handle_request() in a loop",
            worker.file.to_string_lossy()
        );
        Err(i32::from(drover_proto::zygote::EXIT_APP_LOAD))
    }
}

/// Runs `f` with SIGTERM blocked: a retire asked meanwhile waits until PHP is done (delivered
/// during a script, it would cut a sleep() or a blocking read short); it is taken when the
/// mask is restored.
fn with_sigterm_blocked<T>(f: impl FnOnce() -> T) -> T {
    let mut term = SigSet::empty();
    term.add(Signal::SIGTERM);
    let mut before = SigSet::empty();
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&term), Some(&mut before));
    let value = f();
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
    value
}

/// Now, in seconds since the epoch: SAPI's request time.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Handler for Php {
    /// A worker dies of a segfault as php-fpm's children do: Rust's runtime handles
    /// SIGSEGV and SIGBUS to report stack overflows, and returns from a SIGSEGV it did not
    /// cause (one sent with kill), which would let a worker live on that was told to die.
    fn start(&mut self) -> Result<(), i32> {
        for signal in [libc::SIGSEGV, libc::SIGBUS] {
            // SAFETY: restores the default action of a signal; no handler runs our code.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
        // SAFETY: starts a thread that only reads this process's memory through
        // process_vm_readv and writes to stderr; no PHP call is made from it.
        if unsafe { ffi::drover_php_start_stack_thread() } != 0 {
            let _ = writeln!(
                std::io::stderr(),
                "no stack thread: a slowlog stack will interrupt the script's waits"
            );
        }
        self.boot()
    }

    /// The script as php-fpm's status and access log show it: the file that runs, without
    /// Apache's `proxy:fcgi://HOST` and without the path info; "-" when there is none.
    fn script(&self, params: &Params) -> Option<String> {
        let target = self.resolve(params);
        let shown = match &target {
            Target::Script(found) => String::from_utf8_lossy(&found.filename).into_owned(),
            Target::Denied { filename }
            | Target::NoInput { filename }
            | Target::Unreadable { filename } => String::from_utf8_lossy(filename).into_owned(),
            Target::NotFound { .. } => "-".to_owned(),
        };
        *self.decided.borrow_mut() = Some(target);
        Some(shown)
    }

    fn handle(&mut self, conn: &Conn, request: Request) -> Outcome {
        self.memory = None;
        self.status = None;
        let decided = self.decided.borrow_mut().take();
        let target = decided.unwrap_or_else(|| self.resolve(&request.params));
        if self.worker.is_some() {
            // Every request goes to the worker script, with the params as classic mode
            // would have rewritten them for the script the web server names.
            let found = match target {
                Target::Script(found) => found,
                _ => script::Script {
                    filename: (request.params.get("SCRIPT_FILENAME"))
                        .unwrap_or_default()
                        .to_vec(),
                    changes: script::Changes::default(),
                    php_self: (request.params.get("SCRIPT_NAME"))
                        .unwrap_or_default()
                        .to_vec(),
                },
            };
            return self.run(conn, &request, &found);
        }
        match target {
            Target::Script(found) => self.run(conn, &request, &found),
            Target::NoInput { filename } => {
                let error = match std::fs::metadata(std::ffi::OsStr::from_bytes(&filename)) {
                    Ok(_) => "Not a regular file".to_owned(),
                    Err(err) => describe(&err),
                };
                self.status = Some(404);
                unopenable(
                    conn,
                    &filename,
                    &error,
                    "404 Not Found",
                    "No input file specified.\n",
                )
            }
            Target::Unreadable { filename } => {
                let error = describe(&std::io::Error::from_raw_os_error(libc::EACCES));
                self.status = Some(403);
                unopenable(conn, &filename, &error, "403 Forbidden", "Access denied.\n")
            }
            Target::NotFound { .. } => {
                // php-fpm's answer, and its line in the web server's error log.
                let mut c = conn.borrow_mut();
                if FCGI_LOGGING.load(Ordering::Relaxed) {
                    let _ = c.write_stderr(b"Primary script unknown");
                }
                self.status = Some(404);
                answer(&mut c, "404 Not Found", "File not found.\n")
            }
            Target::Denied { filename } => {
                let _ = writeln!(
                    std::io::stderr(),
                    "access to the script '{}' has been denied (see security.limit_extensions)",
                    String::from_utf8_lossy(&filename)
                );
                self.status = Some(403);
                answer(&mut conn.borrow_mut(), "403 Forbidden", "Access denied.\n")
            }
        }
    }

    /// php-fpm's "last request memory": the Zend allocator's peak during the request, as
    /// `memory_get_peak_usage()` reads it at the script's end.
    fn request_memory(&self) -> Option<u64> {
        self.memory
    }

    fn response_status(&self) -> Option<u16> {
        self.status
    }
}

impl Php {
    /// The script a request runs, as php-fpm decides it ([`script::resolve`]).
    fn resolve(&self, params: &Params) -> Target {
        script::resolve(
            |name| params.get(name),
            &self.settings,
            |path| match std::fs::metadata(std::ffi::OsStr::from_bytes(path)) {
                Err(_) => Kind::Missing,
                Ok(meta) if meta.is_file() && readable(path, &meta) => Kind::File,
                Ok(meta) if meta.is_file() => Kind::Unreadable,
                Ok(_) => Kind::Other,
            },
        )
    }
}

/// An I/O error as strerror(3) words it ("No such file or directory"), without Rust's
/// " (os error N)".
fn describe(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Whether this worker may read a regular file: its mode lets everyone read it (the usual
/// 0644, and no system call), or `faccessat` with the effective ids says so (owner, group,
/// ACLs, root).
fn readable(path: &[u8], meta: &std::fs::Metadata) -> bool {
    use nix::fcntl::AtFlags;
    use nix::unistd::{AccessFlags, faccessat};
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o004 != 0
        || faccessat(
            nix::fcntl::AT_FDCWD,
            std::ffi::OsStr::from_bytes(path),
            AccessFlags::R_OK,
            AtFlags::AT_EACCESS,
        )
        .is_ok()
}

/// php-fpm's answer when it cannot open the script, and its log line (in drover's log, and
/// in the web server's unless `fastcgi.logging = 0`).
fn unopenable(conn: &Conn, filename: &[u8], error: &str, status: &str, body: &str) -> Outcome {
    let line = format!(
        "Unable to open primary script: {} ({error})",
        String::from_utf8_lossy(filename)
    );
    let _ = writeln!(std::io::stderr(), "{line}");
    let mut c = conn.borrow_mut();
    if FCGI_LOGGING.load(Ordering::Relaxed) {
        let _ = c.write_stderr(line.as_bytes());
    }
    answer(&mut c, status, body)
}

/// A response drover writes without PHP, and the end of the request.
fn answer(conn: &mut drover_worker::exchange::Exchange, status: &str, body: &str) -> Outcome {
    let head = format!("Status: {status}\r\nContent-type: text/html; charset=UTF-8\r\n\r\n");
    let keep = conn.write_stdout(head.as_bytes()).is_ok()
        && conn.write_stdout(body.as_bytes()).is_ok()
        && conn.finish(0).unwrap_or(false);
    Outcome { keep }
}

/// The NUL-terminated copies of one request's strings that PHP reads, in one buffer kept
/// from request to request (so that a request costs no allocation here once the buffer
/// has grown): strings are pushed first, and pointers taken only once all are in.
#[derive(Default)]
struct Arena {
    bytes: Vec<u8>,
    /// Offset and length of each param's name and value.
    params: Vec<[(usize, usize); 2]>,
    ffi: Vec<ffi::Param>,
}

/// Where a string is in the arena: offset and length.
type Span = Option<(usize, usize)>;

impl Arena {
    fn clear(&mut self) {
        self.bytes.clear();
        self.params.clear();
        self.ffi.clear();
    }

    /// Copies `value` up to its first NUL (C strings end there), then a NUL.
    fn push(&mut self, value: &[u8]) -> (usize, usize) {
        let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&value[..end]);
        self.bytes.push(0);
        (at, end)
    }

    fn keep(&mut self, value: Option<&[u8]>) -> Span {
        value.map(|value| self.push(value))
    }

    /// Points `ffi` at the params, as PHP reads them, once every string is in: the
    /// pointers stay valid until the arena changes.
    fn point(&mut self) {
        let base = self.bytes.as_ptr().cast::<c_char>();
        self.ffi.clear();
        self.ffi.extend(
            self.params
                .iter()
                .map(|[(name, name_len), (value, value_len)]| ffi::Param {
                    // In bounds: offsets into `bytes`, whose allocation no longer changes.
                    name: base.wrapping_add(*name),
                    name_len: *name_len,
                    value: base.wrapping_add(*value),
                    value_len: *value_len,
                }),
        );
    }

    /// Valid until the arena changes.
    fn ptr(&self, span: Span) -> *const c_char {
        span.map_or(std::ptr::null(), |(at, _)| {
            self.bytes[at..].as_ptr().cast::<c_char>()
        })
    }
}

impl Php {
    fn run(&mut self, conn: &Conn, request: &Request, found: &script::Script) -> Outcome {
        let params = &request.params;
        let get = |name: &str| params.get(name);
        let a = &mut self.arena;
        a.clear();
        // The params as php-fpm rewrites them (script::Script::changes): PHP's $_SERVER
        // and getenv() see these.
        for (name, value) in params.iter() {
            let value = match found.changes.get(name) {
                None => value,
                Some(Some(new)) => new,
                Some(None) => continue,
            };
            let pair = [a.push(name), a.push(value)];
            a.params.push(pair);
        }
        for (name, value) in &found.changes.0 {
            if let Some(value) = value
                && params.get(name).is_none()
            {
                let pair = [a.push(name.as_bytes()), a.push(value)];
                a.params.push(pair);
            }
        }
        let spans = [
            a.keep(get("REQUEST_METHOD").or(Some(b"GET"))),
            a.keep(get("QUERY_STRING").or(Some(b""))),
            a.keep(get("REQUEST_URI")),
            a.keep(get("CONTENT_TYPE")),
            a.keep(get("HTTP_COOKIE")),
            a.keep(get("HTTP_AUTHORIZATION")),
            a.keep(get("SERVER_PROTOCOL")),
            a.keep(Some(found.filename.as_slice())),
            a.keep(Some(found.php_self.as_slice())),
            a.keep(get("PHP_VALUE")),
            a.keep(get("PHP_ADMIN_VALUE")),
        ];
        // Every string is in: the pointers below stay valid until the next request.
        self.arena.point();
        let a = &self.arena;
        let p = |i: usize| a.ptr(spans[i]);
        let content_length = get("CONTENT_LENGTH")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
            .unwrap_or(0);
        let req = ffi::Request {
            params: a.ffi.as_ptr(),
            params_len: a.ffi.len(),
            method: p(0),
            query: p(1),
            request_uri: p(2),
            content_type: p(3),
            content_length,
            cookie: p(4),
            authorization: p(5),
            protocol: p(6),
            script_filename: p(7),
            php_self: p(8),
            php_value: p(9),
            php_admin_value: p(10),
        };
        CURRENT.with(|current| {
            *current.borrow_mut() = Some(Current {
                conn: conn.clone(),
                finished: false,
                keep: false,
            });
        });
        let worker = self.worker.is_some();
        with_sigterm_blocked(|| {
            // SAFETY: every pointer in `req` points into the arena, which is not changed
            // until the call returns; the C side keeps none of them after it returns (in
            // worker mode, the script's request is over when the call returns).
            let status = unsafe {
                if worker {
                    ffi::drover_php_worker_handle(&req, now())
                } else {
                    ffi::drover_php_run(&req, now())
                }
            };
            // SAFETY: reads a value the request left; no request runs.
            let peak = unsafe { ffi::drover_php_peak_memory() };
            self.memory = u64::try_from(peak).ok().filter(|&bytes| bytes > 0);
            // -1: PHP could not start the request, and `end` answers 500.
            self.status = if status < 0 {
                Some(500)
            } else {
                u16::try_from(status).ok()
            };
            // SAFETY: reads worker.c's state; no request runs.
            if worker && unsafe { ffi::drover_php_worker_ended() } != 0 {
                // A fatal error, exit() or the script's own end: this worker takes no
                // further request, and the zygote forks a fresh one.
                drover_worker::ledger::retire();
            }
            end(conn, status)
        })
    }
}

/// Ends the request PHP ran (unless `fastcgi_finish_request()` did): END_REQUEST, or a 500
/// if PHP could not start it.
fn end(conn: &Conn, status: c_int) -> Outcome {
    let current = CURRENT.with(|current| current.borrow_mut().take());
    let Some(current) = current else {
        return Outcome { keep: false };
    };
    if current.finished {
        return Outcome { keep: current.keep };
    }
    let mut c = conn.borrow_mut();
    if status < 0 {
        let _ = writeln!(std::io::stderr(), "PHP could not start the request");
        return answer(&mut c, "500 Internal Server Error", "");
    }
    Outcome {
        keep: c.finish(0).unwrap_or(false),
    }
}

/// Runs `f` on the current request's connection, unless `fastcgi_finish_request()` ended
/// it; `None` outside a request.
fn with_open<T>(f: impl FnOnce(&mut Current) -> T) -> Option<T> {
    CURRENT.with(|current| {
        let mut current = current.try_borrow_mut().ok()?;
        current.as_mut().filter(|c| !c.finished).map(f)
    })
}

fn status(result: Option<std::io::Result<()>>) -> c_int {
    match result {
        Some(Ok(())) | None => 0,
        Some(Err(_)) => -1,
    }
}

/// PHP's output (headers and body) for the client.
#[unsafe(no_mangle)]
pub extern "C" fn drover_php_rs_write(data: *const c_char, len: usize) -> c_int {
    if data.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: PHP passes a buffer of `len` readable bytes, valid for this call.
    let data = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    if TO_STDOUT.load(Ordering::Relaxed) {
        return status(Some(std::io::stdout().write_all(data)));
    }
    status(with_open(|c| {
        c.conn
            .try_borrow_mut()
            .map_err(|_| std::io::ErrorKind::WouldBlock.into())
            .and_then(|mut conn| conn.write_stdout(data))
    }))
}

/// `flush()`: what PHP wrote so far goes to the client now.
#[unsafe(no_mangle)]
pub extern "C" fn drover_php_rs_flush() -> c_int {
    status(with_open(|c| {
        c.conn
            .try_borrow_mut()
            .map_err(|_| std::io::ErrorKind::WouldBlock.into())
            .and_then(|mut conn| conn.flush())
    }))
}

/// The request body, for `$_POST`, `$_FILES` and `php://input`; 0 at its end (or when the
/// client is gone or too slow: the worker loop logs that once PHP is done).
#[unsafe(no_mangle)]
pub extern "C" fn drover_php_rs_read_body(buf: *mut c_char, len: usize) -> usize {
    if buf.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: PHP passes a writable buffer of `len` bytes, valid for this call.
    let buf = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    with_open(|c| {
        c.conn
            .try_borrow_mut()
            .ok()
            .and_then(|mut conn| conn.read_stdin(buf).ok())
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// `fastcgi_finish_request()`: ends the FastCGI request now (END_REQUEST, and the
/// connection closed unless the web server keeps it), while the script runs on.
#[unsafe(no_mangle)]
pub extern "C" fn drover_php_rs_finish() -> c_int {
    CURRENT.with(|current| {
        let Ok(mut current) = current.try_borrow_mut() else {
            return -1;
        };
        let Some(current) = current.as_mut().filter(|c| !c.finished) else {
            return -1;
        };
        current.finished = true;
        let Ok(mut conn) = current.conn.try_borrow_mut() else {
            return -1;
        };
        match conn.finish(0) {
            Ok(keep) => {
                current.keep = keep;
                if !keep {
                    // The web server ends the response when the connection closes.
                    close_now(&mut conn);
                }
                0
            }
            Err(_) => {
                close_now(&mut conn);
                -1
            }
        }
    })
}

/// Closes the connection of a request that `fastcgi_finish_request()` ended, so that the
/// web server ends the response now; a body the script left unread is shed first, as the
/// worker loop does (`drover_fastcgi`'s crate doc says why).
fn close_now(conn: &mut drover_worker::exchange::Exchange) {
    if conn.body_unread() {
        let max = drover_fastcgi::Limits::default().max_unread_body;
        conn.get_mut().linger_close(max, LINGER_BOUND);
    } else {
        conn.get_mut().close_shedding();
    }
}

/// How long a close after `fastcgi_finish_request()` waits for the web server to take
/// the rest of an unread body (it stops sending once it has the response, and closes).
const LINGER_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// PHP's log messages: into the web server's error log during a request (unless
/// `fastcgi.logging = 0`, as php-fpm), and into drover's log.
#[unsafe(no_mangle)]
pub extern "C" fn drover_php_rs_log(message: *const c_char, len: usize) {
    if message.is_null() {
        return;
    }
    // SAFETY: PHP passes `len` readable bytes, valid for this call.
    let message = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), len) };
    let mut line = Vec::with_capacity(len + 14);
    line.extend_from_slice(b"PHP message: ");
    line.extend_from_slice(message);
    if FCGI_LOGGING.load(Ordering::Relaxed) {
        with_open(|c| {
            if let Ok(mut conn) = c.conn.try_borrow_mut() {
                let _ = conn.write_stderr(&line);
            }
        });
    }
    line.push(b'\n');
    // One write, so that the line reaches drover's log whole.
    let _ = std::io::stderr().write_all(&line);
}
