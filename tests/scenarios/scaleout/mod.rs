//! drover across machines, issue 22's item 4: three hosts made by the test as loopback
//! addresses (127.0.0.2, .3, .4: Linux routes all of 127/8 to `lo`, and nginx's
//! connections to them come from 127.0.0.1), each running its own drover (its own folder,
//! `drover.toml`, pools and control socket) with three pools on TCP:
//!
//! - `php`: drover-php on FastCGI, `listen_allowed_clients = ["127.0.0.1"]`;
//! - `py`: a WSGI app on FastCGI, the same;
//! - `web`: the same WSGI app answering HTTP itself (`protocol = "http"`).
//!
//! One nginx in front has an upstream per pool across the three hosts (`max_fails`,
//! `fastcgi_next_upstream` / `proxy_next_upstream`), and logs each request with the
//! upstream addresses it tried. Clients ([`Load`]) loop on the three locations through
//! nginx; each response names the host and the app's version that served it.
//!
//! - [`rolling`]: a deploy that renews the app code host by host, first by SIGTERM and a
//!   new start, then by `drover ctl reload`, loses no request.
//! - [`crash`]: SIGKILL of one host's whole process tree fails at most the requests in
//!   flight there; nginx sends the rest to the other hosts.
//! - [`request_id`]: one request followed across a host's logs by its id (nginx's
//!   `$request_id`), as a log pipeline gathering several hosts' logs follows it.
//!
//! docs/scale-out.md gives these setups as recipes, with the figures these tests print.

mod crash;
mod request_id;
mod rolling;

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::{Ctl, Drover, Nginx, Site, TIMEOUT, php_table, proc, root_user};

/// Hosts in the cluster.
pub const HOSTS: usize = 3;

/// Concurrent clients of nginx, each on its own keep-alive connection.
pub const CLIENTS: usize = 9;

/// Workers per pool on each host.
const WORKERS: u32 = 2;

/// The longest a test's load runs, should the test fail before it stops it.
const LOAD_BOUND: Duration = Duration::from_secs(50);

/// The three locations, each to one upstream: what a client asks, and the pool it reaches.
pub const PATHS: [(&str, &str); 3] = [("/app.php", "php"), ("/py/", "py"), ("/web/", "web")];

/// One host: its address, its own drover and folder, its pools' ports.
pub struct Host {
    /// 1, 2 or 3.
    pub n: usize,
    pub ip: String,
    pub site: Site,
    /// The port of each pool, in [`PATHS`]' order.
    pub ports: [u16; 3],
    pub drover: Option<Drover>,
    pub ctl: Ctl,
}

/// A free TCP port on `ip`.
fn free_port(ip: &str) -> u16 {
    let listener = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}:0: {e}"));
    listener.local_addr().expect("local addr").port()
}

impl Host {
    /// Host `n` (1-based) at 127.0.0.(n+1), its app at `version`, started.
    pub fn start(n: usize, version: &str) -> Host {
        let ip = format!("127.0.0.{}", n + 1);
        let site = Site::new();
        let ports = [free_port(&ip), free_port(&ip), free_port(&ip)];
        let ctl = Ctl {
            socket: site.path().join("ctl.sock"),
        };
        let mut host = Host {
            n,
            ip,
            site,
            ports,
            drover: None,
            ctl,
        };
        host.write_config();
        host.deploy(version);
        host.spawn();
        host
    }

    fn write_config(&self) {
        let site = &self.site;
        site.write(
            "drover.toml",
            &format!(
                "error_log = \"stderr\"\nlog_level = \"info\"\nprocess_control_timeout = \"10s\"\n\n\
                 [control]\nlisten = \"{}\"\n",
                self.ctl.socket.display()
            ),
        );
        let allowed = "listen_allowed_clients = [\"127.0.0.1\"]\n";
        let pm = format!("[pm]\nmode = \"static\"\nmax_children = {WORKERS}\n");
        let python = format!(
            "[python]\napp = \"scaleapp:application\"\npython_path = [\"{}\"]\n",
            site.path().join("app").display()
        );
        let [php, py, web] = self.ports;
        let listen = |port: u16| format!("listen = \"{}:{port}\"\n", self.ip);
        // As root, drover wants the pools' user said (see pool_toml).
        let user = root_user();
        let tcp = |port: u16, tables: &str| format!("{}{user}{allowed}\n{tables}", listen(port));
        site.write(
            "pools.d/php.toml",
            &tcp(
                php,
                &format!(
                    "chdir = \"{}\"\n{pm}\n[env]\nRELEASE = \"{}\"\n\n{}",
                    site.docroot.display(),
                    site.docroot.display(),
                    php_table("embed")
                ),
            ),
        );
        site.write("pools.d/py.toml", &tcp(py, &format!("{pm}\n{python}")));
        site.write(
            "pools.d/web.toml",
            &tcp(web, &format!("protocol = \"http\"\n{pm}\n{python}")),
        );
    }

