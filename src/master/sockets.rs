//! What a reload changes besides the pools: the global keys (the error log's destination,
//! level and format, the pid file, emergency restart, the control socket) and the pools'
//! `status_listen` sockets. Each change is logged and put in the reload's summary; one that
//! cannot be made (a file that cannot be opened, an address in use) is logged as an error
//! and the old setting stays, in effect and in the configuration `drover ctl config` shows.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::Master;
use crate::config::{Global, ListenAddr, LogTarget, Pool};
use crate::control::{ControlSocket, Served, StatusSocket, ToMaster};
use crate::pm::EmergencyRestart;

/// The servers the master runs besides the pools, and what they were bound with.
pub(super) struct Sockets {
    /// Where the servers send their requests.
    pub to_master: ToMaster,
    pub control: Option<(PathBuf, Served)>,
    /// Each pool's `status_listen` server, by pool name.
    pub status: HashMap<String, (StatusBinding, Served)>,
    /// The `health_listen` server: bound at start, kept until drover exits.
    pub health: Option<Served>,
}

/// What a `status_listen` socket is bound with: its address and the pool's socket settings
/// it takes (owner, group, mode, backlog, allowed clients).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StatusBinding {
    addr: ListenAddr,
    owner: Option<String>,
    group: Option<String>,
    mode: u32,
    backlog: i32,
    allowed: Vec<IpAddr>,
}

impl StatusBinding {
    pub fn of(pool: &Pool) -> Option<StatusBinding> {
        Some(StatusBinding {
            addr: pool.status_listen.clone()?,
            owner: pool.listen_owner.clone(),
            group: pool.listen_group.clone(),
            mode: pool.listen_mode,
            backlog: pool.listen_backlog,
            allowed: pool.listen_allowed_clients.clone(),
        })
    }
}

impl Sockets {
    /// Binds and serves the control socket and every pool's `status_listen`.
    pub fn start(global: &Global, pools: &[Pool], to_master: ToMaster) -> anyhow::Result<Sockets> {
        use anyhow::Context;
        let mut sockets = Sockets {
            to_master,
            control: None,
            status: HashMap::new(),
            health: None,
        };
        if let Some(addr) = &global.health_listen {
            let socket = crate::control::HealthSocket::bind(addr)
                .with_context(|| format!("cannot listen on health_listen {addr}"))?;
            tracing::info!("health (/livez, /readyz) on {}", socket.addr());
            sockets.health = Some(socket.serve(sockets.to_master.clone()));
        }
        if let Some(path) = &global.control.listen {
            let served = sockets.serve_control(path).with_context(|| {
                format!("cannot listen on the control socket {}", path.display())
            })?;
            tracing::info!("control socket: {}", path.display());
            sockets.control = Some((path.clone(), served));
        }
        for pool in pools {
            let Some(binding) = StatusBinding::of(pool) else {
                continue;
            };
            let served = sockets
                .serve_status(pool)
                .with_context(|| format!("pool {}: cannot listen on status_listen", pool.name))?;
            sockets.status.insert(pool.name.clone(), (binding, served));
        }
        Ok(sockets)
    }

    fn serve_control(&self, path: &Path) -> Result<Served, crate::listener::ListenError> {
        let socket = ControlSocket::bind(path, crate::control::server::DEFAULT_MODE)?;
        Ok(socket.serve(self.to_master.clone()))
    }

    fn serve_status(&self, pool: &Pool) -> Result<Served, crate::listener::ListenError> {
        let socket = StatusSocket::bind(pool)?.expect("the pool has a status_listen");
        tracing::info!("pool {}: status on {}", pool.name, socket.addr());
        Ok(socket.serve(self.to_master.clone()))
    }

    /// Makes `pool`'s `status_listen` what its new configuration says (`None`: the pool is
    /// gone). Returns a summary line when something changed. On failure the pool's
    /// `status_listen` in `pool` is set back to what is served.
    pub fn reload_status(&mut self, name: &str, pool: Option<&mut Pool>) -> Option<String> {
        let wanted = pool.as_deref().and_then(StatusBinding::of);
        let current = self.status.get(name).map(|(binding, _)| binding.clone());
        if wanted == current {
            return None;
        }
        let Some(pool) = pool.filter(|_| wanted.is_some()) else {
            self.status.remove(name);
            return Some(format!("{name}: status_listen closed"));
        };
        let wanted = wanted.expect("checked above");
        match &current {
            // A TCP listener is closed only once its task ends, after this reload: the
            // same address cannot be bound again meanwhile. Keep it as it is.
            Some(old) if old.addr == wanted.addr && old.addr.is_tcp() => {
                tracing::warn!(
                    "pool {name}: status_listen {} keeps the settings it was bound with until drover restarts",
                    old.addr
                );
                return None;
            }
            // The same unix path: its file goes with the old server, then the new one
            // binds it.
            Some(old) if old.addr == wanted.addr => {
                self.status.remove(name);
            }
            _ => {}
        }
        match self.serve_status(pool) {
            Ok(served) => {
                self.status
                    .insert(name.to_string(), (wanted.clone(), served));
                Some(format!("{name}: status_listen {}", wanted.addr))
            }
            Err(err) => {
                tracing::error!("pool {name}: cannot listen on status_listen: {err}");
                pool.status_listen = self.status.get(name).map(|(b, _)| b.addr.clone());
                None
            }
        }
    }
}

