//! Reload that drops nothing. 50 clients loop on a PHP pool and a Python pool through nginx
//! for 10 s while, every second, the test rewrites both pool files (a new `[env]` GREETING
//! that the scripts echo; the PHP pool's max_children between 4 and 3) and sends HUP: every
//! response is a 200 with a greeting the pools have had, and afterwards only the last one
//! is served, by the last worker count. A broken pool file is refused on reload (USR2 and
//! `drover ctl reload`): drover keeps serving the old configuration and says where the
//! error is.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Pool, Setup, line_of, number, site, start, start_sized};
use crate::common::{Log, PoolFile, TIMEOUT, http, proc, wait_until};

/// Concurrent clients, each on its own keep-alive connection to nginx.
const CLIENTS: usize = 50;
/// Reloads, one a second; the load runs a second longer, so the last one rolls under it.
const ROUNDS: u32 = 9;
const PATHS: [&str; 2] = ["/greeting.php", "/py/greeting"];

/// The PHP pool's max_children in `round`: toggled, 4 after the last round.
fn php_children(round: u32) -> u32 {
    if round % 2 == 1 { 4 } else { 3 }
}

fn php_pool(round: u32) -> Pool {
    Pool::php("www")
        .max_children(php_children(round))
        .greeting(&format!("v{round}"))
}

fn python_pool(round: u32) -> Pool {
    Pool::python("py")
        .mount("/py")
        .max_children(2)
        .greeting(&format!("v{round}"))
}

/// Replaces `pools.d/NAME.toml` in one step (rename), as an editor or a deploy tool does,
/// so that drover never reads a half-written file.
fn replace_pool_file(setup: &Setup, pool: &Pool) {
    let site = &setup.stack.site;
    let temp = site.write(
        &format!("pools.d/.{}.toml.new", pool.name),
        &pool.toml(site),
    );
    fs::rename(
        &temp,
        site.path().join(format!("pools.d/{}.toml", pool.name)),
    )
    .expect("rename the pool file into place");
}

/// A request that did not get a 200 with a greeting the pools had.
struct Failure {
    /// Since the load started.
    at: Duration,
    path: &'static str,
    what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {:.2?}: GET {}: {}", self.at, self.path, self.what)
    }
}

/// What one client thread saw.
struct Tally {
    requests: u64,
    failures: Vec<Failure>,
}

/// GETs `PATHS` in turn on one keep-alive connection until `stop`; a body must be
/// `greeting=vK` with K at most `published` (the round whose files are written).
fn client(
    base: String,
    client: usize,
    started: Instant,
    stop: Arc<AtomicBool>,
    published: Arc<AtomicU32>,
) -> Tally {
    let agent: ureq::Agent = http::agent();
    let mut tally = Tally {
        requests: 0,
        failures: Vec::new(),
    };
    // Bounded on its own too: a test that fails before setting `stop` must not hang here.
    let deadline = started + Duration::from_secs(60);
    let mut turn = client;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        let path = PATHS[turn % PATHS.len()];
        turn += 1;
        tally.requests += 1;
        let result = agent.get(&format!("{base}{path}")).call();
        let what = match result {
            Err(e) => Some(format!("transport: {e}")),
            Ok(mut response) => {
                let status = response.status().as_u16();
                let body = response.body_mut().read_to_string();
                let latest = published.load(Ordering::SeqCst);
                match body {
                    Err(e) => Some(format!("{status}, body unreadable: {e}")),
                    Ok(body)
                        if status == 200 && greeting_round(&body).is_some_and(|k| k <= latest) =>
                    {
                        None
                    }
                    Ok(body) => Some(format!("{status} {body:?} (latest round {latest})")),
                }
            }
        };
        if let Some(what) = what {
            tally.failures.push(Failure {
                at: started.elapsed(),
                path,
                what,
            });
        }
    }
    tally
}

/// `greeting=vK` → K.
fn greeting_round(body: &str) -> Option<u32> {
    body.strip_prefix("greeting=v")?.parse().ok()
}

