//! Runtimes: how a pool's workers are started and what the master needs to know of them.
//! Each runtime turns a pool into a [`Launch`]: its [`Kind`] (the runtime interface: how it
//! launches, reports, is observed and retires) and the [`ProcessSpec`] the master execs.
//!
//! - [`kind`]: the runtime interface the master's pool code asks, in one place.
//! - [`php`]: a `drover-php` zygote per pool ([`php::embed`]), or php-cgi: one parent per
//!   static pool that forks its own workers (shared OPcache), one process per worker else.
//! - [`command`]: any FastCGI program that accepts on fd 0, one process per worker.
//! - [`program`]: a background pool's copies of a long-running command, no socket.
//! - [`python`]: a zygote per pool (`drover-python`, its own crate) that loads the app once
//!   and forks workers; here is how the master starts it.
//! - [`zygote`]: the command-line flags every zygote gets.

pub mod command;
pub mod credentials;
pub mod kind;
pub mod php;
pub mod program;
pub mod python;
pub mod zygote;

use std::borrow::Cow;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;

use drover_proto::terms::Terms;
use nix::sys::signal::Signal;

use crate::config::{ListenAddr, PhpRuntime, Pool, Runtime};
pub use credentials::Credentials;
/// Used by the master for every worker, and by a Python worker for itself.
pub use drover_proto::resident_memory;
pub use kind::Kind;

/// Everything needed to exec one process of a pool. Built before spawning, so that
/// nothing is allocated between fork and exec.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// A zygote's terms (`drover_proto::terms`): the spawn writes them into a sealed memfd
    /// at `TERMS_FD`. `None` for every other process.
    pub terms: Option<Terms>,
    /// Start from an empty environment (`clear_env`), then apply `env`.
    pub clear_env: bool,
    pub env: Vec<(OsString, OsString)>,
    pub chdir: Option<PathBuf>,
    /// Set when drover runs as root: the pool's user, group and supplementary groups.
    pub credentials: Option<Credentials>,
    /// What the process gets when the master dies (`PR_SET_PDEATHSIG`): the signal that
    /// asks it to stop, SIGTERM (a zygote and a php-cgi parent pass it on to their
    /// workers), or a program's `stop_signal`.
    pub death_signal: Signal,
    /// `rlimit_files`: the limit on open files, soft and hard, set before the exec; `None`:
    /// the soft limit drover was started with.
    pub rlimit_files: Option<u64>,
}

/// A pool as the master runs it: planned once per generation (the user and group lookups
/// included, which may ask LDAP or sssd), then used by every spawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub kind: Kind,
    pub spec: ProcessSpec,
    /// The entry of `spec.env` that carries the `max_requests` drawn for each process:
    /// php-cgi's `PHP_FCGI_MAX_REQUESTS`. `None` for the other runtimes (a zygote draws each
    /// worker's limit itself; a command has none).
    max_requests_env: Option<usize>,
    /// How the master stops the parent (if any) when its generation goes: SIGKILL, at once,
    /// or SIGTERM for a Python zygote with `hooks`, which reaps its workers and runs
    /// `on_exit` before it exits.
    pub parent_stop: Signal,
    /// What asks a worker to stop when it is retired: SIGTERM, or a program's
    /// `stop_signal`.
    pub stop_signal: Signal,
    /// Whether an embedded-PHP pool's zygote loads the copy of libphp bound directly
    /// (`Absent` for every other runtime); the pool's start logs it once.
    pub direct: php::direct::Direct,
}