    /// Writes the app's code at `version`: the PHP script, and the Python module (without
    /// a stale `__pycache__`, as a new release folder has none). The running workers keep
    /// the code they loaded until they are renewed.
    pub fn deploy(&self, version: &str) {
        let n = self.n;
        self.site.script(
            "release.php",
            &format!(
                "<?php\n$ms = (int)($_GET['ms'] ?? 0);\nif ($ms > 0) {{ usleep($ms * 1000); }}\n\
                 echo \"host={n} version={version} pool=php\\n\";\n"
            ),
        );
        let _ = fs::remove_dir_all(self.site.path().join("app/__pycache__"));
        self.site.write(
            "app/scaleapp.py",
            &format!(
                "import time\nfrom urllib.parse import parse_qs\n\n\
                 def application(environ, start_response):\n    \
                 q = parse_qs(environ.get('QUERY_STRING', ''))\n    \
                 ms = int(q.get('ms', ['0'])[0])\n    \
                 if ms > 0:\n        time.sleep(ms / 1000)\n    \
                 body = ('host={n} version={version} pool=python\\n').encode()\n    \
                 start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', str(len(body)))])\n    \
                 return [body]\n"
            ),
        );
    }

    /// Starts this host's drover on its files and waits until it is ready.
    pub fn spawn(&mut self) {
        let drover = Drover::spawn(&self.site);
        drover.log.wait_for_line("ready:", TIMEOUT);
        self.drover = Some(drover);
    }

    pub fn drover(&self) -> &Drover {
        self.drover.as_ref().expect("the host's drover runs")
    }

    /// SIGTERM: drover stops taking connections, finishes the requests in hand, exits 0.
    /// Returns how long it took.
    pub fn stop(&mut self) -> Duration {
        let mut drover = self.drover.take().expect("the host's drover runs");
        let sent = Instant::now();
        drover.signal(Signal::SIGTERM);
        let status = drover.wait_exit(TIMEOUT);
        assert!(
            status.success(),
            "host {}: drover exited {status} on SIGTERM; its log:\n{}",
            self.n,
            drover.log.text()
        );
        sent.elapsed()
    }

    /// SIGKILL of drover and every process below it at once: the host is gone, as when
    /// the machine fails.
    pub fn crash(&mut self) {
        let drover = self.drover.take().expect("the host's drover runs");
        proc::kill_tree(drover.pid());
        drop(drover);
    }

    /// `drover ctl reload`, then waits for the log's `reload done`.
    pub fn reload(&self) {
        let drover = self.drover();
        let from = drover.log.len();
        self.ctl.ok(&["reload"], &drover.log.text());
        drover
            .log
            .wait_for(from, "reload done", |l| l.contains("reload done"), TIMEOUT);
    }

    /// `ip:port` of each pool, in [`PATHS`]' order.
    fn addresses(&self) -> [String; 3] {
        self.ports.map(|port| format!("{}:{port}", self.ip))
    }
}

/// nginx in front of `hosts`: an upstream per pool, retried on the next host on an error
/// or a timeout; each request logged with the upstreams it tried.
///
/// nginx names the script by its path (`SCRIPT_FILENAME`), the same for every host, as a
/// release folder is on real machines; these hosts' folders differ, so the script there
/// (in nginx's docroot) includes the release of the host that runs it (`[env] RELEASE`).
pub fn front(site: &Site, hosts: &[Host]) -> Nginx {
    site.script(
        "app.php",
        "<?php\nrequire getenv('RELEASE') . '/release.php';\n",
    );
    let mut upstreams = String::from(
        "    log_format scaleout '$status $request_uri [$upstream_addr] [$upstream_status]';\n",
    );
    for (i, (_, pool)) in PATHS.iter().enumerate() {
        upstreams += &format!("    upstream {pool} {{\n");
        for host in hosts {
            upstreams += &format!(
                "        server {} max_fails=1 fail_timeout=2s;\n",
                host.addresses()[i]
            );
        }
        upstreams += "    }\n";
    }
    let retry = "fastcgi_next_upstream error timeout;\n            \
                 fastcgi_next_upstream_tries 3;\n            fastcgi_connect_timeout 2s;";
    let server = format!(
        "        access_log {dir}/nginx-access.log scaleout;\n\
         \x20       location = /app.php {{\n            include /etc/nginx/fastcgi.conf;\n            \
         fastcgi_pass php;\n            {retry}\n        }}\n\
         \x20       location /py/ {{\n            include /etc/nginx/fastcgi.conf;\n            \
         fastcgi_pass py;\n            {retry}\n        }}\n\
         \x20       location /web/ {{\n            proxy_pass http://web;\n            \
         proxy_next_upstream error timeout;\n            proxy_next_upstream_tries 3;\n            \
         proxy_connect_timeout 2s;\n        }}\n",
        dir = site.path().display()
    );
    Nginx::start_with_upstreams(site, &upstreams, &server, 8 * CLIENTS as u32 + 64)
}

/// What nginx's access log says: requests it passed on, and those it had to try on more
/// than one host (`$upstream_addr` lists each host tried).
pub struct Retries {
    pub logged: usize,
    pub retried: usize,
}

