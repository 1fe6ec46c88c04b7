//! The master before its loop: every listener bound (or taken from systemd), every pool's
//! first generation prepared, the control and status sockets opened. Any error here stops
//! drover before a single worker runs.

use std::rc::Rc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;

use super::output::{self, Output};
use super::pool::PoolRun;
use super::pools::Pools;
use super::{Generations, Inbox, Inherited, Master, Notify, Phase, sockets, write_pid_file};
use crate::config::Config;
use crate::listener::Listener;
use crate::logging::ErrorLog;
use crate::pm::EmergencyRestart;
use crate::runtime::php::sample::Sampler;
use crate::systemd;

impl Master {
    /// Binds every listener and prepares every pool; spawns nothing yet. Any error here
    /// stops drover before a single worker runs.
    pub(super) fn bind(
        config: Config,
        log: ErrorLog,
        passed: Vec<(std::os::fd::OwnedFd, String)>,
    ) -> anyhow::Result<Master> {
        // Workers orphaned by a dying php-cgi parent come to us, so that we reap them and a
        // stop waits for their last request.
        nix::sys::prctl::set_child_subreaper(true).context("PR_SET_CHILD_SUBREAPER")?;
        let inherited = adopt_passed(&config.pools, passed)?;
        let (tx, lines) = mpsc::unbounded_channel();
        let mut pools = Pools::default();
        let mut next_id = 0;
        for pool in &config.pools {
            if !nix::unistd::Uid::effective().is_root()
                && (pool.user.is_some() || pool.group.is_some())
            {
                tracing::warn!(
                    "pool {}: user and group are ignored: drover is not running as root",
                    pool.name
                );
            }
            let listener = listen(pool, &inherited)
                .with_context(|| format!("pool {}: cannot listen", pool.name))?;
            next_id += 1;
            let run = new_generation(
                next_id,
                pool,
                listener,
                &tx,
                config.global.process_control_timeout,
            )?;
            pools.push(run);
        }
        let (wakes_tx, wakes) = mpsc::unbounded_channel();
        for pool in pools.iter_mut() {
            pool.watch_listener(&wakes_tx);
        }
        let (to_master, control) = crate::control::channel();
        let sockets = sockets::Sockets::start(&config.global, &config.pools, to_master)?;
        let pid_file = config.global.pid_file.clone();
        if let Some(path) = &pid_file {
            write_pid_file(path)
                .with_context(|| format!("cannot write pid_file {}", path.display()))?;
        }
        let emergency = EmergencyRestart::new(
            config.global.emergency_restart_threshold,
            config.global.emergency_restart_interval,
        );
        Ok(Master {
            config,
            log,
            pools,
            phase: Phase::Running,
            emergency,
            inbox: Inbox {
                lines,
                lines_tx: tx,
                wakes,
                wakes_tx,
                control,
            },
            notify: Notify {
                ready: false,
                reloading: false,
                watchdog: systemd::Watchdog::from_env(),
                status_line: systemd::notifying().then(systemd::StatusLine::default),
                pid_file,
            },
            generations: Generations {
                next_id,
                inherited,
                live: Default::default(),
            },
            sampler: Sampler::new(),
            sockets,
            orphans: Default::default(),
            app_failed: false,
            queues: Default::default(),
        })
    }
}

/// Binds `pool`'s listener and logs it (at start, and for a new or moved pool on reload),
/// or takes the socket systemd passed for it.
pub(super) fn listen(
    pool: &crate::config::Pool,
    inherited: &Inherited,
) -> Result<Rc<Listener>, crate::listener::ListenError> {
    if let Some(listener) = inherited.get(&pool.name) {
        if listener.addr != pool.listen {
            return Err(crate::listener::ListenError::InheritedElsewhere {
                wanted: pool.listen.clone(),
                inherited: listener.addr.clone(),
            });
        }
        return Ok(listener.clone());
    }
    let listener = Listener::bind(pool)?;
    // A [program] pool has no socket: its start line says what it runs, not this.
    if listener.addr != crate::config::ListenAddr::NoSocket {
        tracing::info!(
            "pool {}: listening on {} (backlog {})",
            pool.name,
            listener.addr,
            pool.listen_backlog
        );
    }
    Ok(Rc::new(listener))
}

/// Gives each socket systemd passed to the pool of its name, checked against the pool's
/// `listen`. A socket no pool takes, or one that is not what its pool's `listen` says,
/// stops drover: nginx and the `.socket` unit would disagree on where the pool is.
pub(super) fn adopt_passed(
    pools: &[crate::config::Pool],
    passed: Vec<(std::os::fd::OwnedFd, String)>,
) -> anyhow::Result<Inherited> {
    use std::os::fd::AsRawFd;
    let mut inherited = Inherited::new();
    let mut errors = Vec::new();
    for (fd, name) in passed {
        let raw = fd.as_raw_fd();
        let Some(pool) = pools.iter().find(|p| p.name == name) else {
            errors.push(format!(
                "systemd passed socket {name:?} (fd {raw}) but no pool is named {name:?} (FileDescriptorName= in the .socket unit must be a pool's name)"
            ));
            continue;
        };
        match crate::listener::inherited::adopt(fd, &name, &pool.listen) {
            Ok(listener) => {
                tracing::info!(
                    "pool {name}: listening on {} (fd {raw}, passed by systemd)",
                    listener.addr
                );
                inherited.insert(name, Rc::new(listener));
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    if !errors.is_empty() {
        anyhow::bail!("socket activation: {}", errors.join("; "));
    }
    Ok(inherited)
}

/// A pool's new generation on `listener`, with its own output socket.
pub(super) fn new_generation(
    id: u64,
    pool: &crate::config::Pool,
    listener: Rc<Listener>,
    lines: &mpsc::UnboundedSender<Output>,
    process_control_timeout: Duration,
) -> anyhow::Result<PoolRun> {
    let output = output::capture(id, lines.clone()).context("creating the output socket")?;
    PoolRun::new(id, pool.clone(), listener, output, process_control_timeout)
        .map_err(|e| anyhow::anyhow!("pool {}: {e}", pool.name))
}
