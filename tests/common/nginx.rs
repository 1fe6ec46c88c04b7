//! nginx in front of a pool, as operators run it: Debian's `fastcgi.conf` included as is.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::{Site, TIMEOUT, proc, wait_until};

pub struct Nginx {
    child: Child,
    pub port: u16,
}

impl Nginx {
    /// Serves the site's docroot on a free loopback port, `*.php` going to `socket`.
    pub fn start(site: &Site, socket: &Path) -> Nginx {
        // Another test may take the port between our probe and nginx's bind: then nginx
        // exits, and we try another port.
        for _ in 0..5 {
            let port = free_port();
            let conf = site.write("nginx.conf", &config(site, socket, port));
            let child = Command::new("nginx")
                .arg("-p")
                .arg(site.path())
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(site.path().join("nginx-error.log"))
                // Its own messages go to nginx-error.log (-e and error_log).
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nginx (is it installed?)");
            let mut nginx = Nginx { child, port };
            let up = wait_until(TIMEOUT, "nginx to listen or exit", || {
                if nginx.child.try_wait().unwrap().is_some() {
                    return Some(false);
                }
                TcpStream::connect(("127.0.0.1", port))
                    .is_ok()
                    .then_some(true)
            });
            if up {
                return nginx;
            }
        }
        let errors = fs::read_to_string(site.path().join("nginx-error.log")).unwrap_or_default();
        panic!("nginx did not start; nginx-error.log:\n{errors}");
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://127.0.0.1:{}{path_and_query}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        proc::kill_tree(self.child.id() as i32);
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn config(site: &Site, socket: &Path, port: u16) -> String {
    let dir = site.path().display();
    // As root, nginx's workers would run as www-data, which cannot reach a root-made
    // socket or temp folder (measured.md, "Harness notes").
    let user = if proc::running_as_root() {
        "user root root;"
    } else {
        ""
    };
    format!(
        r#"daemon off;
master_process on;
worker_processes 1;
{user}
error_log {dir}/nginx-error.log info;
pid {dir}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_max_body_size 16m;
    client_body_temp_path {dir}/nginx-client-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
    server {{
        listen 127.0.0.1:{port};
        root {docroot};
        location ~ \.php$ {{
            include /etc/nginx/fastcgi.conf;
            fastcgi_pass unix:{socket};
        }}
    }}
}}
"#,
        docroot = site.docroot.display(),
        socket = socket.display(),
    )
}
