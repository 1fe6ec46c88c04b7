//! The server and `drover ctl`'s client together, against a fake master: a task on its own
//! thread's current-thread runtime (as in drover) that answers the channel with canned
//! replies. The client blocks on the test thread, as `drover ctl` does in its own process.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tempfile::TempDir;
use tokio::sync::{mpsc, oneshot};

use drover::control::fixture::{blind, www};
use drover::control::*;

use super::client::{Client, CtlError};
use drover::listener::ListenError;
use drover_config::ListenAddr;

/// The requests the fake master received, in order.
type Seen = Arc<Mutex<Vec<ControlRequest>>>;

/// What the fake master answers; `mute` drops the request unanswered.
fn canned(request: &ControlRequest) -> Option<ControlReply> {
    Some(match request {
        ControlRequest::Status { pool: None } => ControlReply::Status(vec![www(), blind()]),
        ControlRequest::Status { pool: Some(p) } if p == "www" => ControlReply::Status(vec![www()]),
        ControlRequest::Status { pool: Some(p) } | ControlRequest::Config { pool: Some(p) }
            if p == "mute" =>
        {
            return None;
        }
        ControlRequest::Config { pool: Some(p) } if p == "confused" => ControlReply::Status(vec![]),
        ControlRequest::Status { pool: Some(p) } | ControlRequest::Config { pool: Some(p) } => {
            ControlReply::unknown_pool(p)
        }
        ControlRequest::Config { pool: None } => {
            ControlReply::Ok("[www]\nlisten = \"/run/www.sock\"\n".into())
        }
        ControlRequest::Set { pool, changes } => {
            match changes.iter().find(|(k, _)| k != "pm.max_children") {
                Some((key, _)) => ControlReply::invalid(format!(
                    "pool {pool}: {key}: not a key that can change live"
                )),
                None => ControlReply::Ok(format!("pool {pool}: {} changed", changes.len())),
            }
        }
        ControlRequest::Reload { pool, changed } => ControlReply::Ok(format!(
            "reloading {}{}",
            pool.as_deref().unwrap_or("every pool"),
            if *changed { " if changed" } else { "" }
        )),
        ControlRequest::Workers { pool, delta } => {
            ControlReply::Ok(format!("pool {pool}: {delta:+} workers"))
        }
        ControlRequest::Live => ControlReply::Ok("ok".into()),
        ControlRequest::Ready => ControlReply::Ready(health::Readiness {
            started: true,
            stopping: None,
            pools: vec![health::PoolReadiness {
                pool: "www".into(),
                state: health::PoolState::NoWorker,
            }],
        }),
    })
}

/// A served socket and the fake master behind it, on their own thread.
struct Harness {
    _dir: TempDir,
    socket: PathBuf,
    seen: Seen,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Harness {
    fn start() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("ctl.sock");
        let bound = ControlSocket::bind(&socket, server::DEFAULT_MODE).unwrap();
        Harness::run(dir, socket, move |tx| bound.serve(tx), fake_master)
    }

