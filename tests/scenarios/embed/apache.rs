//! Apache httpd wired to a pool as Debian wires it to php-fpm (`SetHandler
//! "proxy:unix:SOCKET|fcgi://localhost"`, `ProxyFCGIBackendType` left at FPM): Apache then
//! sends `SCRIPT_FILENAME` as `proxy:fcgi://localhost/path`, which php-fpm, and drover-php,
//! strip (php-cgi answers "No input file specified.").

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::Embed;
use crate::common::{Drover, Site, TIMEOUT, http, proc, wait_until};

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
