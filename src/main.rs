//! The `drover` binary, the master daemon: `drover [-c FILE]` loads the configuration and
//! runs it. Every other command line (`-t`, `ctl`, `import`, `--help`, `--version`, a
//! mistake) is `drover-admin`'s, which this binary execs in its own process with the same
//! arguments: the importers, the control client, clap and `-t`'s checks stay out of the
//! code the master keeps resident (docs/ARCHITECTURE.md, "The master's memory").
//! Exit codes are named in [`ExitCode`]-returning paths below: 0 ok, 1 invalid
//! configuration, 2 a runtime failure (a listen address in use, ...), 3 a pool's app
//! failed to load with `exit_on_app_failure` (which `drover serve` sets).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

use drover::config;

/// The binary that owns the rest of the command line, beside this one.
const ADMIN: &str = "drover-admin";

const EXIT_INVALID_CONFIG: u8 = 1;
const EXIT_RUNTIME: u8 = 2;

fn main() -> ExitCode {
    config::probe_php_with(drover::runtime::php::embed::usable);
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_else(|| "drover".into());
    let rest: Vec<OsString> = argv.collect();
    match daemon_config(&rest) {
        Some(path) => run(path),
        None => exec_admin(argv0, &rest),
    }
}

/// The configuration file of a command line that only runs the daemon: nothing, or one
/// `-c FILE`, `-cFILE`, `--config FILE` or `--config=FILE`, read as clap reads them in
/// `drover-admin`. `None` for anything else, which `drover-admin` parses.
fn daemon_config(args: &[OsString]) -> Option<PathBuf> {
    let mut config = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let bytes = arg.as_bytes();
        let value = if bytes == b"-c" || bytes == b"--config" {
            let value = args.next()?;
            // clap reads a value that starts with '-' as the next flag (an error).
            if value.as_bytes().starts_with(b"-") {
                return None;
            }
            value.as_os_str()
        } else if let Some(value) = bytes.strip_prefix(b"--config=") {
            OsStr::from_bytes(value)
        } else if let Some(value) = bytes.strip_prefix(b"-c")
            && !value.starts_with(b"=")
        {
            OsStr::from_bytes(value)
        } else {
            return None;
        };
        // clap refuses an empty path and a second -c.
        if value.is_empty() || config.replace(PathBuf::from(value)).is_some() {
            return None;
        }
    }
    Some(config.unwrap_or_else(|| PathBuf::from(config::DEFAULT_CONFIG_PATH)))
}

/// Replaces this process with `drover-admin` and the same arguments (`argv[0]` kept, so
/// that its usage lines say `drover`); returns only when that fails.
fn exec_admin(argv0: OsString, args: &[OsString]) -> ExitCode {
    let admin = drover::runtime::zygote::beside_drover(ADMIN);
    let err = std::process::Command::new(&admin)
        .arg0(argv0)
        .args(args)
        .exec();
    eprintln!(
        "drover: cannot run {} (`drover -t`, `drover ctl` and `drover import` are its; \
         install it beside drover): {err}",
        admin.display()
    );
    ExitCode::from(EXIT_RUNTIME)
}

/// Loads the configuration, checks what depends on this machine, and runs the master.
fn run(path: PathBuf) -> ExitCode {
    let config = match config::load(&path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return invalid(&path);
        }
    };
    // Checks that depend on the machine drover runs on (its user), not on the files alone.
    let problems = drover::runtime::check(&config);
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{problem}");
        }
        return invalid(&path);
    }
    match drover::master::run(config) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("drover: {err:#}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

fn invalid(path: &std::path::Path) -> ExitCode {
    eprintln!("drover: configuration {} is invalid", path.display());
    ExitCode::from(EXIT_INVALID_CONFIG)
}
