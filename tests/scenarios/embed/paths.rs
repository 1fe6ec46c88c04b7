//! `$_SERVER`'s path variables (`SCRIPT_NAME`, `PATH_INFO`, `PATH_TRANSLATED`, `PHP_SELF`,
//! the `ORIG_*` copies) from drover-php against a real php-fpm 8.2, behind the same nginx
//! configurations, with `cgi.fix_pathinfo` 1 and 0: the pages must be the same, byte for
//! byte (status and body). And `fastcgi.logging`, the other `cgi.*`/`fastcgi.*` setting
//! drover-php honours.

use std::fs;

use super::Embed;
use crate::common::{
    Drover, Location, Nginx, Site, TIMEOUT, check_config, fix_pathinfo_1_and_0, http, wait_until,
};

/// The variables a script reads to know where it is, as JSON.
pub const PAGE: &str = r#"<?php
$keys = ['SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO', 'PATH_TRANSLATED', 'PHP_SELF',
    'REQUEST_URI', 'DOCUMENT_ROOT', 'DOCUMENT_URI', 'QUERY_STRING', 'ORIG_SCRIPT_NAME',
    'ORIG_SCRIPT_FILENAME', 'ORIG_PATH_INFO', 'ORIG_PATH_TRANSLATED'];
$out = [];
foreach ($keys as $key) {
    $out[$key] = array_key_exists($key, $_SERVER) ? $_SERVER[$key] : null;
}
$out['getenv(PATH_INFO)'] = getenv('PATH_INFO');
$out['__FILE__'] = __FILE__;
$out['cgi.fix_pathinfo'] = ini_get('cgi.fix_pathinfo');
echo json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
"#;

/// Four ways nginx passes PHP on, one per folder of the docroot.
fn locations(socket: &std::path::Path) -> String {
    let pass = format!("fastcgi_pass unix:{};", socket.display());
    format!(
        r#"
        # Debian's snippets/fastcgi-php.conf, in the location the nginx wiki gives.
        location ~ ^/split/.*[^/]\.php(/|$) {{
            fastcgi_split_path_info ^(.+?\.php)(/.*)$;
            try_files $fastcgi_script_name =404;
            set $path_info $fastcgi_path_info;
            fastcgi_param PATH_INFO $path_info;
            fastcgi_index index.php;
            include /etc/nginx/fastcgi.conf;
            {pass}
        }}
        # SCRIPT_FILENAME $document_root$fastcgi_script_name and no split: the path info
        # stays in SCRIPT_FILENAME and SCRIPT_NAME.
        location ~ ^/plain/.*\.php {{
            include /etc/nginx/fastcgi.conf;
            {pass}
        }}
        # A PATH_INFO param without a split: sent empty.
        location ~ ^/empty-info/.*\.php {{
            include /etc/nginx/fastcgi.conf;
            fastcgi_param PATH_INFO $fastcgi_path_info;
            {pass}
        }}
        # A front controller.
        location /front/ {{
            try_files $uri /front/index.php$is_args$args;
        }}
        location ~ ^/front/.*\.php$ {{
            include /etc/nginx/fastcgi.conf;
            {pass}
        }}
"#
    )
}

/// The requests, per folder: path info, queries, encoded characters, a trailing slash, a
/// script that is not there.
const URLS: &[&str] = &[
    "/split/index.php",
    "/split/index.php/extra/path",
    "/split/index.php/extra/path?q=1&r=a%20b",
    "/split/my%20page.php/caf%C3%A9/x%2Fy?e=%C3%A9&f",
    "/split/sub/app.php/a/b/",
    "/plain/index.php",
    "/plain/index.php/extra/path",
    "/plain/index.php/extra/path?q=1&r=a%20b",
    "/plain/my%20page.php/caf%C3%A9?e=%C3%A9",
    "/plain/sub/app.php/a/b/",
    "/plain/sub/app.php/",
    "/plain/missing.php/x",
    "/plain/missing.php",
    "/plain/sub.php/x",
    "/plain/sub.php",
    "/empty-info/index.php",
    "/empty-info/index.php/extra/path",
    "/front/",
    "/front/some/route?x=1&y=%20z",
    "/front/caf%C3%A9/route/",
    "/front/index.php?x=1",
];

