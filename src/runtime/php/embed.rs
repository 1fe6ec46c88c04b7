//! Embedded-PHP pools (`runtime = "embed"`), the master's side: the master execs
//! `drover-php` (the [`PROGRAM`] beside `drover`, built from the `drover-php` crate, the only
//! one that links libphp) as the pool's zygote, in every pm mode. The zygote starts PHP once,
//! OPcache's shared memory included, then forks the workers, which share it: one OPcache per
//! pool in dynamic and ondemand pools too, where php-cgi runs one process per worker. It
//! speaks drover-python's protocol (`drover_proto::zygote`); its terms are
//! `drover_proto::zygote::PhpArgs`, built here ([`plan`]).
//!
//! A `drover-php` built where PHP's headers were missing exists but cannot run PHP. Whether
//! it can picks a PHP pool's default runtime, so the configuration loader asks [`usable`],
//! which runs `drover-php --probe` at most once per process and only when a pool needs the
//! answer.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use drover_proto::zygote::{EXIT_NO_PHP, PHP_CHECK, PHP_PROBE, PROBE_LIBPHP, PhpArgs, TERMS_FD};

use crate::config::{Php, Pool};
use crate::runtime::{ProcessSpec, allowed_clients_env, zygote};

/// The embedded-PHP runtime's binary, installed beside `drover`.
pub const PROGRAM: &str = "drover-php";

/// How long `drover-php --probe` may take: it only loads libphp and prints a line, but the
/// loader waits for it, and a configuration must load whatever the program does.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the master finds [`PROGRAM`]: beside the running `drover`.
pub fn program() -> PathBuf {
    zygote::beside_drover(PROGRAM)
}

/// The master's plan for an embedded-PHP pool: one zygote, whose terms are every zygote's
/// ([`zygote::args`]) and `PhpArgs`' own: the `ini_file`, the `[php.ini]` and
/// `[php.admin_ini]` values (`name=value` each), `limit_extensions` (space-separated, empty
/// for any file), and for worker mode the `worker` script and whether it boots in the
/// zygote.
pub fn plan(
    pool: &Pool,
    php: &Php,
    admin_ini: &BTreeMap<String, String>,
    limit_extensions: &[String],
    worker: Option<(&Path, bool)>,
) -> (PathBuf, PhpArgs, Vec<(OsString, OsString)>) {
    let pairs = |ini: &BTreeMap<String, String>| -> Vec<String> {
        ini.iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect()
    };
    let args = PhpArgs {
        zygote: zygote::args(pool),
        ini_file: php.ini_file.clone(),
        ini: pairs(&php.ini),
        admin_ini: pairs(admin_ini),
        limit_extensions: limit_extensions.join(" "),
        worker: worker.map(|(file, _)| file.to_path_buf()),
        boot_in_zygote: worker.is_some_and(|(_, boot)| boot),
    };
    // Checked by drover-php's workers on every accept, as drover-python's.
    let env = allowed_clients_env(pool).into_iter().collect();
    (program(), args, env)
}

/// Whether drover-php can run PHP here: `Ok` with the line naming PHP (`PHP 8.2.36
/// (embed)`), or why not. Asked of [`program`] once per process; the answer holds until
/// drover restarts (a reload does not ask again).
pub fn usable() -> Result<&'static str, &'static str> {
    #[cfg(test)]
    {
        // Unit tests run no drover-php: each says what it assumes ([`assume`]).
        ASSUMED
            .get()
            .unwrap_or(Err("drover-php is not asked in unit tests"))
    }
    #[cfg(not(test))]
    {
        answered()
            .as_ref()
            .map(|probe| probe.php.as_str())
            .map_err(String::as_str)
    }
}

/// The libphp drover-php loads, as its probe named it (`/usr/lib/libphp8.2.so`): `None`
/// when it cannot run PHP, or did not say. Asks the probe if no pool has yet.
pub fn linked_libphp() -> Option<&'static Path> {
    #[cfg(test)]
    {
        None
    }
    #[cfg(not(test))]
    {
        answered().as_ref().ok()?.libphp.as_deref()
    }
}

#[cfg(not(test))]
fn answered() -> &'static Result<Probe, String> {
    ANSWER.get_or_init(|| probe(&program()))
}

/// What `drover-php --probe` said when it can run PHP.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The line naming PHP (`PHP 8.2.36 (embed)`).
    pub php: String,
    /// The libphp it loaded (its [`PROBE_LIBPHP`] line).
    pub libphp: Option<PathBuf>,
}

/// The answer of the one probe this process ran.
static ANSWER: OnceLock<Result<Probe, String>> = OnceLock::new();