pub fn retries(site: &Site) -> Retries {
    let text = fs::read_to_string(site.path().join("nginx-access.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    Retries {
        logged: lines.len(),
        retried: lines.iter().filter(|l| l.contains(", ")).count(),
    }
}

/// nginx's `[error]` lines, for a failure's message.
pub fn nginx_errors(site: &Site) -> String {
    let text = fs::read_to_string(site.path().join("nginx-error.log")).unwrap_or_default();
    let errors: Vec<&str> = text.lines().filter(|l| l.contains("[error]")).collect();
    errors
        .iter()
        .take(20)
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the clients saw so far, shared with the test while they run.
#[derive(Default)]
pub struct Tally {
    /// Answers by (host, version).
    pub served: BTreeMap<(usize, String), u64>,
    /// Each request that did not get the app's 200: when (since the load started), what.
    pub failures: Vec<(Duration, String)>,
    pub requests: u64,
}

impl Tally {
    /// Answers from `host` at `version`.
    pub fn count(&self, host: usize, version: &str) -> u64 {
        self.served
            .get(&(host, version.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Answers by host.
    pub fn by_host(&self) -> [u64; HOSTS] {
        let mut hosts = [0; HOSTS];
        for ((host, _), n) in &self.served {
            hosts[host - 1] += n;
        }
        hosts
    }
}

/// Clients looping on nginx's three locations until stopped, at most [`LOAD_BOUND`].
pub struct Load {
    pub tally: Arc<Mutex<Tally>>,
    /// Requests sent and not yet answered, now.
    pub in_flight: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    clients: Vec<thread::JoinHandle<()>>,
    pub started: Instant,
}

impl Load {
    /// `CLIENTS` clients on `base` (nginx's URL), each query ending in `query`.
    pub fn start(base: &str, query: &'static str) -> Load {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let in_flight = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let clients = (0..CLIENTS)
            .map(|i| {
                let (base, tally, stop) = (base.to_owned(), tally.clone(), stop.clone());
                let in_flight = in_flight.clone();
                thread::spawn(move || {
                    client(i, &base, query, started, &stop, &tally, &in_flight);
                })
            })
            .collect();
        Load {
            tally,
            in_flight,
            stop,
            clients,
            started,
        }
    }

    /// Waits until `done(tally)`, at most [`TIMEOUT`].
    pub fn wait(&self, what: &str, done: impl Fn(&Tally) -> bool) {
        let tally = &self.tally;
        crate::common::wait_until(TIMEOUT, what, || {
            done(&tally.lock().expect("tally")).then_some(())
        });
    }

    /// Stops the clients; what they saw in all.
    pub fn finish(mut self) -> (Tally, Duration) {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients.drain(..) {
            client.join().expect("client thread");
        }
        let elapsed = self.started.elapsed();
        let mut tally = std::mem::take(&mut *self.tally.lock().expect("tally"));
        tally.failures.sort();
        (tally, elapsed)
    }
}

/// One client: the locations in turn, from its own offset, on one keep-alive connection.
fn client(
    i: usize,
    base: &str,
    query: &str,
    started: Instant,
    stop: &AtomicBool,
    tally: &Mutex<Tally>,
    in_flight: &AtomicU64,
) {
    let agent = crate::common::http::agent();
    let mut n = i;
    while !stop.load(Ordering::SeqCst) && started.elapsed() < LOAD_BOUND {
        let (path, _) = PATHS[n % PATHS.len()];
        n += 1;
        let url = format!("{base}{path}{query}");
        in_flight.fetch_add(1, Ordering::SeqCst);
        let result = agent.get(&url).call();
        in_flight.fetch_sub(1, Ordering::SeqCst);
        let answer = match result {
            Err(e) => Err(format!("GET {path}: transport: {e}")),
            Ok(mut response) => {
                let status = response.status().as_u16();
                match response.body_mut().read_to_string() {
                    Ok(body) if status == 200 => {
                        parse_answer(&body).ok_or_else(|| format!("GET {path}: 200 but {body:?}"))
                    }
                    Ok(body) => Err(format!("GET {path}: {status} {body:?}")),
                    Err(e) => Err(format!("GET {path}: {status}, body unreadable: {e}")),
                }
            }
        };
        let mut tally = tally.lock().expect("tally");
        tally.requests += 1;
        match answer {
            Ok(served) => *tally.served.entry(served).or_default() += 1,
            Err(failure) => tally.failures.push((started.elapsed(), failure)),
        }
    }
}

/// `host=2 version=v1 pool=php` → (2, "v1").
fn parse_answer(body: &str) -> Option<(usize, String)> {
    let mut host = None;
    let mut version = None;
    for field in body.split_whitespace() {
        if let Some(n) = field.strip_prefix("host=") {
            host = n.parse().ok();
        } else if let Some(v) = field.strip_prefix("version=") {
            version = Some(v.to_owned());
        }
    }
    Some((host?, version?))
}

/// The first failures, for a message.
pub fn first_failures(tally: &Tally) -> String {
    tally
        .failures
        .iter()
        .take(10)
        .map(|(at, what)| format!("at {at:.2?}: {what}"))
        .collect::<Vec<_>>()
        .join("\n")
}
