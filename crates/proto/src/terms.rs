//! The terms a zygote is started on: what the master knows of a pool that its zygote
//! (`drover-python`, `drover-php`) needs, as one typed structure ([`Terms`]) declared here
//! once for both sides.
//!
//! The master writes them ([`Terms::encode`]) into a sealed memfd that the zygote finds at
//! [`TERMS_FD`] ([`Terms::memfd`]); the zygote reads them back ([`Terms::from_fd`]) before
//! anything else. The command line keeps only what `ps` shows: `--pool NAME`
//! ([`CommandLine`]), checked against the terms.
//!
//! The encoding is one header line, [`MAGIC`] and the drover package version that wrote it,
//! then the terms as JSON. The zygote refuses terms of any other version, naming both,
//! before it reads the rest: a `drover-php` of another package than the master's (an
//! upgrade that replaced the binaries under a running master) stops with that message
//! instead of misreading a field whose meaning changed.

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// The descriptor number a zygote finds its terms at: a sealed memfd the master wrote,
/// read once and closed.
pub const TERMS_FD: i32 = 6;

/// The start of the terms' header line.
pub const MAGIC: &str = "drover-zygote-terms";

/// The version terms are written and read in: the drover package's (the workspace's), so
/// that a master and a zygote agree only when they come from one build of one version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A zygote's terms, by runtime.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Terms {
    Python(PythonArgs),
    Php(PhpArgs),
}

/// Why a zygote could not take its terms.
#[derive(Debug)]
pub enum TermsError {
    /// The descriptor is not open, or not readable.
    Unreadable(io::Error),
    /// No header line: not terms the master wrote.
    NotTerms,
    /// Terms written by another version of drover.
    Version { ours: String, theirs: String },
    /// The right version, but the JSON does not decode (a bug, or a damaged memfd).
    Format(String),
    /// Terms for the other runtime.
    Runtime { expected: &'static str },
    /// The command line names another pool than the terms.
    Pool { argv: String, terms: String },
}

impl std::fmt::Display for TermsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermsError::Unreadable(e) => write!(
                f,
                "cannot read its terms at fd {TERMS_FD} ({e}): it is started by the drover \
                 master, not by hand"
            ),
            TermsError::NotTerms => write!(
                f,
                "fd {TERMS_FD} holds no terms (no \"{MAGIC}\" line): it is started by the \
                 drover master, not by hand"
            ),
            TermsError::Version { ours, theirs } => write!(
                f,
                "terms written by drover {theirs}, but this is version {ours}: the master and \
                 its runtimes must come from one drover package (restart drover after an \
                 upgrade)"
            ),
            TermsError::Format(e) => write!(f, "malformed terms (version {VERSION}): {e}"),
            TermsError::Runtime { expected } => {
                write!(f, "terms for another runtime (expected {expected})")
            }
            TermsError::Pool { argv, terms } => write!(
                f,
                "the command line names pool {argv}, its terms pool {terms}"
            ),
        }
    }
}

impl std::error::Error for TermsError {}

impl Terms {
    /// The header line, then the terms as JSON.
    pub fn encode(&self) -> Vec<u8> {
        Self::encode_as(VERSION, self)
    }

    fn encode_as(version: &str, terms: &Terms) -> Vec<u8> {
        let mut out = format!("{MAGIC} {version}\n").into_bytes();
        // Plain data (strings, numbers, paths drover holds as UTF-8): it always serializes.
        serde_json::to_writer(&mut out, terms).expect("terms serialize");
        out
    }

    /// [`Self::encode`]'s bytes read back; the version is checked before the rest is read.
    pub fn decode(bytes: &[u8]) -> Result<Terms, TermsError> {
        let newline = bytes.iter().position(|&b| b == b'\n');
        let header = newline.and_then(|at| std::str::from_utf8(&bytes[..at]).ok());
        let Some(version) = header.and_then(|line| line.strip_prefix(MAGIC)?.strip_prefix(' '))
        else {
            return Err(TermsError::NotTerms);
        };
        if version != VERSION {
            return Err(TermsError::Version {
                ours: VERSION.into(),
                theirs: version.chars().take(64).collect(),
            });
        }
        let body = &bytes[newline.map_or(bytes.len(), |at| at + 1)..];
        serde_json::from_slice(body).map_err(|e| TermsError::Format(e.to_string()))
    }

