//! Every response header drover-php sends, against a real php-fpm 8.2 behind the same
//! nginx: the header sets (names, values, order; `Date` aside) must be the same. The case
//! that differed: a 304, which php-fpm's `sapi_cgi_send_headers` sends without any
//! `Content-Type` (PHP's default `text/html` or the script's), where drover-php sent it,
//! so a cache could apply `text/html` to a stored CSS or JSON file.

use super::Embed;
use crate::common::{Drover, FpmPool, Nginx, PhpFpm, Site, TIMEOUT, http};

/// One `Last-Modified` time for the revalidation scripts (2023-11-14 22:13:20 GMT).
const MTIME: &str = "Tue, 14 Nov 2023 22:13:20 GMT";

/// (script, source): the 304s as apps send them, and the statuses around them.
const SCRIPTS: &[(&str, &str)] = &[
    // A bare 304: PHP's default Content-Type would be the only one.
    ("bare304.php", "<?php http_response_code(304);"),
    // WordPress's feed and MediaWiki's load.php: Last-Modified, then 304 after
    // If-Modified-Since, with the type the body would have had.
    (
        "revalidate.php",
        r#"<?php
$mtime = 1700000000;
header('Content-Type: text/css; charset=utf-8');
header('Last-Modified: ' . gmdate('D, d M Y H:i:s', $mtime) . ' GMT');
header('Cache-Control: public, max-age=300');
$since = $_SERVER['HTTP_IF_MODIFIED_SINCE'] ?? '';
if ($since !== '' && strtotime($since) >= $mtime) {
    header($_SERVER['SERVER_PROTOCOL'] . ' 304 Not Modified');
    exit;
}
echo "body { color: red }\n";
"#,
    ),
    // The same answer by http_response_code() and an ETag.
    (
        "etag.php",
        r#"<?php
header('Content-Type: application/json');
header('ETag: "v1"');
if (($_SERVER['HTTP_IF_NONE_MATCH'] ?? '') === '"v1"') {
    http_response_code(304);
    return;
}
echo '{"v":1}';
"#,
    ),
    // A Status: header of the script's own (php-fpm decides by the response code).
    (
        "status_header.php",
        "<?php header('Status: 304 Not Modified'); header('Content-Type: text/plain');",
    ),
    // Statuses that keep their Content-Type.
    ("nocontent.php", "<?php http_response_code(204);"),
    ("page.php", "<?php header('X-App: 1'); echo 'hello';"),
    (
        "redirect.php",
        "<?php header('Location: /page.php'); header('Set-Cookie: a=b; HttpOnly', false);",
    ),
    ("gone.php", "<?php http_response_code(410); echo 'gone';"),
    (
        "teapot.php",
        "<?php header('HTTP/1.1 418 Short and stout'); echo 'tea';",
    ),
];

/// (URL, request headers).
const REQUESTS: &[(&str, &[(&str, &str)])] = &[
    ("/bare304.php", &[]),
    ("/revalidate.php", &[]),
    ("/revalidate.php", &[("If-Modified-Since", MTIME)]),
    ("/etag.php", &[]),
    ("/etag.php", &[("If-None-Match", "\"v1\"")]),
    ("/status_header.php", &[]),
    ("/nocontent.php", &[]),
    ("/page.php", &[]),
    ("/redirect.php", &[]),
    ("/gone.php", &[]),
    ("/teapot.php", &[]),
    ("/missing.php", &[]),
];

/// Status and headers (`Date` left out: it is the clock's) of every request, through an
/// nginx passing `*.php` to `socket`.
fn answers(site: &Site, socket: &std::path::Path) -> Vec<(u16, Vec<(String, String)>)> {
    let nginx = Nginx::start(site, socket);
    REQUESTS
        .iter()
        .map(|(url, headers)| {
            let reply = http::get_with(&nginx.url(url), headers);
            let kept = reply
                .headers
                .into_iter()
                .filter(|(name, _)| !name.eq_ignore_ascii_case("date"))
                .map(|(name, value)| (name.to_ascii_lowercase(), value))
                .collect();
            (reply.status, kept)
        })
        .collect()
}

#[test]
fn response_headers_match_php_fpm_a_304_without_content_type() {
    let site = Site::new();
    for (name, source) in SCRIPTS {
        site.script(name, source);
    }
    let fpm = {
        let pool = FpmPool::new(&site, "fpm", "");
        let _fpm = PhpFpm::start(&site, std::slice::from_ref(&pool));
        answers(&site, &pool.socket)
    };
    let drover = Drover::start(&site, &[&Embed::new("www", 1)]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let ours = answers(&site, &site.socket("www"));

    // php-fpm's answers, as the comparison relies on them.
    let at = |answers: &[(u16, Vec<(String, String)>)], i: usize| answers[i].clone();
    let has_type = |answer: &(u16, Vec<(String, String)>)| {
        answer.1.iter().any(|(name, _)| name == "content-type")
    };
    for i in [0, 2, 4] {
        let answer = at(&fpm, i);
        assert_eq!(answer.0, 304, "{:?}: {answer:?}", REQUESTS[i]);
        assert!(!has_type(&answer), "{:?}: {answer:?}", REQUESTS[i]);
    }
    assert!(has_type(&at(&fpm, 1)), "{:?}", at(&fpm, 1));

    let mut report = String::new();
    for ((request, f), d) in REQUESTS.iter().zip(&fpm).zip(&ours) {
        if f != d {
            report.push_str(&format!(
                "{request:?}\n  php-fpm: {f:?}\n  drover:  {d:?}\n"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "drover-php's headers differ from php-fpm's:\n{report}\ndrover's log:\n{}",
        drover.log.text()
    );
}