/// Why PHP pools without `runtime` run on php-cgi, if drover-php was asked (a pool needed
/// to know) and cannot run PHP here.
pub fn fallback_note() -> Option<String> {
    let why = ANSWER.get()?.as_ref().err()?;
    Some(format!(
        "PHP pools without a runtime run on php-cgi: drover-php is not usable here: {why}"
    ))
}

/// Logs the [`fallback_note`] once per process. Called once logging is up, since the first
/// configuration is loaded before it is.
pub fn log_if_unusable() {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if let Some(note) = fallback_note()
        && !LOGGED.swap(true, Ordering::Relaxed)
    {
        tracing::info!("{note}");
    }
}

#[cfg(test)]
thread_local! {
    static ASSUMED: std::cell::Cell<Option<Result<&'static str, &'static str>>> =
        const { std::cell::Cell::new(None) };
}

/// What [`usable`] answers in this unit test's thread.
#[cfg(test)]
pub fn assume(answer: Result<&'static str, &'static str>) {
    ASSUMED.set(Some(answer));
}

/// Runs `program --probe` and reads its answer: `Ok` with the line naming PHP and the
/// libphp it loaded, or why it cannot run PHP (missing, failed, silent, too slow).
pub fn probe(program: &Path) -> Result<Probe, String> {
    let mut command = Command::new(program);
    command.arg(PHP_PROBE);
    let (status, stdout, stderr) = run_bounded(command, PHP_PROBE)?;
    let php = answer(status, &stdout, &stderr)?;
    let libphp = stdout
        .lines()
        .find_map(|line| line.strip_prefix(PROBE_LIBPHP))
        .map(|path| PathBuf::from(path.trim()));
    Ok(Probe { php, libphp })
}

/// `drover -t`'s check of an embedded-PHP pool: its zygote's command line, terms (at
/// [`TERMS_FD`], as the master passes them), environment and folder, run as
/// `drover-php --check` ([`PHP_CHECK`]), which starts PHP as the zygote
/// would and exits before forking. `Err` with drover-php's reason: a `[php.admin_ini]`
/// name PHP has no setting for, a value it refuses, a PHP that cannot start.
///
/// Run as the pool's user, as its zygote runs: PHP's start-up loads what the pool names
/// (its `ini_file`, an `extension=`, an `LD_PRELOAD` in `[env]`), which that user may
/// have written, so `drover -t` run as root must not run it as root.
pub fn check(spec: &ProcessSpec) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(&spec.program);
    command.arg(PHP_CHECK).args(&spec.args);
    let terms = match &spec.terms {
        Some(terms) => Some(
            terms
                .memfd()
                .map_err(|e| format!("cannot write the zygote's terms: {e}"))?,
        ),
        None => None,
    };
    let terms_fd = terms.as_ref().map(AsRawFd::as_raw_fd);
    let credentials = spec.credentials.clone();
    // SAFETY: runs in the forked child before exec; `apply` only makes syscalls
    // (setgroups, setgid, setuid) on the group list built before the fork, and dup2 (or
    // fcntl) puts the terms' memfd, open in the parent until the spawn returns, at
    // TERMS_FD without close-on-exec.
    unsafe {
        command.pre_exec(move || {
            if let Some(credentials) = &credentials {
                credentials.apply()?;
            }
            // A memfd that landed at TERMS_FD itself only loses close-on-exec.
            let placed = match terms_fd {
                Some(TERMS_FD) => libc::fcntl(TERMS_FD, libc::F_SETFD, 0),
                Some(fd) => libc::dup2(fd, TERMS_FD),
                None => 0,
            };
            if placed < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    if spec.clear_env {
        command.env_clear();
    }
    command.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &spec.chdir {
        command.current_dir(dir);
    }
    let (status, stdout, stderr) = run_bounded(command, PHP_CHECK)?;
    if status.success() {
        return Ok(());
    }
    // The reason is drover-php's last line; PHP's own startup warnings come first, and the
    // one just before it (the reason an extension did not load, for one) is added to it.
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| without_tags(line).trim().to_owned())
            .filter(|line| !line.is_empty())
            .collect()
    };
    let (out, err) = (lines(&stdout), lines(&stderr));
    let said = if out.is_empty() { err } else { out };
    Err(match said.as_slice() {
        [] => format!("{PROGRAM} {PHP_CHECK} failed ({status})"),
        [reason] => reason.clone(),
        [.., warning, reason] => format!("{reason}; PHP: {warning}"),
    })
}

