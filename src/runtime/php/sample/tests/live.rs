//! A real php-cgi (PHP_FCGI_CHILDREN=0, its listening socket as fd 0) sampled from outside:
//! idle, then while a request sleeps inside nested functions, methods, a closure and a
//! require; the `/proc/PID/syscall` fallback on the same states; and the cost of a sample
//! and of a stack dump with the binary cache warm.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::super::{Sample, Sampler, StackEnd, Worker, idle_by_syscall};
use super::{fcgi, which};

/// A php-cgi serving `dir` on `dir/php.sock`; killed (by its pid) when dropped.
struct PhpCgi {
    child: Child,
    socket: PathBuf,
}

impl PhpCgi {
    /// `children` = PHP_FCGI_CHILDREN: 0 serves in the process itself, N forks N workers.
    fn start(dir: &Path, children: u32, args: &[&str]) -> Option<PhpCgi> {
        let Some(binary) = which("php-cgi") else {
            println!("SKIPPED: no php-cgi on PATH");
            return None;
        };
        let socket = dir.join("php.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env("PHP_FCGI_CHILDREN", children.to_string())
            .env("PHP_FCGI_MAX_REQUESTS", "0")
            .spawn()
            .unwrap();
        let php = PhpCgi { child, socket };
        if children == 0 {
            wait_for("php-cgi to block in accept", || {
                idle_by_syscall(php.pid()) == Some(true)
            });
        }
        Some(php)
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }
}

impl Drop for PhpCgi {
    fn drop(&mut self) {
        // Workers forked by a php-cgi parent outlive a SIGKILLed parent: note them, kill the
        // parent (so that it forks no replacement), then them.
        let workers = children_of(self.pid());
        let _ = self.child.kill();
        let _ = self.child.wait();
        for worker in workers {
            let _ = nix::sys::signal::kill(worker, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn busy_sample(worker: &Worker) -> Sample {
    let mut sample = Sample::default();
    wait_for("the worker to run the script", || {
        sample = worker.sample().unwrap();
        sample.busy
    });
    sample
}

fn params<'a>(
    dir: &'a str,
    script: &'a str,
    name: &'a str,
    method: &'a str,
    query: &'a str,
    len: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_METHOD", method),
        ("SCRIPT_FILENAME", script),
        ("SCRIPT_NAME", name),
        ("DOCUMENT_ROOT", dir),
        ("REQUEST_URI", "/pretty/url"),
        ("QUERY_STRING", query),
        ("CONTENT_TYPE", "text/plain"),
        ("CONTENT_LENGTH", len),
    ]
}

/// Average time of `f` over `n` runs.
fn time(n: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed() / n
}

const SLOW: &str = "<?php
function level3() { usleep(3000000); }
function level2() { level3(); }
function level1() { level2(); }
level1();
echo 'done';
";

#[test]
fn idle_then_busy_with_nested_functions() {
    let dir = tempfile::tempdir().unwrap();
    let Some(php) = PhpCgi::start(dir.path(), 0, &[]) else {
        return;
    };
    let script = dir.path().join("slow.php");
    std::fs::write(&script, SLOW).unwrap();
    let script = script.to_str().unwrap();

    let mut sampler = Sampler::new();
    let cold = Instant::now();
    let worker = sampler.attach(php.pid()).unwrap();
    let cold = cold.elapsed();
    assert_eq!(worker.php_version().0, 8);
    assert_eq!(
        worker.sample().unwrap(),
        Sample::default(),
        "idle: no request"
    );
    let stack = worker.stack(20).unwrap();
    assert_eq!((stack.frames.len(), stack.end), (0, StackEnd::Complete));
    assert_eq!(idle_by_syscall(php.pid()), Some(true));

    let dirname = dir.path().to_str().unwrap();
    let conn = fcgi::send(
        &php.socket,
        &params(dirname, script, "/slow.php", "GET", "a=1&b=2", "0"),
        b"",
    );
    let sample = busy_sample(&worker);
    assert_eq!(sample.method.as_deref(), Some("GET"));
    assert_eq!(sample.uri.as_deref(), Some("/slow.php"));
    assert_eq!(sample.query.as_deref(), Some("a=1&b=2"));
    assert_eq!(sample.script.as_deref(), Some(script));
    assert_eq!(sample.content_length, Some(0));
    println!("busy sample: {sample:?}");

    // The sleep is entered just after the frames are pushed: wait until it shows.
    let mut stack = worker.stack(20).unwrap();
    wait_for("usleep on the stack", || {
        stack = worker.stack(20).unwrap();
        stack.frames.first().is_some_and(|f| f.function == "usleep")
    });
    let lines: Vec<String> = stack.frames.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "usleep() (internal)".to_owned(),
            format!("level3() {script}:2"),
            format!("level2() {script}:3"),
            format!("level1() {script}:4"),
            format!("{{main}}() {script}:5"),
        ]
    );
    assert_eq!(stack.end, StackEnd::Complete);
    print!("stack:\n{stack}");
    let short = worker.stack(2).unwrap();
    assert_eq!((short.frames.len(), short.end), (2, StackEnd::DepthLimit));
    assert_eq!(
        idle_by_syscall(php.pid()),
        Some(false),
        "sleeping in a script is busy"
    );