    /// A sealed memfd holding [`Self::encode`]'s bytes, which closes on exec (the spawn
    /// moves it to [`TERMS_FD`]).
    pub fn memfd(&self) -> io::Result<OwnedFd> {
        crate::sealed_memfd(c"drover-terms", &self.encode())
    }

    /// The zygote's side: the terms in the memfd at `fd`, read whole from its start (each
    /// zygote of a pool may get the same one), which is then closed.
    pub fn from_fd(fd: i32) -> Result<Terms, TermsError> {
        let bytes = crate::read_memfd(fd).map_err(TermsError::Unreadable)?;
        Terms::decode(&bytes)
    }

    /// The pool the terms are for.
    pub fn pool(&self) -> &str {
        match self {
            Terms::Python(args) => &args.zygote.pool,
            Terms::Php(args) => &args.zygote.pool,
        }
    }
}

/// A zygote's command line: the pool's name, for `ps` (and for a check against the terms);
/// everything else is in the terms. `drover-php --check` takes the same after its flag.
/// Read by hand ([`CommandLine::parse_or_exit`]): one option does not need clap in the
/// runtimes' binaries.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLine {
    pub pool: String,
}

/// What a zygote's arguments ask for.
#[derive(Debug, PartialEq)]
enum Asked {
    Run(CommandLine),
    Help,
    Version,
}

impl CommandLine {
    /// The arguments the master passes.
    pub fn args(pool: &str) -> Vec<std::ffi::OsString> {
        vec!["--pool".into(), pool.into()]
    }

    /// `args` (the program first, as [`std::env::args_os`] gives them) read as a zygote's
    /// command line: `--pool NAME` or `--pool=NAME`, once. `--help` and `--version` print
    /// their answer and exit 0; anything else is a usage error, said on stderr, with exit
    /// code 2 (as clap's were).
    pub fn parse_or_exit(
        args: impl IntoIterator<Item = std::ffi::OsString>,
        about: &str,
    ) -> CommandLine {
        let mut args = args.into_iter();
        let program = args
            .next()
            .map(PathBuf::from)
            .and_then(|path| Some(path.file_name()?.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "zygote".into());
        let usage = format!("Usage: {program} --pool <POOL>");
        match Self::parse(args) {
            Ok(Asked::Run(line)) => line,
            Ok(Asked::Help) => {
                println!("{about}\n\n{usage}");
                std::process::exit(0)
            }
            Ok(Asked::Version) => {
                println!("{program} {VERSION}");
                std::process::exit(0)
            }
            Err(error) => {
                eprintln!("error: {error}\n\n{usage}");
                std::process::exit(2)
            }
        }
    }

    /// The arguments after the program's name, read; the error says what is wrong.
    fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Asked, String> {
        let mut pool = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let arg = arg
                .into_string()
                .map_err(|arg| format!("invalid UTF-8 in {arg:?}"))?;
            let value = match arg.as_str() {
                "-h" | "--help" => return Ok(Asked::Help),
                "-V" | "--version" => return Ok(Asked::Version),
                "--pool" => args
                    .next()
                    .ok_or("a value is required for '--pool <POOL>'")?
                    .into_string()
                    .map_err(|value| format!("invalid UTF-8 in {value:?}"))?,
                other => match other.strip_prefix("--pool=") {
                    Some(value) => value.to_owned(),
                    None => return Err(format!("unexpected argument '{other}'")),
                },
            };
            if pool.replace(value).is_some() {
                return Err("the argument '--pool <POOL>' cannot be used multiple times".into());
            }
        }
        let pool = pool.ok_or("the argument '--pool <POOL>' is required")?;
        Ok(Asked::Run(CommandLine { pool }))
    }

    /// The terms at [`TERMS_FD`], checked against this command line and for the runtime
    /// `pick` takes (`Terms::Php` for `drover-php`).
    pub fn terms<T>(
        &self,
        expected: &'static str,
        pick: impl FnOnce(Terms) -> Option<T>,
    ) -> Result<T, TermsError> {
        let terms = Terms::from_fd(TERMS_FD)?;
        if terms.pool() != self.pool {
            return Err(TermsError::Pool {
                argv: self.pool.clone(),
                terms: terms.pool().into(),
            });
        }
        pick(terms).ok_or(TermsError::Runtime { expected })
    }
}

