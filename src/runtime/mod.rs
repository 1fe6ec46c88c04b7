//! Runtimes: how a pool's workers are started. Each runtime turns a pool into a
//! [`Launch`]: the [`Layout`] of its processes and the [`ProcessSpec`] the master execs.
//!
//! - [`php`]: one php-cgi parent per pool that forks its own workers (shared OPcache).
//! - [`command`]: any FastCGI program that accepts on fd 0, one process per worker.
//! - [`python`]: a zygote per pool (`drover-python`, its own crate) that loads the app once
//!   and forks workers; here is how the master starts it.

pub mod command;
pub mod credentials;
pub mod php;
pub mod python;

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config::{Pool, Runtime};
pub use credentials::Credentials;
/// Used by the master for every worker, and by a Python worker for itself.
pub use drover_proto::resident_memory;

/// Everything needed to exec one process of a pool. Built before spawning, so that
/// nothing is allocated between fork and exec.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Start from an empty environment (`clear_env`), then apply `env`.
    pub clear_env: bool,
    pub env: Vec<(OsString, OsString)>,
    pub chdir: Option<PathBuf>,
    /// Set when drover runs as root: the pool's user, group and supplementary groups.
    pub credentials: Option<Credentials>,
}

/// How a pool's workers relate to the processes the master execs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The master execs one process that forks `workers` workers itself and replaces those
    /// that exit (php-cgi with `PHP_FCGI_CHILDREN`). The master sees the workers by their
    /// parent and becomes their reaper if the parent dies.
    Parent { workers: u32 },
    /// Every process the master execs is one worker; it runs `workers` of them.
    Workers { workers: u32 },
}

/// A pool as the master runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub layout: Layout,
    pub spec: ProcessSpec,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Credentials(#[from] credentials::CredentialsError),
    #[error("cannot create the scoreboard: {0}")]
    Scoreboard(String),
}

/// What would stop a valid configuration from running here, one line per pool:
/// `FILE: KEY: problem`. Run by `drover -t` and before the master starts.
pub fn check(config: &crate::config::Config) -> Vec<String> {
    config
        .pools
        .iter()
        .filter_map(|pool| {
            let (key, problem) = match launch(pool, 0) {
                Ok(launch) => match &pool.runtime {
                    Runtime::Python(_) if !launch.spec.program.is_file() => (
                        "python",
                        format!(
                            "the Python runtime {} is missing; install {} beside drover",
                            launch.spec.program.display(),
                            python::PROGRAM
                        ),
                    ),
                    _ => return None,
                },
                Err(RuntimeError::Credentials(
                    e @ credentials::CredentialsError::NoSuchGroup(_),
                )) => ("group", e.to_string()),
                Err(RuntimeError::Credentials(e)) => ("user", e.to_string()),
                Err(e @ RuntimeError::Scoreboard(_)) => ("pm.max_children", e.to_string()),
            };
            Some(format!("{}: {key}: {problem}", pool.file.display()))
        })
        .collect()
}

/// Plans how to run `pool`. `max_requests` is the limit drawn for this generation.
pub fn launch(pool: &Pool, max_requests: u32) -> Result<Launch, RuntimeError> {
    let credentials = Credentials::for_pool(pool)?;
    let (layout, program, args, runtime_env) = match &pool.runtime {
        Runtime::Php(php) => php::plan(pool, php, max_requests),
        Runtime::Command(command) => command::plan(pool, command),
        Runtime::Python(python) => python::plan(pool, python),
    };
    let mut env: Vec<(OsString, OsString)> =
        pool.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    env.extend(runtime_env);
    Ok(Launch {
        layout,
        spec: ProcessSpec {
            program,
            args,
            clear_env: pool.clear_env,
            env,
            chdir: pool.chdir.clone(),
            credentials,
        },
    })
}

/// `listen_allowed_clients` as libfcgi reads it (and drover's Python workers):
/// `FCGI_WEB_SERVER_ADDRS`, comma-separated, checked on every accept in the worker.
fn allowed_clients_env(pool: &Pool) -> Option<(OsString, OsString)> {
    if pool.listen_allowed_clients.is_empty() {
        return None;
    }
    let list: Vec<String> = pool
        .listen_allowed_clients
        .iter()
        .map(|ip| ip.to_string())
        .collect();
    Some(("FCGI_WEB_SERVER_ADDRS".into(), list.join(",").into()))
}
