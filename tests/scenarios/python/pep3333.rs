//! PEP 3333 conformance: an app wrapped in `wsgiref.validate.validator` behind stock nginx
//! (`include fastcgi.conf;` and `fastcgi_pass`, nothing added). The validator raises on
//! anything drover hands the app or does with its result that PEP 3333 forbids (for
//! instance `HTTP_CONTENT_TYPE` in the environ, which nginx sends for every header):
//! drover would answer 500 and log the traceback.

use super::{field, fields};
use crate::common::{PythonPool, Site, Stack, http};

fn validated_stack() -> Stack {
    Stack::python(
        Site::new(),
        PythonPool::new("pep", "pep3333_app:application"),
    )
}

/// The log must hold the app's own line for `method` and no sign of the validator.
fn assert_validated(stack: &Stack, method: &str) {
    let marker = format!("pep3333 {method} ");
    stack
        .drover
        .log
        .wait_for_line(&marker, crate::common::TIMEOUT);
    let log = stack.drover.log.text();
    for sign in [
        "AssertionError",
        "Traceback",
        "garbage collected without being closed",
    ] {
        assert!(!log.contains(sign), "{sign} in drover's log:\n{log}");
    }
}

#[test]
fn validated_get_passes() {
    let stack = validated_stack();

    let got = fields(&http::get(&stack.url("/things?colour=blue")));

    assert_eq!(field(&got, "method"), "GET");
    assert_eq!(field(&got, "path_info"), "/things");
    assert_eq!(field(&got, "query_string"), "colour=blue");
    assert_validated(&stack, "GET");
}

#[test]
fn validated_post_with_a_content_type_and_a_body_passes() {
    let stack = validated_stack();

    let got = fields(&http::post(
        &stack.url("/things"),
        "application/x-www-form-urlencoded",
        b"colour=blue&size=7",
    ));

    assert_eq!(field(&got, "method"), "POST");
    assert_eq!(
        field(&got, "content_type"),
        "application/x-www-form-urlencoded"
    );
    assert_eq!(field(&got, "content_length"), "18");
    assert_eq!(field(&got, "body"), "colour=blue&size=7");
    assert_validated(&stack, "POST");
}

#[test]
fn validated_head_passes_without_a_body() {
    let stack = validated_stack();

    let mut raw = http::Raw::send(
        stack.nginx.port,
        "HEAD /things HTTP/1.1\r\nConnection: close\r\n",
    );
    raw.read_until(b"\r\n\r\n");
    let wire = http::Wire::parse(&raw.read_to_end());

    assert_eq!(wire.status, 200, "{}", wire.head);
    assert!(wire.body.is_empty(), "HEAD got a body: {:?}", wire.body);
    assert_validated(&stack, "HEAD");
}
