//! Django 5 through its ASGI handler (`app = "djangosite.asgi:application"`,
//! `interface = "asgi"`): the project of `tests/apps/djangosite/` (DEBUG off, a host
//! allow-list, the CSRF middleware, no database). Routing with path converters under a
//! mount, a form POST with its CSRF token (and without: 403), a multi-megabyte multipart
//! upload, a streamed response, an async view cancelled when its client leaves; behind
//! nginx over FastCGI, and on `protocol = "http"` with no nginx.

use super::http_pool::Server;
use super::{noise, sha256};
use crate::common::http::{self, Raw, Reply, Wire};
use crate::common::{Drover, Location, Nginx, PythonPool, Site, Stack, TIMEOUT, python};

const APP: &str = "djangosite.asgi:application";

/// drover serving the Django project under `/dj`, nginx passing `/dj/` to it.
fn behind_nginx() -> Stack {
    let site = Site::new();
    python::install_apps(&site);
    let mut pool = PythonPool::new("dj", APP).max_children(2).mount("/dj");
    pool.interface = Some("asgi".to_string());
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix(&pool.location(), &site.socket(&pool.name)).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    Stack {
        nginx,
        drover,
        site,
    }
}

fn json(reply: &Reply) -> serde_json::Value {
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply:?}"))
}

/// Asserts `reply`'s status, showing drover's log (Django's tracebacks) otherwise.
fn expect(reply: &Reply, status: u16, what: &str, drover: &Drover) {
    assert_eq!(
        reply.status,
        status,
        "{what}: {reply:?}; log:\n{}",
        drover.log.text()
    );
}

/// Path converters, `reverse()` under the mount, the host allow-list, an async view.
/// `base`: the URL up to the mount (no trailing slash); `mount`: the mount itself.
fn routing(base: &str, mount: &str, drover: &Drover) {
    let reply = http::get(&format!("{base}/items/42/?q=drover%20rs"));
    expect(&reply, 200, "GET /items/42/", drover);
    let got = json(&reply);
    assert_eq!(got["pk"], 42, "the <int:pk> converter gives an int");
    assert_eq!(got["query"], "drover rs");
    assert_eq!(got["path"], format!("{mount}/items/42/"));
    assert_eq!(got["path_info"], "/items/42/");
    assert_eq!(got["script_name"], mount);
    assert_eq!(
        got["next"],
        format!("{mount}/items/43/"),
        "reverse() includes the mount (the scope's root_path)"
    );
    assert_eq!(got["remote_addr"], "127.0.0.1");
    assert!(
        got["host"]
            .as_str()
            .is_some_and(|h| h.starts_with("127.0.0.1:")),
        "{got}"
    );

    let reply = http::get(&format!("{base}/hello/drover-rs/"));
    expect(&reply, 200, "GET /hello/drover-rs/ (async view)", drover);
    assert_eq!(json(&reply)["hello"], "drover-rs");

    // CommonMiddleware's APPEND_SLASH redirect keeps the mount; the client follows it.
    let reply = http::get(&format!("{base}/items/7"));
    expect(
        &reply,
        200,
        "GET /items/7 (redirected to /items/7/)",
        drover,
    );
    assert_eq!(json(&reply)["path"], format!("{mount}/items/7/"));

    let not_int = http::get(&format!("{base}/items/nope/"));
    expect(&not_int, 404, "<int:pk> refuses a word", drover);
    let unknown = http::get(&format!("{base}/nowhere/"));
    expect(&unknown, 404, "no route", drover);

    let reply = http::get_with(&format!("{base}/items/1/"), &[("Host", "evil.example")]);
    expect(&reply, 400, "a Host outside ALLOWED_HOSTS", drover);
    drover
        .log
        .wait_for_line("Invalid HTTP_HOST header: 'evil.example'", TIMEOUT);
}

/// The `csrftoken` cookie's value from the `Set-Cookie` headers of `reply`.
fn csrf_cookie(reply: &Reply) -> String {
    reply
        .header_values("set-cookie")
        .iter()
        .find_map(|c| c.strip_prefix("csrftoken=")?.split(';').next())
        .unwrap_or_else(|| panic!("no csrftoken cookie: {:?}", reply.headers))
        .to_string()
}

/// The hidden `csrfmiddlewaretoken` field's value in the form's HTML.
fn hidden_token(html: &str) -> String {
    let after = html
        .split("name=\"csrfmiddlewaretoken\" value=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no csrfmiddlewaretoken field in:\n{html}"));
    after.split('"').next().expect("a quoted value").to_string()
}

/// GET the form: its (cookie, hidden token). Asserts the form posts back under the mount.
fn get_form(base: &str, mount: &str, drover: &Drover) -> (String, String) {
    let page = http::get(&format!("{base}/form/"));
    expect(&page, 200, "GET /form/", drover);
    assert!(
        page.body.contains(&format!("action=\"{mount}/form/\"")),
        "{{% url %}} under the mount: {}",
        page.body
    );
    (csrf_cookie(&page), hidden_token(&page.body))
}

