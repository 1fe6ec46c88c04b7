//! `drover ctl top` as an operator runs it. drover serves a PHP pool `api` and a Python
//! pool `web` of 3 behind nginx; a bounded loop of requests loads `web`, and one request,
//! sent with `X-Request-Id: top-hold-7f3a`, is held in a worker until the test releases it.
//!
//! In a real terminal (a tmux pane of 160x50 running bash): top shows both pools, `web`'s
//! workers against its cap and a non-zero req/s, and the held request with its id; `s`
//! sorts by busy workers (`web` above `api`), `p` picks `web` and lists its workers; `q`,
//! Ctrl-C and SIGTERM each leave the alternate screen, show the shell again and put the
//! terminal's modes back as `stty -a` had them. Piped: `-n 2` prints two blocks of plain
//! lines without an escape sequence (the second with web's queue-wait p99), and top ends
//! when its reader (`head`) does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{Pool, Setup, site, start};
use crate::common::{TIMEOUT, bin, http, run_bounded, wait_until};

const HELD_ID: &str = "top-hold-7f3a";

/// The loaded stack: the held request and the load loop, both ended by [`Loaded::finish`].
struct Loaded {
    setup: Setup,
    held: Option<JoinHandle<http::Reply>>,
    stop: Arc<AtomicBool>,
    load: Option<JoinHandle<u32>>,
}

/// Starts the stack, the load on `web` (at most 5000 requests, 60 s) and the held request.
fn loaded() -> Loaded {
    let api = Pool::php("api");
    let web = Pool::python("web").max_children(3);
    let setup = start(site(), &[&api, &web]);
    let url = setup.stack.url("/hold?n=1");
    let held = thread::spawn(move || http::get_with(&url, &[("X-Request-Id", HELD_ID)]));
    let held_file = setup.stack.site.path().join("held-1");
    wait_until(TIMEOUT, "the held request to start", || {
        std::fs::read_to_string(&held_file).ok()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let url = setup.stack.url("/greeting");
    let stopped = stop.clone();
    let load = thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut answered = 0;
        for _ in 0..5000 {
            if stopped.load(Ordering::Relaxed) || Instant::now() > deadline {
                break;
            }
            if http::try_get(&url).is_ok_and(|r| r.status == 200) {
                answered += 1;
            }
            thread::sleep(Duration::from_millis(5));
        }
        answered
    });
    Loaded {
        setup,
        held: Some(held),
        stop,
        load: Some(load),
    }
}

impl Loaded {
    fn socket(&self) -> &Path {
        &self.setup.ctl.socket
    }

    /// Releases the held request (which must answer) and stops the load (which must have
    /// been answered).
    fn finish(mut self) {
        self.setup.stack.site.write("release", "");
        self.stop.store(true, Ordering::Relaxed);
        let reply = self.held.take().unwrap().join().expect("held client");
        assert_eq!((reply.status, reply.body.as_str()), (200, "released 1"));
        let answered = self.load.take().unwrap().join().expect("load client");
        assert!(answered > 0, "no request of the load was answered");
    }
}

