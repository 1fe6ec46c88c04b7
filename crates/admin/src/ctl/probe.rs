//! `drover ctl probe POOL [URI]`: one FastCGI request straight to a pool's `listen` socket,
//! as nginx would send it, without nginx and without the master: a health check for
//! systemd, Kubernetes or a monitoring system. It speaks the web server's side of FastCGI
//! with the `fastcgi-client` crate, not drover's own codec, so that it checks the pool as
//! a stranger sees it.
//!
//! The params are those of nginx's `fastcgi.conf` for a GET of `URI`. drover's
//! configuration has no document root, so the script a PHP pool runs comes from the
//! command line: `--script PATH` (SCRIPT_FILENAME as given), or `--root DIR` (DIR + the
//! URI's path, `index.php` added to a path ending in `/`, nginx's `fastcgi_index`). A
//! Python pool gets SCRIPT_NAME from its `mount` and PATH_INFO from the rest of the path.
//!
//! Which socket the pool listens on comes from the configuration (`-c`), or, given
//! `--socket`, from the master itself: its effective configuration of the pool (`GET
//! /config?pool=NAME`, what `drover ctl config NAME` prints), loaded back as drover loads a
//! pool file. So a probe through the control socket needs no readable drover.toml.
//!
//! Exit 0 when the answer's status (its `Status:` header, 200 when absent) is 2xx or 3xx;
//! 1 otherwise, and 1 with a message when the socket does not answer within `--timeout`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fastcgi_client::{Client, Params, Request};
use tokio::io::BufStream;

use drover_config::{ListenAddr, Pool, Runtime};

/// `drover ctl probe`'s own arguments.
#[derive(clap::Args, Debug, PartialEq)]
pub struct ProbeArgs {
    /// The pool, as named by its file (`pools.d/NAME.toml`).
    pub pool: String,
    /// The request's path and query.
    #[arg(default_value = "/")]
    pub uri: String,
    /// PHP: the script to run (SCRIPT_FILENAME).
    #[arg(long, value_name = "PATH", conflicts_with = "root")]
    pub script: Option<PathBuf>,
    /// PHP: the document root; the script is DIR + the URI's path.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the body too.
    #[arg(long)]
    pub body: bool,
    /// How long the pool has to answer, connection included.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// What the pool answered.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// As the app wrote them, `Status:` included.
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    /// What the app wrote on FastCGI's stderr stream.
    pub stderr: Vec<u8>,
}

/// Where the probe learns the pool's socket and runtime.
pub enum Source<'a> {
    /// The configuration files (`-c FILE`).
    Config(&'a Path),
    /// The master, over its control socket (`--socket PATH`): the socket's path and what
    /// it answered to `/config?pool=NAME` (the caller asks, so this module needs no client).
    Master {
        socket: &'a Path,
        rendered: Result<String, String>,
    },
}

/// Runs the probe against the pool `source` describes; returns the exit code.
pub fn run(source: Source<'_>, args: &ProbeArgs) -> u8 {
    match find_pool(source, &args.pool).and_then(|pool| probe(&pool, args)) {
        Ok((answer, took)) => {
            let mut out = String::new();
            out.push_str(&format!(
                "{} in {:.1} ms\n",
                answer.status,
                took.as_secs_f64() * 1000.0
            ));
            for header in &answer.headers {
                out.push_str(header);
                out.push('\n');
            }
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`| head`) is the reader's choice; the status is the answer.
            let _ = stdout.write_all(out.as_bytes());
            if args.body {
                let _ = stdout.write_all(b"\n");
                let _ = stdout.write_all(&answer.body);
            }
            let _ = stdout.flush();
            if !answer.stderr.is_empty() {
                eprint!("{}", String::from_utf8_lossy(&answer.stderr));
            }
            u8::from(!(200..400).contains(&answer.status))
        }
        Err(message) => {
            eprintln!("drover ctl probe: {message}");
            1
        }
    }
}

/// Pool `name` as the files, or the master, describe it.
fn find_pool(source: Source<'_>, name: &str) -> Result<Pool, String> {
    match source {
        Source::Config(config) => {
            let shown = config.display();
            let loaded = drover_config::load(config).map_err(|errors| {
                format!(
                    "{errors}\ncannot read the pools from {shown}; pass -c FILE or --socket PATH"
                )
            })?;
            loaded
                .pools
                .into_iter()
                .find(|p| p.name == name)
                .ok_or_else(|| format!("{shown} has no pool {name:?}"))
        }
        Source::Master { socket, rendered } => {
            pool_from_rendered(name, &rendered?).map_err(|why| {
                format!(
                    "the master's configuration of pool {name:?} (at {}): {why}",
                    socket.display()
                )
            })
        }
    }
}

