//! Apache httpd wired to a pool as Debian wires it to php-fpm (`SetHandler
//! "proxy:unix:SOCKET|fcgi://localhost"`, `ProxyFCGIBackendType` left at FPM): Apache then
//! sends `SCRIPT_FILENAME` as `proxy:fcgi://localhost/path`, which php-fpm, and drover-php,
//! strip (php-cgi answers "No input file specified."). With path info
//! (`/index.php/extra`), the path variables are compared with a real php-fpm's behind the
//! same Apache.

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::Embed;
use super::paths::{PAGE, differences, field};
use crate::common::{Drover, Site, TIMEOUT, fix_pathinfo_1_and_0, http, proc, wait_until};

const MODULES: &str = "/usr/lib/apache2/modules";

struct Apache {
    child: Child,
    port: u16,
}

impl Apache {
    fn start(site: &Site, socket: &Path) -> Apache {
        // Apache's children run as nobody when it starts as root: they must reach the
        // socket and see the docroot.
        let mut dir = Some(site.docroot.as_path());
        while let Some(d) = dir.filter(|d| d.starts_with(site.path())) {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
            dir = d.parent();
        }
        std::fs::set_permissions(site.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = site.path().display();
        let user = if proc::running_as_root() {
            "User nobody\nGroup nogroup\n"
        } else {
            ""
        };
        let conf = site.write(
            "apache.conf",
            &format!(
                r#"LoadModule mpm_event_module {MODULES}/mod_mpm_event.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
LoadModule proxy_module {MODULES}/mod_proxy.so
LoadModule proxy_fcgi_module {MODULES}/mod_proxy_fcgi.so
ServerName localhost
ServerRoot {dir}
DefaultRuntimeDir {dir}
PidFile {dir}/apache.pid
ErrorLog {dir}/apache-error.log
Listen 127.0.0.1:{port}
{user}DocumentRoot {docroot}
<Directory {docroot}>
    Require all granted
</Directory>
<FilesMatch "\.php$">
    SetHandler "proxy:unix:{socket}|fcgi://localhost"
</FilesMatch>
"#,
                docroot = site.docroot.display(),
                socket = socket.display(),
            ),
        );
        let child = Command::new("apache2")
            .arg("-f")
            .arg(&conf)
            .arg("-DFOREGROUND")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn apache2 (is it installed?)");
        let mut apache = Apache { child, port };
        let up = wait_until(TIMEOUT, "apache2 to listen", || {
            if apache.child.try_wait().unwrap().is_some() {
                return Some(false);
            }
            TcpStream::connect(("127.0.0.1", port))
                .is_ok()
                .then_some(true)
        });
        let log = std::fs::read_to_string(site.path().join("apache-error.log")).unwrap_or_default();
        assert!(up, "apache2 did not start: {log}");
        apache
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        proc::kill_tree(self.child.id() as i32);
        let _ = self.child.wait();
    }
}

#[test]
fn apache_with_the_stock_fpm_wiring_serves_a_page_and_a_post() {
    let site = Site::new();
    site.script(
        "index.php",
        "<?php echo $_SERVER['REQUEST_METHOD'], ' ', $_SERVER['SCRIPT_FILENAME'], ' ', $_POST['name'] ?? '-', ' ', $_SERVER['PATH_INFO'] ?? '-';",
    );
    let pool = Embed::new("www", 2);
    let drover = Drover::start(&site, &[&pool]);
    let apache = Apache::start(&site, &site.socket("www"));
    let script = site.docroot.join("index.php");

    let page = http::get(&apache.url("/index.php"));
    let post = http::post(
        &apache.url("/index.php"),
        "application/x-www-form-urlencoded",
        b"name=drover",
    );

    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.body, format!("GET {} - -", script.display()));
    assert_eq!(post.body, format!("POST {} drover -", script.display()));
    drop(drover);
}

/// Requests with path info, a query and encoded characters.
const PATH_URLS: &[&str] = &[
    "/index.php",
    "/index.php/extra",
    "/index.php/extra/more/?x=1&y=%20z",
    "/my%20page.php/caf%C3%A9",
    "/index.php/index.php",
    // With cgi.fix_pathinfo = 0, PATH_TRANSLATED (here "my page.php") is what runs.
    "/index.php/my%20page.php",
];

/// Status and body of every [`PATH_URLS`], through Apache to `socket`.
fn pages(site: &Site, socket: &Path) -> Vec<(u16, String)> {
    let apache = Apache::start(site, socket);
    PATH_URLS
        .iter()
        .map(|url| {
            let reply = http::get(&apache.url(url));
            (reply.status, reply.body)
        })
        .collect()
}

/// Behind the same Apache wiring, drover-php's path variables are php-fpm's: the
/// `proxy:fcgi://localhost` prefix is cut off `SCRIPT_FILENAME`, the path info Apache
/// splits off stays `PATH_INFO`, with `cgi.fix_pathinfo` 1 and 0.
#[test]
fn apache_path_info_gives_the_variables_php_fpm_gives() {
    let site = Site::new();
    site.script("index.php", PAGE);
    site.script("my page.php", PAGE);
    let (fpm1, fpm0) = fix_pathinfo_1_and_0(&site, |socket| pages(&site, socket));
    let access = site.path().join("on.access");
    let on = Embed::new("on", 1).top(&format!(
        "access_log = \"{}\"\naccess_format = \"%f %r\"\n",
        access.display()
    ));
    let off = Embed::new("off", 1).admin("\"cgi.fix_pathinfo\" = \"0\"\n");
    let drover = Drover::start(&site, &[&on, &off]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let drover1 = pages(&site, &site.socket("on"));
    let drover0 = pages(&site, &site.socket("off"));

    let extra = &fpm1[1];
    assert_eq!(extra.0, 200, "{extra:?}");
    let script = site.docroot.join("index.php");
    assert_eq!(
        field(extra, "SCRIPT_FILENAME"),
        format!("\"{}\"", script.display())
    );
    assert_eq!(field(extra, "PATH_INFO"), "\"/extra\"");
    assert_eq!(field(extra, "PHP_SELF"), "\"/index.php/extra\"");
    let report = differences("cgi.fix_pathinfo=1", PATH_URLS, &fpm1, &drover1)
        + &differences("cgi.fix_pathinfo=0", PATH_URLS, &fpm0, &drover0);
    // The access log names the script that ran, as php-fpm's %f does: not Apache's
    // proxy:fcgi://localhost/..., and without the path info.
    let lines = wait_until(TIMEOUT, "an access log line per request", || {
        let text = std::fs::read_to_string(&access).unwrap_or_default();
        (text.lines().count() >= PATH_URLS.len()).then_some(text)
    });
    let expected: String = PATH_URLS
        .iter()
        .map(|url| {
            let name = if url.starts_with("/my%20page.php") {
                "my page.php"
            } else {
                "index.php"
            };
            // %r is the URI without its query.
            let uri = url.split('?').next().unwrap();
            format!("{} {uri}\n", site.docroot.join(name).display())
        })
        .collect();
    assert_eq!(lines, expected);
    assert!(
        report.is_empty(),
        "drover-php's pages differ from php-fpm's behind Apache:\n{report}\ndrover's log:\n{}",
        drover.log.text()
    );
}