/// A line of PHP's output without its HTML tags (`html_errors` wraps warnings in `<b>`).
fn without_tags(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_tag = false;
    for c in line.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Runs `command` (drover-php with `flag`) with its output captured, bounded by
/// [`PROBE_TIMEOUT`]: its exit status, stdout and stderr, or why it could not run.
fn run_bounded(mut command: Command, flag: &str) -> Result<(ExitStatus, String, String), String> {
    let program = PathBuf::from(command.get_program());
    let shown = program.display();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{shown} is missing"),
            _ => format!("cannot run {shown}: {e}"),
        })?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Read and reaped on a thread, so that a probe that hangs (or never closes its output)
    // is bounded by PROBE_TIMEOUT.
    let (tx, rx) = std::sync::mpsc::channel();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    std::thread::spawn(move || {
        let mut out = (String::new(), String::new());
        if let Some(pipe) = stdout.as_mut() {
            let _ = pipe.take(64 * 1024).read_to_string(&mut out.0);
        }
        if let Some(pipe) = stderr.as_mut() {
            let _ = pipe.take(64 * 1024).read_to_string(&mut out.1);
        }
        let _ = tx.send((child.wait(), out));
    });
    match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok((Ok(status), (stdout, stderr))) => Ok((status, stdout, stderr)),
        Ok((Err(e), _)) => Err(format!("cannot wait for {shown}: {e}")),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            // Let the thread reap it, rather than leave a zombie the master would find.
            let _ = rx.recv_timeout(Duration::from_secs(1));
            Err(format!(
                "{shown} {flag} did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            ))
        }
    }
}

/// What `drover-php --probe` said: exit 0 and a line naming PHP, or [`EXIT_NO_PHP`] and a
/// line saying why not (on stdout, else stderr); anything else is a failure of its own.
fn answer(status: ExitStatus, stdout: &str, stderr: &str) -> Result<String, String> {
    use std::os::unix::process::ExitStatusExt;
    let first_line = |text: &str| {
        text.lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_owned)
    };
    let said = || first_line(stdout).or_else(|| first_line(stderr));
    match status.code() {
        Some(0) => {
            first_line(stdout).ok_or_else(|| format!("{PROGRAM} {PHP_PROBE} printed nothing"))
        }
        Some(code) if code == i32::from(EXIT_NO_PHP) => Err(said().unwrap_or_else(|| {
            format!("{PROGRAM} {PHP_PROBE} exited with code {code} without saying why")
        })),
        Some(code) => Err(format!(
            "{PROGRAM} {PHP_PROBE} exited with code {code}{}",
            said().map(|s| format!(": {s}")).unwrap_or_default()
        )),
        None => Err(format!(
            "{PROGRAM} {PHP_PROBE} was killed by signal {}",
            status.signal().unwrap_or(0)
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    /// The wait status of an exit with `code`.
    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn a_probe_that_names_php_says_it_is_usable() {
        assert_eq!(
            answer(exited(0), "PHP 8.2.36 (embed)\n", ""),
            Ok("PHP 8.2.36 (embed)".to_owned())
        );
        assert_eq!(
            answer(exited(0), "\n  PHP 8.3.1 (embed)  \nmore\n", "a warning\n"),
            Ok("PHP 8.3.1 (embed)".to_owned())
        );
    }

    #[test]
    fn a_probe_that_cannot_run_php_says_why() {
        let why = "built without PHP's headers (php-config8.2 not found)";
        assert_eq!(answer(exited(3), &format!("{why}\n"), ""), Err(why.into()));
        assert_eq!(answer(exited(3), "", &format!("{why}\n")), Err(why.into()));
        assert!(answer(exited(3), "", "").unwrap_err().contains("code 3"));
    }

    #[test]
    fn any_other_answer_is_a_failure() {
        assert!(
            answer(exited(0), "", "")
                .unwrap_err()
                .contains("printed nothing")
        );
        // A line on stderr alone is no answer: the version goes to stdout.
        assert!(answer(exited(0), "", "PHP 8.2").is_err());
        let e = answer(
            exited(127),
            "",
            "libphp8.2.so: cannot open shared object file\n",
        );
        assert!(
            e.as_ref()
                .unwrap_err()
                .ends_with("code 127: libphp8.2.so: cannot open shared object file"),
            "{e:?}"
        );
        let killed = answer(ExitStatus::from_raw(11), "", "").unwrap_err();
        assert!(killed.contains("signal 11"), "{killed}");
    }

    #[test]
    fn a_missing_drover_php_is_not_usable() {
        let e = probe(Path::new("/nonexistent/drover-php")).unwrap_err();
        assert_eq!(e, "/nonexistent/drover-php is missing");
    }

    #[test]
    fn a_program_that_fails_the_probe_is_not_usable() {
        // /bin/false takes any arguments and exits 1.
        let e = probe(Path::new("/bin/false")).unwrap_err();
        assert!(e.contains("exited with code 1"), "{e}");
    }
}