/// The pool `name` of a rendered configuration (the master's `/config?pool=NAME`: the
/// global block, then `# pool NAME (FILE)` and the pool's block, which loads back to the
/// same settings), loaded as drover loads a pool file.
fn pool_from_rendered(name: &str, rendered: &str) -> Result<Pool, String> {
    // The global block comes first, so the heading always follows a line break.
    let start = rendered
        .find(&format!("\n# pool {name} ("))
        .map(|at| at + 1)
        .ok_or("no block for it in the answer")?;
    let main = Path::new("/drover-ctl-probe/drover.toml");
    let files = std::collections::BTreeMap::from([
        (main.to_path_buf(), String::new()),
        (
            main.with_file_name(format!("pools.d/{name}.toml")),
            rendered[start..].to_owned(),
        ),
    ]);
    let config = drover_config::load_texts(main, &files).map_err(|e| e.to_string())?;
    config
        .pools
        .into_iter()
        .next()
        .ok_or_else(|| "no pool in it".to_owned())
}

fn probe(pool: &Pool, args: &ProbeArgs) -> Result<(Answer, Duration), String> {
    if pool.listen == ListenAddr::NoSocket {
        return Err(format!(
            "pool {} is a background pool ([program]): it has no socket to send a request to",
            pool.name
        ));
    }
    let params = params(pool, args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let start = Instant::now();
    let exchange = exchange(&pool.listen, params);
    let answer = runtime
        .block_on(async { tokio::time::timeout(args.timeout, exchange).await })
        .map_err(|_| {
            format!(
                "pool {} at {} did not answer within {}",
                pool.name,
                pool.listen,
                humantime::format_duration(args.timeout)
            )
        })?
        .map_err(|e| format!("pool {} at {}: {e}", pool.name, pool.listen))?;
    Ok((answer, start.elapsed()))
}

/// The request goes out in one write, at the client's flush, as nginx sends one: the
/// `fastcgi-client` crate writes each record on its own and ends an empty body with two
/// empty STDIN records, and a worker that has answered at the first may have closed the
/// connection before the second, which the client would report as a broken pipe.
async fn exchange(listen: &ListenAddr, params: Params<'_>) -> Result<Answer, String> {
    let request = Request::new(params, fastcgi_client::io::empty());
    let answer = match listen {
        ListenAddr::Unix(path) => {
            let stream = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            Client::new_tokio(BufStream::new(stream))
                .execute_once(request)
                .await
        }
        ListenAddr::NoSocket => return Err("a background pool has no socket".into()),
        ListenAddr::Tcp(_) | ListenAddr::AnyAddress(_) => {
            let stream = tokio::net::TcpStream::connect(connect_to(listen))
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            Client::new_tokio(BufStream::new(stream))
                .execute_once(request)
                .await
        }
    };
    let answer = answer.map_err(|e| format!("FastCGI: {e}"))?;
    let stdout = answer.stdout.unwrap_or_default();
    let (headers, body) = split_head(&stdout)?;
    Ok(Answer {
        status: status_of(&headers)?,
        headers,
        body: body.to_vec(),
        stderr: answer.stderr.unwrap_or_default(),
    })
}

/// Where to connect for a pool listening at `listen`: its address, loopback for an
/// unspecified one (`0.0.0.0`, `[::]`, a bare port).
fn connect_to(listen: &ListenAddr) -> std::net::SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    match listen {
        ListenAddr::Tcp(addr) if !addr.ip().is_unspecified() => *addr,
        ListenAddr::Tcp(SocketAddr::V6(addr)) => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), addr.port())
        }
        ListenAddr::Tcp(addr) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port()),
        ListenAddr::AnyAddress(port) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), *port),
        ListenAddr::Unix(_) | ListenAddr::NoSocket => {
            unreachable!("a unix socket or no socket has no IP address")
        }
    }
}