    let warm = time(100, || drop(sampler.attach(php.pid()).unwrap()));
    let one_sample = time(1000, || assert!(worker.sample().unwrap().busy));
    let one_stack = time(1000, || {
        assert_eq!(worker.stack(20).unwrap().frames.len(), 5)
    });
    let syscall = time(1000, || assert_eq!(idle_by_syscall(php.pid()), Some(false)));
    println!(
        "timings: attach cold {cold:?}, attach warm {warm:?}, sample {one_sample:?}, \
         stack (5 frames) {one_stack:?}, /proc/PID/syscall {syscall:?}"
    );

    let body = fcgi::response(conn);
    assert!(body.ends_with("done"), "response: {body:?}");
    wait_for("the worker to be idle again", || {
        worker.sample().unwrap() == Sample::default()
    });
    wait_for("accept again", || idle_by_syscall(php.pid()) == Some(true));
}

const LIB: &str = "<?php
class Foo {
    public function bar() {
        return array_map(function ($x) { usleep(2000000); return $x; }, [1]);
    }
    public static function make() {
        return (new Foo)->bar();
    }
}
return Foo::make();
";

const MAIN: &str = "<?php
$r = require __DIR__ . '/lib.php';
echo json_encode($r), $_SERVER['REQUEST_TIME_FLOAT'] > 0 ? ' t' : '';
";

#[test]
fn methods_closures_require_and_post() {
    let dir = tempfile::tempdir().unwrap();
    let Some(php) = PhpCgi::start(dir.path(), 0, &[]) else {
        return;
    };
    let (main, lib) = (dir.path().join("main.php"), dir.path().join("lib.php"));
    std::fs::write(&main, MAIN).unwrap();
    std::fs::write(&lib, LIB).unwrap();
    let (main, lib) = (main.to_str().unwrap(), lib.to_str().unwrap());

    let worker = Sampler::new().attach(php.pid()).unwrap();
    let dirname = dir.path().to_str().unwrap();
    let conn = fcgi::send(
        &php.socket,
        &params(dirname, main, "/main.php", "POST", "", "5"),
        b"hello",
    );
    let sample = busy_sample(&worker);
    assert_eq!(
        (sample.method.as_deref(), sample.content_length),
        (Some("POST"), Some(5))
    );
    assert_eq!(sample.query.as_deref(), Some(""));
    let mut stack = worker.stack(20).unwrap();
    wait_for("usleep on the stack", || {
        stack = worker.stack(20).unwrap();
        stack.frames.first().is_some_and(|f| f.function == "usleep")
    });
    let lines: Vec<String> = stack.frames.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "usleep() (internal)".to_owned(),
            format!("Foo->{{closure}}() {lib}:4"),
            "array_map() (internal)".to_owned(),
            format!("Foo->bar() {lib}:4"),
            format!("Foo::make() {lib}:7"),
            format!("require() {lib}:10"),
            format!("{{main}}() {main}:2"),
        ]
    );
    // The script reads $_SERVER, so PHP has computed the request time.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = worker
        .sample()
        .unwrap()
        .request_time
        .expect("request time once $_SERVER is used");
    assert!(
        (now - started).abs() < 30.0,
        "request time {started} vs now {now}"
    );
    print!("stack:\n{stack}");
    assert!(fcgi::response(conn).ends_with("[1] t"));
}

#[test]
fn a_process_that_is_not_php_is_an_unknown_build() {
    let err = Sampler::new().attach(Pid::this()).unwrap_err();
    assert!(err.is_unknown_build(), "{err}");
    println!("fallback reason: {err}");
}

