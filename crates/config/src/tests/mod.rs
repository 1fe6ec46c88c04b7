//! Loading whole configurations from files on disk, as an operator writes them: what valid
//! files resolve to here, the errors invalid ones report in `errors`.

use std::collections::BTreeMap;
use std::time::Duration;

use tempfile::TempDir;

use super::*;

mod errors;
mod keys;
mod php;

/// A valid php pool with only the required keys (and a binary that exists everywhere).
pub(super) const MINIMAL: &str = r#"listen = "/run/drover/www.sock"

[pm]
mode = "static"
max_children = 4

[php]
binary = "/bin/sh"
"#;

/// What the tests of this thread assume drover-php answers, given to the loader as the
/// binaries give it the master's `runtime::php::embed::usable`.
pub(crate) fn assume(answer: Result<&'static str, &'static str>) {
    probe_php_with(assumed);
    ASSUMED.set(Some(answer));
}

thread_local! {
    static ASSUMED: std::cell::Cell<Option<Result<&'static str, &'static str>>> =
        const { std::cell::Cell::new(None) };
}

/// The probe of these tests: what this test's thread [`assume`]d.
fn assumed() -> Result<&'static str, &'static str> {
    ASSUMED
        .get()
        .unwrap_or(Err("drover-php is not asked in unit tests"))
}

/// The errors of pool `name` from `text` (beside an empty drover.toml), loaded from memory
/// by the files' loader, as `(line, key, rule)`.
pub(crate) fn located_errors(name: &str, text: &str) -> Vec<(usize, String, String)> {
    let main = std::path::Path::new("/etc/drover/drover.toml");
    let files = BTreeMap::from([
        (main.to_path_buf(), String::new()),
        (
            main.with_file_name(format!("pools.d/{name}.toml")),
            text.to_owned(),
        ),
    ]);
    match load_texts(main, &files) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .0
            .into_iter()
            .map(|e| (e.line, e.key, e.rule))
            .collect(),
    }
}

/// A folder with `drover.toml` and `pools.d/NAME.toml` for each (name, text).
fn setup(main: &str, pools: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("drover.toml"), main).unwrap();
    std::fs::create_dir(dir.path().join("pools.d")).unwrap();
    for (name, text) in pools {
        std::fs::write(dir.path().join(format!("pools.d/{name}.toml")), text).unwrap();
    }
    dir
}

fn load_dir(dir: &TempDir) -> Result<Config, ConfigErrors> {
    load(&dir.path().join("drover.toml"))
}

/// The errors of loading one pool file named www.
fn pool_errors(pool: &str) -> Vec<ConfigError> {
    let dir = setup("", &[("www", pool)]);
    load_dir(&dir).expect_err("the pool should be invalid").0
}

fn only_error(pool: &str) -> ConfigError {
    let errors = pool_errors(pool);
    assert_eq!(errors.len(), 1, "{}", ConfigErrors(errors.clone()));
    errors.into_iter().next().unwrap()
}

fn assert_at(e: &ConfigError, file: &str, line: usize, key: &str, rule: &str) {
    assert!(e.file.ends_with(file), "file {} in {e}", e.file.display());
    assert_eq!((e.line, e.key.as_str()), (line, key), "{e}");
    assert!(e.rule.contains(rule), "rule {:?} lacks {rule:?}", e.rule);
}

/// A loaded configuration and the folder that must outlive it.
pub(super) fn loaded(pools: &[(&str, &str)]) -> (TempDir, Config) {
    let dir = setup("", pools);
    let config = load_dir(&dir).unwrap();
    (dir, config)
}

