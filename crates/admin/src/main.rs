//! The `drover-admin` binary: the commands that talk about a drover rather than being one
//! (`drover ctl`, `drover import`, `drover completions` and `drover -t`), `drover serve`,
//! which writes a configuration from its flags and execs the daemon on it, and the whole of
//! drover's command line (its `--help`, `--version` and usage errors). The `drover` daemon
//! execs it, with its own arguments, for anything but `drover [-c FILE]`, so that the
//! importers, the control client, clap and `-t`'s checks are not part of the binary that
//! stays resident for the master's whole life (docs/ARCHITECTURE.md, "The master's memory").
//!
//! Users run `drover ...`; this binary is found beside `drover` and runs in its process
//! (same pid, same streams, `argv[0]` kept, so usage lines say `drover`). Exit codes are
//! those of [`ExitCode`]-returning paths below: 0 ok, 1 invalid configuration; `ctl` and
//! `import` have their own.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use drover_config as config;

/// A process manager for FastCGI and WSGI applications.
#[derive(Parser, Debug)]
#[command(name = "drover", version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The global configuration file.
    #[arg(short = 'c', long = "config", default_value = config::DEFAULT_CONFIG_PATH)]
    config: PathBuf,
    /// Test the configuration, print it resolved with every default, and exit.
    #[arg(short = 't', long = "test")]
    test: bool,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Talk to a running drover through its control socket: status, config, set, reload,
    /// workers, top.
    Ctl(drover_admin::ctl::CtlArgs),
    /// Write drover's files from a php-fpm or gunicorn configuration, and report what has
    /// no equivalent.
    Import(drover_admin::import::ImportArgs),
    /// Run one pool from flags, without writing files: `drover serve --python hello:app
    /// -w 4 --http :8000` (`--print` writes the equivalent files). Boxed: its flags make it
    /// the largest by far.
    Serve(Box<drover_admin::serve::ServeArgs>),
    /// Print a completion script for a shell: `drover completions bash >
    /// /usr/share/bash-completion/completions/drover` (the Debian package installs bash's,
    /// zsh's and fish's).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

const EXIT_INVALID_CONFIG: u8 = 1;
const EXIT_RUNTIME: u8 = 2;

fn main() -> ExitCode {
    config::probe_php_with(drover::runtime::php::embed::usable);
    let args = Args::parse();
    match args.command {
        Some(Sub::Ctl(ctl)) => ExitCode::from(drover_admin::ctl::run(ctl)),
        Some(Sub::Import(import)) => ExitCode::from(drover_admin::import::run(import)),
        Some(Sub::Completions { shell }) => {
            use clap::CommandFactory as _;
            use std::io::Write as _;
            // Into a buffer first: clap_complete panics on a failed write (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Args::command(), "drover", &mut script);
            match std::io::stdout().write_all(&script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::from(EXIT_RUNTIME),
            }
        }
        Some(Sub::Serve(serve)) => {
            let argv: Vec<String> = std::env::args().skip(2).collect();
            ExitCode::from(drover_admin::serve::run(*serve, &argv))
        }
        None if args.test => test(&args.config),
        None => run_daemon(&args.config),
    }
}

/// `drover -t`: the configuration's own errors, then what depends on this machine (its
/// users, the runtimes beside drover) and what PHP makes of each pool's
/// `[php.admin_ini]`; valid, it is printed with every default.
fn test(path: &std::path::Path) -> ExitCode {
    let config = match config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return invalid(path);
        }
    };
    let mut problems = drover::runtime::check(&config);
    if problems.is_empty() {
        problems = drover::runtime::check_php_settings(&config);
    }
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{problem}");
        }
        return invalid(path);
    }
    print!("{}", config.render());
    for note in drover::master::memory_notes(&config.pools) {
        eprintln!("drover: {note}");
    }
    if let Some(note) = drover::runtime::php::embed::fallback_note() {
        eprintln!("drover: {note}");
    }
    eprintln!("drover: configuration {} is valid", path.display());
    ExitCode::SUCCESS
}

fn invalid(path: &std::path::Path) -> ExitCode {
    eprintln!("drover: configuration {} is invalid", path.display());
    ExitCode::from(EXIT_INVALID_CONFIG)
}

/// Arguments that mean "run" in a form the daemon's own reading did not take (`-c=FILE`,
/// say): back to `drover`, with the one form it always takes. No loop: `--config=FILE` is
/// the daemon's.
fn run_daemon(path: &std::path::Path) -> ExitCode {
    let (daemon, err) = drover_admin::serve::exec_daemon(path);
    eprintln!("drover: cannot run {}: {err}", daemon.display());
    ExitCode::from(EXIT_RUNTIME)
}