/// What every zygote (`drover-python`, `drover-php`) is given, in its runtime's terms: the
/// part of the pool that a worker's life depends on.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ZygoteArgs {
    pub pool: String,
    pub workers: u32,
    pub max_requests: u32,
    pub max_requests_jitter: u32,
    /// The pool's scoreboard, inherited from the master.
    pub scoreboard_fd: Option<i32>,
    /// max_memory in bytes: a worker checks itself after each request.
    pub max_memory: Option<u64>,
    /// request_read_timeout in milliseconds; absent: no bound.
    pub request_read_timeout_ms: Option<u64>,
    /// access_log: the descriptor the workers write a line per request to, opened by the
    /// master ([`crate::zygote::ACCESS_LOG_FD`]); absent: no access log.
    pub access_log_fd: Option<i32>,
    /// access_log's path, for messages only: the zygote never opens it.
    pub access_log: Option<PathBuf>,
    /// access_format: a php-fpm format or "json" ([`crate::access::parse`]).
    pub access_format: String,
    /// access_suppress_path: a request URI not logged (repeated).
    pub access_suppress_path: Vec<String>,
    /// protocol: what the listener speaks, FastCGI (from a web server) or HTTP/1.1.
    pub protocol: Protocol,
    /// keepalive_timeout in milliseconds (HTTP): how long a kept connection may idle.
    pub keepalive_timeout_ms: u64,
    /// send_timeout in milliseconds (HTTP): a response write that makes no progress this
    /// long ends the connection.
    pub send_timeout_ms: u64,
    /// forwarded_allow_ips (HTTP): an address, or "*", whose X-Forwarded-For/-Proto are
    /// believed (repeated).
    pub forwarded_allow_ips: Vec<String>,
    /// max_request_body in bytes (HTTP): larger bodies are refused with 413.
    pub max_request_body: Option<u64>,
    /// certfile (HTTP): the listener speaks TLS; the certificate and key are in the memfd
    /// at this descriptor ([`crate::zygote::TLS_FD`]), never on the command line.
    pub tls_fd: Option<i32>,
    /// cert_reqs (HTTP over TLS): whether clients present a certificate.
    pub cert_reqs: crate::tls::CertReqs,
    /// ciphers (HTTP over TLS): a suite offered, by its IANA name (repeated); none: rustls's.
    pub ciphers: Vec<String>,
    /// ssl_version (HTTP over TLS): the lowest TLS version taken.
    pub ssl_version: crate::tls::MinVersion,
    /// status_path: a request with this `SCRIPT_NAME` gets the pool's status, which the
    /// worker fetches from `status_from`.
    pub status_path: Option<String>,
    /// The master's `status_listen` for this pool: a unix socket path, or `IP:PORT`.
    pub status_from: Option<String>,
    /// ping_path: a request with this `SCRIPT_NAME` gets `ping_response`.
    pub ping_path: Option<String>,
    pub ping_response: String,
    /// process_dumpable: the zygote and its workers stay dumpable (ptrace, core dumps);
    /// absent, the zygote makes itself non-dumpable first thing, and its workers inherit it.
    pub dumpable: bool,
}

/// A pool's `protocol`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// FastCGI, from a web server in front (nginx's `fastcgi_pass`).
    #[default]
    Fastcgi,
    /// HTTP/1.1, from clients or a proxy (`proxy_pass`, a load balancer).
    Http,
}

/// The terms of `drover-python`: a WSGI or ASGI app's zygote.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PythonArgs {
    pub zygote: ZygoteArgs,
    /// "package.module:callable"
    pub app: String,
    pub python_path: Vec<PathBuf>,
    pub virtualenv: Option<PathBuf>,
    /// Import the app in each worker after fork instead of once in the zygote.
    pub no_preload: bool,
    pub mount: String,
    /// A `warmup` request path, sent through the app before the first fork (repeated).
    pub warmup: Vec<String>,
    /// `hooks`: the module, or the .py file (a gunicorn.conf.py), whose gunicorn hooks
    /// (`post_fork`, `child_exit`, ...) the zygote and its workers call.
    pub hooks: Option<String>,
    /// How the app is called: `wsgi` (the default) or `asgi`.
    pub interface: Interface,
    /// `threads`: each WSGI worker's threads taking requests (1: the worker's own thread).
    pub threads: u32,
    /// `ws_max_size` in bytes (an ASGI app on HTTP): a larger WebSocket message, or a frame
    /// that declares more, closes the WebSocket with 1009.
    pub ws_max_size: u64,
}

