//! request_terminate_timeout: a worker stuck in one request is killed and replaced, the client
//! gets an error at once rather than after the request's 30 s (from nginx; a Python worker,
//! aborted from inside first, answers 500 itself), the log names what was stuck, and the
//! next request is served.
//!
//! A PHP kill's log line is followed by the PHP stack, on drover-php (which the master asks
//! for it, then kills at once) as on php-cgi (read from its memory).
//!
//! The log line of a php-cgi kill names the request the master sampled from the worker's
//! memory (method, URI, script), so the last test checks, under load, that each busy
//! worker's line has its own request and that the idle worker, seen idle, is left alone.

use std::thread;
use std::time::{Duration, Instant};

use super::{Pool, acted_on, lines_with, pid_file, python_stack, read_pid, seconds, served_by};
use crate::common::python::wait_started;
use crate::common::{Log, Site, Stack, TIMEOUT, http, proc, wait_until};

const TOP: &str = "request_terminate_timeout = \"2s\"\n";
const LIMIT: &str = "past request_terminate_timeout (2s)";
/// How fast the client must hear back: the 2 s limit, a tick, and nginx's reaction.
const CLIENT_BOUND: Duration = Duration::from_secs(10);

/// Records its worker's pid in `<site>/stuck-N`, then sleeps 30 s in a function.
const STUCK_PHP: &str = r#"<?php
function stuck() {
    sleep(30);
}
$site = dirname(__DIR__);
$n = (int) $_GET['n'];
file_put_contents("$site/stuck-$n.tmp", getmypid());
rename("$site/stuck-$n.tmp", "$site/stuck-$n");
stuck();
echo "not killed";
"#;

fn php_site() -> Site {
    let site = Site::new();
    site.script("stuck.php", STUCK_PHP);
    site.script("pid.php", "<?php echo getmypid();");
    site
}

/// A static PHP pool of `max_children` workers, on the tests' default PHP runtime.
fn php_pool(max_children: u32) -> Pool {
    let pm = format!("mode = \"static\"\nmax_children = {max_children}\n");
    Pool::php("www", TOP, &pm)
}

/// A `killing worker` line, taken apart.
#[derive(Debug)]
struct Kill {
    pid: i32,
    /// The elapsed time the line gives, in seconds.
    elapsed: f64,
    /// What follows the reason: `METHOD URI?QUERY (script SCRIPT)`.
    request: String,
}

fn parse_kill(line: &str, pool: &str) -> Option<Kill> {
    let (pid, rest) = acted_on(line, pool, "killing")?;
    let (running, request) = rest.split_once(&format!(", {LIMIT}: "))?;
    // A drover worker's request has an id (docs/logs.md, "Request ids"); php-cgi's none.
    let request = request.split(" request_id=").next()?;
    Some(Kill {
        pid,
        elapsed: seconds(running.strip_prefix("request running for ")?)?,
        request: request.to_string(),
    })
}

/// Waits for `n` request_terminate_timeout kills of `pool` from line `from` on.
fn wait_kills(log: &Log, from: usize, pool: &str, n: usize) -> Vec<(String, Kill)> {
    let lines = log.wait_for_lines(
        from,
        "request_terminate_timeout kills",
        |l| acted_on(l, pool, "killing").is_some() && l.contains(LIMIT),
        n,
        TIMEOUT,
    );
    lines
        .into_iter()
        .map(|line| {
            let kill = parse_kill(&line, pool).unwrap_or_else(|| panic!("{line:?}"));
            (line, kill)
        })
        .collect()
}

/// GET `path`, expected to be cut by a kill: (status, how long the client waited).
fn stuck_request(stack: &Stack, path: &str) -> (http::Reply, Duration) {
    let start = Instant::now();
    let reply = http::try_get(&stack.url(path))
        .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", stack.drover.log.text()));
    (reply, start.elapsed())
}

fn assert_cut_quickly(stack: &Stack, path: &str, reply: &http::Reply, waited: Duration) {
    assert!(
        matches!(reply.status, 502 | 504),
        "GET {path}: expected 502 or 504 from nginx, got {reply:?} after {waited:.1?}; \
         drover's log:\n{}",
        stack.drover.log.text()
    );
    assert!(
        waited >= Duration::from_secs(2) && waited < CLIENT_BOUND,
        "GET {path}: answered after {waited:.1?}; drover's log:\n{}",
        stack.drover.log.text()
    );
}

fn assert_elapsed_in_line(line: &str, kill: &Kill) {
    assert!(
        (2.0..5.0).contains(&kill.elapsed),
        "killed after {}s: {line:?}",
        kill.elapsed
    );
}