/// nginx's `fastcgi.conf` for a GET of `args.uri`, from 127.0.0.1 to localhost:80.
fn params<'a>(pool: &Pool, args: &'a ProbeArgs) -> Result<Params<'a>, String> {
    if !args.uri.starts_with('/') {
        return Err(format!("the URI must start with /, got {:?}", args.uri));
    }
    let (path, query) = args.uri.split_once('?').unwrap_or((&args.uri, ""));
    let base = Params::default()
        .gateway_interface("CGI/1.1")
        .server_software("drover-probe")
        .request_method("GET")
        .query_string(query)
        .request_uri(args.uri.as_str())
        .document_uri(path.to_owned())
        .remote_addr("127.0.0.1")
        .remote_port(0)
        .server_addr("127.0.0.1")
        .server_port(80)
        .server_name("localhost")
        .content_type("")
        .content_length(0)
        .custom("REQUEST_SCHEME", "http")
        .custom("REDIRECT_STATUS", "200")
        .custom("HTTP_HOST", "localhost")
        .custom("HTTP_USER_AGENT", "drover-probe");
    let script_filename = match (&args.script, &args.root) {
        (Some(script), _) => Some(script.display().to_string()),
        (None, Some(root)) => {
            let index = if path.ends_with('/') { "index.php" } else { "" };
            let root = root.display().to_string();
            let root = root.trim_end_matches('/');
            Some(format!("{root}{path}{index}"))
        }
        (None, None) => None,
    };
    let params = match &pool.runtime {
        Runtime::Python(python) => {
            let mount = python.mount.trim_end_matches('/');
            let info = path.strip_prefix(mount).unwrap_or(path);
            base.script_name(mount.to_owned())
                .custom("PATH_INFO", info.to_owned())
        }
        Runtime::Php(_) => {
            let filename = script_filename.ok_or(
                "a PHP pool needs the script to run: --script PATH, or --root DIR for DIR + the URI's path",
            )?;
            base.script_name(path.to_owned())
                .document_root(
                    args.root
                        .as_ref()
                        .map(|r| r.display().to_string())
                        .unwrap_or_default(),
                )
                .script_filename(filename)
        }
        Runtime::Program(_) => return Err("a background pool answers no request".into()),
        Runtime::Command(_) => {
            let base = base.script_name(path.to_owned());
            match script_filename {
                Some(filename) => base.script_filename(filename),
                None => base,
            }
        }
    };
    Ok(params)
}

/// The header lines and the body of a CGI answer; the head ends at the first empty line.
fn split_head(stdout: &[u8]) -> Result<(Vec<String>, &[u8]), String> {
    let crlf = stdout.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = stdout.windows(2).position(|w| w == b"\n\n");
    let (end, skip) = match (crlf, lf) {
        (Some(c), Some(l)) if l < c => (l, 2),
        (Some(c), _) => (c, 4),
        (None, Some(l)) => (l, 2),
        (None, None) if stdout.is_empty() => return Err("the pool answered nothing".into()),
        (None, None) => return Err("the answer has no end of headers".into()),
    };
    let head = String::from_utf8_lossy(&stdout[..end]);
    let headers = head
        .lines()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .collect();
    Ok((headers, &stdout[end + skip..]))
}

