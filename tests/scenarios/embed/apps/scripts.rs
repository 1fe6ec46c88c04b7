//! What the real apps did not reach, in small scripts through the same comparison: the
//! reason of every status code (PHP's own table, as php-fpm's "Status:" line has it: a code
//! it does not know goes bare, and nginx sends "418 " with no reason), a status line that
//! wins over a later `Status:` header, and the request as `getallheaders()` and
//! `$_SERVER['FCGI_ROLE']` show it (php-fpm lists the headers newest first).
//!
//! drover-php differed on each before: its own reasons ("413 Content Too Large", "418 I'm
//! a teapot", "Unknown" for the rest), the script's `Status: 410` over its
//! `HTTP/1.1 404 Nope`, the headers in the order they came, and no `FCGI_ROLE`.

use super::{App, Request, missing, serve_both};
use crate::common::Site;

const SCRIPTS: &[(&str, &str)] = &[
    ("code.php", "<?php http_response_code((int) $_GET['c']);"),
    (
        "line_then_status.php",
        "<?php header('HTTP/1.1 404 Nope'); header('Status: 410 Gone', false); echo 'x';",
    ),
    (
        "two_status.php",
        "<?php header('Status: 404 Not Found'); header('X-A: 1'); header('Status: 410 Gone', false);",
    ),
    (
        "request.php",
        "<?php echo json_encode(getallheaders()), ' ', $_SERVER['FCGI_ROLE'] ?? '-', ' ', getenv('FCGI_ROLE');",
    ),
];

/// Codes in PHP's table, codes PHP named otherwise than drover did, codes it does not know.
const CODES: &[&str] = &[
    "/code.php?c=201",
    "/code.php?c=305",
    "/code.php?c=404",
    "/code.php?c=413",
    "/code.php?c=414",
    "/code.php?c=416",
    "/code.php?c=418",
    "/code.php?c=422",
    "/code.php?c=451",
    "/code.php?c=506",
    "/code.php?c=511",
    "/code.php?c=599",
];

fn requests() -> Vec<Request> {
    let mut list: Vec<Request> = CODES.iter().map(|path| Request::get(path)).collect();
    list.push(Request::get("/line_then_status.php"));
    list.push(Request::get("/two_status.php"));
    list.push(
        // The request names its id: drover gives one that came without
        // (`HTTP_X_REQUEST_ID`, docs/logs.md, "Request ids"), php-fpm does not.
        Request::get("/request.php")
            .header("X-Request-Id", "compare-1")
            .header("X-First", "1")
            .header("Cookie", "a=b")
            .header("Accept", "*/*"),
    );
    list
}

#[test]
fn status_lines_and_request_headers_as_under_php_fpm() {
    if let Some(why) = missing(&[]) {
        eprintln!("skipped: {why}");
        return;
    }
    let site = Site::new();
    for (name, source) in SCRIPTS {
        site.script(name, source);
    }
    let app = App {
        name: "scripts",
        root: site.docroot.display().to_string(),
        fallback: "=404",
        params: String::new(),
        locations: String::new(),
    };
    let requests = requests();
    let compared = serve_both(&site, &app, &requests);

    // php-fpm's answers, as the comparison relies on them.
    assert_eq!(compared.fpm(3).status, "413 Request Entity Too Large");
    assert_eq!(compared.fpm(6).status.trim_end(), "418");
    assert_eq!(compared.fpm(12).status, "404 Nope");
    assert_eq!(compared.fpm(13).status, "404 Not Found");
    let body = String::from_utf8_lossy(&compared.fpm(14).body).into_owned();
    assert!(
        body.starts_with(
            r#"{"Accept":"*\/*","Cookie":"a=b","X-First":"1","X-Request-Id":"compare-1","User-Agent""#
        ),
        "{body}"
    );
    assert!(body.ends_with(" RESPONDER RESPONDER"), "{body}");
    compared.assert_same(&requests);
}
