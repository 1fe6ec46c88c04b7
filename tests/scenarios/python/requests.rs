//! What reaches the app: query strings and form fields (plain WSGI and Flask), a 10 MB
//! upload read in chunks, unicode in the path and query, and a mount prefix.

use super::{field, fields, noise, sha256, wsgi_stack};
use crate::common::{PythonPool, Site, Stack, http};

const FORM: &[u8] = b"name=drover&motto=spawn+%26+reap";
const FORM_TYPE: &str = "application/x-www-form-urlencoded";

#[test]
fn wsgi_get_with_a_query_string() {
    let stack = wsgi_stack(2);

    let got = fields(&http::get(
        &stack.url("/echo?name=drover&lang=python%20%26%20rust"),
    ));

    assert_eq!(field(&got, "method"), "GET");
    assert_eq!(field(&got, "get.name"), "drover");
    assert_eq!(field(&got, "get.lang"), "python & rust");
    assert_eq!(
        field(&got, "query_string"),
        "name=drover&lang=python%20%26%20rust"
    );
    assert_eq!(field(&got, "script_name"), "");
    assert_eq!(field(&got, "path_info"), "/echo");
}

#[test]
fn wsgi_post_with_form_fields() {
    let stack = wsgi_stack(2);

    let got = fields(&http::post(&stack.url("/echo?via=form"), FORM_TYPE, FORM));

    assert_eq!(field(&got, "method"), "POST");
    assert_eq!(field(&got, "post.name"), "drover");
    assert_eq!(field(&got, "post.motto"), "spawn & reap");
    assert_eq!(field(&got, "get.via"), "form");
    assert_eq!(field(&got, "content_length"), FORM.len().to_string());
}

fn flask_stack() -> Stack {
    Stack::python(Site::new(), PythonPool::flask("flask"))
}

#[test]
fn flask_get_with_a_query_string() {
    let stack = flask_stack();

    let got = fields(&http::get(
        &stack.url("/echo?name=drover&lang=python%20%26%20rust"),
    ));

    assert_eq!(field(&got, "method"), "GET");
    assert_eq!(field(&got, "get.name"), "drover");
    assert_eq!(field(&got, "get.lang"), "python & rust");
}

#[test]
fn flask_post_with_form_fields() {
    let stack = flask_stack();

    let got = fields(&http::post(&stack.url("/echo?via=form"), FORM_TYPE, FORM));

    assert_eq!(field(&got, "method"), "POST");
    assert_eq!(field(&got, "post.name"), "drover");
    assert_eq!(field(&got, "post.motto"), "spawn & reap");
    assert_eq!(field(&got, "get.via"), "form");
}

#[test]
fn ten_megabyte_upload_read_in_chunks_arrives_intact() {
    let stack = wsgi_stack(2);
    let payload = noise(10 << 20);

    let reply = http::post(
        &stack.url("/upload-sha256"),
        "application/octet-stream",
        &payload,
    );

    let expected = format!("{} {}", payload.len(), sha256(&stack.site, &payload));
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, expected.as_str()),
        "headers {:?}; log:\n{}",
        reply.headers,
        stack.drover.log.text()
    );
}

#[test]
fn unicode_in_path_and_query_reaches_the_app() {
    let stack = wsgi_stack(2);
    let uri = http::percent_encode("/héllo?q=ü");
    assert_eq!(uri, "/h%C3%A9llo?q=%C3%BC");

    let got = fields(&http::get(&stack.url(&uri)));

    assert_eq!(field(&got, "path_info"), "/héllo");
    assert_eq!(field(&got, "query_string"), "q=%C3%BC");
    assert_eq!(field(&got, "get.q"), "ü");
}

#[test]
fn a_mount_prefix_becomes_script_name() {
    let stack = Stack::python(Site::new(), PythonPool::wsgi("py").mount("/app"));

    let got = fields(&http::get(&stack.url("/app/hello?x=1")));

    assert_eq!(field(&got, "script_name"), "/app");
    assert_eq!(field(&got, "path_info"), "/hello");
    assert_eq!(field(&got, "get.x"), "1");
}

#[test]
fn flask_url_for_builds_urls_under_the_mount() {
    let stack = Stack::python(Site::new(), PythonPool::flask("flask").mount("/app"));

    let got = fields(&http::get(&stack.url("/app/hello")));

    assert_eq!(field(&got, "script_root"), "/app");
    assert_eq!(field(&got, "path"), "/hello");
    assert_eq!(field(&got, "url_for"), "/app/hello");
    assert_eq!(field(&got, "url_for_echo"), "/app/echo?q=1");
}

/// php-fpm's `ping.path` and `pm.status_path` work on a WSGI pool too: its workers answer
/// them before the app (whose own `/pid` still answers).
#[test]
fn a_wsgi_pool_answers_its_ping_path_and_status_path() {
    let site = Site::new();
    let status_socket = site.path().join("py-status.sock");
    let stack = Stack::python(
        site,
        PythonPool::wsgi("py")
            .key("ping_path", "\"/ping\"")
            .key("status_path", "\"/status\"")
            .key("status_listen", &format!("\"{}\"", status_socket.display())),
    );

    let ping = http::get(&stack.url("/ping"));
    let status = http::get(&stack.url("/status?json"));
    let app = http::get(&stack.url("/pid"));

    assert_eq!((ping.status, ping.body.as_str()), (200, "pong"));
    assert_eq!(status.status, 200, "{}", status.body);
    let json: serde_json::Value = serde_json::from_str(&status.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", status.body));
    assert_eq!(json["pool"], "py");
    assert_eq!(app.status, 200);
    assert!(app.body.trim().parse::<i32>().is_ok(), "{}", app.body);
}