#[test]
fn a_minimal_php_pool_gets_php_fpm_defaults() {
    let dir = setup("", &[("www", MINIMAL)]);
    let config = load_dir(&dir).unwrap();
    assert_eq!(config.global.error_log, LogTarget::Stderr);
    assert_eq!(config.global.log_level, LogLevel::Info);
    assert_eq!(config.global.log_format, LogFormat::Text);
    assert!(config.pools[0].decorate_workers_output);
    assert!(!config.pools[0].process_dumpable);
    assert_eq!(config.global.include, ["pools.d/*.toml"]);
    assert_eq!(
        config.global.process_control_timeout,
        Duration::from_secs(10)
    );
    assert_eq!(config.global.emergency_restart_threshold, 0);
    assert_eq!(config.global.control.listen, None);
    let [pool] = &config.pools[..] else {
        panic!("one pool")
    };
    assert_eq!(pool.name, "www");
    assert!(pool.file.ends_with("pools.d/www.toml"));
    assert_eq!(pool.listen, ListenAddr::Unix("/run/drover/www.sock".into()));
    assert_eq!((pool.listen_backlog, pool.listen_mode), (511, 0o660));
    assert_eq!((pool.user.as_deref(), pool.chdir.as_deref()), (None, None));
    assert!(pool.clear_env);
    assert_eq!(
        (pool.request_slowlog_timeout, pool.request_terminate_timeout),
        (None, None)
    );
    assert_eq!(pool.request_slowlog_trace_depth, 20);
    assert_eq!(pool.status_listen, None);
    let pm = &pool.pm;
    assert_eq!(
        (pm.mode, pm.max_children, pm.start_servers),
        (PmMode::Static, 4, 4)
    );
    assert_eq!(
        (pm.max_spawn_rate, pm.process_idle_timeout),
        (32, Duration::from_secs(10))
    );
    assert_eq!(
        (pm.max_requests, pm.max_requests_jitter, pm.max_memory),
        (0, 0, None)
    );
    assert!(pool.env.is_empty());
    let php = Php {
        runtime: PhpRuntime::Cgi {
            binary: "/bin/sh".into(),
            any_file: false,
        },
        ini_file: None,
        ini: Default::default(),
    };
    assert_eq!(pool.runtime, Runtime::Php(php));
}

#[test]
fn every_key_set_is_read() {
    let main = r#"
error_log = "log/drover.log"
log_level = "notice"
log_format = "json"
pid_file = "/run/drover.pid"
include = ["pools.d/*.toml"]
process_control_timeout = "1m 30s"
emergency_restart_threshold = 10
emergency_restart_interval = "1m"
[control]
listen = "run/control.sock"
"#;
    let pool = r#"
listen = "127.0.0.1:9000"
listen_backlog = 64
user = "www-data"
group = "www-data"
chdir = "/"
clear_env = false
request_slowlog_timeout = "5s"
slowlog = "log/www.slow"
decorate_workers_output = false
process_dumpable = true
request_terminate_timeout = "1m"
status_listen = "[::1]:9001"
[pm]
mode = "dynamic"
max_children = 10
min_spare_servers = 2
max_spare_servers = 6
max_requests = 500
max_requests_jitter = 50
max_memory = "256MiB"
[env]
APP_ENV = "prod"
[php]
binary = "/bin/sh"
[php.ini]
memory_limit = "128M"
opcache.enable = true
max_execution_time = 30
"#;
    let dir = setup(main, &[("www", pool)]);
    // The logs' folder must exist.
    std::fs::create_dir(dir.path().join("log")).unwrap();
    let config = load_dir(&dir).unwrap();
    let g = &config.global;
    assert_eq!(
        g.error_log,
        LogTarget::File(dir.path().join("log/drover.log"))
    );
    assert_eq!(g.log_level, LogLevel::Info);
    assert_eq!(g.log_format, LogFormat::Json);
    assert_eq!(g.process_control_timeout, Duration::from_secs(90));
    assert_eq!(g.control.listen, Some(dir.path().join("run/control.sock")));
    let p = &config.pools[0];
    assert_eq!(p.listen, ListenAddr::Tcp("127.0.0.1:9000".parse().unwrap()));
    assert_eq!(p.request_slowlog_timeout, Some(Duration::from_secs(5)));
    assert_eq!(p.slowlog, Some(dir.path().join("log/www.slow")));
    assert!(!p.decorate_workers_output);
    assert!(p.process_dumpable);
    // start_servers defaults to the middle of the spare range.
    assert_eq!(
        (
            p.pm.start_servers,
            p.pm.min_spare_servers,
            p.pm.max_spare_servers
        ),
        (4, 2, 6)
    );
    assert_eq!(p.pm.max_memory, Some(256 << 20));
    let Runtime::Php(php) = &p.runtime else {
        panic!("php")
    };
    assert_eq!(php.ini["opcache.enable"], "1");
    assert_eq!(php.ini["max_execution_time"], "30");
}

