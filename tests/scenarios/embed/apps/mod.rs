//! Real apps from Debian's packages, served by drover-php and by a real php-fpm 8.2 behind
//! the same nginx configuration, compared response by response: the status line (code and
//! reason), every header in order, and the body where the app makes it the same twice.
//!
//! - [`wordpress`]: WordPress on MariaDB: the front page, a canonical redirect, a 404, the
//!   login form and a login POST that sets four cookies, the dashboard with them, the feed
//!   and its 304, HEAD, the "Error establishing a database connection" 500.
//! - [`mediawiki`]: MediaWiki on MariaDB: a page, its raw text and its 304, load.php and
//!   its 304, a missing page's 404, the login form's session cookie, redirects.
//! - [`dokuwiki`]: DokuWiki as Debian installs it: pages, css.php, fetch.php and feed.php
//!   with their 304s, a range request, a failed login's 403 and cookies.
//! - [`scripts`]: what the apps did not reach: every status code's reason, a status line
//!   against a `Status:` header, `getallheaders()`'s order, `FCGI_ROLE`.
//!
//! What legitimately varies is masked before the comparison: `Date`, the values of cookies
//! (names and attributes are compared), `Expires` (the clock's), `Last-Modified` where it
//! is the time of the answer, MediaWiki's random `X-Request-Id`, and the bodies (and
//! lengths) of pages that carry a request id, the time they took or the time. Each backend answers every request of the list once; php-fpm also
//! answers it once before, so that the apps' caches (DokuWiki's CSS, WordPress's options)
//! are warm when both are measured. Within each pass the conditional requests take their
//! validators (and the dashboard its login cookies) from that pass's earlier answers, as a
//! client would.
//!
//! The tests run as root (php-fpm's children, and drover's pool, run as www-data, as the
//! packages expect) and skip with a message otherwise, or when a package is missing
//! (scripts/test.sh installs them).

mod dokuwiki;
mod mariadb;
mod mediawiki;
mod scripts;
mod wordpress;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use super::Embed;
use crate::common::{Drover, FpmPool, Nginx, PhpFpm, PoolFile, Site, TIMEOUT, proc};