/// A request stuck in sleep() on `runtime` ("embed" or "cgi") is cut at 2 s, its kill
/// line names it and its stack follows, the worker exits and a new one serves.
fn php_request_stuck_in_sleep(runtime: &'static str) {
    let stack = Stack::start(php_site(), php_pool(1).php_runtime(runtime));
    let log = &stack.drover.log;
    let before = wait_until(TIMEOUT, "one PHP worker", || {
        let workers = stack.drover.workers();
        (workers.len() == 1).then_some(workers[0])
    });

    let (reply, waited) = stuck_request(&stack, "/stuck.php?n=1");
    println!(
        "request_terminate_timeout (php {runtime}): the client got {} after {waited:.1?}",
        reply.status
    );
    assert_cut_quickly(&stack, "/stuck.php?n=1", &reply, waited);

    let victim = read_pid(&pid_file(&stack.site, "stuck", 1)).expect("the script's pid file");
    assert_eq!(victim, before);
    let (line, kill) = wait_kills(log, 0, "www", 1).remove(0);
    assert_eq!(kill.pid, victim, "{line:?}");
    assert_elapsed_in_line(&line, &kill);
    let script = stack.site.docroot.join("stuck.php");
    assert_eq!(
        kill.request,
        format!("GET /stuck.php?n=1 (script {})", script.display()),
        "{line:?}"
    );

    let exited = format!("pool www: worker {victim} exited");
    log.wait_for_line(&exited, TIMEOUT);
    // The PHP stack follows the kill line, innermost frame first, before the worker exits.
    let prefix = format!("pool www: worker {victim}:   ");
    let lines = log.lines();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
    let (killing, exit) = (at("killing worker"), at(&exited));
    let frames: Vec<String> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let frame = l.split(&prefix).nth(1)?;
            assert!(
                killing < Some(i) && Some(i) < exit,
                "a frame out of place: {l:?}; the log:\n{}",
                log.text()
            );
            Some(frame.to_string())
        })
        .collect();
    let script = script.display();
    // An internal function's frame: drover-php writes its caller's line, as php-fpm does;
    // the php-cgi sampler has no line for it.
    let sleep = match runtime {
        "embed" => format!("sleep() {script}:3"),
        _ => "sleep() (internal)".to_string(),
    };
    assert_eq!(
        frames,
        [
            sleep,
            format!("stuck() {script}:3"),
            format!("{{main}}() {script}:9"),
        ],
        "the log:\n{}",
        log.text()
    );

    // From the log: a drover-php zygote between two workers would pass for one in /proc.
    let after = wait_started(log, 0, "www", "worker", 2, TIMEOUT)[1];
    assert_ne!(after, victim);
    assert_eq!(served_by(&stack, "/pid.php"), after);
    assert_eq!(
        lines_with(log, 0, "killing worker").len(),
        1,
        "the log:\n{}",
        log.text()
    );
}

#[test]
fn request_terminate_timeout_kills_a_drover_php_request_stuck_in_sleep_and_replaces_the_worker() {
    php_request_stuck_in_sleep("embed");
}

#[test]
fn request_terminate_timeout_kills_a_php_cgi_request_stuck_in_sleep_and_replaces_the_worker() {
    php_request_stuck_in_sleep("cgi");
}

#[test]
fn request_terminate_timeout_kills_a_python_request_stuck_in_sleep_and_replaces_the_worker() {
    let pm = "mode = \"static\"\nmax_children = 1\n";
    let stack = python_stack(Site::new(), Pool::python("py", TOP, pm));
    let log = &stack.drover.log;
    let victim = wait_started(log, 0, "py", "worker", 1, TIMEOUT)[0];

    let (reply, waited) = stuck_request(&stack, "/sleep?seconds=30");
    println!(
        "request_terminate_timeout (python): the client got {} after {waited:.1?}",
        reply.status
    );
    // A Python request is aborted from inside (python::abort): drover answers 500 itself.
    assert!(
        reply.status == 500 && waited >= Duration::from_secs(2) && waited < CLIENT_BOUND,
        "expected drover's 500 after 2 s, got {reply:?} after {waited:.1?}; log:\n{}",
        stack.drover.log.text()
    );

    let (line, kill) = wait_kills(log, 0, "py", 1).remove(0);
    assert_eq!(kill.pid, victim, "{line:?}");
    assert_elapsed_in_line(&line, &kill);
    assert_eq!(
        kill.request, "GET /sleep?seconds=30 (script pm_app:application)",
        "{line:?}"
    );

    // It ends the aborted request and exits by itself: no SIGKILL within terminate_grace.
    let exited = log.wait_for_line(&format!("pool py: worker {victim} exited"), TIMEOUT);
    assert!(!exited.contains("SIGKILL"), "{exited}");
    let new = wait_started(log, 0, "py", "worker", 2, TIMEOUT)[1];
    assert_eq!(served_by(&stack, "/pid"), new);
    assert_eq!(
        lines_with(log, 0, "killing worker").len(),
        1,
        "the log:\n{}",
        log.text()
    );
}

