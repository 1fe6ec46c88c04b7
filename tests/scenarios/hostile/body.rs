//! A request body the app does not read: a POST of 200 KiB to 4 MiB through nginx to a WSGI
//! route that answers without reading `wsgi.input`, or that raises. The worker must end
//! the response at once and shed the rest of the body, not wait for a body that nginx
//! stops sending once it has the response (which hung the client for nginx's 60 s
//! `fastcgi_read_timeout`). php-cgi, which shuts its side down before draining, is the
//! control.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{Drover, Location, Nginx, PhpPool, PythonPool, Site, Stack, python};

/// The sizes that hung (5/10 at 200 KiB, 9/10 at 1 MiB, 10/10 at 4 MiB).
const SIZES: [usize; 3] = [200 << 10, 1 << 20, 4 << 20];

/// Requests per size, all at once, one worker each.
const TRIES: usize = 10;

/// Every answer comes within this: well under a second on a quiet machine; 5 s leaves
/// room for a loaded one and is still far from the 60 s of a hang.
const BOUND: Duration = Duration::from_secs(5);

/// How one POST went: its status and time, or why it got no answer within [`BOUND`].
type Outcome = Result<(u16, Duration), String>;

/// POSTs `len` bytes to `path` on a fresh connection and reads the reply to its end.
fn post(port: u16, path: &str, len: usize) -> Outcome {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(BOUND)).unwrap();
    stream.set_write_timeout(Some(BOUND)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&vec![b'x'; len]))
        .map_err(|e| format!("sending: {e}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|e| format!("no end of reply after {:.1?}: {e}", started.elapsed()))?;
    let status = String::from_utf8_lossy(&reply)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {:?}", String::from_utf8_lossy(&reply)))?;
    Ok((status, started.elapsed()))
}

/// [`TRIES`] concurrent POSTs of each size to `path`, each size on a fresh stack (so that
/// a worker held by one size cannot slow the next): a line per size, and whether every
/// one was answered `status` within [`BOUND`].
fn hang_table(start: impl Fn() -> Stack, path: &str, status: u16) -> (String, bool) {
    let mut table = String::new();
    let mut all_ok = true;
    for len in SIZES {
        let stack = start();
        let port = stack.nginx.port;
        let path = path.to_string();
        let outcomes: Vec<Outcome> = (0..TRIES)
            .map(|_| {
                let path = path.clone();
                thread::spawn(move || post(port, &path, len))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let ok = |o: &Outcome| matches!(o, Ok((s, t)) if *s == status && *t < BOUND);
        let failed = outcomes.iter().filter(|o| !ok(o)).count();
        // A connection reset or a broken pipe can cut a response short even when its
        // status line got through.
        let nginx_errors =
            std::fs::read_to_string(stack.site.path().join("nginx-error.log")).unwrap_or_default();
        let upstream_errors = nginx_errors
            .lines()
            .filter(|l| l.contains("[error]") && l.contains("upstream"))
            .count();
        all_ok &= failed == 0 && upstream_errors == 0;
        let mut times: Vec<Duration> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok().map(|(_, t)| *t))
            .collect();
        times.sort();
        let over_a_second = outcomes
            .iter()
            .filter(|o| !matches!(o, Ok((_, t)) if *t < Duration::from_secs(1)))
            .count();
        table += &format!(
            "{path} {:>5} KiB: {over_a_second}/{TRIES} took over 1 s, {failed}/{TRIES} no {status} \
             within {BOUND:?}, {upstream_errors} upstream errors; fastest {:.2?}, slowest {:.2?}\n",
            len >> 10,
            times.first().copied().unwrap_or_default(),
            times.last().copied().unwrap_or_default(),
        );
        for outcome in outcomes.iter().filter(|o| !ok(o)) {
            table += &format!("    {outcome:?}\n");
        }
        if failed > 0 || upstream_errors > 0 {
            table += &format!(
                "drover's log:\n{}\nnginx's error log:\n{nginx_errors}\n",
                stack.drover.log.text(),
            );
        }
    }
    (table, all_ok)
}

fn wsgi_stack() -> Stack {
    let pool = PythonPool::wsgi("py").max_children(TRIES as u32);
    Stack::python(Site::new(), pool)
}

#[test]
fn an_unread_body_does_not_hold_the_answer() {
    // `/pid` answers without touching wsgi.input.
    let (table, all_ok) = hang_table(wsgi_stack, "/pid", 200);

    eprintln!("{table}");
    assert!(all_ok, "{table}");
}

/// The WSGI pool behind nginx with `fastcgi_keep_conn on`.
fn kept_wsgi_stack() -> Stack {
    let site = Site::new();
    python::install_apps(&site);
    let pool = PythonPool::wsgi("py").max_children(TRIES as u32);
    let drover = Drover::start(&site, &[&pool]);
    let location = Location::prefix("/", &site.socket("py")).keep_conn();
    let nginx = Nginx::start_locations(&site, &[location]);
    Stack {
        nginx,
        drover,
        site,
    }
}

#[test]
fn an_unread_body_on_a_kept_connection_does_not_hold_the_answer() {
    let (table, all_ok) = hang_table(kept_wsgi_stack, "/pid", 200);

    eprintln!("{table}");
    assert!(all_ok, "{table}");
}

#[test]
fn an_app_that_raises_before_reading_the_body_answers_500_at_once() {
    let (table, all_ok) = hang_table(wsgi_stack, "/fail", 500);

    eprintln!("{table}");
    assert!(all_ok, "{table}");
}

#[test]
fn php_cgi_ignoring_the_body_answers_at_once() {
    let php_stack = || {
        let site = Site::new();
        site.script("ignore.php", "<?php echo 'ignored';\n");
        Stack::start(site, PhpPool::new("php").max_children(TRIES as u32))
    };

    let (table, all_ok) = hang_table(php_stack, "/ignore.php", 200);

    eprintln!("{table}");
    assert!(all_ok, "{table}");
}
