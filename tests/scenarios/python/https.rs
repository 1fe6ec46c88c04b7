//! TLS on an HTTP pool's listener (`certfile`, issue 33 item 4), no proxy in front:
//! real certificates made with `openssl` for each test, real clients (Python's `ssl`, and
//! rustls for the hostile ones). What a client sees (the pool's certificate, ALPN
//! http/1.1, a kept connection, `wsgi.url_scheme` or the scope's scheme), client
//! certificates, what `drover -t` and a reload say of bad files, a renewed certificate
//! served after a reload, and the hostile clients: one that stops mid-handshake, one that
//! speaks plain HTTP to the TLS port, a ClientHello far larger than any real one, a head
//! or a body that trickles in, and the plain listener's other hostile tests
//! (http_hostile.rs, http_pool.rs) over TLS: the smuggling shapes and refused heads,
//! clients that never read their responses. And `drover serve --certfile --keyfile`,
//! gunicorn's flags.
//!
//! The cases a client sees run against a WSGI pool (the blocking loop's TLS, in
//! `drover_worker::socket`) and an ASGI pool (the hub's, `asgi/hub/http.rs`) alike:
//! [`App`], and the `wsgi` and `asgi` modules at the end; an ASGI pool's WebSocket and
//! streamed response over TLS are its own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http_pool::{HttpPool, Server};
use crate::common::{
    Drover, Site, Spawned, TIMEOUT, bin, check_config, free_port, proc, python, python_runtime,
    run_bounded,
};

/// A CA, server certificates `1` and `2` (CN `drover-test-1`, `drover-test-2`, for
/// 127.0.0.1 and localhost), a client certificate of the CA (`client`) and one of no CA
/// (`stranger`), in a folder of their own.
pub(super) struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    pub(super) fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let self_signed = |name: &str| {
            let (key, pem, subj) = (
                format!("{name}.key"),
                format!("{name}.pem"),
                format!("/CN=drover-test-{name}"),
            );
            let mut args = vec!["req", "-x509"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subj]);
            run(&args);
        };
        self_signed("ca");
        self_signed("stranger");
        std::fs::write(
            dir.path().join("ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        for name in ["1", "2", "client"] {
            let (key, csr, pem, subj) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("/CN=drover-test-{name}"),
            );
            let mut args = vec!["req"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
            run(&args);
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                "ext",
            ]);
        }
        std::fs::write(dir.path().join("client.py"), CLIENT).unwrap();
        Certs { dir }
    }

    pub(super) fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// The pool keys serving certificate `name` (`"1"`).
    pub(super) fn keys(&self, name: &str) -> String {
        format!(
            "certfile = \"{}\"\nkeyfile = \"{}\"\n",
            self.path(&format!("{name}.pem")).display(),
            self.path(&format!("{name}.key")).display()
        )
    }

    /// What Python's `ssl` client sees of the pool on `port` (see [`CLIENT`]): `key=value`
    /// lines. `args`: `--alpn h2`, `--cert client` and the like.
    fn client(&self, port: u16, args: &[&str]) -> Seen {
        let out = Command::new("python3")
            .arg(self.path("client.py"))
            .arg(port.to_string())
            .arg(self.path("ca.pem"))
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("python3");
        Seen(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A rustls client for the pool on `port`, trusting the CA.
    pub(super) fn connect(
        &self,
        port: u16,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(self.path("ca.pem")).unwrap();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    }
}

use rustls_pki_types::pem::PemObject;

/// The client: connects with Python's `ssl` (the CA trusted, ALPN as asked, a client
/// certificate if asked), sends two requests for `/remote` on the one connection, and
/// prints what it saw, or the error.
const CLIENT: &str = r#"
import http.client, ssl, sys
port, ca, rest = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
opts = dict(zip(rest[::2], rest[1::2]))
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(opts.get("--alpn", "http/1.1").split(","))
if "--cert" in opts:
    ctx.load_cert_chain(opts["--cert"] + ".pem", opts["--cert"] + ".key")
try:
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    conn.connect()
    sock = conn.sock
    print("subject=" + dict(x[0] for x in sock.getpeercert()["subject"])["commonName"])
    print("alpn=%s" % sock.selected_alpn_protocol())
    print("version=" + sock.version())
    for i in range(2):
        conn.request("GET", "/remote")
        r = conn.getresponse()
        for line in r.read().decode().splitlines():
            print("%d.%s" % (i, line))
    print("kept=%s" % (conn.sock is sock))
except Exception as e:
    print("error=%s: %s" % (type(e).__name__, e))
"#;

/// The client's `key=value` lines.
struct Seen(String);

impl Seen {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    }

    fn ok(&self) -> bool {
        self.get("error").is_none() && self.get("1.url_scheme").is_some()
    }
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The interface of the pool a case runs against; both apps answer `/pid`, `/remote`
/// (the client's address, the scheme, the pid) and `POST /upload-sha256`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum App {
    Wsgi,
    Asgi,
}

