//! The zygote: one per PHP pool, exec'd by the master as `drover-php`. It starts PHP once
//! (module startup: php.ini, the pool's `[php.ini]`, extensions, and OPcache's shared
//! memory), locks the pool's `[php.admin_ini]` values, then forks the workers in every pm
//! mode, so that a pool has one OPcache and one APCu, as php-fpm's children share their
//! master's, and a worker forked later starts warm. The fork loop, its reports to the
//! master and the worker's request loop are `drover_worker`'s, shared with drover-python.

use std::ffi::CString;

use drover_proto::zygote::{EXIT_APP_LOAD, PhpArgs};
use drover_worker::serve::{self, Board, WorkerConfig};
use drover_worker::zygote::{self, Runtime};
use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use super::ffi;
use super::request::Php;
use super::script;

struct Forker {
    limit_extensions: Vec<String>,
    /// Worker mode's script (`[php] worker`).
    worker: Option<std::path::PathBuf>,
    /// `worker_boot = "zygote"`: the handler whose worker script the zygote booted; each
    /// worker serves with its own copy (the fork's), so the booted app is shared
    /// copy-on-write.
    booted: Option<Php>,
}

impl Runtime for Forker {
    fn fork_worker(
        &mut self,
        config: WorkerConfig,
        board: Option<Board<'_>>,
        mask: &SigSet,
    ) -> nix::Result<Pid> {
        // SAFETY: the zygote runs no other thread (PHP is built without threads, NTS), so
        // the child inherits no lock held elsewhere.
        match unsafe { libc::fork() } {
            -1 => Err(nix::Error::last()),
            0 => zygote::become_worker(mask, || {
                let mut php = self.booted.take().unwrap_or_else(|| {
                    Php::new(self.limit_extensions.clone(), self.worker.as_deref())
                });
                let code = serve::run(&mut php, config, board);
                php.finish(code)
            }),
            pid => Ok(Pid::from_raw(pid)),
        }
    }
}

pub fn run(args: PhpArgs) -> u8 {
    let mask = match zygote::block_signals(&args.zygote) {
        Ok(mask) => mask,
        Err(err) => {
            eprintln!("drover-php: cannot block signals: {err}");
            return 1;
        }
    };
    // SAFETY: copies the mask and registers a fork handler; PHP is not started yet.
    unsafe { ffi::drover_php_child_signals(mask.as_ref()) };
    // Before PHP starts: PHP records the handlers present at its startup and calls them
    // from its own (zend_signal); one recorded as the default action would end a worker
    // that SIGTERM asks to retire, mid-response.
    serve::install_signals();
    if args.worker.is_some() {
        // What a script written for FrankenPHP's worker mode looks for (Symfony Runtime's
        // FrankenPHP runner among them), in $_SERVER, $_ENV and getenv().
        // SAFETY: the zygote runs no other thread yet.
        unsafe { std::env::set_var("FRANKENPHP_WORKER", "1") };
    }
    // SAFETY: installs a signal handler; PHP is not started yet.
    unsafe { ffi::drover_php_install_stack_dump() };
    forget_loader_path();
    if let Err(why) = start(&args) {
        eprintln!("drover-php: {why}");
        return EXIT_APP_LOAD;
    }
    let mut forker = Forker {
        limit_extensions: script::parse_extensions(&args.limit_extensions),
        worker: args.worker.clone(),
        booted: None,
    };
    if args.boot_in_zygote {
        match boot_in_zygote(&forker) {
            Ok(php) => forker.booted = Some(php),
            Err(code) => return code,
        }
    }
    zygote::serve(&mut forker, &args.zygote, "php", mask)
}

/// Removes `LD_LIBRARY_PATH` from this process's environment when all it did was lead the
/// loader to a bound copy of libphp (`drover-php --bind-direct`): the folder of the libphp
/// this process loaded, which carries the copy's marker. The loader has read it already;
/// left in, the app would see it (`getenv()`, `$_SERVER`, `$_ENV`) and every program it
/// runs (`proc_open`, `exec`) would load its libraries from there. Any other value is the
/// pool's own (`[env]`) and stays. Called before PHP starts, while no other thread runs.
fn forget_loader_path() {
    let Some(path) = std::env::var_os(crate::direct::LIBRARY_PATH) else {
        return;
    };
    let Some(libphp) = crate::direct::linked_libphp() else {
        return;
    };
    let folder = libphp.parent().map(std::path::Path::as_os_str);
    let canonical = std::fs::canonicalize(&path).ok();
    if folder != canonical.as_deref().map(std::path::Path::as_os_str) {
        return;
    }
    let bound = std::fs::File::open(&libphp)
        .ok()
        .and_then(|file| elfbind::mark::Marker::read(&file).ok().flatten())
        .is_some();
    if bound {
        // SAFETY: the zygote runs no other thread yet (PHP is not started).
        unsafe { std::env::remove_var(crate::direct::LIBRARY_PATH) };
    }
}

