//! Runs the drover binary against configs written into a [`Site`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{Log, Site, TIMEOUT, proc, wait_until};

/// The `drover` binary under test.
const DROVER: &str = env!("CARGO_BIN_EXE_drover");

/// `drover`, with [`admin_bin`] built beside it: the daemon execs it for every command
/// line but `[-c FILE]` (the tests run `-t`, `ctl`, `import`, `serve`, `--help` through
/// drover, as users do).
pub fn bin() -> &'static str {
    admin_bin();
    DROVER
}

/// `drover-admin`, beside [`bin`], built like [`python_runtime`]: it is another package of
/// the workspace (crates/admin).
pub fn admin_bin() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        let bin = build_beside_drover("drover-admin");
        bin.into_os_string().into_string().expect("a UTF-8 path")
    })
}

/// `drover-python`, beside [`bin`], where the master looks for it. Cargo builds only the
/// tested package's own binaries for its integration tests, and `drover-python` is another
/// package of the workspace: the first caller builds it, with drover's profile and target
/// folder, so that a targeted `cargo test --test scenarios` never runs a stale one.
pub fn python_runtime() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build_beside_drover("drover-python"))
}

/// `drover-php`, beside [`bin`], built like [`python_runtime`] once its crate exists
/// (`crates/php`); `None` before. The master runs it for `runtime = "embed"` pools, and asks
/// it (`--probe`) whether PHP pools without a runtime default to it.
pub fn php_runtime() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/php/Cargo.toml");
            manifest
                .is_file()
                .then(|| build_beside_drover("drover-php"))
        })
        .as_deref()
}

/// Builds the workspace's `package` with drover's profile and target folder, and returns
/// its binary (named like the package) beside [`bin`].
fn build_beside_drover(package: &str) -> PathBuf {
    let bin = Path::new(DROVER);
    let profile_dir = bin.parent().expect("drover's folder");
    let profile = match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => "dev",
        Some(profile) => profile,
        None => panic!("no profile folder in {DROVER}"),
    };
    let status = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args([
            "build",
            "--quiet",
            "--package",
            package,
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(profile_dir.parent().expect("the target folder"))
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .stdin(Stdio::null())
        .status()
        .expect("run cargo build");
    assert!(
        status.success(),
        "cargo build --package {package}: {status}"
    );
    bin.with_file_name(package)
}

/// Builds what drover runs beside itself before a test starts it.
fn runtimes() {
    python_runtime();
    php_runtime();
}

/// The PHP runtime of a pool that does not choose one ([`PhpPool::runtime`]): the
/// environment's `DROVER_TEST_PHP_RUNTIME` (`"embed"` or `"cgi"`), else `"embed"` (drover's own default;
/// scripts/test.sh runs the PHP scenario tests on both).
pub fn default_php_runtime() -> &'static str {
    static CHOSEN: OnceLock<&'static str> = OnceLock::new();
    CHOSEN.get_or_init(|| match std::env::var("DROVER_TEST_PHP_RUNTIME") {
        Err(_) => "embed",
        Ok(value) => match value.as_str() {
            "embed" => "embed",
            "cgi" => "cgi",
            other => panic!("DROVER_TEST_PHP_RUNTIME={other:?}: expected \"embed\" or \"cgi\""),
        },
    })
}

/// The `[php]` table of a pool on `runtime` (`"embed"`: drover-php; `"cgi"`: php-cgi from
/// PATH), with a line break before the next table.
pub fn php_table(runtime: &str) -> String {
    match runtime {
        "embed" => "[php]\nruntime = \"embed\"\n".to_owned(),
        "cgi" => "[php]\nruntime = \"cgi\"\nbinary = \"php-cgi\"\n".to_owned(),
        other => panic!("PHP runtime {other:?}: expected \"embed\" or \"cgi\""),
    }
}

/// The process name (`comm`) of the workers of a PHP pool on `runtime`.
pub fn php_worker_comm(runtime: &str) -> &'static str {
    match runtime {
        "embed" => "drover-php",
        _ => "php-cgi",
    }
}

/// A pool file drover reads from `pools.d/NAME.toml`.
pub trait PoolFile {
    fn name(&self) -> &str;
    fn toml(&self, site: &Site) -> String;
}

/// A static `[php]` pool listening on `<site>/<name>.sock`, on [`default_php_runtime`]
/// unless [`PhpPool::runtime`] says otherwise.
pub struct PhpPool {
    pub name: String,
    pub max_children: u32,
    pub max_requests: Option<u32>,
    /// `"embed"` (drover-php) or `"cgi"` (php-cgi).
    pub runtime: &'static str,
}

impl PhpPool {
    pub fn new(name: &str) -> PhpPool {
        PhpPool {
            name: name.to_string(),
            max_children: 2,
            max_requests: None,
            runtime: default_php_runtime(),
        }
    }

    /// Runs the pool on `runtime`: `"embed"` (drover-php) or `"cgi"` (php-cgi), whatever
    /// the process-wide default.
    pub fn runtime(mut self, runtime: &'static str) -> PhpPool {
        assert!(
            matches!(runtime, "embed" | "cgi"),
            "PHP runtime {runtime:?}: expected \"embed\" or \"cgi\""
        );
        self.runtime = runtime;
        self
    }

