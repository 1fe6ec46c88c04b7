//! The `drover` binary: parse the command line, load the configuration, run or test it.
//! Exit codes are named in [`ExitCode`]-returning paths below: 0 ok, 1 invalid
//! configuration, 2 a runtime failure (a listen address in use, ...).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use drover::config;

/// A process manager for FastCGI and WSGI applications.
#[derive(Parser, Debug)]
#[command(version, about)]
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
    /// workers.
    Ctl(drover::control::CtlArgs),
    /// Write drover's files from a php-fpm or gunicorn configuration, and report what has
    /// no equivalent.
    Import(drover::import::ImportArgs),
}

const EXIT_INVALID_CONFIG: u8 = 1;
const EXIT_RUNTIME: u8 = 2;

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Some(Sub::Ctl(ctl)) => return ExitCode::from(drover::control::client::run(ctl)),
        Some(Sub::Import(import)) => return ExitCode::from(drover::import::run(import)),
        None => {}
    }
    let config = match config::load(&args.config) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("drover: configuration {} is invalid", args.config.display());
            return ExitCode::from(EXIT_INVALID_CONFIG);
        }
    };
    // Checks that depend on the machine drover runs on (its user), not on the files alone;
    // with -t, also what PHP makes of each pool's [php.admin_ini].
    let mut problems = drover::runtime::check(&config);
    if args.test && problems.is_empty() {
        problems = drover::runtime::check_php_settings(&config);
    }
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{problem}");
        }
        eprintln!("drover: configuration {} is invalid", args.config.display());
        return ExitCode::from(EXIT_INVALID_CONFIG);
    }
    if args.test {
        print!("{}", config.render());
        if let Some(note) = drover::runtime::php::embed::fallback_note() {
            eprintln!("drover: {note}");
        }
        eprintln!("drover: configuration {} is valid", args.config.display());
        return ExitCode::SUCCESS;
    }
    match drover::master::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("drover: {err:#}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}
