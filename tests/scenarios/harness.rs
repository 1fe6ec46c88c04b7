//! The harness on its own: nginx in front of a php-cgi started by hand, no drover. When this
//! fails, the environment or the harness is at fault, not drover.

use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

use crate::common::{Nginx, Site, TIMEOUT, http, proc, wait_until};

/// `php-cgi -b SOCKET`, killed with its workers on drop.
struct PhpCgi(Child);

impl Drop for PhpCgi {
    fn drop(&mut self) {
        proc::kill_tree(self.0.id() as i32);
        let _ = self.0.wait();
    }
}

#[test]
fn nginx_serves_php_from_a_hand_started_php_cgi() {
    let site = Site::new();
    site.script("hello.php", "<?php echo 'hello from ', PHP_SAPI;");
    let socket = site.socket("manual");
    let _php = PhpCgi(
        Command::new("php-cgi")
            .arg("-b")
            .arg(&socket)
            .env("PHP_FCGI_CHILDREN", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn php-cgi (is it installed?)"),
    );
    wait_until(TIMEOUT, "php-cgi's socket", || {
        UnixStream::connect(&socket).ok()
    });
    let nginx = Nginx::start(&site, &socket);

    let reply = http::get(&nginx.url("/hello.php"));

    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "hello from cgi-fcgi")
    );
}