#[test]
fn relative_paths_resolve_against_drover_toml() {
    let dir = setup(
        "",
        &[(
            "www",
            &MINIMAL.replace("/run/drover/www.sock", "run/www.sock"),
        )],
    );
    let config = load_dir(&dir).unwrap();
    assert_eq!(
        config.pools[0].listen,
        ListenAddr::Unix(dir.path().join("run/www.sock"))
    );
}

#[test]
fn python_and_command_pools_are_read() {
    let python = MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[python]\napp = \"myapp.wsgi\"\nmount = \"/app\"\npython_path = [\"src\"]",
    );
    let command = MINIMAL
        .replace(
            "[php]\nbinary = \"/bin/sh\"",
            "[command]\nargv = [\"sh\", \"-c\", \"true\"]",
        )
        .replace(
            "listen = \"/run/drover/www.sock\"",
            "listen = \"127.0.0.1:9000\"\nlisten_allowed_clients = [\"127.0.0.1\", \"::1\"]",
        );
    let dir = setup("", &[("app", &python), ("cgi", &command)]);
    let config = load_dir(&dir).unwrap();
    let Runtime::Python(py) = &config.pools[0].runtime else {
        panic!("python")
    };
    assert_eq!(
        (py.module.as_str(), py.callable.as_str()),
        ("myapp.wsgi", "application")
    );
    assert_eq!((py.preload, py.mount.as_str()), (true, "/app"));
    assert_eq!(py.interface, Interface::Wsgi);
    assert_eq!(py.python_path, [dir.path().join("src")]);
    assert_eq!(config.pools[1].listen_allowed_clients.len(), 2);
    let Runtime::Command(cmd) = &config.pools[1].runtime else {
        panic!("command")
    };
    assert!(
        cmd.argv[0].ends_with("/sh") && cmd.argv[1..] == ["-c", "true"],
        "{:?}",
        cmd.argv
    );
}

