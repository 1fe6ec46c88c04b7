//! What php-fpm's SAPI gives a script, from drover-php behind nginx.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::Embed;
use crate::common::{AsUser, Drover, Location, Nginx, Site, Stack, TIMEOUT, http};

const PID_PHP: &str = "<?php echo getmypid();";

/// The client has the whole answer before the script's work after
/// `fastcgi_finish_request()` ends, and the one worker then takes the next request.
#[test]
fn fastcgi_finish_request_answers_before_the_script_ends() {
    let site = Site::new();
    let marker = site.path().join("after.txt");
    site.script(
        "finish.php",
        &format!(
            "<?php echo \"answered\\n\"; $ended = fastcgi_finish_request(); echo 'dropped: the request has ended'; sleep(2); file_put_contents({:?}, var_export($ended, true));",
            marker.display()
        ),
    );
    site.script("pid.php", PID_PHP);
    let stack = Stack::start(site, Embed::new("www", 1));

    let started = Instant::now();
    let reply = http::get(&stack.url("/finish.php"));
    let answered = started.elapsed();

    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body, "answered\n");
    assert!(
        answered < Duration::from_millis(1500),
        "the answer took {answered:?}: it waited for the script's sleep(2)"
    );
    assert!(!marker.exists(), "the script's tail ran before the answer");
    let next = http::get(&stack.url("/pid.php"));
    assert_eq!(next.status, 200, "{next:?}");
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("true"),
        "the one worker answered the next request before its script ended"
    );
}

