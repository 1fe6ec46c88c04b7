//! `drover ctl`: its arguments and the whole subcommand ([`run`]): find the socket, send
//! with a [`Client`], print the answer, exit 0, or print the master's error and exit 1.
//! `probe` and `top` are handed to [`probe`] and [`top`].
//!
//! The socket comes from `--socket PATH` or from `[control] listen` in the configuration
//! (`-c`, default /etc/drover/drover.toml), read with the same loader as drover itself.

pub mod client;
pub mod probe;
#[cfg(test)]
mod server_tests;
pub mod top;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use client::{Client, CtlError, EXIT_REFUSED, EXIT_UNREACHABLE};
use drover::control::Format;
use drover_config::DEFAULT_CONFIG_PATH;

/// Talk to a running drover over its control socket.
#[derive(clap::Args, Debug)]
pub struct CtlArgs {
    /// The control socket; by default `[control] listen` of the configuration.
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    pub socket: Option<PathBuf>,
    /// The configuration that names the control socket.
    #[arg(short = 'c', long = "config", value_name = "FILE", default_value = DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
    /// How long to wait for the answer.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(clap::Subcommand, Debug, PartialEq)]
pub enum CtlCommand {
    /// Status of every pool or one: php-fpm's fields, then drover's.
    Status {
        pool: Option<String>,
        #[arg(long, conflicts_with = "openmetrics")]
        json: bool,
        #[arg(long)]
        openmetrics: bool,
        /// Add every worker.
        #[arg(long)]
        full: bool,
    },
    /// The effective configuration, with every default.
    Config { pool: Option<String> },
    /// Change pm keys live, until the next reload: `set www pm.max_children=12`.
    Set {
        pool: String,
        #[arg(required = true, value_name = "KEY=VALUE", value_parser = parse_change)]
        changes: Vec<(String, String)>,
    },
    /// Re-read the files and start a new generation of every pool, or of POOL, as php-fpm's
    /// USR2 and gunicorn's HUP do (new code, a fresh OPcache). The old one is retired once
    /// the new one is up.
    Reload {
        pool: Option<String>,
        /// Only the pools whose configuration changed (added ones start, removed ones go).
        #[arg(long)]
        changed: bool,
    },
    /// Add or remove workers of a static pool: `workers www +2`, `workers www -1`.
    Workers {
        pool: String,
        #[arg(value_name = "+N|-N", allow_hyphen_values = true, value_parser = parse_delta)]
        delta: i32,
    },
    /// Check that the master answers.
    Ping,
    /// Send one FastCGI request to a pool's socket, as nginx would: exit 0 on 2xx/3xx.
    Probe(probe::ProbeArgs),
    /// Every pool live, refreshed every second: workers, req/s, p50/p99, queue, restarts,
    /// memory, and the slowest requests in flight (q quits). Plain lines when not on a
    /// terminal, or with -n COUNT.
    Top(top::TopArgs),
}

fn parse_change(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() && !s.contains('\n') => {
            Ok((key.to_owned(), value.to_owned()))
        }
        _ => Err(format!(
            "expected KEY=VALUE like pm.max_children=12, got {s:?}"
        )),
    }
}

fn parse_delta(s: &str) -> Result<i32, String> {
    let bad = || format!("expected +N or -N like +2 or -1, got {s:?}");
    if !s.starts_with(['+', '-']) {
        return Err(bad());
    }
    match s.parse::<i32>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(n) => Ok(n),
    }
}

/// Runs `drover ctl` and returns its exit code.
pub fn run(args: CtlArgs) -> u8 {
    // Talks to the pool's socket, not to the master; the master (given its socket) or the
    // files say where that is.
    if let CtlCommand::Probe(probe) = &args.command {
        use probe::Source;
        return match &args.socket {
            Some(socket) => {
                let master = Client::new(socket).with_timeout(args.timeout);
                let rendered = master.config(Some(&probe.pool)).map_err(|e| e.to_string());
                probe::run(Source::Master { socket, rendered }, probe)
            }
            None => probe::run(Source::Config(&args.config), probe),
        };
    }
    let socket = match socket_path(&args) {
        Ok(socket) => socket,
        Err(message) => {
            eprintln!("drover ctl: {message}");
            return EXIT_UNREACHABLE;
        }
    };
    let client = Client::new(socket).with_timeout(args.timeout);
    if let CtlCommand::Top(top) = &args.command {
        return top::run(&client, top);
    }
    let answer = match &args.command {
        CtlCommand::Status {
            pool,
            json,
            openmetrics,
            full,
        } => {
            let format = match (json, openmetrics) {
                (true, _) => Format::Json,
                (_, true) => Format::OpenMetrics,
                _ => Format::Text,
            };
            client.status(pool.as_deref(), format, *full)
        }
        CtlCommand::Config { pool } => client.config(pool.as_deref()),
        CtlCommand::Set { pool, changes } => client.set(pool, changes),
        CtlCommand::Reload { pool, changed } => client.reload(pool.as_deref(), *changed),
        CtlCommand::Workers { pool, delta } => client.workers(pool, *delta),
        CtlCommand::Ping => client.ping(),
        CtlCommand::Probe(_) | CtlCommand::Top(_) => unreachable!("answered above"),
    };
    match answer {
        Ok(body) => {
            let newline = if body.is_empty() || body.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            // A closed pipe (`| head`) is the reader's choice, not our failure.
            let _ = write!(std::io::stdout(), "{body}{newline}");
            0
        }
        Err(err) => {
            eprintln!("drover ctl: {err}");
            if matches!(err, CtlError::Refused { .. }) {
                EXIT_REFUSED
            } else {
                EXIT_UNREACHABLE
            }
        }
    }
}