/// `worker_boot = "zygote"`: the worker script boots here, once, and every worker is forked
/// from the booted app. What must not be shared by processes is refused: a socket the boot
/// left open (a database connection: every worker would talk on the same one) stops the
/// pool with the reason, as a boot that fails does. PHP's random generators are unseeded
/// in each worker (`drover_php_worker_after_fork`).
fn boot_in_zygote(forker: &Forker) -> Result<Php, u8> {
    let before = open_sockets();
    let mut php = Php::new(forker.limit_extensions.clone(), forker.worker.as_deref());
    php.boot()
        .map_err(|code| u8::try_from(code).unwrap_or(EXIT_APP_LOAD))?;
    let opened: Vec<String> = open_sockets()
        .into_iter()
        .filter(|socket| !before.contains(socket))
        .map(|(fd, what)| format!("fd {fd} ({what})"))
        .collect();
    if !opened.is_empty() {
        eprintln!(
            "drover-php: the worker script's boot left sockets open: {}; with worker_boot = \
             \"zygote\" every worker would share them (a database connection talked on by \
             all of them): connect on the first request instead, or use worker_boot = \
             \"worker\"",
            opened.join(", ")
        );
        return Err(EXIT_APP_LOAD);
    }
    Ok(php)
}

/// The sockets this process has open, by descriptor, with what /proc names them
/// (`socket:[INODE]`); fd 0 (the pool's listener) and the zygote's own are among them.
fn open_sockets() -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let fd: i32 = entry.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            let target = target.to_string_lossy().into_owned();
            target.starts_with("socket:").then_some((fd, target))
        })
        .collect()
}

/// `drover-php --check`: PHP started as [`run`] starts it, then the exit: 0 when PHP
/// started and took every `[php.admin_ini]` value, else `EXIT_APP_LOAD` and the reason on
/// stdout (`drover -t` reads it).
pub fn check(args: &PhpArgs) -> u8 {
    match start(args) {
        Ok(()) => 0,
        Err(why) => {
            // PHP's own startup warnings first (C stdio's buffer), the reason last: drover
            // -t shows the last line.
            // SAFETY: fflush(NULL) flushes every C output stream.
            unsafe { libc::fflush(std::ptr::null_mut()) };
            println!("{why}");
            EXIT_APP_LOAD
        }
    }
}

/// Module startup with the pool's php.ini and values, then the admin values.
fn start(args: &PhpArgs) -> Result<(), String> {
    let c = |s: &str, what: &str| CString::new(s).map_err(|_| format!("{what} holds a NUL byte"));
    let ini_file = args
        .ini_file
        .as_ref()
        .map(|path| c(&path.to_string_lossy(), "the ini file's path"))
        .transpose()?;
    // `extension` values load with PHP's startup, as php.ini's do, from [php.admin_ini] as
    // well (php-fpm's php_admin_value[extension]): PHP cannot load one once it has started.
    let (admin_extensions, admin): (Vec<&String>, Vec<&String>) = args
        .admin_ini
        .iter()
        .partition(|line| line.starts_with("extension="));
    let startup: Vec<&String> = args.ini.iter().chain(admin_extensions).collect();
    let mut entries = String::new();
    for line in &startup {
        entries.push_str(line);
        entries.push('\n');
    }
    let entries = c(&entries, "[php.ini]")?;
    // SAFETY: both strings are NUL-terminated and outlive the call (PHP copies them).
    let started = unsafe {
        ffi::drover_php_startup(
            ini_file.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
            entries.as_ptr(),
        )
    };
    if started != 0 {
        return Err("PHP failed to start (see the lines above)".into());
    }
    let extensions = startup
        .iter()
        .filter_map(|line| line.strip_prefix("extension="));
    for value in extensions {
        let cvalue = c(value, "an extension")?;
        // SAFETY: a NUL-terminated string; PHP is started and no request runs.
        if unsafe { ffi::drover_php_extension_loaded(cvalue.as_ptr()) } == 0 {
            return Err(format!(
                "pool {}: extension = {value:?}: PHP could not load this extension (its \
                 startup warning says why)",
                args.zygote.pool
            ));
        }
    }
    for line in admin {
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let (cname, cvalue) = (c(name, "[php.admin_ini]")?, c(value, "[php.admin_ini]")?);
        // SAFETY: NUL-terminated strings; PHP is started and no request runs.
        let rule = match unsafe { ffi::drover_php_admin_ini(cname.as_ptr(), cvalue.as_ptr()) } {
            0 => continue,
            -1 => {
                "PHP has no such setting (a typo, or the extension that defines it is not loaded)"
            }
            _ => "PHP refuses this value for it",
        };
        return Err(format!(
            "pool {}: [php.admin_ini] {name} = {value:?}: {rule}",
            args.zygote.pool
        ));
    }
    Ok(())
}

/// One line for `drover-php --probe`: the PHP this binary runs.
pub fn version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(ffi::drover_php_version()) };
    format!("PHP {} (embed)", version.to_string_lossy())
}
