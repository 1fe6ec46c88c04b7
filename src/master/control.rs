//! The master's side of the control socket: answers [`ControlRequest`]s from
//! `drover ctl` and `status_listen`. Live changes are validated by loading the pool file
//! with the changes applied, in memory but by the loader that reads the files, and rolled
//! like a reload; they last until the next reload from the files.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::{Master, Phase};
use crate::config::{self, Config, PmMode, Pool};
use crate::control::health::{PoolReadiness, Readiness, Stopping};
use crate::control::{ControlReply, ControlRequest};

impl Master {
    pub(super) fn on_control(&mut self, request: ControlRequest) -> ControlReply {
        match request {
            ControlRequest::Status { pool } => {
                let now = Instant::now();
                let pools: Vec<_> = self
                    .pools
                    .serving()
                    .filter(|p| pool.as_deref().is_none_or(|n| n == p.name()))
                    .map(|p| self.status_of(p, now))
                    .collect();
                match pool {
                    Some(name) if pools.is_empty() => ControlReply::unknown_pool(&name),
                    _ => ControlReply::Status(pools),
                }
            }
            ControlRequest::Config { pool } => {
                let pools: Vec<Pool> = self
                    .pools
                    .serving()
                    .filter(|p| pool.as_deref().is_none_or(|n| n == p.name()))
                    .map(|p| p.config.clone())
                    .collect();
                if let (Some(name), true) = (&pool, pools.is_empty()) {
                    return ControlReply::unknown_pool(name);
                }
                let effective = Config {
                    pools,
                    ..self.config.clone()
                };
                ControlReply::Ok(effective.render())
            }
            ControlRequest::Reload { pool, changed } => {
                match self.reload(pool.as_deref(), !changed) {
                    Ok(summary) => ControlReply::Ok(summary),
                    Err(message) => {
                        tracing::error!(
                            "reload refused, the running configuration stays: {message}"
                        );
                        ControlReply::invalid(message)
                    }
                }
            }
            ControlRequest::Set { pool, changes } => self.set(&pool, &changes),
            ControlRequest::Live => ControlReply::Ok("ok".into()),
            ControlRequest::Ready => ControlReply::Ready(self.readiness()),
            ControlRequest::Workers { pool, delta } => {
                let Some(current) = self.pools.serving().find(|p| p.name() == pool) else {
                    return ControlReply::unknown_pool(&pool);
                };
                if current.config.pm.mode != PmMode::Static {
                    return ControlReply::Error {
                        status: 409,
                        message: format!(
                            "pool {pool} is {}: only static pools take a worker count; set pm.max_children instead",
                            current.config.pm.mode.as_str()
                        ),
                    };
                }
                let max = i64::from(current.config.pm.max_children) + i64::from(delta);
                if max < 1 {
                    return ControlReply::invalid(format!(
                        "pm.max_children would be {max}: a pool needs at least 1 worker"
                    ));
                }
                self.set(&pool, &[("pm.max_children".to_owned(), max.to_string())])
            }
        }
    }

    /// `/readyz`: the master's phase and each pool's serving generation.
    fn readiness(&self) -> Readiness {
        let stopping = match self.phase {
            Phase::Running => None,
            Phase::Delaying { .. } => Some(Stopping::Delaying),
            Phase::Stopping { .. } => Some(Stopping::Draining),
        };
        Readiness {
            started: self.notify.ready,
            stopping,
            pools: self
                .pools
                .serving()
                .map(|p| PoolReadiness {
                    pool: p.name().to_owned(),
                    state: p.readiness(),
                })
                .collect(),
        }
    }

