//! Reload: re-read and validate the files, then renew the pools. An invalid configuration
//! changes nothing (the errors are logged and returned to `drover ctl`).
//!
//! HUP, USR2 and `drover ctl reload` renew every pool, as php-fpm's USR2 and gunicorn's HUP
//! do: a deploy changes the app's code, not its pool file, and must be served (with a fresh
//! OPcache). `drover ctl reload --changed` renews only the pools whose configuration
//! changed; the others are untouched. Either way a renewed pool starts a new generation on
//! the same listener and its old generation is retired once the new one is up; a removed
//! pool drains; a new pool starts; a pool whose address changed gets a new socket and the
//! old one drains. The summary names each pool and why it got a new generation (renewed,
//! changed, added, removed). TTIN / TTOU resize static pools through the same rolling path.

use std::rc::Rc;
use std::time::Instant;

use super::{Master, listen, new_generation};
use crate::config::{self, PmMode, Pool};
use crate::runtime;

impl Master {
    /// Reloads every pool, or only `only`: with `renew`, every one gets a new generation;
    /// without, only those whose configuration changed (or whose app stopped them). Returns
    /// what was done, one line per pool.
    pub(super) fn reload(&mut self, only: Option<&str>, renew: bool) -> Result<String, String> {
        // A stop (or its shutdown_delay) is under way: new generations would only be
        // stopped again.
        if self.phase != super::Phase::Running {
            return Err("drover is stopping: reload refused".into());
        }
        tracing::info!("reload: reading {}", self.config.path.display());
        let mut new = config::load(&self.config.path).map_err(|errors| errors.to_string())?;
        runtime::php::embed::log_if_unusable();
        let problems = runtime::check(&new);
        if !problems.is_empty() {
            return Err(problems.join("\n"));
        }
        if let Some(name) = only
            && !new.pools.iter().any(|p| p.name == name)
        {
            return Err(format!("no pool {name:?} in the configuration files"));
        }
        let now = Instant::now();
        let mut summary = Vec::new();
        if only.is_none() {
            summary.extend(self.reload_global(&mut new.global));
        }
        if only.is_none() {
            for pool in self.pools.live_mut() {
                if !new.pools.iter().any(|p| p.name == pool.config.name) {
                    summary.push(format!("{}: removed (draining)", pool.config.name));
                    pool.retire_generation(now, true);
                }
            }
        }
        for pool in new
            .pools
            .iter()
            .filter(|p| only.is_none_or(|name| name == p.name))
        {
            summary.push(self.reload_pool(pool, renew, now));
        }
        // Each pool's status_listen, by name: those served now and those in the files.
        let mut names: Vec<String> = match only {
            Some(name) => vec![name.to_string()],
            None => self
                .sockets
                .status
                .keys()
                .cloned()
                .chain(new.pools.iter().map(|p| p.name.clone()))
                .collect(),
        };
        names.sort();
        names.dedup();
        for name in names {
            let pool = new.pools.iter_mut().find(|p| p.name == name);
            summary.extend(self.sockets.reload_status(&name, pool));
        }
        match only {
            Some(name) => {
                let fresh = new.pools.into_iter().find(|p| p.name == name);
                self.config.pools.retain(|p| p.name != name);
                self.config.pools.extend(fresh);
            }
            None => self.config = new,
        }
        // Live changes last until the next reload from the files.
        match only {
            Some(name) => {
                self.generations.live.remove(name);
            }
            None => self.generations.live.clear(),
        }
        self.begin_reload();
        // The old configuration (and whatever the files' text cost) is freed by now.
        super::release_freed_memory();
        let summary = summary.join("\n");
        tracing::info!("reload: {}", summary.replace('\n', "; "));
        Ok(summary)
    }

    /// One pool of the files on a reload: added, unchanged, back to its running generation,
    /// or a new generation; the summary's line for it.
    fn reload_pool(&mut self, pool: &Pool, renew: bool, now: Instant) -> String {
        // Compared with the newest generation, the one a reload a moment ago may still
        // be starting: the files say what the pool must become, not what it was.
        let newest = self.pools.newest_of(&pool.name);
        let serving = self.pools.serving_of(&pool.name);
        let line = match newest {
            None => self
                .add_pool(pool)
                .map(|()| format!("{}: added", pool.name)),
            // A pool stopped by its app starts again: the app may be fixed.
            Some(i) if self.pools[i].config == *pool && !renew && !self.pools[i].failed() => {
                Ok(format!("{}: unchanged", pool.name))
            }
            Some(i)
                if i != serving.unwrap_or(i)
                    && serving.is_some_and(|s| self.pools[s].config == *pool)
                    && !renew =>
            {
                self.withdraw_pending(&pool.name, now);
                Ok(format!(
                    "{}: back to the running generation (the change still starting is withdrawn)",
                    pool.name
                ))
            }
            Some(i) => {
                let why = if self.pools[i].config != *pool {
                    "changed"
                } else if self.pools[i].failed() {
                    "its app had stopped it"
                } else {
                    "renewed"
                };
                self.roll(i, pool)
                    .map(|()| format!("{}: new generation ({why})", pool.name))
            }
        };
        line.unwrap_or_else(|err| format!("{}: {err}", pool.name))
    }

