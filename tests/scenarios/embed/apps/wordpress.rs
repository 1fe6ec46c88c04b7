//! WordPress 6.1 (Debian's `wordpress`, its default theme from
//! `wordpress-theme-twentytwentythree`) on a MariaDB of the test's own.
//!
//! Debian's wp-config.php reads `/etc/wordpress/config-$WORDPRESS_CONFIG.php`; the test
//! writes `config-drover-test.php` there (benches/compare.py writes the same file), which
//! takes the database's name and socket from the request's FastCGI params, so that each
//! run has its own database.

use std::process::Command;

use super::mariadb::MariaDb;
use super::{App, Request, missing, serve_both};
use crate::common::{Site, run_bounded};

/// The configuration Debian's wp-config.php loads for `WORDPRESS_CONFIG=drover-test`.
pub const CONFIG_FILE: &str = "/etc/wordpress/config-drover-test.php";
pub const CONFIG: &str = include_str!("wordpress-config.php");

/// Installs WordPress into the database `db` of `mariadb` (as its web installer would:
/// the site, the user admin / admin-password, the first post), with pretty permalinks.
const INSTALL: &str = r"<?php
$_SERVER['HTTP_HOST'] = 'localhost';
$_SERVER['WORDPRESS_CONFIG'] = 'drover-test';
$_SERVER['DROVER_WP_DB'] = $argv[1];
$_SERVER['DROVER_WP_DB_SOCKET'] = $argv[2];
define('WP_INSTALLING', true);
require '/usr/share/wordpress/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
wp_install('drover test', 'admin', 'admin@example.com', true, '', 'admin-password');
update_option('permalink_structure', '/%year%/%monthnum%/%day%/%postname%/');
echo 'installed';
";

const TEST_COOKIE: &str = "wordpress_test_cookie=WP%20Cookie%20check";

fn requests() -> Vec<Request> {
    let login = "log=admin&pwd=admin-password&wp-submit=Log+In&testcookie=1\
                 &redirect_to=http%3A%2F%2Flocalhost%2Fwp-admin%2F";
    vec![
        Request::get("/"),
        Request::head("/"),
        // The canonical redirect to the post's permalink.
        Request::get("/?p=1"),
        Request::get("/no-such-page/"),
        // Not logged in: 302 to the login form.
        Request::get("/wp-admin/"),
        Request::get("/wp-login.php"),
        // Four cookies: the test cookie, two auth cookies, the logged-in one.
        Request::post("/wp-login.php", login).header("Cookie", TEST_COOKIE),
        // Its body has the time (the script's userSettings).
        Request::get("/wp-admin/")
            .cookies_of("/wp-login.php")
            .body_varies(),
        Request::post("/wp-login.php?wrong", "log=admin&pwd=wrong&testcookie=1")
            .header("Cookie", TEST_COOKIE),
        Request::get("/feed/"),
        Request::get("/feed/").if_none_match(),
        Request::get("/feed/").if_modified_since(),
        Request::head("/feed/").if_none_match(),
        Request::get("/wp-json/"),
        Request::get("/xmlrpc.php"),
        // WordPress's own 500 (wp_die): the database the params name does not exist.
        Request::get("/db-down/"),
        // No such script: the SAPI's own 404.
        Request::get("/no-such-script.php"),
    ]
}

#[test]
fn wordpress_answers_as_under_php_fpm() {
    if let Some(why) = missing(&[
        ("/usr/share/wordpress/wp-settings.php", "wordpress"),
        (
            "/usr/share/wordpress/wp-content/themes/twentytwentythree",
            "wordpress-theme-twentytwentythree",
        ),
        (super::mariadb::MARIADBD, "mariadb-server"),
    ]) {
        eprintln!("skipped: {why}");
        return;
    }
    let site = Site::new();
    let db = MariaDb::start(&site, &["wordpress"]);
    if std::fs::read_to_string(CONFIG_FILE).ok().as_deref() != Some(CONFIG) {
        std::fs::write(CONFIG_FILE, CONFIG).expect("write /etc/wordpress/config-drover-test.php");
    }
    let script = site.write("install-wordpress.php", INSTALL);
    let installed = run_bounded(
        Command::new("php")
            .arg(&script)
            .arg("wordpress")
            .arg(&db.socket),
    );
    let said = String::from_utf8_lossy(&installed.stdout);
    assert!(said.ends_with("installed"), "WordPress's install: {said}");

    let socket = db.socket.display();
    let params = format!(
        "fastcgi_param WORDPRESS_CONFIG drover-test; fastcgi_param DROVER_WP_DB_SOCKET {socket};"
    );
    let app = App {
        name: "wordpress",
        root: "/usr/share/wordpress".into(),
        fallback: "/index.php?$args",
        params: format!("{params} fastcgi_param DROVER_WP_DB wordpress;"),
        locations: format!(
            "        location = /db-down/ {{\n\
             \x20           include /etc/nginx/fastcgi.conf;\n\
             \x20           fastcgi_param SCRIPT_FILENAME /usr/share/wordpress/index.php;\n\
             \x20           fastcgi_param SCRIPT_NAME /index.php;\n\
             \x20           fastcgi_param SERVER_PORT 80;\n\
             \x20           {params} fastcgi_param DROVER_WP_DB no_such_database;\n\
             \x20           fastcgi_pass unix:{{socket}};\n\
             \x20       }}\n"
        ),
    };
    let requests = requests();
    let compared = serve_both(&site, &app, &requests);

    // php-fpm's answers are what the list says they are.
    let codes: Vec<u16> = (0..requests.len())
        .map(|i| compared.fpm(i).code())
        .collect();
    assert_eq!(
        codes,
        [
            200, 200, 301, 404, 302, 200, 302, 200, 200, 200, 304, 304, 304, 200, 405, 500, 404
        ],
        "{:?}",
        (0..requests.len())
            .map(|i| compared.fpm(i))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        compared.fpm(6).values("set-cookie").len(),
        4,
        "{:?}",
        compared.fpm(6)
    );
    assert!(
        !compared.fpm(10).has("content-type"),
        "{:?}",
        compared.fpm(10)
    );
    compared.assert_same(&requests);
    drop(db);
}