    /// The process name of its workers: `drover-php` or `php-cgi`.
    pub fn worker_comm(&self) -> &'static str {
        php_worker_comm(self.runtime)
    }

    pub fn max_children(mut self, n: u32) -> PhpPool {
        self.max_children = n;
        self
    }

    pub fn max_requests(mut self, n: u32) -> PhpPool {
        self.max_requests = Some(n);
        self
    }
}

impl PoolFile for PhpPool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toml(&self, site: &Site) -> String {
        let mut pm = format!("mode = \"static\"\nmax_children = {}\n", self.max_children);
        if let Some(n) = self.max_requests {
            pm += &format!("max_requests = {n}\n");
        }
        pool_toml(
            &site.socket(&self.name),
            &format!("[pm]\n{pm}\n{}", php_table(self.runtime)),
        )
    }
}

/// A pool file: `listen` on `socket` (0666 so nginx's worker may connect), `user = "root"`
/// when the tests run as root (drover then requires a user, and root must be explicit),
/// then `tables`.
pub fn pool_toml(socket: &Path, tables: &str) -> String {
    format!(
        "listen = \"{}\"\nlisten_mode = \"0666\"\n{}\n{tables}",
        socket.display(),
        root_user()
    )
}

/// A pool file of `tables` (the pool's keys and tables) after the `listen` line, on
/// `<site>/<name>.sock`, and the user line that [`pool_toml`] writes.
pub struct Tables {
    pub name: &'static str,
    pub tables: String,
}

impl PoolFile for Tables {
    fn name(&self) -> &str {
        self.name
    }

    fn toml(&self, site: &Site) -> String {
        pool_toml(&site.socket(self.name), &self.tables)
    }
}

/// `pool` run as `user` and `group` where the tests run as root (its file then says
/// `user = "root"`); elsewhere the pool runs as the tests' user, as it would.
pub struct AsUser<P> {
    pub pool: P,
    pub user: &'static str,
    pub group: &'static str,
}

impl<P: PoolFile> PoolFile for AsUser<P> {
    fn name(&self) -> &str {
        self.pool.name()
    }

    fn toml(&self, site: &Site) -> String {
        self.pool.toml(site).replace(
            "user = \"root\"",
            &format!("user = \"{}\"\ngroup = \"{}\"", self.user, self.group),
        )
    }
}

/// `user = "root"` and a newline when the tests run as root (drover then requires a pool's
/// user, and root must be said), else nothing.
pub fn root_user() -> &'static str {
    if proc::running_as_root() {
        "user = \"root\"\n"
    } else {
        ""
    }
}

/// `drover -t -c <site>/drover.toml`, bounded; drover.toml logs to stderr.
pub fn check_config(site: &Site) -> Output {
    runtimes();
    run_bounded(
        Command::new(bin())
            .arg("-t")
            .arg("-c")
            .arg(site.path().join("drover.toml")),
    )
}

/// Runs a command that must exit by itself within [`TIMEOUT`].
pub fn run_bounded(command: &mut Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (out, err) = (Log::default(), Log::default());
    out.collect(child.stdout.take().unwrap());
    err.collect(child.stderr.take().unwrap());
    let status = wait_until(TIMEOUT, &format!("{command:?} to exit"), || {
        child.try_wait().unwrap()
    });
    // The pipes close at exit; let the reader threads take the last lines.
    out.wait_closed(TIMEOUT);
    err.wait_closed(TIMEOUT);
    Output {
        status,
        stdout: out.text().into_bytes(),
        stderr: err.text().into_bytes(),
    }
}

/// A running `drover -c`; on drop it and every process below it are SIGKILLed.
pub struct Drover {
    child: Child,
    /// stdout and stderr, interleaved as they arrive.
    pub log: Log,
}

impl Drover {
    /// Writes `drover.toml` and `pools.d/*.toml` into the site, starts drover and waits for
    /// its `ready:` line.
    pub fn start(site: &Site, pools: &[&dyn PoolFile]) -> Drover {
        Drover::write_files(site, pools);
        let drover = Drover::spawn(site);
        drover.log.wait_for_line("ready:", TIMEOUT);
        drover
    }

    /// [`Drover::start`] from binaries another user may run (see
    /// [`Drover::spawn_reachable`]), for pools with `user = "..."`.
    pub fn start_reachable(site: &Site, pools: &[&dyn PoolFile]) -> Drover {
        Drover::write_files(site, pools);
        let drover = Drover::spawn_reachable(site);
        drover.log.wait_for_line("ready:", TIMEOUT);
        drover
    }