    /// Retires the generations of `name` still starting: the serving one stays.
    fn withdraw_pending(&mut self, name: &str, now: Instant) {
        for pending in self.pools.pending_of(name) {
            pending.replaces = None;
            pending.retire_generation(now, false);
        }
    }

    fn add_pool(&mut self, pool: &Pool) -> Result<(), String> {
        let listener =
            listen(pool, &self.generations.inherited).map_err(|e| format!("cannot listen: {e}"))?;
        self.generations.next_id += 1;
        let mut run = new_generation(
            self.generations.next_id,
            pool,
            listener,
            &self.inbox.lines_tx,
            self.config.global.process_control_timeout,
        )
        .map_err(|e| e.to_string())?;
        run.watch_listener(&self.inbox.wakes_tx);
        self.pools.push(run);
        Ok(())
    }

    /// Starts a new generation of pool `i` with `pool`'s configuration; the old one is
    /// retired when the new one is up ([`Master::retire_replaced`]).
    pub(super) fn roll(&mut self, i: usize, pool: &Pool) -> Result<(), String> {
        // A change made while an earlier one is still starting supersedes it: that
        // generation never served and is retired, and the new one replaces the serving one.
        let now = Instant::now();
        let name = self.pools[i].config.name.clone();
        self.withdraw_pending(&name, now);
        let i = self.pools.serving_of(&name).unwrap_or(i);
        let old = &self.pools[i];
        // A listener shut down for a stopped pool cannot accept again: bind a new one
        // (one systemd passed is never shut down, and `listen` gives it again).
        let same_socket = old.config.listen == pool.listen && !old.refusing();
        // Two protocols never share a socket: a worker of the old one would take a client
        // of the new one and read its request as garbage. On a switch the old generation
        // stops taking connections at once (it finishes those in hand), and new ones wait
        // in the backlog for the new workers.
        let switches_protocol = same_socket && old.config.http.is_some() != pool.http.is_some();
        let listener = if same_socket {
            old.listener.clone()
        } else {
            listen(pool, &self.generations.inherited).map_err(|e| format!("cannot listen: {e}"))?
        };
        self.generations.next_id += 1;
        let mut run = new_generation(
            self.generations.next_id,
            pool,
            listener,
            &self.inbox.lines_tx,
            self.config.global.process_control_timeout,
        )
        .map_err(|e| e.to_string())?;
        if !switches_protocol {
            run.replaces = Some(old.id);
        }
        run.watch_listener(&self.inbox.wakes_tx);
        self.pools.push(run);
        if switches_protocol {
            tracing::info!(
                "pool {name}: the protocol changes: the old workers take no new connection; they wait for the new workers"
            );
            self.pools[i].retire_generation(now, false);
        }
        Ok(())
    }

    /// Retires the generations that a new one replaced, once it is up; keeps the old one
    /// when the new one failed (its app does not load) and drops the new one instead.
    pub(super) fn retire_replaced(&mut self, now: Instant) {
        let mut old_ones = Vec::new();
        let mut failed = Vec::new();
        for pool in self.pools.iter_mut().filter(|p| p.replaces.is_some()) {
            if pool.failed() {
                tracing::error!(
                    "pool {}: the new generation failed to start; the old one keeps serving",
                    pool.config.name
                );
                pool.replaces = None;
                failed.push(pool.id);
            } else if pool.settled() {
                old_ones.extend(pool.replaces.take());
            }
        }
        for pool in self.pools.iter_mut() {
            if old_ones.contains(&pool.id) {
                // Shared with the new generation: the listener stays open.
                let shared = Rc::strong_count(&pool.listener) > 1;
                pool.retire_generation(now, !shared);
            } else if failed.contains(&pool.id) {
                pool.retire_generation(now, false);
            }
        }
    }

    /// A pool stopped by its app (it cannot be imported) with no other generation to serve
    /// refuses connections rather than let them wait for a worker that never comes
    /// ([`PoolRun::refuse`]).
    pub(super) fn refuse_stopped(&mut self) {
        let alone: Vec<bool> = self
            .pools
            .iter()
            .map(|pool| self.pools.alone(pool.name()))
            .collect();
        for (i, alone) in alone.into_iter().enumerate() {
            self.pools[i].refuse(alone);
        }
    }

    /// TTIN / TTOU: `delta` workers more (or fewer) in every static pool, counted from the
    /// newest generation of each (so that signals in quick succession add up), rolled like
    /// a reload. Lasts until the next reload from the files.
    pub(super) fn resize_static_pools(&mut self, delta: i32) {
        if delta == 0 {
            return;
        }
        let mut names: Vec<String> = self
            .pools
            .live()
            .filter(|p| p.config.pm.mode == PmMode::Static)
            .map(|p| p.config.name.clone())
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            let Some(i) = self.pools.newest_of(&name) else {
                continue;
            };
            let mut pool = self.pools[i].config.clone();
            let before = pool.pm.max_children;
            pool.pm.max_children = before.saturating_add_signed(delta).max(1);
            if pool.pm.max_children == before {
                continue;
            }
            tracing::info!(
                "pool {name}: max_children {before} → {}",
                pool.pm.max_children
            );
            if let Err(err) = self.roll(i, &pool) {
                tracing::error!("pool {name}: {err}");
            }
        }
        self.begin_reload();
    }
}
