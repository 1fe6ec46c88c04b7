//! DokuWiki (Debian's `dokuwiki`) as the package installs it: its pages and data in
//! /var/lib/dokuwiki, written by www-data (both backends run as www-data).

use super::{App, Request, missing, serve_both};
use crate::common::Site;

const CSS: &str = "/lib/exe/css.php?t=dokuwiki&tseed=1";
const LOGO: &str = "/lib/exe/fetch.php?media=wiki:dokuwiki-128.png";
const FEED: &str = "/feed.php";

fn requests() -> Vec<Request> {
    vec![
        // 302 to /doku.php?id=start; each answer sets the session cookie and clears the
        // auth cookie.
        Request::get("/"),
        // The pages end with the taskrunner's image, its URL the time.
        Request::get("/doku.php").body_varies(),
        Request::head("/doku.php"),
        Request::get("/doku.php?id=wiki:syntax").body_varies(),
        Request::get("/doku.php?id=wiki:syntax&do=export_raw"),
        Request::get(CSS),
        Request::get(CSS).if_none_match(),
        Request::get(CSS).if_modified_since(),
        Request::get(LOGO),
        Request::get(LOGO).if_none_match(),
        Request::head(LOGO).if_modified_since(),
        Request::get(LOGO).header("Range", "bytes=0-99"),
        Request::get("/lib/exe/fetch.php?media=no:such.png"),
        Request::get(FEED),
        Request::get(FEED).if_none_match(),
        // "403 Login failed", with its cookies.
        Request::post(
            "/doku.php?id=start&do=login",
            "u=admin&p=wrong&do=login&id=start",
        )
        .header("Cookie", "DokuWiki=drovertest")
        .body_varies(),
    ]
}

#[test]
fn dokuwiki_answers_as_under_php_fpm() {
    if let Some(why) = missing(&[("/usr/share/dokuwiki/doku.php", "dokuwiki")]) {
        eprintln!("skipped: {why}");
        return;
    }
    let site = Site::new();
    let app = App {
        name: "dokuwiki",
        root: "/usr/share/dokuwiki".into(),
        fallback: "/doku.php?$args",
        params: String::new(),
        locations: String::new(),
    };
    let requests = requests();
    let compared = serve_both(&site, &app, &requests);

    let codes: Vec<u16> = (0..requests.len())
        .map(|i| compared.fpm(i).code())
        .collect();
    assert_eq!(
        codes,
        [
            302, 200, 200, 200, 200, 200, 304, 304, 200, 304, 304, 206, 404, 200, 304, 403
        ]
    );
    assert_eq!(compared.fpm(15).status, "403 Login failed");
    assert!(
        !compared.fpm(9).has("content-type"),
        "{:?}",
        compared.fpm(9)
    );
    compared.assert_same(&requests);
}