fn docroot(site: &Site) {
    for folder in ["split", "plain", "empty-info", "front"] {
        let dir = site.docroot.join(folder);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("index.php"), PAGE).unwrap();
        fs::write(dir.join("my page.php"), PAGE).unwrap();
        fs::write(dir.join("sub/app.php"), PAGE).unwrap();
    }
    // A folder named like a script.
    fs::create_dir_all(site.docroot.join("plain/sub.php")).unwrap();
}

/// Status and body of every URL, through nginx to `socket`.
fn pages(site: &Site, socket: &std::path::Path) -> Vec<(u16, String)> {
    let nginx = Nginx::start_server(site, &locations(socket));
    URLS.iter()
        .map(|url| {
            let reply = http::get(&nginx.url(url));
            (reply.status, reply.body)
        })
        .collect()
}

/// Where drover's page differs from php-fpm's, per URL of `urls`.
pub fn differences(
    label: &str,
    urls: &[&str],
    fpm: &[(u16, String)],
    drover: &[(u16, String)],
) -> String {
    let mut out = String::new();
    for ((url, f), d) in urls.iter().zip(fpm).zip(drover) {
        if f != d {
            out.push_str(&format!(
                "{label} {url}\n  php-fpm: {} {}\n  drover:  {} {}\n",
                f.0, f.1, d.0, d.1
            ));
        }
    }
    out
}

/// One variable of a page, as JSON text (`null` when unset).
pub fn field(page: &(u16, String), key: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(&page.1)
        .unwrap_or_else(|e| panic!("not the JSON page ({e}): {page:?}"));
    json[key].to_string()
}

#[test]
fn path_variables_match_php_fpm_behind_nginx_with_fix_pathinfo_1_and_0() {
    let site = Site::new();
    docroot(&site);
    let (fpm1, fpm0) = fix_pathinfo_1_and_0(&site, |socket| pages(&site, socket));
    // cgi.fix_pathinfo set every way drover reads it: [php.ini], [php.admin_ini], and the
    // pool's php.ini file.
    let on = Embed::new("on", 1).ini("\"cgi.fix_pathinfo\" = \"1\"\n");
    let ini = site.write("php.ini", "cgi.fix_pathinfo = 0\n");
    let file = Embed::new("file", 1).php(&format!("ini_file = \"{}\"\n", ini.display()));
    let off = Embed::new("off", 1).admin("\"cgi.fix_pathinfo\" = \"0\"\n");
    let drover = Drover::start(&site, &[&on, &off, &file]);
    // drover -t starts PHP as the pools would: the cgi.* names are PHP's now.
    let checked = check_config(&site);
    assert!(checked.status.success(), "drover -t: {checked:?}");
    drover.log.wait_for_line("ready:", TIMEOUT);
    let drover1 = pages(&site, &site.socket("on"));
    let drover0 = pages(&site, &site.socket("off"));
    let from_file = pages(&site, &site.socket("file"));

    // php-fpm's values, as the comparison relies on them (and as the README describes).
    let at = |pages: &[(u16, String)], url: &str| {
        let i = URLS.iter().position(|u| *u == url).unwrap();
        pages[i].clone()
    };
    let root = site.docroot.display().to_string();
    let plain = at(&fpm1, "/plain/index.php/extra/path");
    assert_eq!(plain.0, 200, "{plain:?}");
    assert_eq!(
        field(&plain, "SCRIPT_NAME"),
        "\"/plain/index.php/extra/path\""
    );
    assert_eq!(field(&plain, "PATH_INFO"), "null");
    assert_eq!(field(&plain, "PATH_TRANSLATED"), format!("\"{root}\""));
    assert_eq!(
        field(&plain, "ORIG_SCRIPT_FILENAME"),
        format!("\"{root}/plain/index.php/extra/path\"")
    );
    let split = at(&fpm0, "/split/index.php/extra/path");
    assert_eq!(field(&split, "PHP_SELF"), "\"/extra/path\"");
    assert_eq!(field(&split, "cgi.fix_pathinfo"), "\"0\"");
    assert_eq!(at(&fpm0, "/plain/index.php/extra/path").0, 403);
    let missing = at(&fpm0, "/plain/missing.php");
    assert_eq!(missing, (404, "No input file specified.\n".to_owned()));

    let report = differences("cgi.fix_pathinfo=1", URLS, &fpm1, &drover1)
        + &differences("cgi.fix_pathinfo=0", URLS, &fpm0, &drover0)
        + &differences("php.ini's cgi.fix_pathinfo=0", URLS, &fpm0, &from_file);
    assert!(
        report.is_empty(),
        "drover-php's pages differ from php-fpm's:\n{report}\ndrover's log:\n{}",
        drover.log.text()
    );
}