impl App {
    fn start(self, workers: u32, extra: &str) -> Server {
        match self {
            App::Wsgi => Server::start("wsgi_app:application", workers, extra),
            App::Asgi => Server::start_asgi("asgi_app:app", workers, extra),
        }
    }
}

fn start(certs: &Certs, app: App, workers: u32, extra: &str) -> Server {
    app.start(workers, &format!("{}{extra}", certs.keys("1")))
}

fn an_https_client_gets_the_pools_certificate_alpn_http_1_1_and_a_kept_connection(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "");
    let seen = certs.client(server.port, &[]);
    assert!(seen.ok(), "{seen:?}\n{}", server.drover.log.text());
    assert_eq!(seen.get("subject"), Some("drover-test-1"), "{seen:?}");
    assert_eq!(seen.get("alpn"), Some("http/1.1"), "{seen:?}");
    assert_eq!(seen.get("version"), Some("TLSv1.3"), "{seen:?}");
    // Both requests on the one TLS connection, to the one worker; the app is told https.
    assert_eq!(seen.get("kept"), Some("True"), "{seen:?}");
    assert_eq!(seen.get("0.url_scheme"), Some("https"), "{seen:?}");
    assert_eq!(seen.get("1.url_scheme"), Some("https"), "{seen:?}");
    assert_eq!(seen.get("0.pid"), seen.get("1.pid"), "{seen:?}");
    // A client offering h2 alone gets rustls's no_application_protocol alert.
    let h2 = certs.client(server.port, &["--alpn", "h2"]);
    assert!(
        h2.get("error")
            .is_some_and(|e| e.to_ascii_lowercase().contains("no application protocol")),
        "{h2:?}"
    );
    // TLS 1.2 is taken by default (ssl_version = "TLSv1.2").
    let out = Command::new("curl")
        .args(["-sS", "--tlsv1.2", "--tls-max", "1.2", "--cacert"])
        .arg(certs.path("ca.pem"))
        .arg(format!("https://localhost:{}/remote", server.port))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("url_scheme=https"), "{out:?}");
}

fn client_certificates_required_or_optional_are_checked_against_ca_certs(app: App) {
    let certs = Certs::new();
    let ca = certs.path("ca.pem");
    let client = certs.path("client").display().to_string();
    let stranger = certs.path("stranger").display().to_string();
    let required = start(
        &certs,
        app,
        1,
        &format!(
            "ca_certs = \"{}\"\ncert_reqs = \"required\"\n",
            ca.display()
        ),
    );
    let with = certs.client(required.port, &["--cert", &client]);
    assert!(with.ok(), "{with:?}");
    let without = certs.client(required.port, &[]);
    assert!(
        without
            .get("error")
            .is_some_and(|e| e.contains("CERTIFICATE_REQUIRED")),
        "{without:?}"
    );
    let other = certs.client(required.port, &["--cert", &stranger]);
    assert!(other.get("error").is_some(), "{other:?}");
    drop(required);
    let optional = start(
        &certs,
        app,
        1,
        &format!(
            "ca_certs = \"{}\"\ncert_reqs = \"optional\"\n",
            ca.display()
        ),
    );
    assert!(certs.client(optional.port, &[]).ok());
    assert!(certs.client(optional.port, &["--cert", &client]).ok());
    let other = certs.client(optional.port, &["--cert", &stranger]);
    assert!(other.get("error").is_some(), "{other:?}");
}

/// The pool's file with `keys` as its TLS keys, checked by `drover -t`: its stderr, and
/// `file:line:1: key: ` where the file writes `key`.
fn refused(keys: &str, key: &str) -> (String, String) {
    let site = Site::new();
    python::install_apps(&site);
    let pool = HttpPool::new("web", "wsgi_app:application", 1, free_port(), keys);
    Drover::write_files(&site, &[&pool]);
    let out = check_config(&site);
    assert!(!out.status.success(), "{out:?}");
    let file = site.path().join("pools.d/web.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("{key} is not in {text}"))
        + 1;
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        format!("{}:{line}:1: {key}: ", file.display()),
    )
}