impl Master {
    /// Applies `new`'s global keys. Returns a summary line per change. A key that cannot
    /// take its new value is logged and set back in `new` to the value in effect.
    pub(super) fn reload_global(&mut self, new: &mut Global) -> Vec<String> {
        let old = self.config.global.clone();
        let mut changed = Vec::new();
        self.reload_log_keys(new, &old, &mut changed);
        if (
            new.emergency_restart_threshold,
            new.emergency_restart_interval,
        ) != (
            old.emergency_restart_threshold,
            old.emergency_restart_interval,
        ) {
            self.emergency = EmergencyRestart::new(
                new.emergency_restart_threshold,
                new.emergency_restart_interval,
            );
            changed.push(format!(
                "emergency_restart: {} in {}",
                new.emergency_restart_threshold,
                humantime::format_duration(new.emergency_restart_interval)
            ));
        }
        if new.control.listen != old.control.listen {
            match &new.control.listen {
                None => {
                    self.sockets.control = None;
                    changed.push("control socket: closed".to_string());
                }
                Some(path) => match self.sockets.serve_control(path) {
                    Ok(served) => {
                        // The old one closes (and its file goes) only now.
                        self.sockets.control = Some((path.clone(), served));
                        tracing::info!("control socket: {}", path.display());
                        changed.push(format!("control socket: {}", path.display()));
                    }
                    Err(err) => {
                        tracing::error!(
                            "cannot listen on the control socket {}: {err}",
                            path.display()
                        );
                        new.control.listen = old.control.listen.clone();
                    }
                },
            }
        }
        if new.health_listen != old.health_listen {
            tracing::warn!(
                "health_listen: stays {} until drover restarts (kubelet probes it throughout)",
                old.health_listen
                    .as_ref()
                    .map_or("unset".to_string(), ToString::to_string)
            );
            new.health_listen = old.health_listen.clone();
        }
        if new.shutdown_delay != old.shutdown_delay {
            changed.push(format!(
                "shutdown_delay: {}",
                humantime::format_duration(new.shutdown_delay)
            ));
        }
        if new.process_control_timeout != old.process_control_timeout {
            changed.push(format!(
                "process_control_timeout: {}",
                humantime::format_duration(new.process_control_timeout)
            ));
        }
        changed
    }

    /// The global keys of the logs a reload applies (`error_log`, `log_level`,
    /// `log_format`, `pid_file`); one that cannot be applied keeps its old value in `new`.
    fn reload_log_keys(&mut self, new: &mut Global, old: &Global, changed: &mut Vec<String>) {
        if new.error_log != old.error_log {
            let to = describe(&new.error_log);
            // Said where the log was, so that whoever reads it knows where it went.
            tracing::info!("error_log: now {to}");
            match self.log.file.retarget(&new.error_log) {
                Ok(()) => changed.push(format!("error_log: {to}")),
                Err(err) => {
                    tracing::error!(
                        "error_log: cannot open {to}: {err}; the log stays where it was"
                    );
                    new.error_log = old.error_log.clone();
                }
            }
        }
        if new.log_level != old.log_level {
            match self.log.set_level(new.log_level) {
                Ok(()) => changed.push(format!("log_level: {:?}", new.log_level).to_lowercase()),
                Err(err) => {
                    tracing::error!("log_level: {err}");
                    new.log_level = old.log_level;
                }
            }
        }
        if new.log_format != old.log_format {
            self.log.set_format(new.log_format);
            changed.push(format!("log_format: {}", new.log_format.as_str()));
        }
        if new.pid_file != old.pid_file {
            let written = match &new.pid_file {
                Some(path) => super::write_pid_file(path).map_err(|err| {
                    tracing::error!("pid_file: cannot write {}: {err}", path.display())
                }),
                None => Ok(()),
            };
            match written {
                Ok(()) => {
                    if let Some(path) = &old.pid_file {
                        let _ = std::fs::remove_file(path);
                    }
                    self.notify.pid_file = new.pid_file.clone();
                    changed.push(match &new.pid_file {
                        Some(path) => format!("pid_file: {}", path.display()),
                        None => "pid_file: none".to_string(),
                    });
                }
                Err(()) => new.pid_file = old.pid_file.clone(),
            }
        }
    }
}

fn describe(target: &LogTarget) -> String {
    match target {
        LogTarget::Stderr => "stderr".to_string(),
        LogTarget::File(path) => path.display().to_string(),
    }
}