fn socket_path(args: &CtlArgs) -> Result<PathBuf, String> {
    if let Some(socket) = &args.socket {
        return Ok(socket.clone());
    }
    let shown = args.config.display();
    let config = drover_config::load(&args.config).map_err(|errors| {
        format!("{errors}\ncannot read the control socket from {shown}; pass --socket PATH")
    })?;
    config
        .global
        .control
        .listen
        .ok_or_else(|| format!("{shown} has no [control] listen; pass --socket PATH"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        ctl: CtlArgs,
    }

    fn parse(args: &[&str]) -> Result<CtlArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("ctl").chain(args.iter().copied())).map(|cli| cli.ctl)
    }

    #[test]
    fn subcommands_parse_as_documented() {
        let workers = parse(&["workers", "www", "-2"]).unwrap();
        assert_eq!(
            workers.command,
            CtlCommand::Workers {
                pool: "www".into(),
                delta: -2
            }
        );
        assert_eq!(
            parse(&["workers", "www", "+3"]).unwrap().command,
            CtlCommand::Workers {
                pool: "www".into(),
                delta: 3
            }
        );
        for bad in ["3", "+0", "-x", "+"] {
            assert!(parse(&["workers", "www", bad]).is_err(), "{bad}");
        }
        let set = parse(&[
            "--socket",
            "/run/d.sock",
            "set",
            "www",
            "pm.max_children=12",
            "pm.min_spare_servers=3",
        ])
        .unwrap();
        assert_eq!(set.socket.as_deref(), Some(Path::new("/run/d.sock")));
        let changes = vec![
            ("pm.max_children".into(), "12".into()),
            ("pm.min_spare_servers".into(), "3".into()),
        ];
        assert_eq!(
            set.command,
            CtlCommand::Set {
                pool: "www".into(),
                changes
            }
        );
        assert!(parse(&["set", "www"]).is_err(), "at least one change");
        assert!(parse(&["set", "www", "max_children"]).is_err());
        assert!(parse(&["status", "--json", "--openmetrics"]).is_err());
        assert!(parse(&["--socket", "x", "-c", "y", "ping"]).is_err());
        let status = parse(&["-c", "/etc/d.toml", "status", "www", "--json", "--full"]).unwrap();
        assert_eq!(status.config, Path::new("/etc/d.toml"));
        assert_eq!(
            status.command,
            CtlCommand::Status {
                pool: Some("www".into()),
                json: true,
                openmetrics: false,
                full: true
            }
        );
        let reload = parse(&["reload"]).unwrap();
        assert_eq!(reload.config, Path::new(DEFAULT_CONFIG_PATH));
        assert_eq!(
            reload.command,
            CtlCommand::Reload {
                pool: None,
                changed: false
            }
        );
        assert_eq!(
            parse(&["reload", "--changed", "www"]).unwrap().command,
            CtlCommand::Reload {
                pool: Some("www".into()),
                changed: true
            }
        );
        let probe = parse(&["probe", "www", "/health?x=1", "--timeout", "2s", "--body"]).unwrap();
        let CtlCommand::Probe(probe) = probe.command else {
            panic!("not a probe: {probe:?}");
        };
        assert_eq!(
            (probe.pool.as_str(), probe.uri.as_str()),
            ("www", "/health?x=1")
        );
        assert_eq!(probe.timeout, Duration::from_secs(2));
        assert!(probe.body);
        let CtlCommand::Probe(probe) = parse(&["probe", "www"]).unwrap().command else {
            panic!("not a probe");
        };
        assert_eq!(
            (probe.uri.as_str(), probe.timeout),
            ("/", Duration::from_secs(5))
        );
        assert!(parse(&["probe", "www", "--script", "a", "--root", "b"]).is_err());
    }
}