/// `flush()` sends what the script wrote so far: the first bytes arrive before it ends.
/// (With php.ini's `output_buffering = 4096`, as Debian ships it, PHP holds the first
/// 4 KiB before the SAPI sees them, under php-fpm too: the pool turns it off.)
#[test]
fn flush_streams_the_first_bytes_before_the_script_ends() {
    let site = Site::new();
    site.script(
        "stream.php",
        "<?php header('X-Accel-Buffering: no'); echo str_repeat('a', 100), \"\\n\"; flush(); sleep(2); echo \"end\\n\";",
    );
    let stack = Stack::start(site, Embed::new("www", 1).ini("output_buffering = 0\n"));

    let started = Instant::now();
    let mut client = TcpStream::connect(("127.0.0.1", stack.nginx.port)).unwrap();
    client.set_read_timeout(Some(TIMEOUT)).unwrap();
    client
        .write_all(b"GET /stream.php HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_body_at = None;
    loop {
        let n = client.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        received.extend_from_slice(&buf[..n]);
        if first_body_at.is_none() && received.windows(4).any(|w| w == b"aaaa") {
            first_body_at = Some(started.elapsed());
        }
    }
    let total = started.elapsed();
    let text = String::from_utf8_lossy(&received);

    assert!(text.ends_with("end\n"), "{text}");
    let first = first_body_at.expect("the flushed bytes");
    assert!(
        first < Duration::from_millis(1500) && total >= Duration::from_secs(2),
        "first bytes after {first:?}, end after {total:?}"
    );
}

/// `PHP_VALUE` from nginx holds for the requests it is sent with, and not for the next
/// request the same worker serves; `[php.admin_ini]` beats both it and `ini_set()`.
#[test]
fn php_value_holds_for_its_request_and_admin_ini_for_good() {
    let site = Site::new();
    let show = "<?php echo ini_get('memory_limit'), ' ', ini_get('max_input_vars'), ' ', var_export(ini_set('max_input_vars', '7'), true), ' ', ini_get('max_input_vars');";
    site.script("ini.php", show);
    site.script("pv.php", show);
    let pool = Embed::new("www", 1).admin("max_input_vars = 1234\n");
    let drover = Drover::start(&site, &[&pool]);
    let socket = site.socket("www");
    let nginx = Nginx::start_php_with(
        &site,
        &socket,
        "/pv.php",
        r#"fastcgi_param PHP_VALUE "memory_limit=77M
max_input_vars=55";"#,
    );

    let before = http::get(&nginx.url("/ini.php")).body;
    let during = http::get(&nginx.url("/pv.php")).body;
    let after = http::get(&nginx.url("/ini.php")).body;

    let default_limit = before.split(' ').next().unwrap().to_string();
    assert_ne!(default_limit, "77M");
    assert_eq!(
        before,
        format!("{default_limit} 1234 false 1234"),
        "admin value, locked"
    );
    assert_eq!(
        during, "77M 1234 false 1234",
        "PHP_VALUE sets memory_limit, not the admin value"
    );
    assert_eq!(after, before, "PHP_VALUE leaked into the next request");
    drop(drover);
}

/// `security.limit_extensions` refuses a `.txt` script with php-fpm's answer, and a
/// missing script is php-fpm's 404.
#[test]
fn limit_extensions_and_missing_scripts_answer_as_php_fpm() {
    let site = Site::new();
    site.script("notes.txt", "<?php echo 'ran';");
    let pool = Embed::new("www", 1);
    let drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(
        &site,
        &[Location {
            pattern: r"~ \.(php|txt)$".into(),
            ..Location::php(&site.socket("www"))
        }],
    );

    let denied = http::get(&nginx.url("/notes.txt"));
    let missing = http::get(&nginx.url("/missing.php"));

    assert_eq!(
        (denied.status, denied.body.as_str()),
        (403, "Access denied.\n")
    );
    assert_eq!(
        (missing.status, missing.body.as_str()),
        (404, "File not found.\n")
    );
    drop(drover);
}

/// A script the worker may not read is php-fpm's `EACCES` answer, 403 "Access denied.",
/// with its log line; the worker serves on. As root the pool runs as www-data (root reads
/// any file); otherwise as this user, whom the file's mode keeps out.
#[test]
fn an_unreadable_script_is_access_denied_as_php_fpm() {
    use std::os::unix::fs::PermissionsExt;
    let site = Site::new();
    site.script("index.php", "<?php echo 'served by ', posix_geteuid();");
    site.script("secret.php", "<?php echo 'secret';");
    let secret = site.docroot.join("secret.php");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let drover = Drover::start_reachable(
        &site,
        &[&AsUser {
            pool: Embed::new("www", 1),
            user: "www-data",
            group: "www-data",
        }],
    );
    let nginx = Nginx::start(&site, &site.socket("www"));

    let denied = http::get(&nginx.url("/secret.php"));
    let served = http::get(&nginx.url("/index.php"));

    assert_eq!(
        (denied.status, denied.body.as_str()),
        (403, "Access denied.\n"),
        "drover's log:\n{}",
        drover.log.text()
    );
    drover.log.wait_for_line(
        &format!(
            "Unable to open primary script: {} (Permission denied)",
            secret.display()
        ),
        TIMEOUT,
    );
    assert_eq!(served.status, 200, "{}", served.body);
    if crate::common::proc::running_as_root() {
        assert_ne!(served.body, "served by 0", "the pool must not run as root");
    }
}

/// The SAPI is php-fpm's to the script: its name and its functions.
#[test]
fn scripts_see_php_fpm_s_sapi() {
    let site = Site::new();
    site.script(
        "sapi.php",
        "<?php echo php_sapi_name(), ' ', function_exists('fastcgi_finish_request') ? 'finish' : '-', ' ', getallheaders()['X-Probe'] ?? '-', ' ', $_SERVER['PHP_SELF'];",
    );
    let stack = Stack::start(site, Embed::new("www", 1));

    let reply = http::get_with(&stack.url("/sapi.php"), &[("X-Probe", "p1")]);

    assert_eq!(reply.body, "fpm-fcgi finish p1 /sapi.php");
}

/// A 10 MB upload reaches `$_FILES` whole, and a session lives across requests.
#[test]
fn uploads_and_sessions() {
    let site = Site::new();
    site.script(
        "upload.php",
        "<?php $f = $_FILES['f']; echo $f['error'] ? 'error ' . $f['error'] : $f['size'] . ' ' . md5_file($f['tmp_name']);",
    );
    site.script(
        "count.php",
        "<?php session_start(); $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1; echo $_SESSION['n'];",
    );
    let sessions = site.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let pool = Embed::new("www", 2).ini(&format!(
        "upload_max_filesize = \"20M\"\npost_max_size = \"20M\"\n\"session.save_path\" = {:?}\n",
        sessions.display()
    ));
    let stack = Stack::start(site, pool);

    let payload: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let boundary = "drover-boundary-7";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&payload);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let reply = http::post(
        &stack.url("/upload.php"),
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    );
    let digest = crate::common::bytes::digest(&stack.site, "md5sum", &payload);
    assert_eq!(reply.body, format!("{} {digest}", payload.len()));

    let first = http::get(&stack.url("/count.php"));
    let cookie = first
        .header("set-cookie")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let mut counts = vec![first.body];
    for _ in 0..3 {
        counts.push(http::get_with(&stack.url("/count.php"), &[("Cookie", &cookie)]).body);
    }
    assert_eq!(counts, ["1", "2", "3", "4"]);
}