#[test]
fn bad_certificates_and_settings_are_refused_at_load_with_file_line_and_reason() {
    let certs = Certs::new();
    let p = |f: &str| certs.path(f).display().to_string();
    let cases = [
        // Another certificate's key.
        (
            format!(
                "certfile = \"{}\"\nkeyfile = \"{}\"\n",
                p("1.pem"),
                p("2.key")
            ),
            "keyfile",
            format!(
                "{}: the key does not match certfile's certificate",
                p("2.key")
            ),
        ),
        // A file that is not there.
        (
            format!(
                "certfile = \"{}\"\nkeyfile = \"{}\"\n",
                p("1.pem"),
                p("none.key")
            ),
            "keyfile",
            format!("cannot read {}: No such file or directory", p("none.key")),
        ),
        // Not PEM.
        (
            format!(
                "certfile = \"{}\"\nkeyfile = \"{}\"\n",
                p("ext"),
                p("1.key")
            ),
            "certfile",
            format!("{}: holds no PEM certificate", p("ext")),
        ),
        (
            format!("{}ssl_version = \"TLSv1.1\"\n", certs.keys("1")),
            "ssl_version",
            "TLSv1.1 is not spoken: rustls takes TLS 1.2 and 1.3 only".to_string(),
        ),
        (
            format!(
                "{}ciphers = [\"ECDHE-RSA-AES128-GCM-SHA256\"]\n",
                certs.keys("1")
            ),
            "ciphers",
            "\"ECDHE-RSA-AES128-GCM-SHA256\" is not a cipher suite rustls offers".to_string(),
        ),
        (
            format!("{}cert_reqs = \"required\"\n", certs.keys("1")),
            "cert_reqs",
            "\"required\" needs ca_certs".to_string(),
        ),
    ];
    for (keys, key, reason) in cases {
        let (stderr, at) = refused(&keys, key);
        let expected = format!("{at}{reason}");
        assert!(
            stderr.contains(&expected),
            "expected {expected:?} in:\n{stderr}"
        );
    }
}

fn a_reload_serves_a_renewed_certificate_and_keeps_the_old_one_when_the_new_is_bad(app: App) {
    let certs = Certs::new();
    let live = |name: &str| {
        for ext in ["pem", "key"] {
            std::fs::copy(
                certs.path(&format!("{name}.{ext}")),
                certs.path(&format!("live.{ext}")),
            )
            .unwrap();
        }
    };
    live("1");
    let server = app.start(1, &certs.keys("live"));
    assert_eq!(
        certs.client(server.port, &[]).get("subject"),
        Some("drover-test-1")
    );
    let reload = |round: usize, line: &str| {
        server.drover.signal(nix::sys::signal::Signal::SIGHUP);
        server
            .drover
            .log
            .wait_for_lines(0, line, |l| l.contains(line), round, TIMEOUT);
    };
    // Renewed in place, as certbot does: the same paths, a new pair.
    live("2");
    reload(1, "reload done");
    let seen = certs.client(server.port, &[]);
    assert_eq!(seen.get("subject"), Some("drover-test-2"), "{seen:?}");
    // A key that is not the certificate's: refused, with the file and line; the pool
    // serves on with the certificate it has.
    std::fs::copy(certs.path("1.key"), certs.path("live.key")).unwrap();
    reload(1, "reload refused, the running configuration stays");
    let line = server.drover.log.wait_for_line("reload refused", TIMEOUT);
    assert!(
        line.contains("keyfile: ") && line.contains("does not match"),
        "{line}"
    );
    let seen = certs.client(server.port, &[]);
    assert_eq!(seen.get("subject"), Some("drover-test-2"), "{seen:?}");
    assert!(seen.ok(), "{seen:?}");
}

/// The pool's one worker answers a TLS client (rustls, in this process: no interpreter's
/// start-up in the figure) within 2 s while a stalled client holds its connection open:
/// a stalled client costs a descriptor, not the worker (which it would hold for the whole
/// `request_read_timeout`).
fn answered_at_once(certs: &Certs, server: &Server) {
    let asked = Instant::now();
    let answer = until_close_over_tls(
        certs,
        server,
        b"GET /pid HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(
        answer.starts_with("HTTP/1.1 200 "),
        "{answer:?}\n{}",
        server.drover.log.text()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
}

fn a_client_that_stops_mid_handshake_holds_no_worker_and_is_dropped_in_time(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "request_read_timeout = \"2s\"\n");
    let mut stalled = server.connect();
    // A record header announcing a 512-byte ClientHello, and only its first bytes.
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])
        .unwrap();
    answered_at_once(&certs, &server);
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    server.drover.log.wait_for_line(
        "dropped a connection from 127.0.0.1: its TLS handshake did not complete within 2s",
        TIMEOUT,
    );
    answered_at_once(&certs, &server);
}

