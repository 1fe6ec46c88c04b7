//! drover: a process manager for FastCGI and WSGI applications.
//!
//! # The process tree
//!
//! ```text
//! drover (master)                  tokio current-thread; spawns only by exec, never forks itself
//!  ├─ drover-php (zygote)          php pool, runtime = "embed": the only binary that links
//!  │   └─ drover-php  worker       libphp; starts PHP once, forks the workers (every pm mode)
//!  ├─ php-cgi (pool parent)        static php pool, runtime = "cgi": one php-cgi per
//!  │   ├─ php-cgi  worker          generation, the pool's listening socket as fd 0,
//!  │   └─ php-cgi  worker          PHP_FCGI_CHILDREN = max_children; they share one OPcache
//!  ├─ <command>    worker          any FastCGI app that accepts on fd 0 (fcgiwrap, ...)
//!  ├─ <program>    copy            a background pool's command (`[program]`: a queue
//!  │                               consumer, a scheduler): no socket
//!  └─ drover-python (zygote)       python pool: the only binary that links libpython; loads
//!      └─ drover-python  worker    CPython + the app once, forks the workers
//! ```
//!
//! The master binds every pool's listener before any worker exists and keeps it for its whole
//! life; workers `accept()` on it themselves, so the master is never on the request path
//! (with `queue_timeout`, it only takes a saturated pool's connections that waited past it,
//! and answers them 503: `master/shed.rs`).
//! docs/ARCHITECTURE.md explains the tree, the request path and the reasons behind them;
//! the operator's manual (keys, signals, commands) is the other pages of docs/.
//!
//! # Crates
//!
//! This crate is the master: the binary `drover` (src/main.rs), the daemon, which reads
//! only `[-c FILE]` and execs `drover-admin`, found beside it, for every other command line
//! (`-t`, `ctl`, `serve`, `import`, `--help`), so that the importers, the control client and
//! clap are not in the daemon's resident memory. The workspace's other crates hold the admin
//! tools, the configuration loader, what runs in the processes the master execs and what
//! both sides share:
//!
//! - `crates/admin` (`drover-admin`): the admin tools, `drover -t`, `ctl` (its client,
//!   `probe`, `top`), `serve`, `import`, completions and the command line (clap); it
//!   depends on this crate for the status model and the runtimes' checks, never the
//!   reverse (scripts/imports.py checks that).
//! - `crates/python` (`drover-python`): the Python runtime's binary, zygote and workers; the
//!   only crate that links libpython.
//! - `crates/php` (`drover-php`): the embedded-PHP runtime's binary, zygote and workers; the
//!   only crate that links libphp.
//! - `crates/fastcgi` (`drover-fastcgi`): the FastCGI responder, a sans-I/O core and its
//!   blocking driver, used by every zygote's workers (through `drover-worker`: `drover-python`'s
//!   and `drover-php`'s) and by the ASGI loop, which drives the core itself.
//! - `crates/worker` (`drover-worker`): the fork loop and the worker loop every zygote
//!   shares, FastCGI or HTTP/1.1 (`protocol = "http"`: the workers answer clients
//!   themselves, idle connections waiting in each worker's epoll set).
//! - `crates/config` (`drover-config`): configuration loading, `drover.toml` and the pool
//!   files to a validated, typed `Config` with located errors; what the master and the admin
//!   tools both read. Re-exported as [`config`].
//! - `crates/scoreboard` (`drover-scoreboard`): the per-pool shared memory, created here,
//!   written by the workers; re-exported as [`scoreboard`].
//! - `crates/proto` (`drover-proto`): the zygote ⇄ master protocol (fds, report lines, exit
//!   codes, the zygote's command line, its terms) and the respawn rules both sides apply.
//! - `crates/elfbind` (`elfbind`): a copy of libphp whose calls to its own functions are
//!   direct (`drover-php --bind-direct`, feature `bind`), and the copy's build-id and
//!   trailer, which the master reads (without that feature) to decide whether a pool runs
//!   it.
//!
//! # Signals to the master
//!
//! | signal        | effect |
//! |---------------|--------|
//! | TERM, QUIT    | graceful stop: after `shutdown_delay` (pools serve on, `/readyz` 503), stop accepting, let in-flight requests finish within `process_control_timeout`, then SIGKILL; exit 0 |
//! | INT           | fast stop: SIGKILL every worker at once; exit 0 |
//! | HUP, USR2     | reload: validate the files, roll every pool to a new generation (`master/reload.rs`) |
//! | TTIN, TTOU    | one worker more or fewer in every static pool |
//! | USR1          | reopen the error log file; a new generation for each pool whose access log was moved |
//! | CHLD          | reap exited workers and replace them |
//!
//! Handlers only record; the master loop acts (`master/signals.rs`).
//!
//! # Modules
//!
//! - [`config`]: TOML → validated, typed [`config::Config`]; located errors. Every key is
//!   declared once, in [`config::keys`] (docs/pool-keys.md is written from it). The
//!   `drover-config` crate; the binaries give it the drover-php probe
//!   ([`config::probe_php_with`]).
//! - [`control`]: status (text, JSON, OpenMetrics) and the control socket's HTTP server
//!   (`drover ctl`, its client, is drover-admin's).
//! - [`listener`]: bind unix/TCP listeners with owner, group, mode and backlog, or take the
//!   one systemd passed.
//! - [`master`]: the supervisor: run loop, signals, spawn, reap, shutdown; each pool's
//!   generations and their lifecycle.
//! - [`meminfo`]: the machine's memory as Linux reports it (a process's PSS, the cgroup's
//!   limit, else MemAvailable), read by `drover -t` and the master alike.
//! - [`pm`]: pure process-management policy (what to spawn, backoff, emergency restart,
//!   `max_children = "auto"` from memory, `queue_timeout`'s waits).
//! - [`resident`]: once the master is ready (and after each reload), its own code and
//!   read-only data are paged out, so that what starting ran once is not kept mapped.
//! - [`runtime`]: the runtime interface the master asks ([`runtime::Kind`]: launch, reports,
//!   observation, sizing, retiring) and how each runtime's processes are started (php,
//!   command, python); the Python and embedded-PHP runtimes run in their own binaries,
//!   `drover-python` (crates/python) and `drover-php` (crates/php).
//! - [`scoreboard`]: per-pool shared memory, one slot per worker and a pool area (the request
//!   histogram and status classes behind `/metrics`): written by workers, read by
//!   the master (the `drover-scoreboard` crate).
//! - [`logging`]: the error log (stderr or a reopenable file; text or one JSON object a line).
//! - [`slowlog`]: slow-request entries (header + stack), text or JSON.
//! - [`systemd`][]: sd_notify (readiness, reload, watchdog, a current `STATUS=`) and the
//!   sockets systemd passes (socket activation; [`listener::inherited`] checks and takes them).

pub use drover_config as config;
pub mod control;
pub mod listener;
pub mod logging;
pub mod master;
pub mod meminfo;
pub mod pm;
pub mod resident;
pub mod runtime;
pub use drover_scoreboard as scoreboard;
pub mod slowlog;
pub mod systemd;
