//! gunicorn's command line and settings to drover's files, without running anything.

use super::*;

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

fn file_setting(name: &str, value: Json, line: usize) -> Setting {
    Setting {
        name: name.into(),
        value,
        callable: false,
        repr: None,
        origin: Origin::File {
            file: "gunicorn.conf.py".into(),
            line,
        },
    }
}

fn hook(name: &str, line: usize) -> Setting {
    Setting {
        callable: true,
        ..file_setting(name, Json::Null, line)
    }
}

fn context() -> Context {
    Context {
        cwd: "/srv/app".into(),
        config: Some("/srv/app/gunicorn.conf.py".into()),
        root: false,
        web_concurrency: None,
        env_args: Vec::new(),
    }
}

fn toml(doc: &Doc) -> toml::Table {
    doc.render().parse().expect("valid TOML")
}

fn note<'i>(import: &'i Import, needle: &str) -> &'i Note {
    import
        .report
        .iter()
        .find(|n| n.setting.contains(needle) || n.place.contains(needle))
        .unwrap_or_else(|| panic!("no note on {needle}: {:#?}", import.report))
}

#[test]
fn flags_in_every_spelling() {
    let cli = parse_args(&args(
        "-w4 --bind unix:/run/a.sock -b 127.0.0.1:9 --max-requests=100 -e A=1 -e B=2 \
         --preload -c conf.py --threads 8 --frobnicate myapp.wsgi:app",
    ))
    .unwrap();
    assert_eq!(cli.config.as_deref(), Some("conf.py"));
    assert_eq!(cli.app.as_deref(), Some("myapp.wsgi:app"));
    let get = |name: &str| cli.settings.iter().find(|s| s.name == name).unwrap();
    assert_eq!(get("workers").value, Json::String("4".into()));
    assert_eq!(
        get("bind").value,
        serde_json::json!(["unix:/run/a.sock", "127.0.0.1:9"])
    );
    assert_eq!(
        get("max_requests").origin,
        Origin::Flag("--max-requests=100".into())
    );
    assert_eq!(get("raw_env").value, serde_json::json!(["A=1", "B=2"]));
    assert_eq!(get("preload_app").value, Json::Bool(true));
    assert_eq!(get("threads").origin, Origin::Flag("--threads 8".into()));
    assert_eq!(get("frobnicate").value, Json::Bool(true));
    assert!(parse_args(&args("-w")).is_err());
    assert!(parse_args(&args("a:app b:app")).is_err());
}

#[test]
fn a_config_file_and_flags_make_a_static_pool_the_flags_winning() {
    let file = vec![
        file_setting("bind", Json::String("unix:/run/app.sock".into()), 1),
        file_setting("workers", serde_json::json!(3), 2),
        file_setting("max_requests", serde_json::json!(1000), 3),
        file_setting("max_requests_jitter", serde_json::json!(50), 4),
        file_setting("timeout", serde_json::json!(60), 5),
        file_setting("graceful_timeout", serde_json::json!(20), 6),
        file_setting(
            "raw_env",
            serde_json::json!(["DJANGO_SETTINGS_MODULE=site.prod"]),
            7,
        ),
        file_setting("pythonpath", Json::String("lib,/opt/x".into()), 8),
        file_setting("user", Json::String("www-data".into()), 9),
    ];
    let cli = parse_args(&args("-w 5 --preload app:application")).unwrap();
    let import = map(&file, &cli, &context()).unwrap();
    let pool = toml(&import.pool);
    assert_eq!(import.pool_name, "app");
    assert_eq!(pool["listen"].as_str(), Some("/run/app.sock"));
    assert_eq!(pool["listen_mode"].as_str(), Some("0777"));
    assert_eq!(pool["listen_owner"].as_str(), Some("www-data"));
    assert_eq!(pool["user"].as_str(), Some("www-data"));
    assert_eq!(pool["chdir"].as_str(), Some("/srv/app"));
    assert_eq!(pool["request_terminate_timeout"].as_str(), Some("60s"));
    assert_eq!(pool["pm"]["mode"].as_str(), Some("static"));
    assert_eq!(pool["pm"]["max_children"].as_integer(), Some(5));
    assert_eq!(pool["pm"]["max_requests"].as_integer(), Some(1000));
    assert_eq!(pool["pm"]["max_requests_jitter"].as_integer(), Some(50));
    assert_eq!(
        pool["env"]["DJANGO_SETTINGS_MODULE"].as_str(),
        Some("site.prod")
    );
    assert_eq!(pool["python"]["app"].as_str(), Some("app:application"));
    assert_eq!(pool["python"]["preload"].as_bool(), Some(true));
    let paths = pool["python"]["python_path"].as_array().unwrap();
    assert_eq!(paths[0].as_str(), Some("/srv/app/lib"));
    assert_eq!(paths[1].as_str(), Some("/opt/x"));
    let global = toml(&import.global);
    assert_eq!(global["process_control_timeout"].as_str(), Some("20s"));
    assert!(import.report.is_empty(), "{:#?}", import.report);
    assert!(
        import
            .nginx
            .contains("# was: proxy_pass http://unix:/run/app.sock:;")
    );
    assert!(import.nginx.contains("fastcgi_pass unix:/run/app.sock;"));
    assert!(import.nginx.contains("include fastcgi.conf;"));
    let text = import.pool.render();
    let line = text
        .lines()
        .find(|l| l.starts_with("max_children"))
        .unwrap();
    assert!(line.ends_with("# -w 5"), "{line}");
}

