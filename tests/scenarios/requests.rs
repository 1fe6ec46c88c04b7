//! Requests through nginx reach PHP whole: query strings, form fields, a 1 MB upload, and
//! the `$_SERVER` variables nginx's `fastcgi.conf` sends.

use std::collections::BTreeMap;

use crate::common::{PhpPool, Site, Stack, http};

/// Prints what PHP received, one `kind.name=value` per line.
const ECHO_PHP: &str = r#"<?php
header("Content-Type: text/plain");
foreach (["REQUEST_METHOD", "REQUEST_URI", "QUERY_STRING", "SCRIPT_FILENAME", "CONTENT_LENGTH"] as $key) {
    echo "server.$key=", $_SERVER[$key] ?? "(unset)", "\n";
}
foreach ($_GET as $name => $value) echo "get.$name=$value\n";
foreach ($_POST as $name => $value) echo "post.$name=$value\n";
foreach ($_FILES as $name => $file) {
    echo "file.$name=", $file["error"] ? "error " . $file["error"] : $file["size"] . " " . md5_file($file["tmp_name"]), "\n";
}
"#;

fn start() -> Stack {
    let site = Site::new();
    site.script("echo.php", ECHO_PHP);
    Stack::start(site, PhpPool::new("www"))
}

/// ECHO_PHP's output as a map; asserts a 200 first.
fn received(reply: http::Reply) -> BTreeMap<String, String> {
    assert_eq!(reply.status, 200, "reply: {reply:?}");
    let lines = reply.body.lines().filter_map(|l| l.split_once('='));
    lines.map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn field<'a>(received: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    received
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no {key} in {received:#?}"))
}

#[test]
fn get_with_a_query_string() {
    let stack = start();
    let uri = "/echo.php?name=drover&lang=rust%20%26%20php";

    let got = received(http::get(&stack.url(uri)));

    assert_eq!(field(&got, "get.name"), "drover");
    assert_eq!(field(&got, "get.lang"), "rust & php");
    assert_eq!(field(&got, "server.REQUEST_METHOD"), "GET");
    assert_eq!(field(&got, "server.REQUEST_URI"), uri);
    assert_eq!(
        field(&got, "server.QUERY_STRING"),
        "name=drover&lang=rust%20%26%20php"
    );
    let script = stack.site.docroot.join("echo.php");
    assert_eq!(
        field(&got, "server.SCRIPT_FILENAME"),
        script.to_str().unwrap()
    );
}

#[test]
fn post_with_form_fields() {
    let stack = start();
    let form = b"name=drover&motto=spawn+%26+reap";

    let reply = http::post(
        &stack.url("/echo.php?via=form"),
        "application/x-www-form-urlencoded",
        form,
    );
    let got = received(reply);

    assert_eq!(field(&got, "post.name"), "drover");
    assert_eq!(field(&got, "post.motto"), "spawn & reap");
    assert_eq!(field(&got, "get.via"), "form");
    assert_eq!(field(&got, "server.REQUEST_METHOD"), "POST");
    assert_eq!(field(&got, "server.REQUEST_URI"), "/echo.php?via=form");
    assert_eq!(field(&got, "server.QUERY_STRING"), "via=form");
    assert_eq!(field(&got, "server.CONTENT_LENGTH"), form.len().to_string());
}

#[test]
fn one_megabyte_upload_arrives_intact() {
    let stack = start();
    let payload = noise(1 << 20);
    let boundary = "drover-test-boundary-7f3a9c1e5b";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"noise.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
    body.extend_from_slice(&payload);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());

    let content_type = format!("multipart/form-data; boundary={boundary}");
    let got = received(http::post(&stack.url("/echo.php"), &content_type, &body));

    let expected = format!("{} {}", payload.len(), md5sum(&stack.site, &payload));
    assert_eq!(field(&got, "file.upload"), expected);
    assert_eq!(field(&got, "post.note"), "hello");
    assert_eq!(field(&got, "server.CONTENT_LENGTH"), body.len().to_string());
}

fn noise(len: usize) -> Vec<u8> {
    crate::common::bytes::noise(len, 0x9E37_79B9_7F4A_7C15)
}

fn md5sum(site: &Site, bytes: &[u8]) -> String {
    crate::common::bytes::digest(site, "md5sum", bytes)
}