/// What the master samples from php-cgi workers shows in its kill lines. Two of three workers are stuck in different requests; each kill line
/// names its own worker's request, and the third worker, idle, is never taken for busy
/// (it would be killed too, 2 s after).
#[test]
fn the_php_cgi_scoreboard_under_load_shows_each_busy_workers_request_and_leaves_the_idle_one() {
    // php-cgi's: its kill lines give the request the master sampled from its memory.
    let stack = Stack::start(php_site(), php_pool(3).php_runtime("cgi"));
    let log = &stack.drover.log;
    let workers = wait_until(TIMEOUT, "3 php-cgi workers", || {
        let workers = stack.drover.workers();
        (workers.len() == 3).then_some(workers)
    });

    let clients: Vec<_> = (1..=2)
        .map(|n| {
            let url = stack.url(&format!("/stuck.php?n={n}&load=yes"));
            thread::spawn(move || http::try_get(&url))
        })
        .collect();
    let stuck: Vec<i32> = wait_until(TIMEOUT, "2 requests stuck in 2 workers", || {
        (1..=2)
            .map(|n| read_pid(&pid_file(&stack.site, "stuck", n)))
            .collect()
    });
    assert_ne!(stuck[0], stuck[1]);
    let idle: Vec<i32> = workers
        .iter()
        .copied()
        .filter(|p| !stuck.contains(p))
        .collect();
    assert_eq!(idle.len(), 1, "workers {workers:?}, stuck {stuck:?}");

    let kills = wait_kills(log, 0, "www", 2);
    let script = stack.site.docroot.join("stuck.php");
    for (n, pid) in (1..=2).zip(&stuck) {
        let (line, kill) = kills
            .iter()
            .find(|(_, k)| k.pid == *pid)
            .unwrap_or_else(|| panic!("no kill of worker {pid} in {kills:#?}"));
        assert_eq!(
            kill.request,
            format!(
                "GET /stuck.php?n={n}&load=yes (script {})",
                script.display()
            ),
            "{line:?}"
        );
        assert_elapsed_in_line(line, kill);
    }
    for client in clients {
        let reply = client.join().expect("client thread");
        let reply = reply.unwrap_or_else(|e| panic!("{e}; the log:\n{}", log.text()));
        assert!(matches!(reply.status, 502 | 504), "{reply:?}");
    }
    // The idle worker stays idle and alive: no kill, well past the 2 s it would take.
    let idle_killed = proc::poll(Duration::from_secs(3), || {
        lines_with(log, 0, "killing worker").len() > 2 || !proc::is_running(idle[0])
    });
    assert!(
        !idle_killed,
        "idle worker {} was killed or exited; the log:\n{}",
        idle[0],
        log.text()
    );
}

/// Issue 24: a `request_terminate_timeout` kill is its own cause of exit, `terminate`: the
/// status (and the metrics, rendered from the same counts) count it there and not as a crash, so that the
/// README's crash alert (`recycled_total{cause="crash"}`) keeps meaning a crash. `python`:
/// a Python pool, whose aborted worker exits by itself (its exit is no `max_requests`
/// recycle either); otherwise drover-php, whose worker the master SIGKILLs.
fn a_terminate_kill_is_counted_as_terminate_not_as_a_crash(python: bool) {
    use crate::common::{Location, Nginx, start_with_control};
    let site = Site::new();
    let pm = "mode = \"static\"\nmax_children = 1\n";
    let (pool, path, name) = if python {
        site.write("apps/pm_app.py", include_str!("../../apps/pm_app.py"));
        (Pool::python("py", TOP, pm), "/sleep?seconds=30", "py")
    } else {
        site.script("stuck.php", STUCK_PHP);
        (php_pool(1).php_runtime("embed"), "/stuck.php?n=1", "www")
    };
    let (drover, ctl) = start_with_control(&site, &[&pool]);
    let nginx = if python {
        Nginx::start_locations(&site, &[Location::prefix("/", &site.socket(name))])
    } else {
        Nginx::start(&site, &site.socket(name))
    };
    let log = &drover.log;
    let victim = wait_started(log, 0, name, "worker", 1, TIMEOUT)[0];

    let reply = http::try_get(&nginx.url(path));
    println!("a request past request_terminate_timeout: {reply:?}");
    let (line, kill) = wait_kills(log, 0, name, 1).remove(0);
    assert_eq!(kill.pid, victim, "{line:?}");
    let exited = log.wait_for_line(&format!("pool {name}: worker {victim} exited"), TIMEOUT);
    println!("{exited}");

    let recycled = ctl.status_json(name, &log.text())["recycled"].clone();
    println!("recycled: {recycled}");
    assert_eq!(recycled["terminate"], 1, "{recycled}\n{}", log.text());
    assert_eq!(recycled["crash"], 0, "{recycled}\n{}", log.text());
    assert_eq!(recycled["max_requests"], 0, "{recycled}\n{}", log.text());
}

#[test]
fn a_drover_php_terminate_kill_is_counted_as_terminate_not_as_a_crash() {
    a_terminate_kill_is_counted_as_terminate_not_as_a_crash(false);
}

#[test]
fn a_python_terminate_abort_is_counted_as_terminate_not_as_a_crash() {
    a_terminate_kill_is_counted_as_terminate_not_as_a_crash(true);
}