/// A worker that segfaults costs its request only; the master logs how it ended and the
/// pool serves on.
#[test]
fn a_segfaulting_worker_costs_one_request() {
    let site = Site::new();
    site.script(
        "crash.php",
        "<?php posix_kill(getmypid(), SIGSEGV); sleep(1); echo 'alive';",
    );
    site.script("pid.php", PID_PHP);
    let stack = Stack::start(site, Embed::new("www", 2));

    let crashed = http::get(&stack.url("/crash.php"));
    assert_eq!(crashed.status, 502, "{crashed:?}");
    stack.drover.log.wait_for_line("SIGSEGV", TIMEOUT);
    for _ in 0..10 {
        assert_eq!(http::get(&stack.url("/pid.php")).status, 200);
    }
}

/// An uncaught exception and a script past `max_execution_time` each end their request
/// with php-fpm's 500 and a "PHP message" in the log; the one worker serves on.
#[test]
fn fatal_errors_end_the_request_and_the_worker_serves_on() {
    let site = Site::new();
    site.script(
        "throw.php",
        "<?php throw new RuntimeException('boom from the app');",
    );
    site.script(
        "spin.php",
        "<?php set_time_limit(1); $x = 0; while (true) { $x++; }",
    );
    site.script("pid.php", PID_PHP);
    let stack = Stack::start(site, Embed::new("www", 1));
    let pid = http::get(&stack.url("/pid.php")).body;

    let thrown = http::get(&stack.url("/throw.php"));
    let spun = http::get(&stack.url("/spin.php"));

    assert_eq!(thrown.status, 500, "{thrown:?}");
    assert_eq!(spun.status, 500, "{spun:?}");
    let log = &stack.drover.log;
    log.wait_for_line(
        "PHP message: PHP Fatal error:  Uncaught RuntimeException: boom from the app",
        TIMEOUT,
    );
    log.wait_for_line("Maximum execution time of 1 second exceeded", TIMEOUT);
    assert_eq!(
        http::get(&stack.url("/pid.php")).body,
        pid,
        "the worker was replaced"
    );
}

/// A client that goes away mid-response: the script's next writes fail and PHP marks the
/// connection aborted. With `ignore_user_abort(true)` the script runs to its end and sees
/// `connection_aborted()`; without, it ends at that write (its shutdown functions run).
#[test]
fn a_vanished_client_aborts_the_script_unless_it_ignores_user_abort() {
    let site = Site::new();
    for (name, ignore) in [("ignore", "true"), ("stop", "false")] {
        let marker = site.path().join(format!("{name}.txt"));
        site.script(
            &format!("{name}.php"),
            &format!(
                r#"<?php
ignore_user_abort({ignore});
header('X-Accel-Buffering: no');
$i = 0;
register_shutdown_function(function () use (&$i) {{
    file_put_contents({marker:?}, (connection_aborted() ? 'aborted' : 'connected') . " after $i");
}});
for (; $i < 100; $i++) {{ echo str_repeat('x', 8192), "\n"; flush(); usleep(20000); }}
"#,
                marker = marker.display()
            ),
        );
    }
    let stack = Stack::start(site, Embed::new("www", 2).ini("output_buffering = 0\n"));

    for name in ["ignore", "stop"] {
        let mut client = TcpStream::connect(("127.0.0.1", stack.nginx.port)).unwrap();
        client.set_read_timeout(Some(TIMEOUT)).unwrap();
        write!(
            client,
            "GET /{name}.php HTTP/1.0\r\nHost: localhost\r\n\r\n"
        )
        .unwrap();
        let mut buf = [0u8; 4096];
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0);
        drop(client);
    }

    let marker = |name: &str| {
        crate::common::wait_until(TIMEOUT, "the script's marker", || {
            std::fs::read_to_string(stack.site.path().join(format!("{name}.txt"))).ok()
        })
    };
    assert_eq!(
        marker("ignore"),
        "aborted after 100",
        "ran to its end, aborted"
    );
    let stopped = marker("stop");
    let at: u32 = stopped
        .strip_prefix("aborted after ")
        .unwrap_or_else(|| panic!("{stopped:?}"))
        .parse()
        .unwrap();
    assert!(
        at < 100,
        "the script did not stop at the failed write: {stopped:?}"
    );
}

