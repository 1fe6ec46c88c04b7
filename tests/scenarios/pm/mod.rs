//! Process management with the real drover, nginx, php-cgi and CPython: pools sized by
//! load, workers recycled for their memory or killed for a stuck request, as an operator
//! sees it in the log, in `/proc` and at the client.
//!
//! - [`dynamic`]: a dynamic PHP pool grows to max_children under load (said once) and
//!   retires its spares afterwards.
//! - [`ondemand`]: an ondemand PHP pool starts empty, spawns for the first request (its
//!   cold-start latency is printed) and is empty again after process_idle_timeout.
//! - [`max_memory`]: a leaking Python worker is recycled near max_memory without a failed
//!   request.
//! - [`terminate`]: request_terminate_timeout kills a stuck PHP (drover-php and php-cgi) or
//!   Python request, the PHP stack in the log; the kill lines show what the php-cgi
//!   scoreboard sampled from busy and idle workers.
//!
//! The Python routes are in `tests/apps/pm_app.py`.

mod dynamic;
mod max_memory;
mod ondemand;
mod terminate;

use std::path::Path;

use crate::common::python::started_pid;
use crate::common::{
    Drover, Location, Log, Nginx, PoolFile, Site, Stack, default_php_runtime, http, php_table,
    pool_toml,
};

/// The runtime table of a [`Pool`].
enum Runtime {
    /// On "embed" (drover-php) or "cgi" (php-cgi).
    Php(&'static str),
    /// `pm_app:application` from `<site>/apps`.
    Python,
}

/// A pool file with the test's own keys, as an operator writes one: top-level pool keys,
/// then `[pm]`, then the runtime's table.
struct Pool {
    name: String,
    /// Top-level lines, such as `request_terminate_timeout = "2s"`.
    top: String,
    /// The `[pm]` table's lines.
    pm: String,
    runtime: Runtime,
}

impl Pool {
    fn php(name: &str, top: &str, pm: &str) -> Pool {
        Pool {
            name: name.to_string(),
            top: top.to_string(),
            pm: pm.to_string(),
            runtime: Runtime::Php(default_php_runtime()),
        }
    }

    /// This PHP pool on `runtime` whatever the tests' default.
    fn php_runtime(mut self, runtime: &'static str) -> Pool {
        self.runtime = Runtime::Php(runtime);
        self
    }

    fn python(name: &str, top: &str, pm: &str) -> Pool {
        Pool {
            runtime: Runtime::Python,
            ..Pool::php(name, top, pm)
        }
    }
}

impl PoolFile for Pool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toml(&self, site: &Site) -> String {
        let runtime = match self.runtime {
            Runtime::Php(runtime) => php_table(runtime),
            Runtime::Python => format!(
                "[python]\napp = \"pm_app:application\"\npython_path = [\"{}\"]\n",
                site.path().join("apps").display()
            ),
        };
        let tables = format!("{}\n[pm]\n{}\n{runtime}", self.top, self.pm);
        pool_toml(&site.socket(&self.name), &tables)
    }
}

/// drover serving `pool` (a Python one, `tests/apps/pm_app.py`), nginx passing every path.
fn python_stack(site: Site, pool: Pool) -> Stack {
    site.write("apps/pm_app.py", include_str!("../../apps/pm_app.py"));
    let drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket(&pool.name))]);
    Stack {
        nginx,
        drover,
        site,
    }
}

/// GET through nginx; a transport failure panics with drover's log.
fn get(stack: &Stack, path: &str) -> http::Reply {
    http::try_get(&stack.url(path))
        .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", stack.drover.log.text()))
}

/// GET a route answering with the worker's pid: asserts a 200 and returns the pid.
fn served_by(stack: &Stack, path: &str) -> i32 {
    let reply = get(stack, path);
    assert_eq!(
        reply.status,
        200,
        "GET {path}: {reply:?}; drover's log:\n{}",
        stack.drover.log.text()
    );
    reply
        .body
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("GET {path}: not a pid: {reply:?}"))
}

/// The pids of the `pool POOL: worker PID started` lines from log line `from` on.
fn started_since(log: &Log, from: usize, pool: &str) -> Vec<i32> {
    log.lines()
        .iter()
        .skip(from)
        .filter_map(|l| started_pid(l, pool, "worker"))
        .collect()
}

/// The log lines from `from` on that contain `needle`.
fn lines_with(log: &Log, from: usize, needle: &str) -> Vec<String> {
    log.lines()
        .into_iter()
        .skip(from)
        .filter(|l| l.contains(needle))
        .collect()
}

/// `pool POOL: VERB worker PID: REST` → (PID, REST), for VERB "retiring" or "killing".
fn acted_on<'l>(line: &'l str, pool: &str, verb: &str) -> Option<(i32, &'l str)> {
    let rest = line.split(&format!("pool {pool}: {verb} worker ")).nth(1)?;
    let (pid, rest) = rest.split_once(": ")?;
    Some((pid.parse().ok()?, rest))
}

/// A seconds figure as drover logs durations ("2.1s", "850ms", "2.05s") → seconds.
fn seconds(text: &str) -> Option<f64> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse::<f64>().ok().map(|ms| ms / 1000.0);
    }
    text.strip_suffix('s')?.parse().ok()
}

/// A PHP script in the docroot that records its worker's pid in `<site>/<name>-N` (N from
/// the query string) as it starts, so that a test knows which worker holds which request.
fn pid_file(site: &Site, name: &str, n: u32) -> std::path::PathBuf {
    site.path().join(format!("{name}-{n}"))
}

/// The pid a script wrote at `path`, once the file is complete.
fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