/// `fastcgi.logging = 0` (php-fpm's setting, registered by drover-php) keeps PHP's
/// messages and "Primary script unknown" out of nginx's error log; drover's log still has
/// them. The default pool beside it shows they would be there.
#[test]
fn fastcgi_logging_0_keeps_php_messages_out_of_the_web_servers_log() {
    let site = Site::new();
    for folder in ["quiet", "loud"] {
        site.write(
            &format!("www/{folder}/log.php"),
            "<?php error_log('marker-' . $_GET['n']); echo ini_get('fastcgi.logging');",
        );
    }
    let quiet = Embed::new("quiet", 1).admin("\"fastcgi.logging\" = \"0\"\n");
    let loud = Embed::new("loud", 1);
    let drover = Drover::start(&site, &[&quiet, &loud]);
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location::prefix(r"~ ^/quiet/.*\.php$", &site.socket("quiet")),
            Location::prefix(r"~ ^/loud/.*\.php$", &site.socket("loud")),
        ],
    );
    let get = |url: &str| {
        let reply = http::get(&nginx.url(url));
        (reply.status, reply.body)
    };
    assert_eq!(get("/quiet/log.php?n=q"), (200, "0".to_owned()));
    assert_eq!(get("/quiet/missing.php").0, 404);
    assert_eq!(get("/loud/log.php?n=l"), (200, "1".to_owned()));
    assert_eq!(get("/loud/missing.php").0, 404);

    let errors = site.path().join("nginx-error.log");
    let text = wait_until(
        TIMEOUT,
        "the loud pool's lines in nginx's error log",
        || {
            let text = fs::read_to_string(&errors).unwrap_or_default();
            let unknown = text
                .lines()
                .any(|l| l.contains("Primary script unknown") && l.contains("/loud/missing.php"));
            (text.contains("marker-l") && unknown).then_some(text)
        },
    );
    assert!(!text.contains("marker-q"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("Primary script unknown") && l.contains("/quiet/")),
        "{text}"
    );
    drover.log.wait_for_line("marker-q", TIMEOUT);
}

/// A php-cgi pool (`runtime = "cgi"`) with drover's defaults.
struct Cgi(&'static str, &'static str);

impl crate::common::PoolFile for Cgi {
    fn name(&self) -> &str {
        self.0
    }
    fn toml(&self, site: &Site) -> String {
        crate::common::pool_toml(
            &site.socket(self.0),
            &format!(
                "[pm]\nmode = \"static\"\nmax_children = 1\n\n{}{}",
                crate::common::php_table("cgi"),
                self.1
            ),
        )
    }
}

