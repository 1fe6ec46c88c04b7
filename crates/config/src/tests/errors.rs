//! The located errors an operator reads for each broken rule.

use std::path::Path;

use super::*;

#[test]
fn an_unknown_key_suggests_the_nearest_known_one() {
    let pool = MINIMAL.replace("max_children = 4", "max_chidren = 4");
    let errors = pool_errors(&pool);
    assert_eq!(errors.len(), 2, "{}", ConfigErrors(errors.clone()));
    // The missing key points at the [pm] header, the unknown one at itself.
    assert_at(
        &errors[0],
        "pools.d/www.toml",
        3,
        "pm.max_children",
        "missing required key",
    );
    assert_at(
        &errors[1],
        "pools.d/www.toml",
        5,
        "pm.max_chidren",
        "unknown key",
    );
    assert_eq!(errors[1].rule, "unknown key; did you mean max_children?");
    assert!(errors[1].to_string().ends_with(
        "pools.d/www.toml:5:1: pm.max_chidren: unknown key; did you mean max_children?"
    ));
}

#[test]
fn a_wrong_type_names_the_expected_one() {
    let e = only_error(&format!("listen_backlog = \"511\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "listen_backlog",
        "expected an integer, found string",
    );
    assert_eq!((e.column, e.value.as_deref()), (1, Some("\"511\"")));
}

#[test]
fn a_missing_top_level_key_points_at_the_first_line() {
    let e = only_error(&MINIMAL.replace("listen = \"/run/drover/www.sock\"", ""));
    assert_at(&e, "pools.d/www.toml", 1, "listen", "missing required key");
    assert_eq!((e.column, e.value), (1, None));
}

#[test]
fn min_spare_above_max_spare_is_refused() {
    let pool = MINIMAL.replace(
        "mode = \"static\"",
        "mode = \"dynamic\"\nmin_spare_servers = 3\nmax_spare_servers = 2",
    );
    let e = only_error(&pool);
    assert_at(
        &e,
        "pools.d/www.toml",
        5,
        "pm.min_spare_servers",
        "not be more than max_spare",
    );
    assert_eq!(e.value.as_deref(), Some("3"));
}

#[test]
fn start_servers_must_lie_between_the_spares() {
    let pool = MINIMAL.replace(
        "mode = \"static\"",
        "mode = \"dynamic\"\nmin_spare_servers = 1\nmax_spare_servers = 3\nstart_servers = 4",
    );
    let e = only_error(&pool);
    assert_at(
        &e,
        "pools.d/www.toml",
        7,
        "pm.start_servers",
        "must be between min_spare_servers (1)",
    );
}

#[test]
fn spare_keys_are_an_error_outside_dynamic() {
    let e = only_error(&MINIMAL.replace("max_children = 4", "max_children = 4\nstart_servers = 2"));
    assert_at(
        &e,
        "pools.d/www.toml",
        6,
        "pm.start_servers",
        "only used by pm.mode = \"dynamic\"",
    );
}

#[test]
fn two_pools_on_one_address_name_each_other() {
    let b = MINIMAL.replace("/run/drover/www.sock", "/run/drover/./www.sock");
    let dir = setup("", &[("a", MINIMAL), ("b", &b)]);
    let errors = load_dir(&dir).unwrap_err().0;
    let [e] = &errors[..] else {
        panic!("{}", ConfigErrors(errors.clone()))
    };
    assert_at(
        e,
        "pools.d/b.toml",
        1,
        "listen",
        "already used by listen of pool a",
    );
    assert!(e.rule.contains("pools.d/a.toml"), "{e}");
}

#[test]
fn status_listen_must_not_take_another_pools_address() {
    let a = MINIMAL.replace("/run/drover/www.sock", "127.0.0.1:9000");
    let b = format!("status_listen = \"127.0.0.1:9000\"\n{MINIMAL}")
        .replace("/run/drover/www.sock", "/run/b.sock");
    let dir = setup("", &[("a", &a), ("b", &b)]);
    let errors = load_dir(&dir).unwrap_err().0;
    assert_eq!(errors.len(), 1, "{}", ConfigErrors(errors.clone()));
    assert_at(
        &errors[0],
        "pools.d/b.toml",
        1,
        "status_listen",
        "already used by listen of pool a",
    );
}

#[test]
fn a_missing_php_binary_is_reported() {
    let e = only_error(&MINIMAL.replace("/bin/sh", "/nonexistent/php-cgi"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.binary",
        "php binary not found",
    );
    assert_eq!(e.value.as_deref(), Some("\"/nonexistent/php-cgi\""));
}

#[test]
fn a_pool_needs_exactly_one_runtime() {
    let e = only_error(&MINIMAL.replace("[php]\nbinary = \"/bin/sh\"\n", ""));
    assert_at(&e, "pools.d/www.toml", 1, "", "no runtime");

    let two = format!("{MINIMAL}\n[command]\nargv = [\"/bin/sh\"]\n");
    let e = only_error(&two);
    assert_at(&e, "pools.d/www.toml", 10, "command", "already has [php]");
}

#[test]
fn unix_socket_keys_are_refused_on_tcp() {
    let pool = format!("listen_mode = \"0600\"\n{MINIMAL}")
        .replace("/run/drover/www.sock", "127.0.0.1:9000");
    let e = only_error(&pool);
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "listen_mode",
        "only for unix sockets",
    );
}

#[test]
fn durations_need_a_unit() {
    let e = only_error(&format!("request_terminate_timeout = 30\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "request_terminate_timeout",
        "with a unit, like \"30s\"",
    );
    let e = only_error(&format!("request_terminate_timeout = \"30\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "request_terminate_timeout",
        "invalid duration",
    );
}

#[test]
fn every_error_in_a_file_is_reported() {
    let pool = MINIMAL
        .replace("max_children = 4", "max_children = 0")
        .replace("mode = \"static\"", "mode = \"static\"\nmax_memory = 256")
        .replace("/bin/sh", "/nonexistent");
    let errors = pool_errors(&pool);
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["pm.max_memory", "pm.max_children", "php.binary"]);
    assert_eq!(ConfigErrors(errors).to_string().lines().count(), 3);
}

#[test]
fn errors_in_every_file_are_reported_in_file_order() {
    let dir = setup(
        "log_level = \"loud\"\n",
        &[("b", "listen = 1\n"), ("a", "[pm\n")],
    );
    let errors = load_dir(&dir).unwrap_err().0;
    let files: Vec<&Path> = errors.iter().map(|e| e.file.as_path()).collect();
    assert!(files[0].ends_with("drover.toml"));
    assert!(files[1].ends_with("pools.d/a.toml"));
    assert!(files.last().unwrap().ends_with("pools.d/b.toml"));
    let syntax = &errors[1];
    assert_eq!((syntax.line, syntax.key.as_str()), (1, ""));
    assert!(syntax.rule.starts_with("invalid TOML"), "{syntax}");
}

#[test]
fn no_pools_is_an_error_at_include() {
    let dir = setup("include = [\"conf.d/*.toml\"]\n", &[]);
    let e = &load_dir(&dir).unwrap_err().0[0];
    assert_at(
        e,
        "drover.toml",
        1,
        "include",
        "no pools: include matched no files",
    );
    let dir = setup("", &[]);
    let e = &load_dir(&dir).unwrap_err().0[0];
    assert_at(e, "drover.toml", 1, "include", "pools.d/*.toml");
}

#[test]
fn global_rules_are_checked() {
    let dir = setup(
        "emergency_restart_threshold = 3\nlog_level = \"warning\"\n",
        &[("www", MINIMAL)],
    );
    let e = &load_dir(&dir).unwrap_err().0[0];
    assert_at(
        e,
        "drover.toml",
        1,
        "emergency_restart_threshold",
        "must be more than 0s",
    );
    let dir = setup("log_level = \"warning\"\n", &[("www", MINIMAL)]);
    assert_eq!(load_dir(&dir).unwrap().global.log_level, LogLevel::Warn);
}

#[test]
fn slowlog_rules_are_checked() {
    let e = only_error(&format!("request_slowlog_timeout = \"5s\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "request_slowlog_timeout",
        "needs slowlog",
    );
    let pool = format!(
        "request_slowlog_timeout = \"5s\"\nslowlog = \"s.log\"\nrequest_terminate_timeout = \"5s\"\n{MINIMAL}"
    );
    assert_at(
        &only_error(&pool),
        "pools.d/www.toml",
        1,
        "request_slowlog_timeout",
        "shorter than",
    );
}

#[test]
fn jitter_needs_max_requests() {
    let e = only_error(&MINIMAL.replace(
        "max_children = 4",
        "max_children = 4\nmax_requests_jitter = 5",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        6,
        "pm.max_requests_jitter",
        "must be 0 when max_requests is 0",
    );
}

#[test]
fn env_names_and_values_are_checked() {
    let e = only_error(&format!("{MINIMAL}[env]\nPORT = 8080\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "env.PORT",
        "expected a string, found integer",
    );
    let e = only_error(&format!("{MINIMAL}[env]\n\"1BAD\" = \"x\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "env.1BAD",
        "not a valid environment variable name",
    );
}

#[test]
fn env_values_fit_what_execve_takes() {
    // One string: NAME=value and its NUL at most 128 KiB, else E2BIG at spawn.
    let value = "x".repeat(128 * 1024);
    let e = only_error(&format!("{MINIMAL}[env]\nBIG = \"{value}\"\n"));
    assert_at(&e, "pools.d/www.toml", 10, "env.BIG", "MAX_ARG_STRLEN");
    assert!(e.rule.contains("131077 bytes"), "{e}");
    let fits = "x".repeat(128 * 1024 - 6);
    assert!(
        load_dir(&setup(
            "",
            &[("www", &format!("{MINIMAL}[env]\nBIG = \"{fits}\"\n"))]
        ))
        .is_ok()
    );
    // All of it: at most 512 KiB.
    let many: String = (0..5)
        .map(|i| format!("V{i} = \"{}\"\n", "x".repeat(120 * 1024)))
        .collect();
    let e = only_error(&format!("{MINIMAL}[env]\n{many}"));
    assert_at(&e, "pools.d/www.toml", 9, "env", "at most 524288 (512 KiB)");
    // php.ini values travel as one argument each, `-d name=value`.
    let e = only_error(&format!("{MINIMAL}[php.ini]\nx = \"{value}\"\n"));
    assert_at(&e, "pools.d/www.toml", 10, "php.ini.x", "MAX_ARG_STRLEN");
}

#[test]
fn allowed_clients_are_refused_where_the_runtime_would_not_check_them() {
    let tcp = MINIMAL.replace(
        "listen = \"/run/drover/www.sock\"",
        "listen = \"127.0.0.1:9000\"\nlisten_allowed_clients = [\"127.0.0.1\"]",
    );
    let e = only_error(&tcp);
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "listen_allowed_clients",
        "php-cgi does not enforce it",
    );
    assert!(
        e.rule.contains("unix socket") && e.rule.contains("firewall"),
        "{e}"
    );
    let command = tcp.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[command]\nargv = [\"/bin/sh\"]",
    );
    assert!(load_dir(&setup("", &[("www", &command)])).is_ok());
    let e = only_error(&command.replace("127.0.0.1:9000", "[::1]:9000"));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "listen_allowed_clients",
        "IPv4 clients only",
    );
    // A bare port is dual-stack: its IPv4 clients arrive as IPv6 addresses.
    let e = only_error(&command.replace("127.0.0.1:9000", "9000"));
    assert_eq!(e.key, "listen_allowed_clients", "{e}");
}

#[test]
fn a_bare_port_collides_with_any_address_on_that_port() {
    let any = MINIMAL.replace("/run/drover/www.sock", "9000");
    let local = MINIMAL.replace("/run/drover/www.sock", "127.0.0.1:9000");
    let other = MINIMAL.replace("/run/drover/www.sock", "127.0.0.1:9001");
    assert!(load_dir(&setup("", &[("a", &any), ("b", &other)])).is_ok());
    let errors = load_dir(&setup("", &[("a", &any), ("b", &local)]))
        .unwrap_err()
        .0;
    assert_eq!(errors.len(), 1, "{}", ConfigErrors(errors.clone()));
    assert_at(&errors[0], "pools.d/b.toml", 1, "listen", "already used");
    let status = format!("status_listen = \"[::1]:9000\"\n{any}");
    assert_eq!(only_error(&status).key, "status_listen");
}

#[test]
fn a_bad_pool_file_name_is_refused() {
    let dir = setup("", &[("my pool", MINIMAL)]);
    let e = &load_dir(&dir).unwrap_err().0[0];
    assert_at(
        e,
        "pools.d/my pool.toml",
        1,
        "",
        "must match [A-Za-z0-9_.-]+",
    );
}

#[test]
fn a_pool_may_not_take_the_control_socket() {
    let main = "[control]\nlisten = \"/run/drover/www.sock\"\n";
    let dir = setup(main, &[("www", MINIMAL)]);
    let errors = load_dir(&dir).unwrap_err().0;
    let [e] = &errors[..] else {
        panic!("{}", ConfigErrors(errors.clone()))
    };
    assert_at(
        e,
        "pools.d/www.toml",
        1,
        "listen",
        "already used by control.listen",
    );
}

#[test]
fn dynamic_needs_its_spares_at_the_pm_header() {
    let errors = pool_errors(&MINIMAL.replace("\"static\"", "\"dynamic\""));
    let keys: Vec<(usize, &str)> = errors.iter().map(|e| (e.line, e.key.as_str())).collect();
    assert_eq!(
        keys,
        [(3, "pm.min_spare_servers"), (3, "pm.max_spare_servers")]
    );
}

#[test]
fn an_empty_include_is_an_error_at_the_key() {
    let dir = setup("\ninclude = []\n", &[("www", MINIMAL)]);
    let errors = load_dir(&dir).unwrap_err().0;
    let [e] = &errors[..] else {
        panic!("{}", ConfigErrors(errors.clone()))
    };
    assert_at(e, "drover.toml", 2, "include", "no pools");
}

#[test]
fn absolute_include_globs_are_used_as_written() {
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("api.toml"), MINIMAL).unwrap();
    let main = format!("include = [{:?}]\n", elsewhere.path().join("*.toml"));
    let dir = setup(&main, &[]);
    let config = load_dir(&dir).unwrap();
    assert_eq!(config.pools[0].name, "api");
    assert_eq!(config.pools[0].file, elsewhere.path().join("api.toml"));
}

#[test]
fn log_format_and_decorate_workers_output_name_their_values() {
    let dir = setup("log_format = \"logfmt\"\n", &[("www", MINIMAL)]);
    let errors = load_dir(&dir).unwrap_err().0;
    assert_eq!(errors.len(), 1, "{}", ConfigErrors(errors.clone()));
    assert_at(
        &errors[0],
        "drover.toml",
        1,
        "log_format",
        "\"text\" or \"json\"",
    );
    let e = only_error(&format!("decorate_workers_output = \"no\"\n{MINIMAL}"));
    assert_at(&e, "www.toml", 1, "decorate_workers_output", "boolean");
}

#[test]
fn protocol_http_is_refused_where_no_worker_speaks_it() {
    let e = only_error(&format!("protocol = \"http\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "protocol",
        "a PHP pool speaks FastCGI only",
    );
    let command = MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[command]\nargv = [\"sh\", \"-c\", \"true\"]",
    );
    let e = only_error(&format!("protocol = \"http\"\n{command}"));
    assert_at(&e, "pools.d/www.toml", 1, "protocol", "a [command] pool");
    let e = only_error(&format!("protocol = \"spdy\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "protocol",
        "\"fastcgi\" or \"http\"",
    );
}

#[test]
fn http_keys_need_protocol_http_and_valid_values() {
    let python = MINIMAL.replace("[php]\nbinary = \"/bin/sh\"", "[python]\napp = \"app\"");
    let e = only_error(&format!("keepalive_timeout = \"5s\"\n{python}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "keepalive_timeout",
        "only for protocol = \"http\"",
    );
    let e = only_error(&format!(
        "protocol = \"http\"\nforwarded_allow_ips = [\"10.0.0.1\", \"proxy\"]\n{python}"
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "forwarded_allow_ips",
        "not an IP address",
    );
    let e = only_error(&format!(
        "protocol = \"http\"\nmax_request_body = \"10\"\n{python}"
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "max_request_body",
        "needs a unit",
    );
    // WebSockets are an ASGI app's: the bound is refused on a WSGI pool and on FastCGI.
    let e = only_error(&format!(
        "protocol = \"http\"\nws_max_size = \"1MiB\"\n{python}"
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "ws_max_size",
        "only for interface = \"asgi\"",
    );
    let e = only_error(&format!(
        "ws_max_size = \"1MiB\"\n{python}\ninterface = \"asgi\""
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "ws_max_size",
        "only for protocol = \"http\"",
    );
    let e = only_error(&format!(
        "protocol = \"http\"\nsend_timeout = \"0s\"\n{python}"
    ));
    assert_at(&e, "pools.d/www.toml", 2, "send_timeout", "more than 0s");
    let e = only_error(&format!(
        "protocol = \"http\"\nsend_timeout = \"0s\"\n{python}\ninterface = \"asgi\""
    ));
    assert_at(&e, "pools.d/www.toml", 2, "send_timeout", "more than 0s");
}

/// A Python pool's text, `[python]` holding `python`, with `top` above `[pm]`.
fn python_pool(top: &str, python: &str) -> String {
    MINIMAL
        .replace(
            "[php]\nbinary = \"/bin/sh\"",
            &format!("[python]\n{python}"),
        )
        .replace("\n[pm]", &format!("{top}\n[pm]"))
}

#[test]
fn an_app_factory_with_other_than_literal_arguments_is_refused_at_its_line() {
    let e = only_error(&python_pool("", "app = \"myapp:create_app(os.environ)\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "python.app",
        "after \"myapp:\": the factory's arguments must be literals",
    );
    let e = only_error(&python_pool("", "app = \"myapp:factory.build()\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "python.app",
        "only a name or a call",
    );
}

#[test]
fn terminate_grace_is_refused_where_nothing_can_use_it() {
    let e = only_error(&format!("terminate_grace = \"2s\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "terminate_grace",
        "Python pools only",
    );
    let e = only_error(&python_pool("terminate_grace = \"2s\"", "app = \"myapp\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "terminate_grace",
        "needs request_terminate_timeout",
    );
}

#[test]
fn hooks_is_a_module_or_an_existing_py_file() {
    let e = only_error(&python_pool(
        "",
        "app = \"myapp\"\nhooks = \"/nonexistent/gunicorn.conf.py\"",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "python.hooks",
        "cannot use /nonexistent",
    );
    let e = only_error(&python_pool("", "app = \"myapp\"\nhooks = \"my-hooks\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "python.hooks",
        "expected a module",
    );
}

#[test]
fn a_python_interface_other_than_wsgi_or_asgi_is_refused() {
    let pool = MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[python]\napp = \"main:app\"\ninterface = \"rsgi\"",
    );
    let e = only_error(&pool);
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "python.interface",
        "\"wsgi\" or \"asgi\"",
    );
}

#[test]
fn warmup_is_refused_for_an_asgi_app() {
    let pool = MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[python]\napp = \"main:app\"\ninterface = \"asgi\"\nwarmup = [\"/\"]",
    );
    let e = only_error(&pool);
    assert_eq!(e.key, "python.warmup");
    assert!(e.rule.contains("interface = \"asgi\""), "{}", e.rule);
}

#[test]
fn terminate_grace_is_refused_for_an_asgi_app_which_is_killed_at_once() {
    let pool = python_pool(
        "request_terminate_timeout = \"5s\"\nterminate_grace = \"2s\"",
        "app = \"myapp\"\ninterface = \"asgi\"",
    );
    let e = only_error(&pool);
    assert_at(
        &e,
        "pools.d/www.toml",
        3,
        "terminate_grace",
        "WSGI pools only",
    );
    // Without the key: no abort, the kill is at once.
    let (_dir, config) = loaded(&[(
        "www",
        &python_pool(
            "request_terminate_timeout = \"5s\"",
            "app = \"myapp\"\ninterface = \"asgi\"",
        ),
    )]);
    assert_eq!(config.pools[0].terminate_grace, Duration::ZERO);
}

/// `[python] threads`: a count in 1..=64, for WSGI apps served over FastCGI.
fn threads_pool(threads: &str, more: &str) -> String {
    MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        &format!("[python]\napp = \"main:app\"\nthreads = {threads}\n{more}"),
    )
}

#[test]
fn threads_out_of_range_are_refused_with_the_bound() {
    for bad in ["0", "65", "-1", "\"4\""] {
        let e = only_error(&threads_pool(bad, ""));
        assert_at(&e, "pools.d/www.toml", 9, "python.threads", "");
        if bad == "65" {
            assert!(e.rule.contains("64"), "{bad}: {}", e.rule);
        }
    }
}

#[test]
fn threads_are_refused_for_an_asgi_app() {
    let e = only_error(&threads_pool("4", "interface = \"asgi\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "python.threads",
        "interface = \"asgi\"",
    );
    // One thread is what an ASGI worker has anyway.
    let dir = setup("", &[("www", &threads_pool("1", "interface = \"asgi\""))]);
    assert!(load_dir(&dir).is_ok());
}

#[test]
fn threads_are_refused_with_protocol_http() {
    let e = only_error(&format!("protocol = \"http\"\n{}", threads_pool("4", "")));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "python.threads",
        "protocol = \"http\"",
    );
}

#[test]
fn threads_are_not_a_php_key() {
    let pool = MINIMAL.replace(
        "[php]\nbinary = \"/bin/sh\"",
        "[php]\nbinary = \"/bin/sh\"\nthreads = 4",
    );
    let e = only_error(&pool);
    assert_eq!(e.key, "php.threads");
}

#[test]
fn terminate_grace_is_refused_with_threads_whose_worker_is_killed_at_once() {
    let pool = python_pool(
        "request_terminate_timeout = \"5s\"\nterminate_grace = \"2s\"",
        "app = \"myapp\"\nthreads = 4",
    );
    let e = only_error(&pool);
    assert_at(&e, "pools.d/www.toml", 3, "terminate_grace", "threads");
    let (_dir, config) = loaded(&[(
        "www",
        &python_pool(
            "request_terminate_timeout = \"5s\"",
            "app = \"myapp\"\nthreads = 4",
        ),
    )]);
    assert_eq!(config.pools[0].terminate_grace, Duration::ZERO);
}

#[test]
fn process_dumpable_false_is_refused_where_no_zygote_enforces_it() {
    // MINIMAL runs php-cgi, an exec'd program drover cannot make non-dumpable.
    let e = only_error(&format!("process_dumpable = false\n{MINIMAL}"));
    assert_at(
        &e,
        "www.toml",
        1,
        "process_dumpable",
        "drover-php and Python",
    );
    // true is what php-cgi is anyway; leaving the key out is the default.
    let dumpable = format!("process_dumpable = true\n{MINIMAL}");
    let (_dir, config) = loaded(&[("www", &dumpable)]);
    assert!(config.pools[0].process_dumpable);
    let python = MINIMAL.replace("[php]\nbinary = \"/bin/sh\"", "[python]\napp = \"app\"");
    let (_dir, config) = loaded(&[("www", &format!("process_dumpable = false\n{python}"))]);
    assert!(!config.pools[0].process_dumpable);
}
