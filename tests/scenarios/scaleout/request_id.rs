//! One slow request followed across drover's logs by its id, issue 22's item 6: nginx
//! passes its `$request_id` (`fastcgi_param REQUEST_ID $request_id;`) and shows it to the
//! client (`add_header X-Request-Id`); the app sees it as `HTTP_X_REQUEST_ID` (PHP's
//! `$_SERVER`, WSGI's environ), and the access log (`%I`), the slowlog entry and the line
//! the app writes to stderr while it runs (a `request_id` field in drover's JSON log) all
//! carry it. A client's own `X-Request-Id`
//! comes first; one that may not stand in a log is replaced by nginx's.

use std::fs;
use std::path::Path;

use crate::common::{
    Drover, Location, Nginx, PoolFile, PythonPool, Site, TIMEOUT, Tables, http, php_table,
    pool_toml,
};

/// The PHP script: a line to stderr, a sleep past `request_slowlog_timeout` when asked,
/// then the id it sees.
const SCRIPT: &str = r#"<?php
if (isset($_GET['slow'])) {
    file_put_contents('php://stderr', "marker-rid-php working\n");
    usleep(1600000);
}
echo $_SERVER['HTTP_X_REQUEST_ID'] ?? 'none';
"#;

/// The WSGI app: the same, in Python.
const APP: &str = r#"import sys, time

def application(environ, start_response):
    if 'slow' in environ.get('QUERY_STRING', ''):
        print('marker-rid-py working', file=sys.stderr, flush=True)
        time.sleep(1.6)
    body = environ.get('HTTP_X_REQUEST_ID', 'none').encode()
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [body]
"#;

/// The keys that log a pool's requests and slow ones, into `<site>/NAME.access` and
/// `<site>/NAME.slow`.
fn logging(site: &Site, name: &str) -> String {
    let path = |ext: &str| site.path().join(format!("{name}.{ext}"));
    format!(
        "access_log = \"{}\"\naccess_format = \"%I %m %r%Q%q %s\"\n\
         slowlog = \"{}\"\nrequest_slowlog_timeout = \"1s\"\n",
        path("access").display(),
        path("slow").display()
    )
}

struct Php;

impl PoolFile for Php {
    fn name(&self) -> &str {
        "www"
    }

    fn toml(&self, site: &Site) -> String {
        pool_toml(
            &site.socket("www"),
            &format!(
                "{}\n[pm]\nmode = \"static\"\nmax_children = 2\n\n{}",
                logging(site, "www"),
                php_table("embed")
            ),
        )
    }
}

/// nginx's id for the request, as it showed it to the client.
fn nginx_id(reply: &http::Reply) -> String {
    let id = reply.header("x-request-id").to_owned();
    assert_eq!(id.len(), 32, "nginx's $request_id: {reply:?}");
    id
}

/// Follows one slow request and two fast ones through `url` (`path` and its query), with
/// the pool's logs in `site` as `name`.
fn follow(site: &Site, drover: &Drover, name: &str, marker: &str, url: &dyn Fn(&str) -> String) {
    let slow = http::get(&url("?slow=1"));
    assert_eq!(slow.status, 200, "{slow:?}");
    let id = nginx_id(&slow);
    assert_eq!(
        slow.body, id,
        "the app sees nginx's id as HTTP_X_REQUEST_ID"
    );

    // The client's own id comes first; one that may not stand in a log does not.
    let given = http::get_with(&url(""), &[("X-Request-Id", "client-7f3a.1")]);
    assert_eq!(given.body, "client-7f3a.1", "{given:?}");
    let hostile = http::get_with(&url(""), &[("X-Request-Id", "x\" forged=1")]);
    assert_eq!(hostile.body, nginx_id(&hostile), "{hostile:?}");

    let access = wait_lines(&site.path().join(format!("{name}.access")), 3);
    assert!(
        access
            .iter()
            .any(|l| l.starts_with(&format!("{id} GET ")) && l.ends_with(" 200")),
        "the access log's %I: {access:?}"
    );
    assert!(
        access.iter().any(|l| l.starts_with("client-7f3a.1 GET ")),
        "{access:?}"
    );
    let slowlog = wait_text(&site.path().join(format!("{name}.slow")), "request_id = ");
    assert!(
        slowlog.contains(&format!("request_id = {id}\n")),
        "the slowlog entry names the request: {slowlog}"
    );
    let line = drover.log.wait_for_line(marker, TIMEOUT);
    assert_eq!(
        output_id(&line).as_deref(),
        Some(id.as_str()),
        "the app's line while it ran: {line:?}"
    );
    let warn = drover.log.wait_for_line("slow request", TIMEOUT);
    assert!(warn.contains(&format!("request_id={id}")), "{warn:?}");
    println!(
        "followed {id}:\n  {}\n  {line}\n  {warn}\n{slowlog}",
        access.join("\n  ")
    );
}

/// The `request_id` field of a JSON line of drover's log.
fn output_id(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    value["request_id"].as_str().map(str::to_owned)
}

/// drover with a JSON error log (`log_format = "json"`), serving `pools`.
fn start_json(site: &Site, pools: &[&dyn PoolFile]) -> Drover {
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\nlog_format = \"json\"\n",
    );
    for pool in pools {
        site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(site));
    }
    let drover = Drover::spawn(site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    drover
}

/// The file's lines once it has `n`, at most [`TIMEOUT`].
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    crate::common::wait_until(TIMEOUT, &format!("{n} lines in {}", path.display()), || {
        let text = fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        (lines.len() >= n).then_some(lines)
    })
}

/// The file's text once it contains `needle`, at most [`TIMEOUT`].
fn wait_text(path: &Path, needle: &str) -> String {
    crate::common::wait_until(
        TIMEOUT,
        &format!("{needle:?} in {}", path.display()),
        || {
            let text = fs::read_to_string(path).unwrap_or_default();
            text.contains(needle).then_some(text)
        },
    )
}