    /// Applies `changes` (pm keys only) to one pool after validating them like the files.
    fn set(&mut self, pool: &str, changes: &[(String, String)]) -> ControlReply {
        if self.phase != Phase::Running {
            return ControlReply::Error {
                status: 409,
                message: "drover is stopping: no live changes".into(),
            };
        }
        let Some(index) = self.pools.serving_of(pool) else {
            return ControlReply::unknown_pool(pool);
        };
        if let Some((key, _)) = changes.iter().find(|(key, _)| !key.starts_with("pm.")) {
            return ControlReply::invalid(format!(
                "{key}: only pm keys can be changed live (reload for the others)"
            ));
        }
        let current = self.pools[index].config.clone();
        // Earlier live changes of this pool stay: the file, then each change in order.
        let mut all = self.generations.live.get(pool).cloned().unwrap_or_default();
        all.extend(changes.iter().cloned());
        let changed = match validate(&self.config, &current, &all) {
            Ok(pool) => pool,
            Err(message) => return ControlReply::invalid(message),
        };
        if changed == current {
            return ControlReply::Ok(format!("{pool}: nothing changed"));
        }
        // A program pool's count changes in place: its copies keep running.
        if self.pools[index].resize_in_place(&changed, Instant::now()) {
            self.generations.live.insert(pool.to_owned(), all);
            tracing::info!(
                "pool {pool}: live change pm.max_children={} (until the next reload)",
                changed.pm.max_children
            );
            return ControlReply::Ok(format!(
                "{pool}: pm.max_children={} (copies started or stopped in place; lasts until \
                 the next reload)",
                changed.pm.max_children
            ));
        }
        match self.roll(index, &changed) {
            Ok(()) => {
                self.generations.live.insert(pool.to_owned(), all);
                self.begin_reload();
                let list: Vec<String> = changes.iter().map(|(k, v)| format!("{k}={v}")).collect();
                tracing::info!(
                    "pool {pool}: live change {} (until the next reload)",
                    list.join(" ")
                );
                ControlReply::Ok(format!(
                    "{pool}: {} (a new generation starts; lasts until the next reload)",
                    list.join(" ")
                ))
            }
            Err(err) => ControlReply::Error {
                status: 500,
                message: err,
            },
        }
    }
}

/// The pool's file with `changes` written into its `[pm]` table, loaded in memory by the
/// loader that reads the files: the same rules, the same messages. Nothing is written.
fn validate(global: &Config, pool: &Pool, changes: &[(String, String)]) -> Result<Pool, String> {
    let text =
        config::read_text(&pool.file).map_err(|e| format!("{}: {e}", pool.file.display()))?;
    let mut table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", pool.file.display()))?;
    let pm = table
        .entry("pm")
        .or_insert_with(|| toml::Value::Table(Default::default()));
    let Some(pm) = pm.as_table_mut() else {
        return Err("pm: not a table".into());
    };
    for (key, value) in changes {
        let name = key.trim_start_matches("pm.");
        // A value is TOML (12, "256MiB", true); a bare word is taken as a string.
        let value: toml::Value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.trim_matches('"').to_owned()));
        pm.insert(name.to_owned(), value);
    }
    // A stand-in drover.toml at the real one's path, so that relative paths in the pool
    // file resolve exactly as they do for the real file; it includes only the changed pool
    // file, put in a folder of its own (never created) so that no name can clash with it.
    let folder = global.path.parent().unwrap_or(Path::new(""));
    let file = Path::new(".drover-set").join(format!("{}.toml", pool.name));
    let include = glob::Pattern::escape(&file.to_string_lossy());
    let main = toml::Table::from_iter([(
        "include".to_owned(),
        toml::Value::Array(vec![toml::Value::String(include)]),
    )]);
    let texts = BTreeMap::from([
        (
            global.path.clone(),
            toml::to_string(&main).unwrap_or_default(),
        ),
        (
            folder.join(file),
            toml::to_string(&table).unwrap_or_default(),
        ),
    ]);
    match config::load_texts(&global.path, &texts) {
        Ok(loaded) => {
            let fresh = loaded.pools.into_iter().next().ok_or("the pool vanished")?;
            let mut merged = pool.clone();
            merged.pm = fresh.pm;
            Ok(merged)
        }
        // The values came from the command line, not from a line of the file: name the
        // key, the value and the rule.
        Err(errors) => Err(errors
            .0
            .iter()
            .map(|e| match &e.value {
                Some(value) => format!("{}: {} (value: {value})", e.key, e.rule),
                None => format!("{}: {}", e.key, e.rule),
            })
            .collect::<Vec<_>>()
            .join("\n")),
    }
}