    pub fn write_files(site: &Site, pools: &[&dyn PoolFile]) {
        site.write(
            "drover.toml",
            "error_log = \"stderr\"\nlog_level = \"info\"\n",
        );
        for pool in pools {
            site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(site));
        }
    }

    /// Starts drover on the site's existing `drover.toml` without waiting for anything.
    pub fn spawn(site: &Site) -> Drover {
        Drover::spawn_with_env(site, &[])
    }

    /// [`Drover::spawn`] with these variables added to drover's environment.
    pub fn spawn_with_env(site: &Site, env: &[(&str, &std::ffi::OsStr)]) -> Drover {
        Drover::spawn_program(Path::new(bin()), site, env)
    }

    /// [`Drover::spawn`] of copies of drover and drover-php in `<site>/bin`, for pools that
    /// run as another user (`www-data`): the build's own folder may be one that user cannot
    /// reach (a checkout under a 0700 folder), the site is one it can.
    pub fn spawn_reachable(site: &Site) -> Drover {
        runtimes();
        let folder = site.path().join("bin");
        std::fs::create_dir_all(&folder).expect("create <site>/bin");
        let drover = folder.join("drover");
        for from in [Some(Path::new(bin())), php_runtime()]
            .into_iter()
            .flatten()
        {
            let to = folder.join(from.file_name().expect("a binary's name"));
            std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        Drover::spawn_program(&drover, site, &[])
    }

    /// [`Drover::spawn`] with the soft limit on open files at `soft` (the hard one kept),
    /// as a service under systemd starts (1024).
    pub fn spawn_with_nofile(site: &Site, soft: u64) -> Drover {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(bin());
        // SAFETY: between fork and exec only getrlimit and setrlimit, on this stack.
        unsafe {
            command.pre_exec(move || {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                limit.rlim_cur = soft.min(limit.rlim_max);
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Drover::spawn_command(&mut command, site)
    }

    fn spawn_program(program: &Path, site: &Site, env: &[(&str, &std::ffi::OsStr)]) -> Drover {
        Drover::spawn_command(Command::new(program).envs(env.iter().copied()), site)
    }

    /// `command` (drover, or what execs it) with `-c <site>/drover.toml`, its stdout and
    /// stderr collected into the log.
    fn spawn_command(command: &mut Command, site: &Site) -> Drover {
        runtimes();
        let (child, log) = Log::spawn(command.arg("-c").arg(site.path().join("drover.toml")));
        Drover { child, log }
    }

    /// Starts drover as systemd's socket activation does: `socket` as fd 3, with
    /// `LISTEN_FDS=1`, `LISTEN_FDNAMES=name` and `LISTEN_PID` set to drover's own pid (by a
    /// shell that then execs drover, keeping its pid).
    pub fn spawn_with_socket(
        site: &Site,
        socket: std::os::fd::BorrowedFd<'_>,
        name: &str,
    ) -> Drover {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        runtimes();
        let raw = socket.as_raw_fd();
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg("LISTEN_PID=$$ exec \"$0\" \"$@\"")
            .arg(bin())
            .arg("-c")
            .arg(site.path().join("drover.toml"))
            .env("LISTEN_FDS", "1")
            .env("LISTEN_FDNAMES", name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec only dup2 and fcntl, which are async-signal-safe;
        // fd 3 is left without close-on-exec, so drover inherits it.
        unsafe {
            command.pre_exec(move || {
                let moved = if raw == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(raw, 3)
                };
                if moved < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().expect("spawn drover");
        let log = Log::default();
        log.collect(child.stdout.take().unwrap());
        log.collect(child.stderr.take().unwrap());
        Drover { child, log }
    }

    /// Starts drover on the site's `drover.toml` inside a cgroup: a shell writes its own pid
    /// to `procs` (the cgroup's `cgroup.procs`), then execs drover, so that drover and every
    /// process it starts are in that cgroup from their first allocation.
    pub fn spawn_in_cgroup(site: &Site, procs: &Path) -> Drover {
        let mut shell = Command::new("/bin/sh");
        shell
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(procs)
            .arg(bin());
        Drover::spawn_command(&mut shell, site)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: Signal) {
        proc::signal(self.pid(), signal);
    }

    /// Waits up to `timeout` for drover to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let child = &mut self.child;
        wait_until(timeout, "drover to exit", || child.try_wait().unwrap())
    }

    /// Every process below drover (pool parents and their workers).
    pub fn descendants(&self) -> Vec<i32> {
        proc::descendants(self.pid())
    }

    /// The running php-cgi and drover-php processes below drover that have no children:
    /// the PHP workers, whether drover starts them directly or a pool parent (a php-cgi
    /// parent, a drover-php zygote) forks them.
    pub fn workers(&self) -> Vec<i32> {
        let below = self.descendants();
        let is_parent = |pid: i32| {
            below
                .iter()
                .any(|&d| proc::stat(d).is_some_and(|s| s.ppid == pid))
        };
        below
            .iter()
            .copied()
            .filter(|&pid| {
                proc::stat(pid).is_some_and(|s| {
                    ["php-cgi", "drover-php"].contains(&s.comm.as_str()) && s.state != 'Z'
                })
            })
            .filter(|&pid| !is_parent(pid))
            .collect()
    }
}

impl Drop for Drover {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        proc::kill_tree(self.pid());
        let _ = self.child.wait();
    }
}