fn a_plain_http_client_on_the_tls_port_gets_an_alert_and_the_close_at_once(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "");
    let mut plain = server.connect();
    let asked = Instant::now();
    plain
        .write_all(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    plain.read_to_end(&mut answer).unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    // A TLS alert record (content type 21), no HTTP.
    assert_eq!(answer.first(), Some(&0x15), "{answer:?}");
    answered_at_once(&certs, &server);
}

/// The resident memory of the process `pid`, in KiB.
fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

fn a_huge_client_hello_is_refused_with_bounded_memory(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "");
    let seen = certs.client(server.port, &[]);
    let worker = seen.get("0.pid").expect("the worker's pid").to_owned();
    let before = rss_kib(&worker);
    let mut huge = server.connect();
    // A ClientHello that says it is 16 MiB long, sent in full-size records.
    let mut sent = 0usize;
    let mut first = vec![0x01, 0xff, 0xff, 0xff];
    first.resize(16 * 1024, 0x41);
    let mut refused = false;
    for i in 0..1024 {
        let body = if i == 0 {
            first.clone()
        } else {
            vec![0x41; 16 * 1024]
        };
        let mut record = vec![0x16, 0x03, 0x01, 0x40, 0x00];
        record.extend_from_slice(&body);
        if huge.write_all(&record).is_err() {
            refused = true;
            break;
        }
        sent += record.len();
    }
    let mut answer = Vec::new();
    let _ = huge.read_to_end(&mut answer);
    // The worker closed the connection long before 16 MiB came (rustls takes 64 KiB of
    // handshake at most), with an alert.
    assert!(
        refused || answer.first() == Some(&0x15),
        "sent {sent}, got {answer:?}"
    );
    assert!(sent < 8 << 20, "sent {sent} bytes before the close");
    let grown = rss_kib(&worker).saturating_sub(before);
    assert!(grown < 4096, "the worker grew by {grown} KiB");
    answered_at_once(&certs, &server);
}

/// The hostile tests of the plain listener whose client trickles (http_pool.rs,
/// http_hostile.rs), over TLS: the head, then a body, arriving in pieces hold no worker.
fn a_head_trickling_in_over_tls_holds_no_worker_and_is_dropped_in_time(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "request_read_timeout = \"2s\"\n");
    let mut slow = certs.connect(server.port);
    slow.write_all(b"GET /pid HTTP/1.1\r\nHo").unwrap();
    slow.flush().unwrap();
    answered_at_once(&certs, &server);
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    // "its request head" (WSGI), "the request head" (ASGI).
    server
        .drover
        .log
        .wait_for_line("request head did not arrive within 2s", TIMEOUT);
}

fn a_body_trickling_in_over_tls_holds_no_worker_and_a_whole_one_is_served(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "request_read_timeout = \"3s\"\n");
    let mut slow = certs.connect(server.port);
    slow.write_all(
        b"POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789",
    )
    .unwrap();
    answered_at_once(&certs, &server);
    // A body larger than one TLS record and than the loop's read-ahead, in one go.
    let body = vec![b'x'; 300 * 1024];
    let mut whole = certs.connect(server.port);
    whole
        .write_all(
            format!(
                "POST /upload-sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
    whole.write_all(&body).unwrap();
    let mut answer = Vec::new();
    let _ = whole.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(&format!("{} ", body.len())), "{answer}");
    server
        .drover
        .log
        .wait_for_line("request body did not arrive within 3s", TIMEOUT);
}