/// PHP hidden in an upload, behind nginx's `location ~ \.php$` without `try_files`:
/// `/uploads/evil.jpg/x.php` names a script that is not there. php-cgi's default
/// `cgi.fix_pathinfo = 1` walks up to `evil.jpg` and runs it (php-fpm and drover-php refuse
/// the `.jpg` with `security.limit_extensions`: 403). drover runs php-cgi with
/// `cgi.fix_pathinfo = 0` and `cgi.discard_path = 1`: 404, the .jpg not run, on every
/// runtime. A pool that writes `cgi.fix_pathinfo = 1` with `limit_extensions = []` (any file
/// may run) gets php-cgi's walk, as the control case shows. And the normal pages are those
/// of php-fpm with `cgi.fix_pathinfo = 0`, but for the one php-fpm refuses with 403.
#[test]
fn php_hidden_in_an_upload_runs_on_no_runtime_and_php_cgi_pages_match_php_fpm() {
    let site = Site::new();
    docroot(&site);
    site.write(
        "www/uploads/evil.jpg",
        "\u{ff}\u{d8}<?php echo 'EXECUTED ', __FILE__;",
    );
    let (fpm1, fpm0) = fix_pathinfo_1_and_0(&site, |socket| pages(&site, socket));
    let cgi = Cgi("cgi", "");
    let embed = Embed::new("embed", 1);
    let drover = Drover::start(&site, &[&cgi, &embed]);
    drover.log.wait_for_line("ready:", TIMEOUT);

    let upload = |pool: &str| {
        let nginx = Nginx::start(&site, &site.socket(pool));
        let reply = http::get(&nginx.url("/uploads/evil.jpg/x.php"));
        (reply.status, reply.body)
    };
    let (status, body) = upload("cgi");
    assert!(
        !body.contains("EXECUTED"),
        "php-cgi ran the .jpg: {status} {body:?}"
    );
    assert_eq!((status, body.as_str()), (404, "No input file specified.\n"));
    let (status, body) = upload("embed");
    assert!(
        !body.contains("EXECUTED"),
        "drover-php ran the .jpg: {status} {body:?}"
    );
    assert_eq!(status, 403, "{body:?}");

    let cgi_pages = pages(&site, &site.socket("cgi"));
    let mut report = String::new();
    for ((url, f), c) in URLS.iter().zip(&fpm0).zip(&cgi_pages) {
        let refused = f == &(403, "Access denied.\n".to_owned())
            && c == &(404, "No input file specified.\n".to_owned());
        if f != c && !refused {
            report.push_str(&format!(
                "{url}\n  php-fpm (fix_pathinfo=0): {} {}\n  php-cgi: {} {}\n",
                f.0, f.1, c.0, c.1
            ));
        }
    }
    assert!(
        report.is_empty(),
        "php-cgi's pages differ from php-fpm's with cgi.fix_pathinfo = 0:\n{report}\ndrover's log:\n{}",
        drover.log.text()
    );
    // The legitimate PATH_INFO app (fastcgi_split_path_info) runs, with its path info.
    let i = URLS
        .iter()
        .position(|u| *u == "/split/index.php/extra/path")
        .unwrap();
    assert_eq!(cgi_pages[i].0, 200, "{:?}", cgi_pages[i]);
    assert_eq!(field(&cgi_pages[i], "PATH_INFO"), "\"/extra/path\"");
    assert_eq!(field(&cgi_pages[i], "SCRIPT_NAME"), "\"/split/index.php\"");
    // The cost, as the README says: PHP_SELF is the PATH_INFO sent, not SCRIPT_NAME +
    // PATH_INFO as under php-fpm's default (cgi.fix_pathinfo = 1).
    assert_eq!(field(&cgi_pages[i], "PHP_SELF"), "\"/extra/path\"");
    assert_eq!(
        field(&fpm1[i], "PHP_SELF"),
        "\"/split/index.php/extra/path\""
    );

    // The control case, alone: a pool that asks for php-cgi's walk gets it.
    drop(drover);
    fs::remove_dir_all(site.path().join("pools.d")).unwrap();
    let walks = Cgi(
        "walks",
        "limit_extensions = []\n[php.ini]\n\"cgi.fix_pathinfo\" = \"1\"\n",
    );
    let drover = Drover::start(&site, &[&walks]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let (status, body) = upload("walks");
    assert!(
        status == 200 && body.contains("EXECUTED"),
        "the control case: php-cgi's walk runs the .jpg: {status} {body:?}"
    );
}