    /// Serves with `serve` on a new thread while `master` answers the channel.
    fn run<F>(
        dir: TempDir,
        socket: PathBuf,
        serve: impl FnOnce(ToMaster) -> Served + Send + 'static,
        master: fn(mpsc::Receiver<Envelope>, Seen) -> F,
    ) -> Harness
    where
        F: Future<Output = ()> + 'static,
    {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = oneshot::channel::<()>();
        let recorded = seen.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let (tx, rx) = channel();
                let served = serve(tx);
                tokio::select! {
                    _ = master(rx, recorded) => {}
                    _ = stopped => {}
                }
                drop(served);
            });
        });
        Harness {
            _dir: dir,
            socket,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn client(&self) -> Client {
        Client::new(&self.socket).with_timeout(Duration::from_secs(20))
    }

    fn seen(&self) -> Vec<ControlRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

async fn fake_master(mut rx: mpsc::Receiver<Envelope>, seen: Seen) {
    while let Some((request, reply)) = rx.recv().await {
        seen.lock().unwrap().push(request.clone());
        if let Some(answer) = canned(&request) {
            let _ = reply.send(answer);
        }
    }
}

fn refused(result: Result<String, CtlError>) -> (u16, String) {
    match result {
        Err(CtlError::Refused { status, message }) => (status, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_socket_is_private_and_replaces_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    // A socket file nobody listens on, as a killed drover leaves it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let bound = ControlSocket::bind(&path, server::DEFAULT_MODE).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A live one is not taken over.
    assert!(matches!(
        ControlSocket::bind(&path, server::DEFAULT_MODE),
        Err(ListenError::InUse { .. })
    ));
    drop(bound);
    assert!(!path.exists(), "the socket file goes with the socket");
    std::fs::write(&path, "not a socket").unwrap();
    assert!(matches!(
        ControlSocket::bind(&path, 0o600),
        Err(ListenError::NotASocket { .. })
    ));
    std::fs::remove_file(&path).unwrap();
    let again = ControlSocket::bind(&path, 0o660).unwrap();
    assert_eq!(
        std::fs::metadata(again.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o660
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["ctl.sock"], "no staging folder left behind");
}

#[test]
fn every_route_answers_through_the_client() {
    let h = Harness::start();
    let c = h.client();
    assert_eq!(c.ping().unwrap(), "pong");
    let text = c.status(None, Format::Text, false).unwrap();
    assert!(
        text.starts_with("pool:                 www\n")
            && text.contains("\npool:                 leg\"acy\n"),
        "{text}"
    );
    let one: serde_json::Value =
        serde_json::from_str(&c.status(Some("www"), Format::Json, true).unwrap()).unwrap();
    assert_eq!(
        one["pool"], "www",
        "one pool asked: php-fpm's single object"
    );
    assert_eq!(one["processes"][0]["pid"], 4242);
    let all: serde_json::Value =
        serde_json::from_str(&c.status(None, Format::Json, false).unwrap()).unwrap();
    assert_eq!(all.as_array().map(Vec::len), Some(2));
    assert!(
        c.status(None, Format::OpenMetrics, false)
            .unwrap()
            .ends_with("# EOF\n")
    );
    assert_eq!(
        c.config(None).unwrap(),
        "[www]\nlisten = \"/run/www.sock\"\n"
    );
    let changes = vec![("pm.max_children".to_owned(), "12".to_owned())];
    assert_eq!(c.set("www", &changes).unwrap(), "pool www: 1 changed");
    assert_eq!(c.reload(Some("app"), false).unwrap(), "reloading app");
    assert_eq!(c.reload(None, false).unwrap(), "reloading every pool");
    assert_eq!(
        c.reload(None, true).unwrap(),
        "reloading every pool if changed"
    );
    assert_eq!(
        c.reload(Some("app"), true).unwrap(),
        "reloading app if changed"
    );
    assert_eq!(c.workers("www", -2).unwrap(), "pool www: -2 workers");
    assert_eq!(
        h.seen(),
        [
            ControlRequest::Status { pool: None },
            ControlRequest::Status {
                pool: Some("www".into())
            },
            ControlRequest::Status { pool: None },
            ControlRequest::Status { pool: None },
            ControlRequest::Config { pool: None },
            ControlRequest::Set {
                pool: "www".into(),
                changes
            },
            ControlRequest::Reload {
                pool: Some("app".into()),
                changed: false
            },
            ControlRequest::Reload {
                pool: None,
                changed: false
            },
            ControlRequest::Reload {
                pool: None,
                changed: true
            },
            ControlRequest::Reload {
                pool: Some("app".into()),
                changed: true
            },
            ControlRequest::Workers {
                pool: "www".into(),
                delta: -2
            },
        ]
    );
}

#[test]
fn content_types_and_cache_headers() {
    let h = Harness::start();
    let c = h.client();
    for (target, expected) in [
        ("/status", "text/plain; charset=utf-8"),
        ("/status?json", "application/json"),
        (
            "/status?format=openmetrics",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        ("/ping", "text/plain; charset=utf-8"),
        ("/config", "text/plain; charset=utf-8"),
    ] {
        let answer = c.request("GET", target, String::new()).unwrap();
        assert_eq!(
            (answer.status, answer.content_type.as_deref()),
            (200, Some(expected)),
            "{target}"
        );
    }
    let head = c.request("HEAD", "/status?json", String::new()).unwrap();
    assert_eq!(
        (head.status, head.body.as_str()),
        (200, ""),
        "HEAD: headers only"
    );
    let reload = c.request("POST", "/reload", String::new()).unwrap();
    assert_eq!(reload.content_type.as_deref(), Some("application/json"));
    assert_eq!(reload.body, "{\"message\":\"reloading every pool\"}\n");
}

#[test]
fn errors_come_back_as_their_status_with_the_message() {
    let h = Harness::start();
    let c = h.client();
    assert_eq!(
        refused(c.status(Some("nope"), Format::Text, false)),
        (404, "no pool named \"nope\"".into())
    );
    let bad = vec![
        ("pm.max_children".to_owned(), "12".to_owned()),
        ("pm.mode".to_owned(), "dynamic".to_owned()),
    ];
    assert_eq!(
        refused(c.set("www", &bad)),
        (
            400,
            "pool www: pm.mode: not a key that can change live".into()
        )
    );
    assert_eq!(refused(c.config(Some("mute"))).0, 503, "a dropped reply");
    assert!(refused(c.config(Some("confused"))).1.contains("wrong kind"));
    let answer = c.request("POST", "/status", String::new()).unwrap();
    assert_eq!(
        (answer.status, answer.allow.as_deref()),
        (405, Some("GET, HEAD"))
    );
    assert!(
        answer
            .body
            .starts_with("{\"error\":\"method POST not allowed here"),
        "{}",
        answer.body
    );
    assert_eq!(
        c.request("GET", "/nope", String::new()).unwrap().status,
        404
    );
    assert_eq!(
        c.request("POST", "/pools/www/workers", "3".into())
            .unwrap()
            .status,
        400
    );
    let huge = "k=v\n".repeat(20_000);
    assert_eq!(
        c.request("POST", "/pools/www/set", huge).unwrap().status,
        413
    );
    // Refused before the master was asked.
    assert!(
        h.seen()
            .iter()
            .all(|r| !matches!(r, ControlRequest::Workers { .. }))
    );
}

#[test]
fn nobody_listening_is_unreachable_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let result = Client::new(dir.path().join("none.sock")).ping();
    assert!(
        matches!(result, Err(CtlError::Unreachable { .. })),
        "{result:?}"
    );
}

/// The fake master holds every answer until all requests have arrived: the test can only
/// pass if the server has them all in flight at once.
#[test]
fn concurrent_requests_are_in_flight_together() {
    const CLIENTS: usize = 16;
    async fn gathering_master(mut rx: mpsc::Receiver<Envelope>, seen: Seen) {
        let mut waiting = Vec::new();
        while let Some((request, reply)) = rx.recv().await {
            seen.lock().unwrap().push(request);
            waiting.push(reply);
            if waiting.len() == CLIENTS {
                for reply in waiting.drain(..) {
                    let _ = reply.send(ControlReply::Status(vec![www()]));
                }
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ctl.sock");
    let bound = ControlSocket::bind(&socket, server::DEFAULT_MODE).unwrap();
    let h = Harness::run(dir, socket, move |tx| bound.serve(tx), gathering_master);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = h.client();
            std::thread::spawn(move || c.status(Some("www"), Format::Json, false))
        })
        .collect();
    for client in clients {
        assert!(
            client
                .join()
                .unwrap()
                .unwrap()
                .starts_with("{\"pool\":\"www\"")
        );
    }
    assert_eq!(h.seen().len(), CLIENTS);
}

/// A folder with drover.toml and one command pool whose `status_listen` is `status`.
fn pool_with_status_listen(status: &str) -> (TempDir, drover_config::Pool) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("drover.toml"),
        "[control]\nlisten = \"ctl.sock\"\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("pools.d")).unwrap();
    let pool = format!(
        "listen = \"www.sock\"\nstatus_listen = \"{status}\"\nlisten_mode = \"0640\"\n\n[pm]\nmode = \"static\"\nmax_children = 1\n\n[command]\nargv = [\"/bin/true\"]\n"
    );
    std::fs::write(dir.path().join("pools.d/www.toml"), pool).unwrap();
    let config = drover_config::load(&dir.path().join("drover.toml")).unwrap();
    assert_eq!(
        config.global.control.listen.as_deref(),
        Some(dir.path().join("ctl.sock").as_path())
    );
    let pool = config.pools[0].clone();
    (dir, pool)
}

#[test]
fn status_listen_over_tcp_serves_its_pool_to_plain_http() {
    let (dir, pool) = pool_with_status_listen("127.0.0.1:0");
    let bound = StatusSocket::bind(&pool)
        .unwrap()
        .expect("status_listen is set");
    let ListenAddr::Tcp(addr) = bound.addr().clone() else {
        panic!("tcp")
    };
    assert_ne!(addr.port(), 0, "the port the kernel chose");
    let h = Harness::run(dir, PathBuf::new(), move |tx| bound.serve(tx), fake_master);
    let get = |path: &str| {
        ureq::get(&format!("http://{addr}{path}"))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap()
    };
    let mut json = get("/status?json&full");
    assert_eq!(json.status(), 200);
    let body: serde_json::Value =
        serde_json::from_str(&json.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(
        (body["pool"].as_str(), body["processes"][1]["pid"].as_i64()),
        (Some("www"), Some(4243))
    );
    assert_eq!(get("/ping").body_mut().read_to_string().unwrap(), "pong");
    assert!(
        get("/status?openmetrics")
            .body_mut()
            .read_to_string()
            .unwrap()
            .contains("drover_up{pool=\"www\"")
    );
    assert_eq!(get("/status?pool=app").status(), 404);
    assert_eq!(get("/config").status(), 404);
    assert_eq!(
        h.seen(),
        [
            ControlRequest::Status {
                pool: Some("www".into())
            },
            ControlRequest::Status {
                pool: Some("www".into())
            }
        ]
    );
    // /metrics: Prometheus text unless OpenMetrics is asked for; workers only with ?full.
    let metrics = |path: &str, accept: Option<&str>| {
        let mut request = ureq::get(&format!("http://{addr}{path}"));
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        let mut answer = request.call().unwrap();
        let kind = answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        (kind, answer.body_mut().read_to_string().unwrap())
    };
    let (kind, body) = metrics("/metrics", None);
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    assert!(body.contains("# TYPE drover_accepted_connections_total counter\n"));
    assert!(body.contains("drover_request_duration_seconds_count{pool=\"www\"} 10\n"));
    assert!(!body.contains("pid=") && !body.contains("# EOF"), "{body}");
    // Prometheus's own scraper asks for OpenMetrics first.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (kind, body) = metrics("/metrics?full", Some(prometheus));
    assert_eq!(kind, render::Exposition::OpenMetrics.content_type());
    assert!(
        body.ends_with("# EOF\n") && body.contains("pid=\"4242\""),
        "{body}"
    );
    assert_eq!(get("/metrics?json").status(), 400);
}

#[test]
fn status_listen_on_a_unix_path_takes_the_pools_mode() {
    let (dir, pool) = pool_with_status_listen("status.sock");
    let path = dir.path().join("status.sock");
    let bound = StatusSocket::bind(&pool).unwrap().unwrap();
    assert_eq!(bound.addr(), &ListenAddr::Unix(path.clone()));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let h = Harness::run(dir, path.clone(), move |tx| bound.serve(tx), fake_master);
    let c = h.client();
    assert!(
        c.status(None, Format::Text, true)
            .unwrap()
            .starts_with("pool:                 www\n")
    );
    assert_eq!(refused(c.reload(None, false)).0, 404);
    drop(h);
    assert!(!Path::new(&path).exists(), "removed when the server stops");
}

/// One `GET` over TCP, read to the end: (status, body).
fn tcp_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[test]
fn health_listen_answers_the_probes_from_the_master() {
    let dir = tempfile::tempdir().unwrap();
    let bound = HealthSocket::bind(&ListenAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
    let ListenAddr::Tcp(addr) = *bound.addr() else {
        panic!("a TCP address: {:?}", bound.addr());
    };
    let h = Harness::run(dir, PathBuf::new(), move |tx| bound.serve(tx), fake_master);
    assert_eq!(tcp_get(addr, "/livez"), (200, "ok\n".into()));
    // The fake master's one pool has no worker.
    assert_eq!(
        tcp_get(addr, "/readyz"),
        (
            503,
            "[-]pool www: no worker running\nreadyz check failed\n".into()
        )
    );
    let (status, body) = tcp_get(addr, "/status");
    assert_eq!(status, 404, "{body}");
    assert_eq!(h.seen(), [ControlRequest::Live, ControlRequest::Ready]);
}

/// A master whose loop never takes a request.
async fn stuck(rx: mpsc::Receiver<Envelope>, _seen: Seen) {
    let _held = rx;
    std::future::pending::<()>().await;
}

#[test]
fn livez_fails_when_the_master_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let bound = HealthSocket::bind(&ListenAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
    let ListenAddr::Tcp(addr) = *bound.addr() else {
        panic!("a TCP address");
    };
    let _h = Harness::run(dir, PathBuf::new(), move |tx| bound.serve(tx), stuck);
    let started = std::time::Instant::now();
    let (status, body) = tcp_get(addr, "/livez");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("did not answer within"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Issue 34: 1,100 idle connections to `health_listen` took the master's descriptors, and
/// `/livez` stopped answering. Past [`server::MAX_CONNECTIONS`] a new connection closes the
/// oldest: with many more idle ones held open, the probe is answered and the first idle
/// ones were closed.
#[test]
fn idle_connections_past_the_cap_close_the_oldest_and_livez_answers() {
    let dir = tempfile::tempdir().unwrap();
    let bound = HealthSocket::bind(&ListenAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
    let ListenAddr::Tcp(addr) = *bound.addr() else {
        panic!("a TCP address");
    };
    let _h = Harness::run(dir, PathBuf::new(), move |tx| bound.serve(tx), fake_master);
    let idle: Vec<std::net::TcpStream> = (0..server::MAX_CONNECTIONS * 2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    assert_eq!(tcp_get(addr, "/livez"), (200, "ok\n".into()));
    // The first of them were closed by the server: a read ends at once.
    let mut first = &idle[0];
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        std::io::Read::read(&mut first, &mut byte).unwrap(),
        0,
        "the oldest idle connection is still open"
    );
    // The newest are still served.
    let mut last = idle.last().unwrap();
    std::io::Write::write_all(
        &mut last,
        b"GET /livez HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut last, &mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}