/// nginx's directives: its id to the pool, and to the client.
const PASS_ID: &str = "fastcgi_param REQUEST_ID $request_id;\n            \
                       add_header X-Request-Id $request_id always;";

#[test]
fn a_slow_php_request_has_one_id_in_the_app_the_access_log_the_slowlog_and_its_output() {
    let site = Site::new();
    site.script("rid.php", SCRIPT);
    let drover = start_json(&site, &[&Php]);
    let nginx = Nginx::start_locations(&site, &[Location::php(&site.socket("www")).with(PASS_ID)]);
    follow(&site, &drover, "www", "marker-rid-php", &|q| {
        nginx.url(&format!("/rid.php{q}"))
    });
}

#[test]
fn a_slow_wsgi_request_has_one_id_in_the_environ_the_access_log_the_slowlog_and_its_output() {
    let site = Site::new();
    site.write("apps/rid_app.py", APP);
    let mut pool = PythonPool::new("py", "rid_app:application");
    pool.keys += &logging(&site, "py");
    let drover = start_json(&site, &[&pool]);
    let nginx = Nginx::start_locations(
        &site,
        &[Location::prefix("/", &site.socket("py")).with(PASS_ID)],
    );
    follow(&site, &drover, "py", "marker-rid-py", &|q| {
        nginx.url(&format!("/rid{q}"))
    });
}

/// Without an id from the client or nginx, the worker makes one; the kill of the request
/// past `request_terminate_timeout` names it, as the line the script wrote before does.
#[test]
fn a_killed_request_without_a_given_id_is_named_by_the_one_drover_made() {
    let site = Site::new();
    site.script("rid.php", SCRIPT);
    // A pool whose requests are killed past `request_terminate_timeout`.
    let terminating = Tables {
        name: "www",
        tables: format!(
            "request_terminate_timeout = \"1s\"\n\n[pm]\nmode = \"static\"\nmax_children = 1\n\n{}",
            php_table("embed")
        ),
    };
    let drover = start_json(&site, &[&terminating]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let reply = http::get(&nginx.url("/rid.php?slow=1"));
    assert_eq!(reply.status, 502, "killed mid-request: {reply:?}");
    let output = drover.log.wait_for_line("marker-rid-php", TIMEOUT);
    let id =
        output_id(&output).unwrap_or_else(|| panic!("the script's line carries no id: {output:?}"));
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "a made id is 32 hex digits: {id:?}"
    );
    let kill = drover.log.wait_for_line("killing worker", TIMEOUT);
    assert!(
        kill.contains("request_terminate_timeout") && kill.contains(&format!("request_id={id}\"")),
        "the kill line names the request: {kill:?}"
    );
}

/// A plain ASGI app (no framework): the `x-request-id` headers its scope has, and the
/// access log's line, for a request nginx names and one it does not.
const ASGI_APP: &str = r#"async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    ids = [v.decode() for k, v in scope["headers"] if k == b"x-request-id"]
    body = ",".join(ids).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
"#;

#[test]
fn an_asgi_scope_has_one_x_request_id_header_the_access_log_shows() {
    let site = Site::new();
    site.write("apps/rid_asgi.py", ASGI_APP);
    let mut pool = PythonPool::new("api", "rid_asgi:app");
    pool.interface = Some("asgi".to_string());
    pool.keys += &logging(&site, "api");
    let drover = start_json(&site, &[&pool]);
    let nginx = Nginx::start_locations(
        &site,
        &[Location::prefix("/", &site.socket("api")).with(PASS_ID)],
    );
    let reply = http::get(&nginx.url("/a"));
    assert_eq!(
        reply.status,
        200,
        "{reply:?}; drover's log:\n{}",
        drover.log.text()
    );
    let id = nginx_id(&reply);
    assert_eq!(reply.body, id, "one x-request-id header, nginx's id");
    let given = http::get_with(&nginx.url("/b"), &[("X-Request-Id", "client-9")]);
    assert_eq!(given.body, "client-9", "{given:?}");
    let access = wait_lines(&site.path().join("api.access"), 2);
    assert!(access[0].starts_with(&format!("{id} GET /a")), "{access:?}");
    assert!(access[1].starts_with("client-9 GET /b"), "{access:?}");
}

/// The same app answering HTTP itself (`protocol = "http"`) behind nginx's `proxy_pass`,
/// which sets the header: the scope has that one id.
#[test]
fn an_asgi_http_pool_takes_the_id_nginx_proxies_to_it() {
    let site = Site::new();
    site.write("apps/rid_asgi.py", ASGI_APP);
    let mut pool = PythonPool::new("api", "rid_asgi:app");
    pool.interface = Some("asgi".to_string());
    pool.keys += "protocol = \"http\"\n";
    pool.keys += &logging(&site, "api");
    let drover = start_json(&site, &[&pool]);
    let server = format!(
        "        location / {{\n            proxy_pass http://unix:{}:;\n            \
         proxy_set_header X-Request-Id $request_id;\n            \
         add_header X-Request-Id $request_id always;\n        }}\n",
        site.socket("api").display()
    );
    let nginx = Nginx::start_server(&site, &server);
    let reply = http::get(&nginx.url("/a"));
    assert_eq!(
        reply.status,
        200,
        "{reply:?}; drover's log:\n{}",
        drover.log.text()
    );
    let id = nginx_id(&reply);
    assert_eq!(reply.body, id, "one x-request-id header, nginx's id");
    let access = wait_lines(&site.path().join("api.access"), 1);
    assert!(access[0].starts_with(&format!("{id} GET /a")), "{access:?}");
}