/// `[python] interface`, as the zygote takes it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    /// PEP 3333: one request at a time per worker.
    #[default]
    Wsgi,
    /// ASGI 3.0: an event loop per worker, many requests at once.
    Asgi,
}

/// The terms of `drover-php`: an embedded-PHP pool's zygote.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PhpArgs {
    pub zygote: ZygoteArgs,
    /// The php.ini PHP loads; absent: PHP's own search (PHPRC, then the embed SAPI's
    /// folder, /etc/php/8.2/embed on Debian).
    pub ini_file: Option<PathBuf>,
    /// A `[php.ini]` value, `name=value` (repeated): php-fpm's `php_value`, which a script
    /// may change with `ini_set`.
    pub ini: Vec<String>,
    /// A `[php.admin_ini]` value, `name=value` (repeated): php-fpm's `php_admin_value`,
    /// which a script cannot change.
    pub admin_ini: Vec<String>,
    /// `security.limit_extensions`: the script suffixes PHP may run, space-separated, as
    /// php-fpm writes them; empty: any file.
    pub limit_extensions: String,
    /// `[php] worker`: worker mode's script, which each worker runs once and which handles
    /// every request through `frankenphp_handle_request()`.
    pub worker: Option<PathBuf>,
    /// `[php] worker_boot = "zygote"`: the zygote boots the worker script once, and each
    /// worker is forked from the booted app.
    pub boot_in_zygote: bool,
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn parse(args: &[&str]) -> Result<Asked, String> {
        CommandLine::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn a_zygote_s_command_line_is_the_pool_it_runs_once() {
        let www = Ok(Asked::Run(CommandLine { pool: "www".into() }));
        assert_eq!(parse(&["--pool", "www"]), www);
        assert_eq!(parse(&["--pool=www"]), www);
        // What the master passes reads back as the pool.
        let args = CommandLine::args("www");
        assert_eq!(CommandLine::parse(args), www);
        assert_eq!(parse(&["--help"]), Ok(Asked::Help));
        assert_eq!(parse(&["-V"]), Ok(Asked::Version));
        for wrong in [
            &[][..],
            &["--pool"],
            &["--pool", "a", "--pool", "b"],
            &["--pool", "www", "--workers", "4"],
            &["www"],
        ] {
            assert!(parse(wrong).is_err(), "{wrong:?}");
        }
    }

    fn zygote(pool: &str) -> ZygoteArgs {
        ZygoteArgs {
            pool: pool.into(),
            workers: 4,
            max_requests: 500,
            max_requests_jitter: 50,
            scoreboard_fd: Some(crate::zygote::SCOREBOARD_FD),
            max_memory: Some(64 << 20),
            request_read_timeout_ms: Some(30_000),
            access_log_fd: Some(crate::zygote::ACCESS_LOG_FD),
            access_log: Some("/var/log/drover/www.access".into()),
            access_format: crate::access::DEFAULT_FORMAT.into(),
            access_suppress_path: vec!["/ping".into()],
            protocol: Protocol::Http,
            keepalive_timeout_ms: 2000,
            send_timeout_ms: 60_000,
            forwarded_allow_ips: vec!["127.0.0.1".into(), "*".into()],
            max_request_body: Some(1 << 20),
            tls_fd: Some(crate::zygote::TLS_FD),
            cert_reqs: crate::tls::CertReqs::Optional,
            ciphers: vec!["TLS13_AES_128_GCM_SHA256".into()],
            ssl_version: crate::tls::MinVersion::Tls13,
            status_path: Some("/status".into()),
            status_from: Some("127.0.0.1:9001".into()),
            ping_path: Some("/ping".into()),
            ping_response: "pong \"quoted\"\nline".into(),
            dumpable: true,
        }
    }

    fn php() -> Terms {
        Terms::Php(PhpArgs {
            zygote: zygote("www"),
            ini_file: Some("/etc/php/8.2/embed/php.ini".into()),
            ini: vec!["memory_limit=64M".into(), "error_log=/tmp/a b=c".into()],
            admin_ini: vec!["disable_functions=exec".into()],
            limit_extensions: ".php .phar".into(),
            worker: Some("/srv/app/worker.php".into()),
            boot_in_zygote: true,
        })
    }

    fn python() -> Terms {
        Terms::Python(PythonArgs {
            zygote: zygote("api"),
            app: "myapp.wsgi:application".into(),
            python_path: vec!["/srv/api".into(), "/srv/lib é".into()],
            virtualenv: Some("/srv/venv".into()),
            no_preload: true,
            mount: "/api".into(),
            warmup: vec!["/health".into()],
            hooks: Some("/srv/api/gunicorn.conf.py".into()),
            interface: Interface::Asgi,
            threads: 4,
            ws_max_size: 1 << 20,
        })
    }

    #[test]
    fn terms_of_each_runtime_round_trip() {
        for terms in [php(), python()] {
            let bytes = terms.encode();
            assert!(bytes.starts_with(format!("{MAGIC} {VERSION}\n").as_bytes()));
            assert_eq!(Terms::decode(&bytes).unwrap(), terms);
        }
    }

    #[test]
    fn terms_cross_a_sealed_memfd_whole() {
        use std::os::fd::IntoRawFd;
        let terms = python();
        let fd = terms.memfd().unwrap();
        // Sealed: the zygote (or its app) cannot change what the next zygote reads.
        let mut file = std::fs::File::from(fd.try_clone().unwrap());
        assert!(io::Write::write_all(&mut file, b"x").is_err());
        assert_eq!(Terms::from_fd(fd.into_raw_fd()).unwrap(), terms);
    }

    #[test]
    fn terms_of_another_version_are_refused_naming_both() {
        let bytes = Terms::encode_as("0.0.9", &php());
        let err = Terms::decode(&bytes).unwrap_err();
        assert!(
            matches!(&err, TermsError::Version { ours, theirs } if ours == VERSION && theirs == "0.0.9"),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("drover 0.0.9") && message.contains(&format!("version {VERSION}")),
            "{message}"
        );
        // The version is checked before the body: a body of another shape still says so.
        let other = format!("{MAGIC} 9.9.9\n{{\"php\":{{\"renamed\":1}}}}");
        assert!(matches!(
            Terms::decode(other.as_bytes()),
            Err(TermsError::Version { .. })
        ));
    }

    #[test]
    fn anything_else_is_refused_with_the_reason() {
        assert!(matches!(Terms::decode(b""), Err(TermsError::NotTerms)));
        assert!(matches!(
            Terms::decode(b"--pool www --workers 4\n"),
            Err(TermsError::NotTerms)
        ));
        assert!(matches!(
            Terms::decode(MAGIC.as_bytes()),
            Err(TermsError::NotTerms)
        ));
        // The right version, a damaged or foreign body: a format error, never defaults.
        for body in [
            "",
            "{\"php\":{}}",
            "{\"perl\":{}}",
            "{\"python\":{\"zygote\":{\"pool\":\"www\"}}}",
        ] {
            let bytes = format!("{MAGIC} {VERSION}\n{body}");
            assert!(
                matches!(Terms::decode(bytes.as_bytes()), Err(TermsError::Format(_))),
                "{body}"
            );
        }
        // A field this version does not know is refused, not ignored.
        let mut value: serde_json::Value =
            serde_json::from_slice(&php().encode()[MAGIC.len() + VERSION.len() + 2..]).unwrap();
        value["php"]["zygote"]["surprise"] = 1.into();
        let bytes = format!("{MAGIC} {VERSION}\n{value}");
        let err = Terms::decode(bytes.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");
    }

    #[test]
    fn a_descriptor_that_is_not_open_is_unreadable_not_taken() {
        // The highest descriptor number, never open in a test.
        let fd = i32::try_from(open_limit()).unwrap_or(i32::MAX) - 1;
        assert!(matches!(Terms::from_fd(fd), Err(TermsError::Unreadable(_))));
    }

    fn open_limit() -> u64 {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit with a valid out-pointer.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        limit.rlim_cur
    }
}