/// Waits for the outcome of the reload asked at log line `from`: its summary, or a refusal.
fn wait_reload_outcome(log: &Log, from: usize) -> String {
    log.wait_for(
        from,
        "the reload's outcome",
        |l| {
            (l.contains("reload: ") && !l.contains("reload: reading"))
                || l.contains("reload refused")
        },
        TIMEOUT,
    )
}

#[test]
fn hup_every_second_under_50_concurrent_clients_drops_nothing_and_applies_the_new_config() {
    let (php, python) = (php_pool(0), python_pool(0));
    // Each client holds a connection to nginx, and nginx one to a pool per request.
    let setup = start_sized(site(), &[&php, &python], 4 * CLIENTS as u32);
    let log = &setup.stack.drover.log;
    assert_eq!(setup.get_ok("/greeting.php"), "greeting=v0");
    assert_eq!(setup.get_ok("/py/greeting"), "greeting=v0");

    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU32::new(0));
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (stop, published) = (stop.clone(), published.clone());
            let base = setup.stack.url("");
            thread::spawn(move || client(base, i, started, stop, published))
        })
        .collect();

    let mut outcomes = Vec::new();
    let mut last_reload = 0;
    for round in 1..=ROUNDS {
        // Pacing, not synchronisation: the scenario is one reload a second.
        sleep_until(started + Duration::from_secs(round.into()));
        // Odd rounds deploy a new configuration; even ones are a plain `kill -HUP` with no
        // file changed, which renews every pool all the same.
        if round % 2 == 1 {
            published.store(round, Ordering::SeqCst);
            replace_pool_file(&setup, &php_pool(round));
            replace_pool_file(&setup, &python_pool(round));
        }
        last_reload = log.len();
        setup.stack.drover.signal(Signal::SIGHUP);
        outcomes.push(wait_reload_outcome(log, last_reload));
    }
    sleep_until(started + Duration::from_secs(u64::from(ROUNDS) + 1));
    stop.store(true, Ordering::SeqCst);
    let tallies: Vec<Tally> = clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect();
    let elapsed = started.elapsed();

    let requests: u64 = tallies.iter().map(|t| t.requests).sum();
    let mut failures: Vec<&Failure> = tallies.iter().flat_map(|t| &t.failures).collect();
    failures.sort_by_key(|f| f.at);
    println!(
        "reload under load: {requests} requests from {CLIENTS} clients in {elapsed:.1?} \
         ({:.0}/s), {ROUNDS} HUPs, {} failed",
        requests as f64 / elapsed.as_secs_f64(),
        failures.len()
    );
    // Each HUP rolled both pools: a reload that left them "unchanged" would test nothing.
    // The plain ones renewed them.
    let not_rolled: Vec<&String> = outcomes
        .iter()
        .filter(|l| !(l.contains("www: new generation") && l.contains("py: new generation")))
        .collect();
    let renewed = outcomes
        .iter()
        .filter(|l| l.contains("www: new generation (renewed)"))
        .count();
    assert_eq!(
        renewed,
        (ROUNDS / 2) as usize,
        "the plain HUPs renewed the PHP pool: {outcomes:#?}"
    );
    assert!(
        not_rolled.is_empty(),
        "reloads that did not roll both pools: {not_rolled:#?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {requests} requests failed; the first ones:\n{}\nnginx's errors:\n{}\n\
         drover's log:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        nginx_errors(&setup),
        setup.log()
    );

    // The last configuration, and only it, once its reload is done.
    log.wait_for(
        last_reload,
        "reload done",
        |l| l.contains("reload done"),
        TIMEOUT,
    );
    // An old worker that was busy at "reload done" may take a request or two more before
    // the master sees it idle and retires it (php-cgi's state is sampled): the old
    // configuration must stop answering soon, not at that very line.
    let last = format!("greeting=v{ROUNDS}");
    for path in PATHS {
        let mut stale = Vec::new();
        let settled = proc::poll(TIMEOUT, || {
            stale = (0..20)
                .map(|_| setup.get_ok(path))
                .filter(|body| *body != last)
                .collect();
            stale.is_empty()
        });
        assert!(
            settled,
            "{path}: an old generation still serves: {stale:?}; drover's log:\n{}",
            setup.log()
        );
    }
    let children = php_children(ROUNDS) as usize;
    let mut status = serde_json::Value::Null;
    let settled = proc::poll(TIMEOUT, || {
        status = setup.status("www");
        number(&status, "total processes") == children as u64
            && setup.stack.drover.workers().len() == children
    });
    assert!(
        settled,
        "the PHP pool never had {children} workers: status {status:#}, php-cgi workers {:?}; \
         drover's log:\n{}",
        setup.stack.drover.workers(),
        setup.log()
    );
    assert_eq!(status["limits"]["max_children"], children, "{status:#}");
    let py = setup.status("py");
    assert_eq!(number(&py, "total processes"), 2, "{py:#}");
}