/// A tmux server of our own (its own socket) with one 160x50 session running bash.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(dir: &Path) -> Tmux {
        let tmux = Tmux {
            socket: dir.join("tmux.sock"),
        };
        let out = run_bounded(
            tmux.command()
                .args(["new-session", "-d", "-s", "top", "-x", "160", "-y", "50"])
                .args(["env", "PS1=operator$ ", "bash", "--norc", "--noprofile"]),
        );
        assert!(
            out.status.success(),
            "tmux new-session: {out:?} (is tmux installed? scripts/test.sh installs it)"
        );
        tmux.wait_screen("the shell's prompt", |s| s.contains("operator$"));
        tmux
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket);
        command
    }

    fn run(&self, args: &[&str]) -> String {
        let out = run_bounded(self.command().args(args));
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Keys as tmux names them: `q`, `C-c`, `Enter`; a line of text is one key.
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// The pane's visible text.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    /// Whether the pane shows the alternate screen.
    fn alternate(&self) -> bool {
        self.run(&["display-message", "-p", "-t", "top", "#{alternate_on}"])
            .trim()
            == "1"
    }

    /// The pid of the pane's shell.
    fn shell_pid(&self) -> i32 {
        self.run(&["display-message", "-p", "-t", "top", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("pane_pid")
    }

    /// Waits until the screen satisfies `ok`; the screen.
    fn wait_screen(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = crate::common::proc::poll(TIMEOUT, || {
            last = self.screen();
            ok(&last)
        });
        assert!(found, "timed out waiting for {what}; the screen:\n{last}");
        last
    }

    /// `stty -a` in the pane's shell, written to `file` (whole, by a rename).
    fn stty(&self, file: &Path) -> String {
        let f = file.display();
        self.keys(&[&format!("stty -a > {f}.tmp && mv {f}.tmp {f}"), "Enter"]);
        wait_until(TIMEOUT, "stty -a's output", || {
            std::fs::read_to_string(file).ok()
        })
    }
}

impl Drop for Tmux {
    /// Ends our own server only (its socket), with the shell and anything left in it.
    fn drop(&mut self) {
        let _ = run_bounded(self.command().arg("kill-server"));
    }
}

/// The line of the pools table for `pool` and its index on the screen.
fn pool_row<'s>(screen: &'s str, pool: &str) -> Option<(usize, &'s str)> {
    screen.lines().enumerate().find(|(_, l)| {
        l.get(2..)
            .is_some_and(|rest| rest.starts_with(&format!("{pool} ")))
    })
}

/// The pids of `web`'s workers, as `drover ctl status web --json --full` lists them.
fn web_workers(setup: &Setup) -> Vec<i64> {
    let text = setup
        .ctl
        .ok(&["status", "web", "--json", "--full"], &setup.log());
    let status: serde_json::Value = serde_json::from_str(&text).expect("status JSON");
    status["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|w| w["pid"].as_i64())
        .collect()
}

/// `web`'s row shows its 3 workers against a cap of 3, one or more busy, and requests per
/// second above 0 (the load, measured between two samples).
fn web_is_live(screen: &str) -> bool {
    let Some((_, row)) = pool_row(screen, "web") else {
        return false;
    };
    let cells: Vec<&str> = row.split_whitespace().collect();
    // POOL RUNTIME PM BUSY IDLE TOTAL/MAX REQ/S ...
    cells.len() > 6
        && cells[5] == "3/3"
        && cells[3].parse::<u32>().is_ok_and(|busy| busy >= 1)
        && cells[6].parse::<f64>().is_ok_and(|rate| rate > 0.0)
}

/// Starts top in the pane and waits for it to show the loaded pools and the held request.
fn start_top(tmux: &Tmux, socket: &Path) -> String {
    tmux.keys(&[
        &format!("{} ctl --socket {} top", bin(), socket.display()),
        "Enter",
    ]);
    tmux.wait_screen("top to show web live and the held request", |s| {
        s.contains("drover top - ")
            && pool_row(s, "api").is_some()
            && web_is_live(s)
            && s.lines()
                .any(|l| l.contains("/hold?n=1") && l.ends_with(HELD_ID))
    })
}

/// top has left: the shell is back on the main screen, with its modes as before.
fn assert_restored(tmux: &Tmux, before: &str, after: &Path) {
    // The main screen comes back first, the shell's new prompt a moment later.
    let prompt_last = |s: &str| {
        s.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_end() == "operator$")
    };
    let screen = tmux.wait_screen("the shell's prompt again, last", |s| {
        !s.contains("drover top - ") && prompt_last(s)
    });
    assert!(
        !tmux.alternate(),
        "still on the alternate screen:\n{screen}"
    );
    let _ = std::fs::remove_file(after);
    assert_eq!(tmux.stty(after), before, "stty -a differs after top");
}

#[test]
fn top_shows_the_pools_live_in_a_terminal_and_leaves_it_as_it_found_it() {
    let loaded = loaded();
    let dir = loaded.setup.stack.site.path().to_owned();
    let tmux = Tmux::start(&dir);
    let before = tmux.stty(&dir.join("stty-before"));

    let screen = start_top(&tmux, loaded.socket());
    assert!(
        tmux.alternate(),
        "top is not on the alternate screen:\n{screen}"
    );
    // Refreshed: a later sample's time in the header.
    let header = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("drover top - "))
            .map(str::to_owned)
    };
    let first = header(&screen);
    tmux.wait_screen("the next sample", |s| {
        header(s).is_some_and(|h| Some(h) != first)
    });
    assert!(screen.contains("sort: pool"), "{screen}");
    let (api, web) = (
        pool_row(&screen, "api").unwrap().0,
        pool_row(&screen, "web").unwrap().0,
    );
    assert!(api < web, "sorted by name:\n{screen}");

    // `s`: by busy workers; web has the held request, api nothing.
    tmux.keys(&["s"]);
    let screen = tmux.wait_screen("the sort by busy workers", |s| {
        s.contains("sort: busy")
            && matches!((pool_row(s, "web"), pool_row(s, "api")), (Some(w), Some(a)) if w.0 < a.0)
    });
    assert!(screen.contains("SLOWEST REQUESTS IN FLIGHT"), "{screen}");

    // `p`: the first pool in that order, web, with every one of its workers.
    tmux.keys(&["p"]);
    let screen = tmux.wait_screen("web picked", |s| {
        s.contains("pool: web") && s.contains("WORKERS OF web")
    });
    assert!(screen.lines().any(|l| l.starts_with("> web ")), "{screen}");
    let listed = web_workers(&loaded.setup);
    let workers_part = &screen[screen.find("WORKERS OF web").unwrap()..];
    let shown = listed
        .iter()
        .filter(|pid| workers_part.contains(&format!(" {pid} ")))
        .count();
    assert_eq!(shown, 3, "web's workers {listed:?} not listed:\n{screen}");
    let held_line = workers_part
        .lines()
        .find(|l| l.ends_with(HELD_ID))
        .unwrap_or_else(|| panic!("the held request is not among web's workers:\n{screen}"));
    assert!(
        held_line.contains("Running") && held_line.contains("/hold?n=1"),
        "{held_line}"
    );

    tmux.keys(&["q"]);
    assert_restored(&tmux, &before, &dir.join("stty-q"));

    // Ctrl-C, which raw mode delivers as a key.
    start_top(&tmux, loaded.socket());
    tmux.keys(&["C-c"]);
    assert_restored(&tmux, &before, &dir.join("stty-ctrl-c"));

    // SIGTERM, as a shutdown or `kill` sends it: top is the shell's only child.
    start_top(&tmux, loaded.socket());
    let shell = tmux.shell_pid();
    let children = format!("/proc/{shell}/task/{shell}/children");
    let top: i32 = wait_until(TIMEOUT, "top's pid", || {
        std::fs::read_to_string(&children)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    });
    kill(Pid::from_raw(top), Signal::SIGTERM).expect("SIGTERM to top");
    assert_restored(&tmux, &before, &dir.join("stty-term"));
    let screen = tmux.screen();
    drop(tmux);
    assert!(!screen.contains("panicked"), "{screen}");
    loaded.finish();
}