#[test]
fn gunicorns_defaults_are_written_where_drovers_differ() {
    let context = Context {
        root: true,
        web_concurrency: Some("3".into()),
        ..context()
    };
    let import = map(&[], &parse_args(&args("hello")).unwrap(), &context).unwrap();
    let pool = toml(&import.pool);
    assert_eq!(pool["listen"].as_str(), Some("127.0.0.1:8000"));
    assert_eq!(pool["user"].as_str(), Some("root"));
    assert_eq!(pool["request_terminate_timeout"].as_str(), Some("30s"));
    assert_eq!(pool["pm"]["max_children"].as_integer(), Some(3));
    assert_eq!(pool["python"]["preload"].as_bool(), Some(false));
    assert_eq!(
        toml(&import.global)["process_control_timeout"].as_str(),
        Some("30s")
    );
    assert!(import.nginx.contains("fastcgi_pass 127.0.0.1:8000;"));
    assert!(map(&[], &Cli::default(), &context).is_err(), "no app");
}

#[test]
fn the_workers_keep_the_environment_gunicorns_workers_inherited() {
    // gunicorn's workers see its whole environment (a unit's Environment=DATABASE_URL):
    // drover's default clear_env = true would drop it.
    let import = map(&[], &parse_args(&args("hello")).unwrap(), &context()).unwrap();
    assert_eq!(toml(&import.pool)["clear_env"].as_bool(), Some(false));
    let text = import.pool.render();
    let line = text.lines().find(|l| l.starts_with("clear_env")).unwrap();
    assert!(line.contains("Environment="), "{line}");
}

#[test]
fn what_has_no_equivalent_is_reported_with_its_line_or_flag() {
    let file = vec![
        file_setting("worker_class", Json::String("gevent".into()), 4),
        file_setting("forwarded_allow_ips", Json::String("*".into()), 5),
        file_setting("max_requests_jitter", serde_json::json!(10), 6),
        file_setting("helper_value", serde_json::json!(1), 7),
        Setting {
            repr: Some("{1, 2}".into()),
            ..file_setting("reload_extra_files", Json::Null, 8)
        },
        hook("on_reload", 9),
    ];
    let cli = parse_args(&args("--threads 4 -b localhost:8001 --frob x:y")).unwrap();
    let import = map(&file, &cli, &context()).unwrap();
    let gevent = note(&import, "worker_class");
    assert_eq!(
        gevent.to_string(),
        "gunicorn.conf.py:4: worker_class = gevent: no equivalent: drover's workers are synchronous, one request at a time (gunicorn's sync), or an event loop for an ASGI app (interface = \"asgi\", gunicorn's UvicornWorker)"
    );
    assert_eq!(
        toml(&import.pool)["python"]["threads"].as_integer(),
        Some(4)
    );
    assert!(!import.report.iter().any(|n| n.setting == "threads"));
    assert!(note(&import, "--frob").why.starts_with("unknown flag"));
    assert!(
        note(&import, "forwarded_allow_ips")
            .why
            .starts_with("not needed")
    );
    assert!(
        note(&import, "max_requests_jitter")
            .why
            .contains("without max_requests")
    );
    assert!(
        toml(&import.pool)["pm"]
            .get("max_requests_jitter")
            .is_none()
    );
    assert!(
        note(&import, "helper_value")
            .why
            .contains("not a gunicorn setting")
    );
    assert!(note(&import, "reload_extra_files").why.contains("not JSON"));
    assert!(note(&import, "on_reload").why.contains("no such moment"));
    assert_eq!(
        toml(&import.pool)["listen"].as_str(),
        Some("127.0.0.1:8001")
    );
    assert!(
        note(&import, "-b localhost:8001")
            .why
            .contains("127.0.0.1:8001")
    );
}

#[test]
fn hooks_name_the_config_file() {
    let file = vec![hook("post_fork", 3), hook("child_exit", 7)];
    let import = map(&file, &parse_args(&args("app:app")).unwrap(), &context()).unwrap();
    assert_eq!(
        toml(&import.pool)["python"]["hooks"].as_str(),
        Some("/srv/app/gunicorn.conf.py")
    );
    let text = import.pool.render();
    let line = text.lines().find(|l| l.starts_with("hooks")).unwrap();
    assert!(
        line.ends_with("# the hooks it defines: post_fork (line 3), child_exit (line 7)"),
        "{line}"
    );
    assert!(import.report.is_empty(), "{:#?}", import.report);
    let none = map(&[], &parse_args(&args("app:app")).unwrap(), &context()).unwrap();
    assert!(toml(&none.pool)["python"].get("hooks").is_none());
}

