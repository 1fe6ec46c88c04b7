//! PHP worker mode (`[php] worker = FILE`, docs/php-worker-mode.md): a worker script boots
//! once per worker and handles every request through `frankenphp_handle_request()`,
//! behind real nginx.
//!
//! - [`isolation`]: every request starts clean (superglobals, headers, status, output
//!   buffers, sessions, uploads, ini values, the time limit), two clients interleaved.
//! - [`faults`]: an exception, a fatal error, `exit()` and a segfault cost one request, and
//!   a flood of them never holds the pool back; a script that cannot boot stops the pool,
//!   a worker that crashes in its boot backs off, with its cause in the log.
//! - [`lifecycle`]: `max_requests`, `max_memory`, SIGTERM, the slowlog's stack,
//!   `request_terminate_timeout`, the status page and access log, reload.
//! - [`frameworks`]: a Symfony 5.4 app (its worker script written as Symfony Runtime's
//!   FrankenPHP runner runs a kernel) and a Slim 3 app, from Debian's packages.
//! - [`zygote`]: `worker_boot = "zygote"`: one boot, workers forked from it.
//! - [`hostile`]: a body never read, clients that vanish mid-body or mid-answer.
//! - [`scope`]: what a request changes in the engine and its modules (handlers, streams,
//!   umask, strtok, the stat cache, the URL rewriter, mbstring, intl, json, libxml, random)
//!   is fresh in the next, on php-fpm, classic drover-php, worker mode and zygote boot.

mod faults;
mod frameworks;
mod hostile;
mod isolation;
mod lifecycle;
mod scope;
mod zygote;

pub use faults::AFTER_FLOOD;

use std::path::PathBuf;

use crate::common::{Site, Stack, http};
use crate::embed::Embed;

/// The worker script every test but the frameworks' runs (tests/apps/worker.php).
pub fn worker_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apps/worker.php")
}

/// A static pool of `workers` running tests/apps/worker.php, with `BOOT_LOG` and `END_LOG`
/// in the site (one line per boot, per end of the script).
pub fn pool(workers: u32) -> Embed {
    Embed::new("www", workers).php(&format!("worker = {:?}\n", worker_script()))
}

/// Runs `test` on a static pool of one worker running tests/apps/worker.php booted in the
/// worker, then on one booted in the zygote (`worker_boot = "zygote"`).
pub fn for_each_boot(test: impl Fn(Embed)) {
    let zygote = pool(1).php(&format!(
        "worker = {:?}\nworker_boot = \"zygote\"\n",
        worker_script()
    ));
    for (boot, pool) in [("worker", pool(1)), ("zygote", zygote)] {
        eprintln!("worker_boot = {boot:?}");
        test(pool);
    }
}

/// The pool's `[env]` lines that name the boot and end logs in `site`.
pub fn logs_env(site: &Site) -> String {
    format!(
        "BOOT_LOG = {:?}\nEND_LOG = {:?}\n",
        site.path().join("boots.log"),
        site.path().join("ends.log")
    )
}

/// The lines of one of the site's logs (`boots.log`, `ends.log`).
pub fn lines(site: &Site, name: &str) -> Vec<String> {
    std::fs::read_to_string(site.path().join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `/state.php`'s answer, parsed.
pub fn state(stack: &Stack, query: &str, headers: &[(&str, &str)]) -> serde_json::Value {
    let reply = http::get_with(&stack.url(&format!("/state.php{query}")), headers);
    assert_eq!(reply.status, 200, "{reply:?}");
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}