#[test]
fn piped_top_prints_plain_blocks_and_ends_with_its_reader() {
    let loaded = loaded();
    let socket = loaded.socket().display().to_string();
    let out = run_bounded(Command::new(bin()).args(["ctl", "--socket", &socket, "top", "-n", "2"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        !text.contains('\x1b'),
        "an escape sequence in plain output:\n{text}"
    );
    let blocks: Vec<&str> = text.split("\n\ndrover top - ").collect();
    assert_eq!(blocks.len(), 2, "two blocks:\n{text}");
    assert!(text.starts_with("drover top - "), "{text}");
    assert!(!text.contains("keys:"), "{text}");
    let second = blocks[1];
    assert!(
        web_is_live(second),
        "web's row in the second block:\n{text}"
    );
    assert!(pool_row(second, "api").is_some(), "{text}");
    // The queue-wait p99 of the connections the load sent since the first sample: a
    // figure (`<100ms` unsaturated), not a dash.
    let (_, row) = pool_row(second, "web").unwrap();
    let heading: Vec<&str> = second
        .lines()
        .find(|l| l.trim_start().starts_with("POOL "))
        .expect("the heading")
        .split_whitespace()
        .collect();
    let column = heading.iter().position(|&h| h == "WAIT99").expect("WAIT99");
    let wait99 = row.split_whitespace().nth(column).unwrap_or("");
    assert!(
        wait99 == "<100ms" || wait99.ends_with("ms") || wait99.ends_with('s'),
        "web's WAIT99 {wait99:?}:\n{text}"
    );
    assert!(
        second
            .lines()
            .any(|l| l.contains("/hold?n=1") && l.ends_with(HELD_ID)),
        "the held request in flight:\n{text}"
    );

    // Without -n, until its reader goes: `head` takes 3 lines and top ends on the closed pipe.
    // (run_bounded fails the test if the pipeline does not end.)
    let out = run_bounded(
        Command::new("sh")
            .arg("-c")
            .arg(format!("{} ctl --socket {socket} top | head -n 3", bin())),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.starts_with("drover top - ") && text.lines().count() == 3,
        "{text}"
    );

    // Unreachable: one line, exit 2, as every ctl command.
    let gone = loaded.setup.stack.site.path().join("nobody.sock");
    let out = run_bounded(
        Command::new(bin())
            .args(["ctl", "--socket"])
            .arg(&gone)
            .args(["top", "--once"]),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach drover"),
        "{out:?}"
    );
    loaded.finish();
}

/// top's terminal crate is drover-admin's: the daemon, resident for the master's whole
/// life, does not carry it (docs/ARCHITECTURE.md, "The master's memory"). Its source
/// paths, in every panic location, name it.
#[test]
fn the_daemon_does_not_carry_the_terminal_code() {
    let names = |bin: &str| {
        let bytes = std::fs::read(bin).unwrap_or_else(|e| panic!("{bin}: {e}"));
        bytes
            .windows(b"crossterm".len())
            .filter(|w| w == b"crossterm")
            .count()
    };
    assert!(
        names(crate::common::admin_bin()) > 0,
        "drover-admin has no crossterm: the check cannot see it"
    );
    assert_eq!(names(bin()), 0, "the daemon {} links crossterm", bin());
}