/// Where a request's conditional headers come from: the first answer to `GET path`.
#[derive(Clone, Copy)]
enum Validator {
    None,
    /// `If-None-Match` with its `ETag`.
    ETag(&'static str),
    /// `If-Modified-Since` with its `Last-Modified`.
    Since(&'static str),
}

/// One request of an app's list.
pub struct Request {
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: &'static str,
    validator: Validator,
    /// The `Set-Cookie`s of the first answer to a POST to this path, sent as `Cookie`.
    cookies_of: Option<&'static str>,
    /// Whether the body (and its length) is the same from one answer to the next.
    body_same: bool,
    /// Whether its `Last-Modified` is the time of the answer.
    time_based: bool,
}

impl Request {
    pub fn get(path: &'static str) -> Request {
        Request {
            method: "GET",
            path,
            headers: Vec::new(),
            body: "",
            validator: Validator::None,
            cookies_of: None,
            body_same: true,
            time_based: false,
        }
    }

    pub fn head(path: &'static str) -> Request {
        Request {
            method: "HEAD",
            ..Request::get(path)
        }
    }

    /// A form POST.
    pub fn post(path: &'static str, form: &'static str) -> Request {
        Request {
            method: "POST",
            body: form,
            ..Request::get(path)
        }
        .header("Content-Type", "application/x-www-form-urlencoded")
    }

    pub fn header(mut self, name: &'static str, value: &'static str) -> Request {
        self.headers.push((name, value));
        self
    }

    /// With `If-None-Match`: the `ETag` of the first answer to `GET self.path`.
    pub fn if_none_match(mut self) -> Request {
        self.validator = Validator::ETag(self.path);
        self
    }

    /// With `If-Modified-Since`: the `Last-Modified` of the first answer to `GET self.path`.
    pub fn if_modified_since(mut self) -> Request {
        self.validator = Validator::Since(self.path);
        self
    }

    /// With the cookies that the first answer to a POST to `path` set (a login).
    pub fn cookies_of(mut self, path: &'static str) -> Request {
        self.cookies_of = Some(path);
        self
    }

    /// A page whose body differs from one answer to the next (a request id, a timing, the
    /// time).
    pub fn body_varies(mut self) -> Request {
        self.body_same = false;
        self
    }

    /// An answer whose `Last-Modified` is the time it was made.
    pub fn time_based(mut self) -> Request {
        self.time_based = true;
        self
    }

    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// One answer as it came on the wire.
#[derive(Clone, Debug)]
pub struct Answer {
    /// "301 Moved Permanently": the code and the reason nginx passed on.
    pub status: String,
    pub headers: Vec<(String, String)>,
    /// De-chunked.
    pub body: Vec<u8>,
}

impl Answer {
    pub fn code(&self) -> u16 {
        self.status[..3].parse().unwrap_or(0)
    }

    /// Every value of header `name` (any case).
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn has(&self, name: &str) -> bool {
        !self.values(name).is_empty()
    }
}

/// How an app is served: its folder (nginx's root), the script that takes the URLs that
/// are no file (`try_files`), and its own `fastcgi_param` lines.
pub struct App {
    pub name: &'static str,
    pub root: String,
    pub fallback: &'static str,
    pub params: String,
    /// More `location` blocks, written for a socket (`{socket}` in them).
    pub locations: String,
}

/// The server block: the app's folder, its fallback, its PHP to `socket`. SERVER_PORT is
/// pinned (and the clients send `Host: localhost`), because each backend has its own nginx
/// on its own port and apps put the port in what they send (DokuWiki's cookie names).
fn server_body(app: &App, socket: &Path) -> String {
    let socket = socket.display().to_string();
    format!(
        "        index index.php doku.php;\n\
         \x20       location / {{ root {root}; try_files $uri $uri/ {fallback}; }}\n\
         \x20       location ~ \\.php$ {{\n\
         \x20           root {root};\n\
         \x20           include /etc/nginx/fastcgi.conf;\n\
         \x20           fastcgi_param SERVER_PORT 80;\n\
         \x20           {params}\n\
         \x20           fastcgi_pass unix:{socket};\n\
         \x20       }}\n{locations}",
        root = app.root,
        fallback = app.fallback,
        params = app.params,
        locations = app.locations.replace("{socket}", &socket),
    )
}

/// drover's pool for the apps: one drover-php worker, as www-data when root (as php-fpm's
/// child), since the apps write files that php-fpm's child must be able to rewrite.
struct AppPool(Embed);

impl PoolFile for AppPool {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn toml(&self, site: &Site) -> String {
        self.0.toml(site).replace(
            "user = \"root\"",
            "user = \"www-data\"\ngroup = \"www-data\"",
        )
    }
}

/// Whether the app tests can run here: as root, with `files` installed; else why not.
pub fn missing(files: &[(&str, &str)]) -> Option<String> {
    if !proc::running_as_root() {
        return Some("the real-app tests run as root (the apps' packages run as www-data)".into());
    }
    files
        .iter()
        .find(|(file, _)| !Path::new(file).exists())
        .map(|(file, package)| format!("{file} is missing (apt-get install {package})"))
}

/// php-fpm's answers and drover-php's to the requests (after php-fpm's warm-up pass).
pub struct Compared {
    app: &'static str,
    fpm: Vec<Answer>,
    drover: Vec<Answer>,
    log: String,
}

/// Serves `app` by php-fpm (twice through the list), then by drover-php (once).
pub fn serve_both(site: &Site, app: &App, requests: &[Request]) -> Compared {
    let fpm = {
        let pool = FpmPool::new(site, "fpm", "");
        let _fpm = PhpFpm::start(site, std::slice::from_ref(&pool));
        let nginx = Nginx::start_server(site, &server_body(app, &pool.socket));
        // The warm-up: first views that write caches, and what runs after their answers.
        pass(nginx.port, requests);
        pass(nginx.port, requests)
    };
    let drover = Drover::start_reachable(site, &[&AppPool(Embed::new("www", 1))]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start_server(site, &server_body(app, &site.socket("www")));
    let ours = pass(nginx.port, requests);
    Compared {
        app: app.name,
        fpm,
        drover: ours,
        log: drover.log.text(),
    }
}

/// Every request once, in order, with the conditional headers and cookies a client would
/// take from this pass's earlier answers. Not from another pass's: an app may change a
/// page after answering (MediaWiki's updates after `fastcgi_finish_request`), and a
/// validator from before that rightly gets a 200.
fn pass(port: u16, requests: &[Request]) -> Vec<Answer> {
    let mut answers: Vec<Answer> = Vec::new();
    for request in requests {
        let extra = derived_headers(request, requests, &answers);
        answers.push(send(port, request, &extra));
    }
    answers
}

/// The validator and cookie headers `request` takes from earlier answers.
fn derived_headers(
    request: &Request,
    all: &[Request],
    answers: &[Answer],
) -> Vec<(String, String)> {
    let answer_to = |method: &str, path: &str| {
        all.iter()
            .zip(answers)
            .find(|(r, _)| r.method == method && r.path == path)
            .map(|(_, a)| a)
            .unwrap_or_else(|| panic!("no earlier {method} {path} for {}", request.describe()))
    };
    let mut out = Vec::new();
    let validator = match request.validator {
        Validator::None => None,
        Validator::ETag(path) => Some(("If-None-Match", "ETag", path)),
        Validator::Since(path) => Some(("If-Modified-Since", "Last-Modified", path)),
    };
    if let Some((header, from, path)) = validator {
        let answer = answer_to("GET", path);
        let value = answer
            .values(from)
            .first()
            .unwrap_or_else(|| panic!("GET {path} sent no {from}: {answer:?}"))
            .to_string();
        out.push((header.to_string(), value));
    }
    if let Some(path) = request.cookies_of {
        let cookies: Vec<&str> = answer_to("POST", path)
            .values("set-cookie")
            .iter()
            .filter_map(|c| c.split(';').next())
            .collect();
        out.push(("Cookie".to_string(), cookies.join("; ")));
    }
    out
}

/// One request on its own connection (`Connection: close`), read to the end.
fn send(port: u16, request: &Request, extra: &[(String, String)]) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to nginx");
    stream
        .set_read_timeout(Some(TIMEOUT))
        .expect("read timeout");
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nUser-Agent: drover-tests\r\n",
        request.method, request.path
    );
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if request.method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", request.body.len()));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(request.body.as_bytes()))
        .expect("send the request");
    let mut received = Vec::new();
    stream
        .read_to_end(&mut received)
        .unwrap_or_else(|e| panic!("{}: {e}", request.describe()));
    parse(&received, request.method == "HEAD")
        .unwrap_or_else(|| panic!("{}: no HTTP answer in {received:?}", request.describe()))
}

fn parse(received: &[u8], head_only: bool) -> Option<Answer> {
    let end = received.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&received[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_once(' ')?.1.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let raw = &received[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if head_only {
        Vec::new()
    } else if chunked {
        dechunk(raw)?
    } else {
        raw.to_vec()
    };
    Some(Answer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// What is compared of an answer: the status line and the headers, with what legitimately
/// varies masked, and the body when the request's is the same each time.
fn comparable(request: &Request, answer: &Answer) -> (String, Vec<(String, String)>, Vec<u8>) {
    let headers = answer
        .headers
        .iter()
        .filter(|(name, _)| name != "date")
        .map(|(name, value)| {
            let value = match name.as_str() {
                "set-cookie" => mask_cookie(value),
                "expires" | "x-request-id" => "…".to_string(),
                "content-length" if !request.body_same => "…".to_string(),
                "last-modified" if request.time_based => "…".to_string(),
                _ => value.clone(),
            };
            (name.clone(), value)
        })
        .collect();
    let body = if request.body_same {
        answer.body.clone()
    } else {
        Vec::new()
    };
    (answer.status.clone(), headers, body)
}

/// `name=…; path=/; expires=…; HttpOnly`: the value and the expiry masked.
fn mask_cookie(value: &str) -> String {
    value
        .split(';')
        .enumerate()
        .map(|(i, part)| {
            let part = part.trim();
            let (key, _) = part.split_once('=').unwrap_or((part, ""));
            if i == 0 || key.eq_ignore_ascii_case("expires") {
                format!("{key}=…")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Compared {
    /// Panics with every request whose answers differ between php-fpm and drover-php.
    pub fn assert_same(&self, requests: &[Request]) {
        let mut report = String::new();
        for (i, request) in requests.iter().enumerate() {
            let fpm = comparable(request, &self.fpm[i]);
            let ours = comparable(request, &self.drover[i]);
            if fpm != ours {
                report.push_str(&format!(
                    "{}\n  php-fpm: {} {:?}\n  drover:  {} {:?}\n",
                    request.describe(),
                    fpm.0,
                    fpm.1,
                    ours.0,
                    ours.1
                ));
                if fpm.2 != ours.2 {
                    report.push_str(&format!(
                        "  bodies differ: {} and {} bytes\n",
                        fpm.2.len(),
                        ours.2.len()
                    ));
                }
            }
        }
        assert!(
            report.is_empty(),
            "{}: drover-php's answers differ from php-fpm's:\n{report}\ndrover's log:\n{}",
            self.app,
            self.log
        );
    }

    /// php-fpm's answer to the `i`th request, for the checks that the list tests what it
    /// says (a 304 is a 304).
    pub fn fpm(&self, i: usize) -> &Answer {
        &self.fpm[i]
    }
}