fn sleep_until(when: Instant) {
    thread::sleep(when.saturating_duration_since(Instant::now()));
}

/// nginx's `[error]` lines (a refused or reset upstream connection shows there).
fn nginx_errors(setup: &Setup) -> String {
    let path = setup.stack.site.path().join("nginx-error.log");
    let text = fs::read_to_string(path).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[error]") || l.contains("[crit]") || l.contains("[alert]"))
        .collect();
    errors[..errors.len().min(40)].join("\n")
}

/// `max_children = 0` in the `[pm]` of the PHP pool, with a new greeting that must not apply.
fn broken_php_pool(setup: &Setup) -> (String, usize) {
    let text = php_pool(1)
        .toml(&setup.stack.site)
        .replace("max_children = 4", "max_children = 0");
    (text.clone(), line_of(&text, "max_children = 0"))
}

#[test]
fn a_broken_pool_file_on_reload_keeps_the_old_configuration_and_says_where() {
    let php = php_pool(0);
    let setup = start(site(), &[&php]);
    let log = &setup.stack.drover.log;
    assert_eq!(setup.get_ok("/greeting.php"), "greeting=v0");
    let workers = wait_until(TIMEOUT, "3 php-cgi workers", || {
        let mut w = setup.stack.drover.workers();
        w.sort();
        (w.len() == 3).then_some(w)
    });

    let (text, line) = broken_php_pool(&setup);
    setup.stack.site.write("pools.d/www.toml", &text);
    let place = format!("pools.d/www.toml:{line}:");
    let from = log.len();
    setup.stack.drover.signal(Signal::SIGUSR2);

    let outcome = wait_reload_outcome(log, from);
    assert!(
        outcome.contains("reload refused"),
        "{outcome:?}; the log:\n{}",
        log.text()
    );
    let located = log.wait_for(
        from,
        "the error's file:line and key",
        |l| l.contains(&place) && l.contains("pm.max_children"),
        TIMEOUT,
    );
    println!("USR2 with a broken pool file: {located}");
    assert_still_serving_v0(&setup, &workers);

    let run = setup.ctl.run(&["reload"]);
    println!(
        "ctl reload with a broken pool file: exit {:?}, {}",
        run.code,
        run.stderr.trim()
    );
    assert!(
        run.code.is_some_and(|c| c != 0),
        "ctl reload accepted a broken pool file: {run:#?}"
    );
    assert!(
        run.stderr.contains(&place) && run.stderr.contains("pm.max_children"),
        "ctl reload's error does not name {place} and pm.max_children: {run:#?}"
    );
    assert_still_serving_v0(&setup, &workers);

    // Fixed, the same reload goes through.
    setup
        .stack
        .site
        .write("pools.d/www.toml", &php_pool(2).toml(&setup.stack.site));
    setup.ctl.ok(&["reload"], &setup.log());
    wait_until(TIMEOUT, "greeting=v2 after the fixed reload", || {
        (setup.get_ok("/greeting.php") == "greeting=v2").then_some(())
    });
}

/// drover still runs, with the same workers, and serves the old greeting.
fn assert_still_serving_v0(setup: &Setup, workers: &[i32]) {
    assert!(
        proc::is_running(setup.stack.drover.pid()),
        "drover exited:\n{}",
        setup.log()
    );
    assert_eq!(setup.get_ok("/greeting.php"), "greeting=v0");
    let mut now = setup.stack.drover.workers();
    now.sort();
    assert_eq!(
        now,
        workers,
        "the workers changed; drover's log:\n{}",
        setup.log()
    );
    let status = setup.status("www");
    assert_eq!(status["limits"]["max_children"], 3, "{status:#}");
}