/// Sends `request` on a new TLS connection; the answer, read to the connection's end (a
/// refusal or `Connection: close` ends it; a read error after bytes came is the end too).
fn until_close_over_tls(certs: &Certs, server: &Server, request: &[u8]) -> String {
    let mut tls = certs.connect(server.port);
    tls.write_all(request).unwrap();
    tls.flush().unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// http_hostile.rs's smuggling shapes and http_pool.rs's refused heads, over TLS: the same
/// status, the same log line, and the worker serves on. (An ASGI pool reads a chunked
/// body's smuggling shapes as the app reads it: asgi_http.rs; here its refused heads.)
fn smuggling_shapes_and_hostile_heads_over_tls_get_their_status_and_a_log_line(app: App) {
    let certs = Certs::new();
    let server = start(&certs, app, 1, "max_request_body = \"1MiB\"\n");
    let smuggling = match app {
        App::Wsgi => super::http_hostile::smuggling_cases()
            .map(|(request, line)| ("400", request, line))
            .to_vec(),
        App::Asgi => Vec::new(),
    };
    let heads = super::http_pool::hostile_heads();
    for (status, request, line) in smuggling.iter().chain(heads.iter()) {
        let answer = until_close_over_tls(&certs, &server, request.as_bytes());
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{request:?}: expected {status}, got {answer:?}\n{}",
            server.drover.log.text()
        );
        // The WSGI loop's line ends with the status; the hub's has the reason alone.
        let reason = line.split(" (").next().unwrap_or(line);
        server.drover.log.wait_for_line(reason, TIMEOUT);
    }
    answered_at_once(&certs, &server);
}

/// http_hostile.rs's clients that never read their responses, over TLS: as many as
/// workers ask for 64 MiB and read only the first bytes; `send_timeout` frees the workers
/// (a third client is answered within it and a margin), with the plain listener's line.
#[test]
fn tls_clients_that_never_read_their_responses_free_the_workers_after_send_timeout() {
    let certs = Certs::new();
    let server = start(&certs, App::Wsgi, 2, "send_timeout = \"2s\"\n");
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut tls = certs.connect(server.port);
        tls.write_all(b"GET /big?size=67108864 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        // The head has come: a worker is writing this response.
        let mut first = [0u8; 16];
        tls.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200"), "{first:?}");
        stalled.push(tls);
    }
    let asked = Instant::now();
    let seen = certs.client(server.port, &[]);
    let waited = asked.elapsed();
    assert!(
        seen.ok(),
        "{seen:?} after {waited:?}; the log:\n{}",
        server.drover.log.text()
    );
    assert!(
        waited < Duration::from_secs(2 + 4),
        "answered after {waited:?}"
    );
    server.drover.log.wait_for_line(
        "dropped a connection: the client read nothing of the response for 2s (send_timeout)",
        TIMEOUT,
    );
    drop(stalled);
}

/// `drover serve` with gunicorn's flags, the files named relative to the current
/// directory: an HTTPS client (Python's `ssl`, and curl) gets the certificate; a key that
/// is not the certificate's is refused naming the flag.
fn drover_serve_takes_gunicorns_certfile_and_keyfile_flags(app: App) {
    python_runtime();
    let certs = Certs::new();
    let site = Site::new();
    python::install_apps(&site);
    let apps = site.path().join("apps");
    let serve = |args: &[&str]| {
        let mut command = Command::new(bin());
        command
            .arg("serve")
            .args(match app {
                App::Wsgi => ["--python", "wsgi_app:application"],
                App::Asgi => ["--asgi", "asgi_app:app"],
            })
            .args(args)
            .arg("--set")
            .arg(format!("python.python_path=[\"{}\"]", apps.display()))
            .current_dir(certs.path(""))
            .env("XDG_RUNTIME_DIR", site.path())
            .env_remove("VIRTUAL_ENV");
        command
    };
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let out = run_bounded(&mut serve(&[
        "--http",
        &addr,
        "--certfile",
        "1.pem",
        "--keyfile",
        "2.key",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("drover serve: --keyfile: keyfile: ")
            && stderr.contains(&certs.path("2.key").display().to_string()),
        "{stderr}"
    );
    let mut serving = Spawned::new(&mut serve(&[
        "--http",
        &addr,
        "-w",
        "2",
        "--certfile",
        "1.pem",
        "--keyfile",
        "1.key",
    ]));
    serving.log.wait_for_line("ready:", TIMEOUT);
    let seen = certs.client(port, &[]);
    assert!(seen.ok(), "{seen:?}\n{}", serving.log.text());
    assert_eq!(seen.get("subject"), Some("drover-test-1"), "{seen:?}");
    assert_eq!(seen.get("0.url_scheme"), Some("https"), "{seen:?}");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(certs.path("ca.pem"))
        .arg(format!("https://localhost:{port}/remote"))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("url_scheme=https"), "{out:?}");
    proc::signal(serving.child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let child = &mut serving.child;
    let status = crate::common::wait_until(TIMEOUT, "drover serve to exit", || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}\n{}", serving.log.text());
}

/// An ASGI pool's WebSocket over TLS (the hub keeps the session and bridges plaintext to
/// asyncio's `WsConn`): the `websockets` client over `wss://`, a thousand messages in
/// order, a message larger than a TLS record, the scope's scheme `wss`, the app's close
/// code; HTTP served beside on the same port.
#[test]
fn an_asgi_websocket_over_tls_echoes_in_order_and_passes_close_codes() {
    let certs = Certs::new();
    let server = Server::start_asgi("asgi_ws_app:app", 1, &certs.keys("1"));
    let script = r#"
import ssl, sys
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed
ctx = ssl.create_default_context(cafile=sys.argv[2])
with connect(f"wss://localhost:{sys.argv[1]}/echo", ssl=ctx) as ws:
    for i in range(1000):
        ws.send(f"m{i}")
    got = [ws.recv() for _ in range(1000)]
    print("in order", got == [f"m{i}" for i in range(1000)])
    ws.send(b"\x00\x01" * 40000)
    print("binary", ws.recv() == b"\x00\x01" * 40000)
    ws.send("scheme")
    print("scheme", ws.recv())
    ws.send("close-4001")
    try:
        ws.recv()
    except ConnectionClosed as closed:
        print("closed", closed.rcvd.code, closed.rcvd.reason)
"#;
    let run = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(server.port.to_string())
        .arg(certs.path("ca.pem"))
        .output()
        .expect("run python3");
    let out = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "in order True",
            "binary True",
            "scheme wss",
            "closed 4001 asked"
        ],
        "{}\nlog:\n{}",
        String::from_utf8_lossy(&run.stderr),
        server.drover.log.text()
    );
    let answer = until_close_over_tls(
        &certs,
        &server,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer:?}");
}