/// A form POST: 200 with the token and its cookie, 400 on a field error, 403 without the
/// token, with a forged one, or without the cookie.
fn csrf_form(base: &str, mount: &str, drover: &Drover) {
    let (cookie, token) = get_form(base, mount, drover);
    let url = format!("{base}/form/");
    let form = "application/x-www-form-urlencoded";
    let with_cookie = [("Cookie", format!("csrftoken={cookie}"))];
    let with_cookie: Vec<(&str, &str)> =
        with_cookie.iter().map(|(n, v)| (*n, v.as_str())).collect();

    let body = format!("csrfmiddlewaretoken={token}&title=drover+rs&count=3");
    let saved = http::post_with(&url, &with_cookie, form, body.as_bytes());
    expect(&saved, 200, "POST with the token", drover);
    assert_eq!(
        json(&saved)["saved"],
        serde_json::json!({"title": "drover rs", "count": 3})
    );

    let body = format!("csrfmiddlewaretoken={token}&title=drover&count=0");
    let invalid = http::post_with(&url, &with_cookie, form, body.as_bytes());
    expect(&invalid, 400, "POST with a field error", drover);
    assert!(json(&invalid)["errors"]["count"].is_array(), "{invalid:?}");

    // Each refusal with the reason Django logs for it.
    for (reason, headers, body) in [
        (
            "CSRF token missing.",
            &with_cookie[..],
            "title=x&count=1".to_string(),
        ),
        (
            "CSRF token from POST incorrect.",
            &with_cookie[..],
            format!("csrfmiddlewaretoken={}&title=x&count=1", "x".repeat(64)),
        ),
        (
            "CSRF cookie not set.",
            &[][..],
            format!("csrfmiddlewaretoken={token}&title=x&count=1"),
        ),
    ] {
        let from = drover.log.len();
        let refused = http::post_with(&url, headers, form, body.as_bytes());
        expect(&refused, 403, reason, drover);
        assert!(
            refused.body.contains("CSRF verification failed"),
            "{reason}: {refused:?}"
        );
        let line = format!("Forbidden ({reason}): {mount}/form/");
        drover
            .log
            .wait_for(from, &line, |l| l.contains(&line), TIMEOUT);
    }
}

/// A 4 MB file in a multipart/form-data POST, with the CSRF token as a field: Django
/// spools it to a temporary file and the view hashes it.
fn upload(base: &str, mount: &str, site: &Site, drover: &Drover) {
    let (cookie, token) = get_form(base, mount, drover);
    let file = noise(4 << 20);
    let boundary = "----drover-django-boundary-7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, value) in [("csrfmiddlewaretoken", token.as_str()), ("note", "café")] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"noise.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());

    let reply = http::post_with(
        &format!("{base}/upload/"),
        &[("Cookie", &format!("csrftoken={cookie}"))],
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    );

    expect(&reply, 200, "POST /upload/", drover);
    let got = json(&reply);
    assert_eq!(got["name"], "noise.bin");
    assert_eq!(got["size"], file.len());
    assert_eq!(got["sha256"], sha256(site, &file));
    assert_eq!(got["on_disk"], true, "past FILE_UPLOAD_MAX_MEMORY_SIZE");
    assert_eq!(got["note"], "café");
}

/// A `StreamingHttpResponse`'s first chunk reaches the client before the view makes the
/// last; a client that hangs up on a waiting async view gets it cancelled (Django 5 listens
/// for `http.disconnect`), and the worker serves on.
fn stream_and_disconnect(port: u16, mount: &str, site: &Site, drover: &Drover) {
    let marker = site.path().join("django-stream.go");
    let mut raw = Raw::send(
        port,
        &format!(
            "GET {mount}/stream/?marker={} HTTP/1.0\r\n",
            marker.display()
        ),
    );
    raw.read_until(b"first\n");
    std::fs::write(&marker, "").expect("create the marker");
    let wire = Wire::parse(&raw.read_to_end());
    assert_eq!(wire.status, 200, "head: {}", wire.head);
    assert_eq!(String::from_utf8_lossy(&wire.body), "first\nlast\n");

    let from = drover.log.len();
    let raw = Raw::send(port, &format!("GET {mount}/wait/?id=gone HTTP/1.0\r\n"));
    let started = "django view started gone";
    drover
        .log
        .wait_for(from, started, |l| l.contains(started), TIMEOUT);
    drop(raw);
    let cancelled = "django view cancelled gone";
    drover
        .log
        .wait_for(from, cancelled, |l| l.contains(cancelled), TIMEOUT);
}

#[test]
fn django_routes_under_a_mount_behind_nginx() {
    let stack = behind_nginx();
    routing(&stack.url("/dj"), "/dj", &stack.drover);
}

#[test]
fn django_form_post_with_csrf_behind_nginx() {
    let stack = behind_nginx();
    csrf_form(&stack.url("/dj"), "/dj", &stack.drover);
}

#[test]
fn django_file_upload_behind_nginx() {
    let stack = behind_nginx();
    upload(&stack.url("/dj"), "/dj", &stack.site, &stack.drover);
}

#[test]
fn django_streams_and_cancels_a_view_when_the_client_leaves_behind_nginx() {
    let stack = behind_nginx();
    stream_and_disconnect(stack.nginx.port, "/dj", &stack.site, &stack.drover);
    routing(&stack.url("/dj"), "/dj", &stack.drover);
}

#[test]
fn django_over_http_without_nginx() {
    let server = Server::start_asgi(APP, 2, "");
    let base = server.url("");

    routing(&base, "", &server.drover);
    csrf_form(&base, "", &server.drover);
    upload(&base, "", &server.site, &server.drover);
    stream_and_disconnect(server.port, "", &server.site, &server.drover);
    routing(&base, "", &server.drover);

    // Django runs its sync views and middleware on asgiref's thread, where Python's cycle
    // collector may free the objects of a connection closed meanwhile (each request here is
    // a connection): they must drop there without an error (and without leaking).
    for n in 0..40 {
        let reply = http::get(&format!("{base}/items/{n}/"));
        expect(&reply, 200, "GET /items/N/", &server.drover);
    }
    let log = server.drover.log.text();
    assert!(!log.contains("RuntimeError"), "{log}");
}