impl Launch {
    /// The spec of one process, given the `max_requests` drawn for it.
    pub fn spec(&self, max_requests: u32) -> Cow<'_, ProcessSpec> {
        let Some(index) = self.max_requests_env else {
            return Cow::Borrowed(&self.spec);
        };
        let mut spec = self.spec.clone();
        spec.env[index].1 = max_requests.to_string().into();
        Cow::Owned(spec)
    }

    /// A zygote of this launch exited unasked (`exit`: how, as the log says it); `served`:
    /// whether the pool served a request since it started. When that zygote ran the copy
    /// of libphp bound directly and nothing was served
    /// ([`php::direct::Direct::after_zygote_exit`]), the next zygotes run the libphp
    /// drover-php is linked to: the copy's `LD_LIBRARY_PATH` leaves the spec, one warning
    /// says why, and the answer is true. Otherwise nothing changes and the answer is false.
    pub fn fall_back(&mut self, pool: &str, served: bool, exit: &str) -> bool {
        let Some(next) = self.direct.after_zygote_exit(served) else {
            return false;
        };
        // The pool's environment names no library path when the copy is used (else the
        // pool is left alone): the only entry is the copy's. A zygote has no
        // `max_requests_env` whose index this could move.
        if let Some((name, _)) = self.direct.env() {
            self.spec.env.retain(|(key, _)| *key != name);
        }
        if let php::direct::Direct::FellBack { copy } = &next {
            tracing::warn!(
                "pool {pool}: drover-php: {exit} on {} (PHP's calls bound directly) before \
                 any request; its zygotes run the libphp drover-php is linked to from now \
                 on (until a reload or restart tries the copy again)",
                copy.display()
            );
        }
        self.direct = next;
        true
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Credentials(#[from] credentials::CredentialsError),
    #[error("cannot create the scoreboard: {0}")]
    Scoreboard(String),
    #[error("cannot open access_log {0}")]
    AccessLog(String),
    #[error("cannot hand the TLS certificate to the zygote: {0}")]
    Tls(String),
}

/// What would stop a valid configuration from running here, one line per pool:
/// `FILE: KEY: problem`. Run by `drover -t` and before the master starts.
pub fn check(config: &crate::config::Config) -> Vec<String> {
    config
        .pools
        .iter()
        .filter_map(|pool| {
            let (key, problem) = match launch(pool, 0) {
                Ok(launch) => {
                    let (key, what, program) = match &pool.runtime {
                        Runtime::Python(_) => ("python", "Python", python::PROGRAM),
                        Runtime::Php(php) if matches!(php.runtime, PhpRuntime::Embed { .. }) => {
                            ("php.runtime", "PHP", php::embed::PROGRAM)
                        }
                        _ => return None,
                    };
                    if launch.spec.program.is_file() {
                        return None;
                    }
                    let problem = format!(
                        "the {what} runtime {} is missing; install {program} beside drover",
                        launch.spec.program.display(),
                    );
                    (key, problem)
                }
                Err(RuntimeError::Credentials(
                    e @ credentials::CredentialsError::NoSuchGroup(_),
                )) => ("group", e.to_string()),
                Err(RuntimeError::Credentials(e)) => ("user", e.to_string()),
                Err(e @ RuntimeError::Scoreboard(_)) => ("pm.max_children", e.to_string()),
                // Opened by the master for each generation, not by a launch plan.
                Err(e @ RuntimeError::AccessLog(_)) => ("access_log", e.to_string()),
                Err(e @ RuntimeError::Tls(_)) => ("certfile", e.to_string()),
            };
            Some(format!("{}: {key}: {problem}", pool.file.display()))
        })
        .chain(reserve_problems(config))
        .collect()
}

/// The pools whose `memory_reserve` is not less than the cgroup's memory limit here
/// ([`crate::pm::memory::reserve_problem`]); the limit is read only if a pool sets one.
fn reserve_problems(config: &crate::config::Config) -> Vec<String> {
    let reserved: Vec<(&Pool, u64)> = config
        .pools
        .iter()
        .filter_map(|pool| Some((pool, pool.pm.memory.reserve?)))
        .collect();
    if reserved.is_empty() {
        return Vec::new();
    }
    let Some(limit) = crate::meminfo::memory_limit() else {
        return Vec::new();
    };
    reserved
        .into_iter()
        .filter_map(|(pool, reserve)| {
            let why = crate::pm::memory::reserve_problem(reserve, &limit)?;
            Some(format!("{}: pm.memory_reserve: {why}", pool.file.display()))
        })
        .collect()
}

/// `drover -t`'s check of the embedded-PHP pools that set `[php.admin_ini]`: PHP is
/// started as each pool's zygote would start it ([`php::embed::check`]), so that a name PHP
/// has no setting for, or a value it refuses, is reported with the pool's file now rather
/// than when the pool starts. Only for `-t`: it costs a PHP startup per pool, which a
/// reload on the master's thread should not pay (a zygote that fails at a reload leaves
/// the running generation serving). One problem per pool, as [`check`]'s.
pub fn check_php_settings(config: &crate::config::Config) -> Vec<String> {
    config
        .pools
        .iter()
        .filter(|pool| {
            matches!(&pool.runtime, Runtime::Php(php)
                if matches!(&php.runtime, PhpRuntime::Embed { admin_ini, .. } if !admin_ini.is_empty()))
        })
        .filter_map(|pool| {
            let launch = launch(pool, 0).ok()?;
            let why = php::embed::check(&launch.spec).err()?;
            // drover-php names the pool; the file says which already.
            let prefix = format!("pool {}: ", pool.name);
            let why = why.strip_prefix(&prefix).unwrap_or(&why);
            Some(format!("{}: {why}", pool.file.display()))
        })
        .collect()
}

/// Plans how to run `pool`, with `max_requests` in the spec ([`Launch::spec`] gives a spec
/// with another).
pub fn launch(pool: &Pool, max_requests: u32) -> Result<Launch, RuntimeError> {
    let credentials = Credentials::for_pool(pool)?;
    let kind = Kind::of(pool);
    let mut direct = php::direct::Direct::Absent;
    let mut terms = None;
    let (program, args, mut runtime_env) = match &pool.runtime {
        Runtime::Php(php) => match &php.runtime {
            PhpRuntime::Embed {
                admin_ini,
                limit_extensions,
                worker,
                boot_in_zygote,
            } => {
                direct = php::direct::for_pool(pool, php::embed::linked_libphp);
                let (program, args, env) = php::embed::plan(
                    pool,
                    php,
                    admin_ini,
                    limit_extensions,
                    worker.as_deref().map(|file| (file, *boot_in_zygote)),
                );
                terms = Some(Terms::Php(args));
                (program, zygote::command_line(pool), env)
            }
            PhpRuntime::Cgi { binary, .. } => php::plan(kind, pool, php, binary, max_requests),
        },
        Runtime::Command(command) => command::plan(pool, command),
        Runtime::Python(python) => {
            let (program, args, env) = python::plan(pool, python);
            terms = Some(Terms::Python(args));
            (program, zygote::command_line(pool), env)
        }
        Runtime::Program(program) => program::plan(program),
    };
    runtime_env.extend(direct.env());
    let mut env: Vec<(OsString, OsString)> =
        pool.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    env.extend(runtime_env);
    // The runtime's entry comes last: a variable of the same name in `[env]` is overridden.
    let max_requests_env = match kind {
        Kind::PhpParent | Kind::PhpWorkers => {
            env.iter().rposition(|(k, _)| k == php::MAX_REQUESTS_ENV)
        }
        Kind::PhpZygote | Kind::PythonZygote | Kind::Command | Kind::Program => None,
    };
    let hooks = matches!(&pool.runtime, Runtime::Python(python) if python.hooks.is_some());
    Ok(Launch {
        kind,
        max_requests_env,
        parent_stop: if hooks {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        },
        stop_signal: program::stop_signal(pool),
        direct,
        spec: ProcessSpec {
            program,
            args,
            terms,
            clear_env: pool.clear_env,
            env,
            chdir: pool.chdir.clone(),
            credentials,
            death_signal: program::stop_signal(pool),
            rlimit_files: pool.rlimit_files.map(u64::from),
        },
    })
}

/// `listen_allowed_clients` as libfcgi reads it (and drover's Python workers):
/// `FCGI_WEB_SERVER_ADDRS`, comma-separated, checked on every accept in the worker.
fn allowed_clients_env(pool: &Pool) -> Option<(OsString, OsString)> {
    if pool.listen_allowed_clients.is_empty() {
        return None;
    }
    // A bare port listens dual-stack: its IPv4 clients arrive as `::ffff:a.b.c.d`, which
    // the worker compares as written.
    let dual_stack = matches!(pool.listen, ListenAddr::AnyAddress(_));
    let list: Vec<String> = pool
        .listen_allowed_clients
        .iter()
        .flat_map(|ip| {
            let mapped = match ip {
                IpAddr::V4(v4) if dual_stack => Some(IpAddr::V6(v4.to_ipv6_mapped())),
                _ => None,
            };
            std::iter::once(*ip).chain(mapped)
        })
        .map(|ip| ip.to_string())
        .collect();
    Some(("FCGI_WEB_SERVER_ADDRS".into(), list.join(",").into()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use drover_proto::terms::CommandLine;

    use super::*;

    /// Pool `www` from `text`, loaded as drover loads a file.
    fn pool(text: &str) -> Pool {
        let main = Path::new("/etc/drover/drover.toml");
        let files = BTreeMap::from([
            (main.to_path_buf(), String::new()),
            (main.with_file_name("pools.d/www.toml"), text.to_owned()),
        ]);
        let config = crate::config::load_texts(main, &files).unwrap();
        config.pools.into_iter().next().unwrap()
    }

    const POOL: &str = "listen = \"/run/drover/www.sock\"\nuser = \"root\"\n\
                        [pm]\nmode = \"dynamic\"\nmax_children = 4\nstart_servers = 1\n\
                        min_spare_servers = 1\nmax_spare_servers = 2\n";

    #[test]
    fn a_spawn_gets_the_plan_of_its_own_max_requests() {
        // [env] cannot override the runtime's variable, before or after the plan.
        let php = pool(&format!(
            "{POOL}[env]\nPHP_FCGI_MAX_REQUESTS = \"7\"\n[php]\nbinary = \"/bin/sh\"\n"
        ));
        let planned = launch(&php, 0).unwrap();
        for limit in [0, 42, 500] {
            assert_eq!(*planned.spec(limit), launch(&php, limit).unwrap().spec);
        }

        let command = pool(&format!("{POOL}[command]\nargv = [\"/bin/sh\"]\n"));
        let planned = launch(&command, 0).unwrap();
        assert_eq!(*planned.spec(42), planned.spec);
    }

    #[test]
    fn a_zygote_on_the_bound_copy_that_dies_before_serving_makes_the_next_run_the_linked_libphp() {
        use php::direct::Direct;
        php::embed::assume(Ok("PHP 8.2.36 (embed)"));
        let embed = pool(&format!(
            "{POOL}[env]\nAPP = \"1\"\n[php]\nruntime = \"embed\"\n"
        ));
        let mut planned = launch(&embed, 0).unwrap();
        // As `launch` plans it when the copy is good.
        let copy = PathBuf::from("/var/lib/drover/libphp/libphp8.2.so");
        planned.direct = Direct::Bound {
            copy: copy.clone(),
            build_id: "d02f".into(),
        };
        planned.spec.env.extend(planned.direct.env());
        let path = |launch: &Launch| {
            launch
                .spec
                .env
                .iter()
                .find(|(key, _)| key == "LD_LIBRARY_PATH")
                .map(|(_, value)| value.clone())
        };
        assert_eq!(path(&planned), Some("/var/lib/drover/libphp".into()));

        // A pool that served on the copy keeps it: the exit is not the copy's doing.
        let mut served = planned.clone();
        assert!(!served.fall_back("www", true, "php zygote 7 exited on SIGSEGV"));
        assert_eq!(served, planned);

        assert!(planned.fall_back("www", false, "php zygote 7 exited on SIGILL"));
        assert_eq!(planned.direct, Direct::FellBack { copy });
        assert_eq!(path(&planned), None);
        assert!(planned.spec.env.iter().any(|(key, _)| key == "APP"));
        // Once: the next exit is the linked libphp's, and changes nothing.
        let fallen = planned.clone();
        assert!(!planned.fall_back("www", false, "php zygote 8 exited on SIGILL"));
        assert_eq!(planned, fallen);
    }

    /// A zygote's terms as the zygote reads them: encoded as the spawn writes them, decoded
    /// as `drover-php` and `drover-python` do, for the runtime `pick` takes. Its command line
    /// is the pool's name alone.
    fn parsed<T>(spec: &ProcessSpec, pick: impl FnOnce(Terms) -> Option<T>) -> T {
        let terms = spec.terms.as_ref().expect("a zygote has terms");
        assert_eq!(spec.args, CommandLine::args(terms.pool()));
        pick(Terms::decode(&terms.encode()).unwrap()).expect("the runtime's terms")
    }

    fn php_terms(spec: &ProcessSpec) -> drover_proto::zygote::PhpArgs {
        parsed(spec, |terms| match terms {
            Terms::Php(php) => Some(php),
            Terms::Python(_) => None,
        })
    }

    fn python_terms(spec: &ProcessSpec) -> drover_proto::zygote::PythonArgs {
        parsed(spec, |terms| match terms {
            Terms::Python(python) => Some(python),
            Terms::Php(_) => None,
        })
    }

    #[test]
    fn a_worker_script_is_passed_to_drover_php() {
        crate::config::probe_php_with(php::embed::usable);
        php::embed::assume(Ok("PHP 8.2.36 (embed)"));
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("worker.php");
        std::fs::write(&script, "<?php").unwrap();
        let config = pool(&format!("{POOL}[php]\nworker = {script:?}\n"));
        let Runtime::Php(php) = &config.runtime else {
            panic!("php")
        };
        let PhpRuntime::Embed {
            admin_ini,
            limit_extensions,
            worker,
            ..
        } = &php.runtime
        else {
            panic!("embed: {:?}", php.runtime)
        };
        let (_, args, _) = php::embed::plan(
            &config,
            php,
            admin_ini,
            limit_extensions,
            worker.as_deref().map(|w| (w, true)),
        );
        assert!(args.boot_in_zygote, "{args:?}");
        assert_eq!(args.worker.as_deref(), Some(script.as_path()), "{args:?}");
    }

    #[test]
    fn an_embed_pool_runs_drover_php_with_its_command_line() {
        use drover_proto::zygote::{PhpArgs, ZygoteArgs};
        crate::config::probe_php_with(php::embed::usable);
        php::embed::assume(Ok("PHP 8.2.36 (embed)"));
        let text = format!(
            "request_read_timeout = \"5s\"\naccess_log = \"/var/log/www.access\"\n\
             access_suppress_path = [\"/ping\", \"/health\"]\n{POOL}max_requests = 100\nmax_memory = \"64MiB\"\n\
             [php]\nlimit_extensions = [\".php\", \".phar\"]\n[php.ini]\nmemory_limit = \"64M\"\n\
             [php.admin_ini]\ndisable_functions = \"exec\"\n"
        );
        let planned = launch(&pool(&text), 0).unwrap();
        assert_eq!(planned.kind, Kind::PhpZygote);
        assert!(planned.spec.program.ends_with(php::embed::PROGRAM));
        // No php-cgi variables; no FCGI_WEB_SERVER_ADDRS without listen_allowed_clients.
        assert!(planned.spec.env.is_empty(), "{:?}", planned.spec.env);
        // The zygote draws each worker's request limit itself.
        assert_eq!(*planned.spec(42), planned.spec);
        let expected = PhpArgs {
            zygote: ZygoteArgs {
                pool: "www".into(),
                workers: 1,
                max_requests: 100,
                max_requests_jitter: 0,
                scoreboard_fd: Some(drover_proto::zygote::SCOREBOARD_FD),
                max_memory: Some(64 << 20),
                request_read_timeout_ms: Some(5000),
                access_log_fd: Some(drover_proto::zygote::ACCESS_LOG_FD),
                access_log: Some("/var/log/www.access".into()),
                access_format: drover_proto::access::DEFAULT_FORMAT.into(),
                access_suppress_path: vec!["/ping".into(), "/health".into()],
                protocol: drover_proto::zygote::Protocol::Fastcgi,
                keepalive_timeout_ms: 2000,
                send_timeout_ms: 60_000,
                forwarded_allow_ips: Vec::new(),
                max_request_body: None,
                tls_fd: None,
                cert_reqs: Default::default(),
                ciphers: Vec::new(),
                ssl_version: Default::default(),
                status_path: None,
                status_from: None,
                ping_path: None,
                ping_response: "pong".into(),
                dumpable: false,
            },
            ini_file: None,
            ini: vec!["memory_limit=64M".into()],
            admin_ini: vec!["disable_functions=exec".into()],
            limit_extensions: ".php .phar".into(),
            worker: None,
            boot_in_zygote: false,
        };
        assert_eq!(php_terms(&planned.spec), expected);
        // process_dumpable = true: the zygote stays dumpable.
        let dumpable = launch(&pool(&format!("process_dumpable = true\n{text}")), 0).unwrap();
        assert!(php_terms(&dumpable.spec).zygote.dumpable);

        // Its workers check listen_allowed_clients, as drover-python's do.
        let tcp = text.replace(
            "listen = \"/run/drover/www.sock\"",
            "listen = \"127.0.0.1:9000\"\nlisten_allowed_clients = [\"127.0.0.1\", \"::1\"]",
        );
        let planned = launch(&pool(&tcp), 0).unwrap();
        let allowed = ("FCGI_WEB_SERVER_ADDRS".into(), "127.0.0.1,::1".into());
        assert_eq!(planned.spec.env, [allowed]);
        // On a bare port (dual-stack) IPv4 clients arrive mapped into IPv6.
        let any = text.replace(
            "listen = \"/run/drover/www.sock\"",
            "listen = \"9000\"\nlisten_allowed_clients = [\"127.0.0.1\", \"::1\"]",
        );
        let planned = launch(&pool(&any), 0).unwrap();
        let allowed = (
            "FCGI_WEB_SERVER_ADDRS".into(),
            "127.0.0.1,::ffff:127.0.0.1,::1".into(),
        );
        assert_eq!(planned.spec.env, [allowed]);

        // [] is any file: an empty argument, not the flag's default.
        let any = pool(&format!("{POOL}[php]\nlimit_extensions = []\n"));
        let args = php_terms(&launch(&any, 0).unwrap().spec);
        assert_eq!(args.limit_extensions, "");
    }

    #[test]
    fn php_cgi_gets_the_ini_file_with_c() {
        let text = format!("{POOL}[php]\nbinary = \"/bin/sh\"\nini_file = \"/etc/passwd\"\n");
        let planned = launch(&pool(&text), 0).unwrap();
        assert_eq!(planned.kind, Kind::PhpWorkers);
        assert_eq!(planned.spec.args[..2], ["-c", "/etc/passwd"]);
    }

    #[test]
    fn php_cgi_runs_only_the_named_script_unless_the_pool_says_otherwise() {
        let cgi = format!("{POOL}[php]\nbinary = \"/bin/sh\"\n");
        let args = launch(&pool(&cgi), 0).unwrap().spec.args;
        assert_eq!(
            args,
            ["-d", "cgi.fix_pathinfo=0", "-d", "cgi.discard_path=1"],
            "after -c, before [php.ini]"
        );
        // Written in [php.ini] (1 only beside limit_extensions = []): the pool's value alone.
        let on = cgi.replace("[php]\n", "[php]\nlimit_extensions = []\n")
            + "[php.ini]\n\"cgi.fix_pathinfo\" = \"1\"\nmemory_limit = \"64M\"\n";
        let args = launch(&pool(&on), 0).unwrap().spec.args;
        assert_eq!(
            args,
            [
                "-d",
                "cgi.discard_path=1",
                "-d",
                "cgi.fix_pathinfo=1",
                "-d",
                "memory_limit=64M"
            ]
        );
    }

    #[test]
    fn a_python_pool_runs_drover_python_with_its_command_line() {
        let text = format!("{POOL}[python]\napp = \"myapp.wsgi:app\"\nmount = \"/app\"\n");
        let planned = launch(&pool(&text), 0).unwrap();
        assert_eq!(planned.kind, Kind::PythonZygote);
        let args = python_terms(&planned.spec);
        assert_eq!(
            (
                args.zygote.pool.as_str(),
                args.zygote.workers,
                args.app.as_str()
            ),
            ("www", 1, "myapp.wsgi:app")
        );
        assert_eq!((args.mount.as_str(), args.no_preload), ("/app", false));
        assert_eq!(args.zygote.request_read_timeout_ms, Some(30_000));
        assert_eq!(planned.parent_stop, Signal::SIGKILL);
        let hooked = format!("{text}hooks = \"myapp.hooks\"\n");
        assert_eq!(
            launch(&pool(&hooked), 0).unwrap().parent_stop,
            Signal::SIGTERM
        );
    }
}
