//! nginx in front of pools, as operators run it: Debian's `fastcgi.conf` included as is.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{Site, TIMEOUT, proc, wait_until};

/// Enough for the functional tests: a few clients, each with its connection to a pool.
const WORKER_CONNECTIONS: u32 = 64;

pub struct Nginx {
    child: Child,
    pub port: u16,
}

/// An nginx `location` whose requests go to a pool's socket.
pub struct Location {
    /// What follows `location`: `~ \.php$`, `/`, `/app/`.
    pub pattern: String,
    pub socket: PathBuf,
    /// `fastcgi_keep_conn on`, through an upstream that keeps idle connections open.
    pub keep_conn: bool,
    /// More directives for the location, such as `fastcgi_param PHP_VALUE "...";`.
    pub extra: String,
}

impl Location {
    /// `*.php` to `socket`, scripts found in the docroot.
    pub fn php(socket: &Path) -> Location {
        Location {
            pattern: r"~ \.php$".to_string(),
            socket: socket.to_path_buf(),
            keep_conn: false,
            extra: String::new(),
        }
    }

    /// Every path under `prefix` to `socket`, as a WSGI app is mounted.
    pub fn prefix(prefix: &str, socket: &Path) -> Location {
        Location {
            pattern: prefix.to_string(),
            socket: socket.to_path_buf(),
            keep_conn: false,
            extra: String::new(),
        }
    }

    /// This location with `fastcgi_keep_conn on`: nginx keeps up to 2 idle connections to
    /// the pool open and sends further requests on them.
    pub fn keep_conn(mut self) -> Location {
        self.keep_conn = true;
        self
    }

    /// This location with more directives (each ending in `;`).
    pub fn with(mut self, directives: &str) -> Location {
        self.extra.push_str(directives);
        self
    }
}

impl Nginx {
    /// Serves the site's docroot on a free loopback port, `*.php` going to `socket`.
    pub fn start(site: &Site, socket: &Path) -> Nginx {
        Nginx::start_locations(site, &[Location::php(socket)])
    }

    /// As [`Nginx::start`], with `directives` added for the one script `path` (such as
    /// `fastcgi_param PHP_VALUE "...";`), as a site sets a parameter for one location.
    pub fn start_php_with(site: &Site, socket: &Path, path: &str, directives: &str) -> Nginx {
        let one = Location {
            pattern: format!("= {path}"),
            ..Location::php(socket)
        };
        Nginx::start_locations(site, &[one.with(directives), Location::php(socket)])
    }

    /// Serves the site's docroot on a free loopback port, with `locations` passed on to
    /// their pools.
    pub fn start_locations(site: &Site, locations: &[Location]) -> Nginx {
        Nginx::start_sized(site, locations, WORKER_CONNECTIONS)
    }

    /// [`Nginx::start_locations`] with room for `worker_connections` connections: a load
    /// test's clients and nginx's connections to the pools both count against it.
    pub fn start_sized(site: &Site, locations: &[Location], worker_connections: u32) -> Nginx {
        Nginx::launch(site, |port| {
            config(site, locations, port, worker_connections)
        })
    }

    /// Serves the site's docroot on a free loopback port with `server_body` (location
    /// blocks written out in full) as the `server` block's directives.
    pub fn start_server(site: &Site, server_body: &str) -> Nginx {
        Nginx::launch(site, |port| {
            wrap(site, "", server_body, port, WORKER_CONNECTIONS)
        })
    }

    /// Serves the site's docroot on a free loopback port with `upstreams` (http-level
    /// blocks) and `server_body` (location blocks written out in full), with room for
    /// `worker_connections` connections.
    pub fn start_with_upstreams(
        site: &Site,
        upstreams: &str,
        server_body: &str,
        worker_connections: u32,
    ) -> Nginx {
        Nginx::launch(site, |port| {
            wrap(site, upstreams, server_body, port, worker_connections)
        })
    }

    /// Starts nginx with the configuration `conf(port)` makes.
    fn launch(site: &Site, conf: impl Fn(u16) -> String) -> Nginx {
        // Another test may take the port between our probe and nginx's bind: then nginx
        // exits, and we try another port.
        for _ in 0..5 {
            let port = free_port();
            let conf = site.write("nginx.conf", &conf(port));
            let child = Command::new("nginx")
                .arg("-p")
                .arg(site.path())
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(site.path().join("nginx-error.log"))
                // Its own messages go to nginx-error.log (-e and error_log).
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nginx (is it installed?)");
            let mut nginx = Nginx { child, port };
            let up = wait_until(TIMEOUT, "nginx to listen or exit", || {
                if nginx.child.try_wait().unwrap().is_some() {
                    return Some(false);
                }
                TcpStream::connect(("127.0.0.1", port))
                    .is_ok()
                    .then_some(true)
            });
            if up {
                return nginx;
            }
        }
        let errors = fs::read_to_string(site.path().join("nginx-error.log")).unwrap_or_default();
        panic!("nginx did not start; nginx-error.log:\n{errors}");
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://127.0.0.1:{}{path_and_query}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        proc::kill_tree(self.child.id() as i32);
        let _ = self.child.wait();
    }
}

/// A loopback TCP port nothing listens on now (the kernel's pick; free until someone binds
/// it).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn config(site: &Site, locations: &[Location], port: u16, worker_connections: u32) -> String {
    let upstreams: String = locations
        .iter()
        .enumerate()
        .filter(|(_, l)| l.keep_conn)
        .map(|(i, l)| {
            format!(
                "    upstream kept{i} {{\n        server unix:{};\n        keepalive 2;\n    }}\n",
                l.socket.display()
            )
        })
        .collect();
    let locations: String = locations
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let pass = if l.keep_conn {
                format!("fastcgi_pass kept{i};\n            fastcgi_keep_conn on;")
            } else {
                format!("fastcgi_pass unix:{};", l.socket.display())
            };
            format!(
                "        location {} {{\n            include /etc/nginx/fastcgi.conf;\n            {pass}\n            {}\n        }}\n",
                l.pattern, l.extra,
            )
        })
        .collect();
    wrap(site, &upstreams, &locations, port, worker_connections)
}

/// The whole configuration around `upstreams` (http-level blocks) and `locations` (the
/// server block's directives).
fn wrap(
    site: &Site,
    upstreams: &str,
    locations: &str,
    port: u16,
    worker_connections: u32,
) -> String {
    let dir = site.path().display();
    // As root, nginx's workers would run as www-data, which cannot reach a root-made
    // socket or temp folder (measured.md, "Harness notes").
    let user = if proc::running_as_root() {
        "user root root;"
    } else {
        ""
    };
    format!(
        r#"daemon off;
master_process on;
worker_processes 1;
{user}
error_log {dir}/nginx-error.log info;
pid {dir}/nginx.pid;
events {{ worker_connections {worker_connections}; }}
http {{
    access_log off;
    # The Python upload test sends 10 MB.
    client_max_body_size 20m;
    client_body_temp_path {dir}/nginx-client-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
{upstreams}    server {{
        listen 127.0.0.1:{port};
        root {docroot};
{locations}    }}
}}
"#,
        docroot = site.docroot.display(),
    )
}