/// An ASGI pool's streamed response over TLS: chunked, its first chunk delivered before
/// the app has the last one (each `send()` goes out sealed at once).
#[test]
fn an_asgi_streamed_response_over_tls_sends_its_first_chunk_first() {
    let certs = Certs::new();
    let server = start(&certs, App::Asgi, 1, "");
    let marker = server.site.path().join("stream.go");
    crate::common::http1::streams_its_first_chunk_first(&mut certs.connect(server.port), &marker);
}

/// Each case as a test for the interface its module names.
macro_rules! cases {
    ($app:ident: $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                super::$case(super::App::$app);
            }
        )+
    };
}

mod wsgi {
    cases!(Wsgi:
        an_https_client_gets_the_pools_certificate_alpn_http_1_1_and_a_kept_connection,
        client_certificates_required_or_optional_are_checked_against_ca_certs,
        a_reload_serves_a_renewed_certificate_and_keeps_the_old_one_when_the_new_is_bad,
        a_client_that_stops_mid_handshake_holds_no_worker_and_is_dropped_in_time,
        a_plain_http_client_on_the_tls_port_gets_an_alert_and_the_close_at_once,
        a_huge_client_hello_is_refused_with_bounded_memory,
        a_head_trickling_in_over_tls_holds_no_worker_and_is_dropped_in_time,
        a_body_trickling_in_over_tls_holds_no_worker_and_a_whole_one_is_served,
        smuggling_shapes_and_hostile_heads_over_tls_get_their_status_and_a_log_line,
        drover_serve_takes_gunicorns_certfile_and_keyfile_flags,
    );
}

mod asgi {
    cases!(Asgi:
        an_https_client_gets_the_pools_certificate_alpn_http_1_1_and_a_kept_connection,
        client_certificates_required_or_optional_are_checked_against_ca_certs,
        a_reload_serves_a_renewed_certificate_and_keeps_the_old_one_when_the_new_is_bad,
        a_client_that_stops_mid_handshake_holds_no_worker_and_is_dropped_in_time,
        a_plain_http_client_on_the_tls_port_gets_an_alert_and_the_close_at_once,
        a_huge_client_hello_is_refused_with_bounded_memory,
        a_head_trickling_in_over_tls_holds_no_worker_and_is_dropped_in_time,
        a_body_trickling_in_over_tls_holds_no_worker_and_a_whole_one_is_served,
        smuggling_shapes_and_hostile_heads_over_tls_get_their_status_and_a_log_line,
        drover_serve_takes_gunicorns_certfile_and_keyfile_flags,
    );
}