/// The `Status:` header's code; 200 when there is none, as CGI says.
fn status_of(headers: &[String]) -> Result<u16, String> {
    let Some(value) = headers.iter().find_map(|h| {
        let (name, value) = h.split_once(':')?;
        name.eq_ignore_ascii_case("status").then_some(value.trim())
    }) else {
        return Ok(200);
    };
    value
        .split_whitespace()
        .next()
        .and_then(|code| code.parse().ok())
        .filter(|code| (100..1000).contains(code))
        .ok_or_else(|| format!("bad Status header {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_at_the_first_empty_line() {
        let (headers, body) =
            split_head(b"Status: 500 Oops\r\nContent-Type: text/plain\r\n\r\nbody\r\n\r\n")
                .unwrap();
        assert_eq!(headers, ["Status: 500 Oops", "Content-Type: text/plain"]);
        assert_eq!(body, b"body\r\n\r\n");
        let (headers, body) = split_head(b"Content-type: text/html\n\nhi").unwrap();
        assert_eq!(headers, ["Content-type: text/html"]);
        assert_eq!(body, b"hi");
        assert!(split_head(b"").is_err());
        assert!(split_head(b"Content-Type: x\r\n").is_err());
    }

    #[test]
    fn the_status_header_decides_and_200_without_one() {
        let headers = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(status_of(&headers(&["Content-Type: x"])), Ok(200));
        assert_eq!(status_of(&headers(&["status: 404 Not Found"])), Ok(404));
        assert_eq!(status_of(&headers(&["Status: 302"])), Ok(302));
        assert!(status_of(&headers(&["Status: x"])).is_err());
    }

    fn args(uri: &str) -> ProbeArgs {
        ProbeArgs {
            pool: "www".into(),
            uri: uri.into(),
            script: None,
            root: None,
            body: false,
            timeout: Duration::from_secs(5),
        }
    }

    /// drover.toml `main` and a static pool of one worker with this runtime table, loaded
    /// as drover loads them.
    fn config_of(main: &str, runtime: &str) -> drover_config::Config {
        let path = Path::new("/etc/drover/drover.toml");
        let text = format!(
            "listen = \"/run/drover/www.sock\"\nuser = \"root\"\n\
             [pm]\nmode = \"static\"\nmax_children = 1\n{runtime}"
        );
        let files = std::collections::BTreeMap::from([
            (path.to_path_buf(), main.to_owned()),
            (path.with_file_name("pools.d/www.toml"), text),
        ]);
        drover_config::load_texts(path, &files).unwrap()
    }

    fn pool_of(runtime: &str) -> Pool {
        config_of("", runtime).pools.into_iter().next().unwrap()
    }

    #[test]
    fn a_php_pool_runs_the_script_under_the_root_as_nginx_would() {
        let pool = pool_of("[php]\nbinary = \"/bin/sh\"\nruntime = \"cgi\"\n");
        assert!(params(&pool, &args("/")).is_err(), "no script, no root");
        let mut a = args("/admin/?x=1&y=2");
        a.root = Some("/srv/www/".into());
        let p = params(&pool, &a).unwrap();
        assert_eq!(p["SCRIPT_FILENAME"], "/srv/www/admin/index.php");
        assert_eq!(p["SCRIPT_NAME"], "/admin/");
        assert_eq!(p["QUERY_STRING"], "x=1&y=2");
        assert_eq!(p["REQUEST_URI"], "/admin/?x=1&y=2");
        assert_eq!(p["DOCUMENT_URI"], "/admin/");
        assert_eq!(p["REQUEST_METHOD"], "GET");
        let mut a = args("/x");
        a.script = Some("/srv/ping.php".into());
        assert_eq!(
            params(&pool, &a).unwrap()["SCRIPT_FILENAME"],
            "/srv/ping.php"
        );
        assert!(params(&pool, &args("x")).is_err(), "a URI starts with /");
    }

    #[test]
    fn the_masters_rendered_configuration_gives_the_pool_back() {
        for runtime in [
            "[php]\nbinary = \"/bin/sh\"\nruntime = \"cgi\"\n",
            "[python]\napp = \"app:application\"\nmount = \"/py\"\n",
        ] {
            let config = config_of("[control]\nlisten = \"/run/drover/ctl.sock\"\n", runtime);
            let pool = config.pools[0].clone();
            let rendered = config.render();
            let back = pool_from_rendered("www", &rendered).unwrap();
            assert_eq!((&back.name, &back.listen), (&pool.name, &pool.listen));
            assert_eq!(back.runtime, pool.runtime, "{rendered}");
        }
        let err = pool_from_rendered("other", "# global (x)\n").unwrap_err();
        assert!(err.contains("no block"), "{err}");
    }

    #[test]
    fn a_python_pool_gets_its_mount_as_script_name() {
        let pool = pool_of("[python]\napp = \"app:application\"\nmount = \"/py\"\n");
        let a = args("/py/health?deep");
        let p = params(&pool, &a).unwrap();
        assert_eq!(p["SCRIPT_NAME"], "/py");
        assert_eq!(p["PATH_INFO"], "/health");
        assert_eq!(p["QUERY_STRING"], "deep");
        assert!(!p.contains_key("SCRIPT_FILENAME"));
    }

    #[test]
    fn unspecified_addresses_are_reached_on_loopback() {
        let tcp = |s: &str| ListenAddr::Tcp(s.parse().unwrap());
        assert_eq!(
            connect_to(&tcp("10.0.0.1:9000")).to_string(),
            "10.0.0.1:9000"
        );
        assert_eq!(
            connect_to(&tcp("0.0.0.0:9000")).to_string(),
            "127.0.0.1:9000"
        );
        assert_eq!(connect_to(&tcp("[::]:9000")).to_string(), "[::1]:9000");
        assert_eq!(
            connect_to(&ListenAddr::AnyAddress(9000)).to_string(),
            "127.0.0.1:9000"
        );
    }
}