#[test]
fn binds_as_drover_listens() {
    let bind = |b: &str| {
        let s = file_setting("bind", Json::String(b.into()), 1);
        map::listen_of(&s, Path::new("/srv/app"))
    };
    assert_eq!(bind("0.0.0.0:80"), Some(("0.0.0.0:80".into(), false)));
    assert_eq!(bind(":8000"), Some(("8000".into(), false)));
    assert_eq!(bind("[::1]:8000"), Some(("[::1]:8000".into(), false)));
    assert_eq!(bind("127.0.0.1"), Some(("127.0.0.1:8000".into(), false)));
    assert_eq!(
        bind("unix:app.sock"),
        Some(("/srv/app/app.sock".into(), true))
    );
    assert_eq!(bind("fd://3"), None);
    assert_eq!(bind("example.com:80"), None);
}

#[test]
fn drover_pythons_json_becomes_settings_in_line_order() {
    let settings = settings_from_json(
        "g.py",
        r#"{"workers": {"line": 3, "value": 5}, "bind": {"line": 2, "value": "unix:/x"},
            "post_fork": {"line": 9, "callable": true}, "odd": {"line": 11, "repr": "{1}"}}"#,
    )
    .unwrap();
    let names: Vec<&str> = settings.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["bind", "workers", "post_fork", "odd"]);
    assert!(settings[2].callable);
    assert_eq!(settings[3].repr.as_deref(), Some("{1}"));
    assert!(settings_from_json("g.py", "not json").is_err());
}

#[test]
fn gunicorn_cmd_args_sit_between_the_file_and_the_command_line() {
    let file = vec![
        file_setting("workers", serde_json::json!(2), 1),
        file_setting("timeout", serde_json::json!(10), 2),
    ];
    let context = Context {
        env_args: env_args(Some("--workers 3 --timeout 20")).unwrap(),
        ..context()
    };
    let import = map(
        &file,
        &parse_args(&args("-t 40 app:app")).unwrap(),
        &context,
    )
    .unwrap();
    let pool = toml(&import.pool);
    assert_eq!(pool["pm"]["max_children"].as_integer(), Some(3));
    assert_eq!(pool["request_terminate_timeout"].as_str(), Some("40s"));
    let text = import.pool.render();
    let line = text
        .lines()
        .find(|l| l.starts_with("max_children"))
        .unwrap();
    assert!(line.ends_with("# GUNICORN_CMD_ARGS --workers 3"), "{line}");
    assert!(env_args(Some("app:app")).is_err());
    assert_eq!(env_args(None).unwrap(), Vec::new());
}

#[test]
fn uvicorn_s_worker_class_makes_an_asgi_pool() {
    for worker in ["uvicorn.workers.UvicornWorker", "asgi"] {
        let cli = parse_args(&args(&format!("-w 2 -k {worker} main:app"))).unwrap();
        let import = map(&[], &cli, &context()).unwrap();
        let pool = toml(&import.pool);
        assert_eq!(
            pool["python"]["interface"].as_str(),
            Some("asgi"),
            "{worker}"
        );
        assert!(
            !import
                .report
                .iter()
                .any(|n| n.setting.contains("worker_class")),
            "{worker}"
        );
    }
}

#[test]
fn threads_become_the_pools_threads_except_for_an_asgi_app() {
    let cli = parse_args(&args("-k gthread --threads 8 myapp.wsgi:app")).unwrap();
    let import = map(&[], &cli, &context()).unwrap();
    assert_eq!(
        toml(&import.pool)["python"]["threads"].as_integer(),
        Some(8)
    );
    assert!(note(&import, "worker_class").why.starts_with("not needed"));

    let cli = parse_args(&args("--threads 100 myapp.wsgi:app")).unwrap();
    let import = map(&[], &cli, &context()).unwrap();
    assert!(toml(&import.pool)["python"].get("threads").is_none());
    assert!(note(&import, "threads").why.contains("at most 64"));

    let cli = parse_args(&args(
        "-k uvicorn.workers.UvicornWorker --threads 4 main:app",
    ))
    .unwrap();
    let import = map(&[], &cli, &context()).unwrap();
    assert!(toml(&import.pool)["python"].get("threads").is_none());
    assert!(note(&import, "threads").why.contains("ASGI"));
}

#[test]
fn a_proc_name_that_cannot_name_a_file_is_not_the_pools_name() {
    for hostile in ["../../x", "/abs/x", ".hidden", "www@2", "a b"] {
        let file = vec![file_setting("proc_name", Json::String(hostile.into()), 3)];
        let cli = parse_args(&args("site:app")).unwrap();
        let import = map(&file, &cli, &context()).unwrap();
        assert_eq!(import.pool_name, "site", "{hostile}");
        let note = import
            .report
            .iter()
            .find(|n| n.setting.contains("proc_name"))
            .unwrap_or_else(|| panic!("{hostile}: {:?}", import.report));
        assert_eq!(note.place, "gunicorn.conf.py:3");
        assert!(note.why.contains("[A-Za-z0-9_.-]+"), "{note}");
    }
    let cli = parse_args(&args("../../x:app")).unwrap();
    assert_eq!(map(&[], &cli, &context()).unwrap().pool_name, "app");
}