/// A reload applies the global keys and `status_listen` too: the log moves to the new
/// `error_log` at the new `log_level`, the new `pid_file` is written (the old one removed),
/// and a control socket and a pool's `status_listen` added to the files answer.
#[test]
fn a_reload_applies_the_global_keys_and_status_listen() {
    use crate::common::{Ctl, Drover, PhpPool, Site};

    let site = Site::new();
    let (old_pid, new_pid) = (site.path().join("old.pid"), site.path().join("new.pid"));
    let (file, control) = (
        site.path().join("drover.log"),
        site.path().join("control.sock"),
    );
    site.write(
        "drover.toml",
        &format!(
            "error_log = \"stderr\"\npid_file = \"{}\"\n",
            old_pid.display()
        ),
    );
    let pool = PhpPool::new("www").max_children(2);
    site.write("pools.d/www.toml", &pool.toml(&site));
    let drover = Drover::spawn(&site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    assert!(old_pid.exists());
    let first = parents(drover.pid())[0];

    site.write(
        "drover.toml",
        &format!(
            "error_log = \"{}\"\nlog_level = \"warn\"\npid_file = \"{}\"\n[control]\nlisten = \"{}\"\n",
            file.display(),
            new_pid.display(),
            control.display()
        ),
    );
    let status = site.path().join("status.sock");
    let with_status = format!(
        "status_listen = \"{}\"\n{}",
        status.display(),
        pool.toml(&site)
    );
    site.write("pools.d/www.toml", &with_status);
    drover.signal(Signal::SIGHUP);

    // The old destination says where the log went; the rest goes there.
    drover
        .log
        .wait_for_line(&format!("error_log: now {}", file.display()), TIMEOUT);
    let pid = wait_until(TIMEOUT, "the new pid_file", || {
        fs::read_to_string(&new_pid).ok()
    });
    assert_eq!(pid.trim(), drover.pid().to_string());
    assert!(!old_pid.exists(), "the old pid_file is still there");
    let log = || fs::read_to_string(&file).unwrap_or_default();
    // The pid file moves first, with the global keys; the status socket comes after the
    // pool's new generation has started.
    let status = Ctl { socket: status };
    let pong = wait_until(TIMEOUT, "the status_listen socket to answer", || {
        let run = status.run(&["ping"]);
        (run.code == Some(0)).then_some(run.stdout)
    });
    assert_eq!(pong.trim(), "pong");
    Ctl { socket: control }.ok(&["status"], &log());

    // The pool file changed (status_listen), so the pool rolled: wait for the old
    // generation's parent to be gone. Then, at log_level = "warn", a killed php-cgi parent
    // is logged and its replacement's start is not.
    let parent = wait_until(TIMEOUT, "the new generation alone", || {
        let parents = parents(drover.pid());
        (parents.len() == 1 && parents[0] != first).then(|| parents[0])
    });
    proc::signal(parent, Signal::SIGKILL);
    let role = match crate::common::default_php_runtime() {
        "embed" => "php zygote",
        _ => "php-cgi parent",
    };
    let killed = format!("pool www: {role} {parent} exited on SIGKILL");
    wait_until(TIMEOUT, "the warning in the new error_log", || {
        fs::read_to_string(&file)
            .unwrap()
            .contains(&killed)
            .then_some(())
    });
    wait_until(TIMEOUT, "a new php-cgi parent", || {
        parents(drover.pid())
            .iter()
            .any(|&p| p != parent)
            .then_some(())
    });
    let text = fs::read_to_string(&file).unwrap();
    let after = &text[text.find(&killed).unwrap()..];
    assert!(
        !after.contains("started"),
        "info lines at log_level warn:\n{after}"
    );
    assert!(
        !drover.log.text().contains(&killed),
        "the warning went to stderr"
    );
}

/// drover's children that are live php-cgi pool parents.
fn parents(drover: i32) -> Vec<i32> {
    proc::descendants(drover)
        .into_iter()
        .filter(|&p| proc::stat(p).is_some_and(|s| s.ppid == drover && s.state != 'Z'))
        .collect()
}
