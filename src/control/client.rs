//! `drover ctl`: the control socket's client. [`Client`] has one method per subcommand and
//! blocks (it runs its own small tokio runtime for hyper); [`run`] is the whole subcommand:
//! find the socket, send, print the answer, exit 0, or print the master's error and exit 1.
//!
//! The socket comes from `--socket PATH` or from `[control] listen` in the configuration
//! (`-c`, default /etc/drover/drover.toml), read with the same loader as drover itself.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

use super::request::Format;
use crate::config::DEFAULT_CONFIG_PATH;

/// The master answered, but with an error (bad key or value, unknown pool, reload failed).
pub const EXIT_REFUSED: u8 = 1;
/// No answer at all: no socket configured, nobody listening, or a timeout.
pub const EXIT_UNREACHABLE: u8 = 2;

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
    Probe(super::probe::ProbeArgs),
    /// Every pool live, refreshed every second: workers, req/s, p50/p99, queue, restarts,
    /// memory, and the slowest requests in flight (q quits). Plain lines when not on a
    /// terminal, or with -n COUNT.
    Top(super::top::TopArgs),
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
        use super::probe::Source;
        return match &args.socket {
            Some(socket) => {
                let master = Client::new(socket).with_timeout(args.timeout);
                super::probe::run(Source::Master(&master), probe)
            }
            None => super::probe::run(Source::Config(&args.config), probe),
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
        return super::top::run(&client, top);
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
    let config = crate::config::load(&args.config).map_err(|errors| {
        format!("{errors}\ncannot read the control socket from {shown}; pass --socket PATH")
    })?;
    config
        .global
        .control
        .listen
        .ok_or_else(|| format!("{shown} has no [control] listen; pass --socket PATH"))
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot reach drover at {}: {source} (is it running, with this [control] listen?)", socket.display())]
    Unreachable {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("drover at {} did not answer within {}", socket.display(), humantime::format_duration(*timeout))]
    Timeout { socket: PathBuf, timeout: Duration },
    #[error("talking to drover at {}: {message}", socket.display())]
    Protocol { socket: PathBuf, message: String },
    /// The master's own words.
    #[error("{message}")]
    Refused { status: u16, message: String },
}

/// One HTTP answer, whatever its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub allow: Option<String>,
    pub body: String,
}

/// A blocking client of one control socket (or a unix `status_listen`).
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    timeout: Duration,
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>) -> Client {
        Client {
            socket: socket.into(),
            timeout: Duration::from_secs(60),
        }
    }

    pub fn with_timeout(self, timeout: Duration) -> Client {
        Client { timeout, ..self }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn ping(&self) -> Result<String, CtlError> {
        self.call("GET", "/ping".into(), String::new())
    }

    pub fn status(
        &self,
        pool: Option<&str>,
        format: Format,
        full: bool,
    ) -> Result<String, CtlError> {
        let mut query: Vec<String> = pool
            .map(|p| format!("pool={}", encode(p)))
            .into_iter()
            .collect();
        if format != Format::Text {
            query.push(format!("format={}", format.name()));
        }
        if full {
            query.push("full".into());
        }
        let target = if query.is_empty() {
            "/status".into()
        } else {
            format!("/status?{}", query.join("&"))
        };
        self.call("GET", target, String::new())
    }

    pub fn config(&self, pool: Option<&str>) -> Result<String, CtlError> {
        self.call("GET", with_pool("/config", pool), String::new())
    }

    pub fn set(&self, pool: &str, changes: &[(String, String)]) -> Result<String, CtlError> {
        let body: String = changes
            .iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect();
        self.call("POST", format!("/pools/{}/set", encode(pool)), body)
    }

    /// Renews every pool, or `pool`; with `changed`, only if its configuration changed.
    pub fn reload(&self, pool: Option<&str>, changed: bool) -> Result<String, CtlError> {
        let mut path = with_pool("/reload", pool);
        if changed {
            path.push(if pool.is_some() { '&' } else { '?' });
            path.push_str("changed");
        }
        self.call("POST", path, String::new())
    }

    pub fn workers(&self, pool: &str, delta: i32) -> Result<String, CtlError> {
        self.call(
            "POST",
            format!("/pools/{}/workers", encode(pool)),
            format!("{delta:+}"),
        )
    }

    /// The body of a 2xx answer (a JSON `message` unwrapped); the master's error otherwise.
    fn call(&self, method: &str, target: String, body: String) -> Result<String, CtlError> {
        let answer = self.request(method, &target, body)?;
        let json: Option<serde_json::Value> = answer
            .content_type
            .as_deref()
            .filter(|t| t.starts_with("application/json"))
            .and_then(|_| serde_json::from_str(&answer.body).ok());
        let field = |name| {
            json.as_ref()
                .and_then(|v| v.get(name))
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        };
        if (200..300).contains(&answer.status) {
            return Ok(field("message").unwrap_or(answer.body));
        }
        let message = field("error")
            .unwrap_or_else(|| format!("HTTP {}: {}", answer.status, answer.body.trim()));
        Err(CtlError::Refused {
            status: answer.status,
            message,
        })
    }

    /// Sends one request and reads the whole answer. Blocks; must not be called from
    /// within a tokio runtime.
    pub fn request(&self, method: &str, target: &str, body: String) -> Result<Answer, CtlError> {
        let protocol = |message: String| CtlError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| protocol(format!("cannot start a runtime: {e}")))?;
        let exchange = self.exchange(method, target, body);
        match runtime.block_on(async { tokio::time::timeout(self.timeout, exchange).await }) {
            Ok(answer) => answer,
            Err(_) => Err(CtlError::Timeout {
                socket: self.socket.clone(),
                timeout: self.timeout,
            }),
        }
    }

    async fn exchange(&self, method: &str, target: &str, body: String) -> Result<Answer, CtlError> {
        let protocol = |message: String| CtlError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|source| CtlError::Unreachable {
                socket: self.socket.clone(),
                source,
            })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| protocol(e.to_string()))?;
        // Drives the connection's I/O while send_request waits; ends with the connection.
        tokio::spawn(connection);
        let request = Request::builder()
            .method(method)
            .uri(target)
            // HTTP/1.1 requires a Host; a unix socket has no name to put there.
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| protocol(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| protocol(e.to_string()))?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (content_type, allow) = (
            header(hyper::header::CONTENT_TYPE),
            header(hyper::header::ALLOW),
        );
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| protocol(e.to_string()))?
            .to_bytes();
        Ok(Answer {
            status,
            content_type,
            allow,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

fn with_pool(path: &str, pool: Option<&str>) -> String {
    match pool {
        Some(pool) => format!("{path}?pool={}", encode(pool)),
        None => path.to_owned(),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a pool name is one
/// path segment or one query value whatever it holds.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn names_are_escaped_into_one_segment() {
        assert_eq!(encode("www"), "www");
        assert_eq!(encode("a/b c+d%"), "a%2Fb%20c%2Bd%25");
        assert_eq!(
            with_pool("/reload", Some("x&y=z")),
            "/reload?pool=x%26y%3Dz"
        );
    }
}