#[test]
fn an_http_python_pool_gets_gunicorns_defaults() {
    let python = MINIMAL.replace("[php]\nbinary = \"/bin/sh\"", "[python]\napp = \"app\"");
    let (_dir, config) = loaded(&[
        ("www", &python),
        (
            "web",
            &format!("protocol = \"http\"\n{python}").replace("www.sock", "web.sock"),
        ),
        (
            "big",
            &format!(
                "protocol = \"http\"\nkeepalive_timeout = \"30s\"\n\
                 forwarded_allow_ips = [\"*\"]\nmax_request_body = \"10MiB\"\n\
                 send_timeout = \"10s\"\n{python}"
            )
            .replace("www.sock", "big.sock"),
        ),
        (
            "asgi",
            &format!("protocol = \"http\"\n{python}\ninterface = \"asgi\"")
                .replace("www.sock", "asgi.sock"),
        ),
        (
            "ws",
            &format!("protocol = \"http\"\nws_max_size = \"1MiB\"\n{python}\ninterface = \"asgi\"")
                .replace("www.sock", "ws.sock"),
        ),
        (
            "slow",
            &format!("protocol = \"http\"\nsend_timeout = \"5s\"\n{python}\ninterface = \"asgi\"")
                .replace("www.sock", "slow.sock"),
        ),
    ]);
    let by_name = |name: &str| config.pools.iter().find(|p| p.name == name).unwrap();
    assert_eq!(by_name("www").http, None);
    let web = by_name("web").http.clone().unwrap();
    assert_eq!(web.keepalive_timeout, Duration::from_secs(2));
    assert_eq!(web.forwarded_allow_ips, ["127.0.0.1", "::1"]);
    assert_eq!(web.max_request_body, None);
    assert_eq!(web.send_timeout, Duration::from_secs(60));
    let big = by_name("big").http.clone().unwrap();
    assert_eq!(big.keepalive_timeout, Duration::from_secs(30));
    assert_eq!(big.forwarded_allow_ips, ["*"]);
    assert_eq!(big.max_request_body, Some(10 << 20));
    assert_eq!(big.send_timeout, Duration::from_secs(10));
    // An ASGI app is served over HTTP too, with uvicorn's WebSocket message bound.
    let asgi = by_name("asgi").http.clone().unwrap();
    assert_eq!(asgi.ws_max_size, 16 << 20);
    assert_eq!(by_name("ws").http.clone().unwrap().ws_max_size, 1 << 20);
    assert_eq!(asgi.send_timeout, Duration::from_secs(60));
    // The hub enforces send_timeout on an ASGI pool's connections too.
    assert_eq!(
        by_name("slow").http.clone().unwrap().send_timeout,
        Duration::from_secs(5)
    );
}

#[test]
fn texts_load_as_the_same_files_on_disk_do() {
    let broken = MINIMAL.replace("max_children = 4", "max_chidren = 4");
    for pool in [MINIMAL, broken.as_str()] {
        let dir = setup("", &[("www", pool), ("b", MINIMAL)]);
        let main = dir.path().join("drover.toml");
        let files: BTreeMap<_, _> = [
            (main.clone(), String::new()),
            (dir.path().join("pools.d/www.toml"), pool.to_owned()),
            (dir.path().join("pools.d/b.toml"), MINIMAL.to_owned()),
            // Outside the glob: not a pool.
            (dir.path().join("pools.d/x.toml.example"), "junk".to_owned()),
        ]
        .into_iter()
        .collect();
        match (load_dir(&dir), load_texts(&main, &files)) {
            (Ok(disk), Ok(texts)) => assert_eq!(disk, texts),
            (Err(disk), Err(texts)) => assert_eq!(disk, texts),
            (disk, texts) => panic!("disk {disk:?}\ntexts {texts:?}"),
        }
    }
}

#[test]
fn a_python_pool_takes_a_factory_hooks_and_terminate_grace() {
    let python = MINIMAL
        .replace(
            "[php]\nbinary = \"/bin/sh\"",
            "[python]\napp = \"myapp:create_app('prod', debug=False)\"\nhooks = \"gunicorn.conf.py\"",
        )
        .replace(
            "\n[pm]",
            "request_terminate_timeout = \"2s\"\nterminate_grace = \"500ms\"\n[pm]",
        );
    let dir = setup("", &[("app", &python)]);
    std::fs::write(dir.path().join("gunicorn.conf.py"), "workers = 4\n").unwrap();
    let config = load_dir(&dir).unwrap();
    let pool = &config.pools[0];
    let Runtime::Python(py) = &pool.runtime else {
        panic!("python")
    };
    assert_eq!(py.callable, "create_app('prod', debug=False)");
    let hooks = dir.path().join("gunicorn.conf.py");
    assert_eq!(py.hooks.as_deref(), Some(hooks.to_str().unwrap()));
    assert_eq!(pool.terminate_grace, Duration::from_millis(500));
    // The rendered pool loads back the same.
    let text = config.render();
    assert!(text.contains("terminate_grace = \"500ms\""), "{text}");
    assert!(
        text.contains("app = \"myapp:create_app('prod', debug=False)\""),
        "{text}"
    );
}