/// `PHP_ADMIN_VALUE` from nginx sets a value the script cannot change, for that request.
#[test]
fn php_admin_value_locks_its_setting_for_its_request() {
    let site = Site::new();
    let show = "<?php echo ini_get('memory_limit'), ' ', var_export(ini_set('memory_limit', '99M'), true), ' ', ini_get('memory_limit');";
    site.script("admin.php", show);
    site.script("plain.php", show);
    let pool = Embed::new("www", 1);
    let drover = Drover::start(&site, &[&pool]);
    let socket = site.socket("www");
    let nginx = Nginx::start_php_with(
        &site,
        &socket,
        "/admin.php",
        r#"fastcgi_param PHP_ADMIN_VALUE "memory_limit=88M";"#,
    );

    let locked = http::get(&nginx.url("/admin.php")).body;
    let plain = http::get(&nginx.url("/plain.php")).body;

    assert_eq!(locked, "88M false 88M");
    let default_limit = plain.split(' ').next().unwrap().to_string();
    assert_ne!(
        default_limit, "88M",
        "PHP_ADMIN_VALUE leaked into the next request"
    );
    assert_eq!(plain, format!("{default_limit} '{default_limit}' 99M"));
    drop(drover);
}

/// php-fpm's `pm.status_path` and `ping.path` on the pool's own socket, behind nginx's usual
/// php-fpm wiring (`location ~ ^/(status|ping)$`): the ping is the worker's, the status
/// the master's (fetched from `status_listen`, with php-fpm's query words), and neither
/// reaches PHP: a page served after them is PHP's own.
#[test]
fn status_path_and_ping_path_answer_on_the_pool_s_socket() {
    let site = Site::new();
    site.script("index.php", "<?php echo 'page';");
    let status_socket = site.path().join("www-status.sock");
    let pool = Embed::new("www", 2).top(&format!(
        "status_listen = \"{}\"\nstatus_path = \"/status\"\nping_path = \"/ping\"\nping_response = \"alive\"",
        status_socket.display()
    ));
    let drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(
        &site,
        &[
            Location {
                pattern: "~ ^/(status|ping)$".into(),
                ..Location::php(&site.socket("www"))
            },
            Location::php(&site.socket("www")),
        ],
    );

    let page = http::get(&nginx.url("/index.php"));
    let ping = http::get(&nginx.url("/ping"));
    let status = http::get(&nginx.url("/status?json&full"));
    let text = http::get(&nginx.url("/status"));
    let refused = http::get(&nginx.url("/status?xml"));
    let after = http::get(&nginx.url("/index.php"));

    assert_eq!((page.status, page.body.as_str()), (200, "page"));
    assert_eq!(
        (ping.status, ping.body.as_str(), ping.header("content-type")),
        (200, "alive", "text/plain")
    );
    assert_eq!(
        status.status,
        200,
        "{}; drover's log:\n{}",
        status.body,
        drover.log.text()
    );
    let json: serde_json::Value = serde_json::from_str(&status.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", status.body));
    assert_eq!(json["pool"], "www");
    assert!(
        json["accepted conn"].as_u64().is_some_and(|n| n >= 2),
        "{json}"
    );
    assert_eq!(
        json["processes"].as_array().map(Vec::len),
        Some(2),
        "{json}"
    );
    assert_eq!(text.status, 200);
    assert!(text.body.starts_with("pool:"), "{}", text.body);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!((after.status, after.body.as_str()), (200, "page"));
}

/// A body over `post_max_size` is read and dropped at the speed it arrives, and answered
/// as php-fpm answers it (200, no `$_POST`): 16 MiB sent at once on loopback hold the
/// worker well under a second, never `request_read_timeout` (30 s), and it serves the next
/// request at once.
#[test]
fn a_body_over_post_max_size_costs_the_time_it_takes_to_arrive() {
    let site = Site::new();
    site.script(
        "form.php",
        "<?php echo getmypid(), ' ', count($_POST), ' ', error_get_last()['message'] ?? '';",
    );
    let pool = Embed::new("www", 1).ini("post_max_size = \"1M\"\n");
    let stack = Stack::start(site, pool);
    let url = stack.url("/form.php");
    let first = http::get(&url);
    let pid = first.body.split(' ').next().unwrap_or_default().to_owned();
    let body = format!("a={}", "x".repeat(16 << 20));
    let started = Instant::now();
    let over = http::post(&url, "application/x-www-form-urlencoded", body.as_bytes());
    let took = started.elapsed();
    let next = http::get(&url);
    let all = started.elapsed();
    println!("16 MiB over post_max_size: answered in {took:?}, the next request by {all:?}");
    assert_eq!(over.status, 200, "{over:?}");
    assert!(
        over.body.starts_with(&format!("{pid} 0 "))
            && over.body.contains("exceeds the limit of 1048576 bytes"),
        "{over:?}"
    );
    assert!(next.body.starts_with(&format!("{pid} 0")), "{next:?}");
    assert!(
        all < Duration::from_secs(5),
        "answered in {took:?}, the next request by {all:?}\n{}",
        stack.drover.log.text()
    );
}