/// The pids whose parent is `parent`.
fn children_of(parent: Pid) -> Vec<Pid> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
        if ppid == Some(parent.as_raw()) {
            found.push(Pid::from_raw(pid));
        }
    }
    found
}

#[test]
fn workers_forked_by_a_php_cgi_parent() {
    // The layout drover runs (one parent, PHP_FCGI_CHILDREN workers), here without OPcache.
    let dir = tempfile::tempdir().unwrap();
    let Some(php) = PhpCgi::start(dir.path(), 2, &["-d", "opcache.enable=0"]) else {
        return;
    };
    let script = dir.path().join("slow.php");
    std::fs::write(&script, SLOW.replace("3000000", "1500000")).unwrap();
    let mut children = Vec::new();
    wait_for("two workers in accept", || {
        children = children_of(php.pid());
        children.len() == 2 && children.iter().all(|&c| idle_by_syscall(c) == Some(true))
    });
    let mut sampler = Sampler::new();
    let workers: Vec<Worker> = children
        .iter()
        .map(|&c| sampler.attach(c).unwrap())
        .collect();
    let parent = sampler.attach(php.pid()).unwrap();
    assert!(
        workers
            .iter()
            .chain([&parent])
            .all(|w| w.sample().unwrap() == Sample::default())
    );

    let dirname = dir.path().to_str().unwrap();
    let conn = fcgi::send(
        &php.socket,
        &params(
            dirname,
            script.to_str().unwrap(),
            "/slow.php",
            "GET",
            "",
            "0",
        ),
        b"",
    );
    let mut busy = Vec::new();
    wait_for("one worker to run the script", || {
        busy = workers
            .iter()
            .filter(|w| w.sample().unwrap().busy)
            .collect();
        !busy.is_empty()
    });
    assert_eq!(busy.len(), 1);
    let (busy, idle) = (
        busy[0],
        workers.iter().find(|w| w.pid() != busy[0].pid()).unwrap(),
    );
    assert_eq!(busy.sample().unwrap().uri.as_deref(), Some("/slow.php"));
    assert_eq!(idle.sample().unwrap(), Sample::default());
    assert_eq!(idle_by_syscall(idle.pid()), Some(true));
    println!(
        "without OPcache, a script that never reads $_SERVER: request_time {:?}",
        busy.sample().unwrap().request_time
    );
    assert!(fcgi::response(conn).ends_with("done"));
}

const CHURN: &str = "<?php
function deep($n) { return $n === 0 ? str_repeat('x', 1000) : strlen(deep($n - 1)) . ''; }
for ($i = 0; $i < 200; $i++) { deep(40); }
echo 'ok';
";

#[test]
fn sampling_during_request_churn_never_fails() {
    // Requests start and end all the time while we read: torn reads must end a stack walk
    // cleanly (or give an idle sample), never panic, loop or error out.
    let dir = tempfile::tempdir().unwrap();
    let Some(php) = PhpCgi::start(dir.path(), 0, &[]) else {
        return;
    };
    let script = dir.path().join("churn.php");
    std::fs::write(&script, CHURN).unwrap();
    let worker = Sampler::new().attach(php.pid()).unwrap();
    let (socket, dirname, script) = (
        php.socket.clone(),
        dir.path().to_str().unwrap().to_owned(),
        script,
    );
    let client = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut served = 0;
        while Instant::now() < deadline {
            let p = params(
                &dirname,
                script.to_str().unwrap(),
                "/churn.php",
                "GET",
                "",
                "0",
            );
            assert!(fcgi::response(fcgi::send(&socket, &p, b"")).ends_with("ok"));
            served += 1;
        }
        served
    });
    let (mut busy, mut idle, mut ends) = (0, 0, std::collections::HashMap::new());
    while !client.is_finished() {
        let sample = worker.sample().unwrap();
        if sample.busy {
            busy += 1;
            assert!(
                matches!(sample.method.as_deref(), Some("GET") | None),
                "{sample:?}"
            );
        } else {
            idle += 1;
        }
        let stack = worker.stack(64).unwrap();
        assert!(stack.frames.len() <= 64);
        *ends.entry(format!("{:?}", stack.end)).or_insert(0) += 1;
    }
    let served = client.join().unwrap();
    println!("churn: {served} requests; samples busy {busy}, idle {idle}; stack ends {ends:?}");
    assert!(served > 0 && busy > 0);
}
