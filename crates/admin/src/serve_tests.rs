use super::*;

/// The repository (this crate is crates/admin): `examples/` is there.
fn repo() -> PathBuf {
    let admin = Path::new(env!("CARGO_MANIFEST_DIR"));
    admin.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn context() -> Context {
    Context {
        cwd: repo(),
        virtualenv: None,
        php_worker: false,
        root: false,
    }
}

fn args(f: impl FnOnce(&mut ServeArgs)) -> ServeArgs {
    let mut args = ServeArgs::default();
    f(&mut args);
    args
}

fn folder() -> PathBuf {
    PathBuf::from("/nonexistent/drover-serve-test")
}

#[test]
fn a_python_app_is_an_http_pool_run_from_the_current_directory() {
    let plan = build(&args(|a| a.python = Some("hello:app".into())), &context()).unwrap();
    let config = plan.load(&folder()).unwrap();
    let pool = &config.pools[0];
    let cwd = context().cwd;
    assert_eq!(pool.name, "app");
    assert_eq!(pool.listen.to_string(), DEFAULT_HTTP);
    assert_eq!(pool.chdir.as_deref(), Some(cwd.as_path()));
    assert!(!pool.clear_env);
    assert_eq!(pool.pm.max_children, 1);
    let text = plan.pool_text();
    assert!(text.contains("protocol = \"http\""), "{text}");
    assert!(
        text.contains(&format!("python_path = [\"{}\"]", cwd.display())),
        "{text}"
    );
}

#[test]
fn flags_set_their_keys_and_set_overrides() {
    let plan = build(
        &args(|a| {
            a.asgi = Some("app:app".into());
            a.fastcgi = Some("run/app.sock".into());
            a.workers = Some("4".into());
            a.health = Some("127.0.0.1:8081".into());
            a.set = vec![
                "pm.max_requests=100".into(),
                "env.GREETING=hello world".into(),
                "shutdown_delay=5s".into(),
                "python.threads=1".into(),
            ];
        }),
        &context(),
    )
    .unwrap();
    let config = plan.load(&folder()).unwrap();
    let pool = &config.pools[0];
    assert_eq!(pool.pm.max_children, 4);
    assert_eq!(pool.pm.max_requests, 100);
    assert_eq!(
        pool.listen.to_string(),
        context().cwd.join("run/app.sock").display().to_string()
    );
    assert_eq!(
        config.global.shutdown_delay,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(
        config.global.health_listen.map(|a| a.to_string()),
        Some("127.0.0.1:8081".to_string())
    );
    assert!(plan.pool_text().contains("GREETING = \"hello world\""));
    assert!(plan.pool_text().contains("interface = \"asgi\""));
}

#[test]
fn errors_name_the_flag() {
    let load = |f: fn(&mut ServeArgs)| {
        let plan = build(&args(f), &context())?;
        plan.load(&folder()).map(|_| ()).map_err(|e| e.join("\n"))
    };
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.workers = Some("0".into());
    })
    .unwrap_err();
    assert!(err.starts_with("-w: pm.max_children: "), "{err}");
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.set = vec!["pm.max_requests=many".into()];
    })
    .unwrap_err();
    assert!(
        err.starts_with("--set pm.max_requests=many: pm.max_requests: "),
        "{err}"
    );
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.set = vec!["no_such_key=1".into()];
    })
    .unwrap_err();
    assert!(err.starts_with("--set no_such_key=1: "), "{err}");
    let err = load(|a| {
        a.php = Some(".".into());
        a.http = Some("127.0.0.1:8080".into());
    })
    .unwrap_err();
    assert!(err.contains("--http: "), "{err}");
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.http = Some("localhost:80".into());
    })
    .unwrap_err();
    assert!(err.starts_with("--http: listen: "), "{err}");
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.set = vec!["include=[]".into()];
    })
    .unwrap_err();
    assert!(err.starts_with("--set include=[]: "), "{err}");
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.set = vec!["novalue".into()];
    })
    .unwrap_err();
    assert_eq!(err, "--set novalue: expected KEY=VALUE");
}

#[test]
fn php_serves_fastcgi_from_its_docroot() {
    let plan = build(&args(|a| a.php = Some("examples/www".into())), &context()).unwrap();
    let config = plan.load(&folder()).unwrap();
    let pool = &config.pools[0];
    assert_eq!(pool.name, "www");
    assert_eq!(pool.listen.to_string(), DEFAULT_FASTCGI);
    assert_eq!(
        pool.chdir.as_deref(),
        Some(context().cwd.join("examples/www").as_path())
    );
}

#[test]
fn worker_mode_is_refused_where_the_build_lacks_it() {
    let err = build(&args(|a| a.worker = Some("worker.php".into())), &context()).unwrap_err();
    assert!(err.starts_with("--worker: "), "{err}");
    assert!(err.contains("not available"), "{err}");
    let plan = build(
        &args(|a| a.worker = Some("worker.php".into())),
        &Context {
            php_worker: true,
            ..context()
        },
    )
    .unwrap();
    let cwd = context().cwd;
    assert!(
        plan.pool_text().contains(&format!(
            "worker = \"{}\"",
            cwd.join("worker.php").display()
        )),
        "{}",
        plan.pool_text()
    );
}

#[test]
fn map_tables_take_dotted_names_whole() {
    assert_eq!(
        split("php.ini.opcache.enable"),
        Some(vec!["php".into(), "ini".into(), "opcache.enable".into()])
    );
    assert_eq!(
        split("pm.max_children"),
        Some(vec!["pm".into(), "max_children".into()])
    );
    assert_eq!(split("a..b"), None);
    assert_eq!(split(""), None);
}

#[test]
fn the_same_files_reuse_one_folder() {
    let a = build(&args(|a| a.python = Some("hello:app".into())), &context()).unwrap();
    let b = build(&args(|a| a.python = Some("hello:app".into())), &context()).unwrap();
    let c = build(&args(|a| a.python = Some("other:app".into())), &context()).unwrap();
    assert_eq!(folder_for(&a), folder_for(&b));
    assert_ne!(folder_for(&a), folder_for(&c));
}

#[test]
fn a_colon_and_a_port_is_every_address_as_gunicorn_reads_it() {
    let cwd = Path::new("/srv/app");
    assert_eq!(address(":8000", cwd), "8000");
    assert_eq!(address("8000", cwd), "8000");
    assert_eq!(address("0.0.0.0:8000", cwd), "0.0.0.0:8000");
    assert_eq!(address("run/app.sock", cwd), "/srv/app/run/app.sock");
    assert_eq!(address("/run/app.sock", cwd), "/run/app.sock");
}

/// Issue 33: as root, `drover serve` refused with an error about a file the user never
/// wrote. It runs the app as root (gunicorn does), or as `-u`/`-g`; a user that does not
/// exist is an error that names the flag.
#[test]
fn as_root_the_pool_runs_as_root_or_as_u_and_g() {
    let root = Context {
        root: true,
        ..context()
    };
    let plan = build(&args(|a| a.python = Some("hello:app".into())), &root).unwrap();
    assert_eq!(plan.pool.get("user"), Some(&string("root")));
    let plan = build(
        &args(|a| {
            a.python = Some("hello:app".into());
            a.user = Some("www-data".into());
            a.group = Some("nogroup".into());
        }),
        &root,
    )
    .unwrap();
    assert_eq!(plan.pool.get("user"), Some(&string("www-data")));
    assert_eq!(plan.pool.get("group"), Some(&string("nogroup")));
    let file = plan.pool_file(&folder());
    let problem = format!("{}: user: user \"www-data\" does not exist", file.display());
    assert_eq!(
        explain_problem(&plan, &folder(), &problem),
        "-u: user \"www-data\" does not exist"
    );
    // Not root: nobody to switch to, and -u says so.
    let plan = build(&args(|a| a.python = Some("hello:app".into())), &context()).unwrap();
    assert_eq!(plan.pool.get("user"), None);
    let refused = build(
        &args(|a| {
            a.python = Some("hello:app".into());
            a.user = Some("www-data".into());
        }),
        &context(),
    )
    .unwrap_err();
    assert!(
        refused.starts_with("-u: drover serve is not running as root"),
        "{refused}"
    );
}

fn virtualenv(config: &Config) -> Option<&Path> {
    match &config.pools[0].runtime {
        config::Runtime::Python(python) => python.virtualenv.as_deref(),
        _ => panic!("not a Python pool"),
    }
}

#[test]
fn the_virtualenv_is_the_active_one_else_drovers_own_and_set_wins() {
    let python = |a: &mut ServeArgs| a.python = Some("hello:app".into());
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for chosen in [
        Virtualenv::Active(venv.clone()),
        Virtualenv::Installed(venv.clone()),
    ] {
        let context = Context {
            virtualenv: Some(chosen),
            ..context()
        };
        let plan = build(&args(python), &context).unwrap();
        let config = plan.load(&folder()).unwrap();
        assert_eq!(virtualenv(&config), Some(venv.as_path()));
        let set = args(|a| {
            python(a);
            a.set = vec!["python.virtualenv=/tmp".into()];
        });
        let plan = build(&set, &context).unwrap();
        let config = plan.load(&folder()).unwrap();
        assert_eq!(virtualenv(&config), Some(Path::new("/tmp")));
    }
    // An error about it names where it came from.
    let missing = PathBuf::from("/nonexistent/venv");
    for (chosen, origin) in [
        (Virtualenv::Active(missing.clone()), "$VIRTUAL_ENV: "),
        (
            Virtualenv::Installed(missing.clone()),
            "the virtualenv drover is installed in: ",
        ),
    ] {
        let context = Context {
            virtualenv: Some(chosen),
            ..context()
        };
        let err = build(&args(python), &context)
            .unwrap()
            .load(&folder())
            .unwrap_err()
            .join("\n");
        assert!(err.starts_with(origin), "{err}");
    }
}

#[test]
fn drover_is_in_a_virtualenv_when_its_folder_is_the_bin_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let drover = bin.join("drover");
    assert_eq!(drover::runtime::python::virtualenv_of(&drover), None);
    std::fs::write(dir.path().join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    assert_eq!(
        drover::runtime::python::virtualenv_of(&drover).as_deref(),
        Some(dir.path())
    );
}

#[test]
fn gunicorns_tls_flags_set_the_tls_keys_and_their_errors_name_the_flag() {
    let plan = build(
        &args(|a| {
            a.python = Some("hello:app".into());
            a.certfile = Some("tls/cert.pem".into());
            a.keyfile = Some("/etc/tls/key.pem".into());
            a.ca_certs = Some("clients.pem".into());
            a.cert_reqs = Some("2".into());
        }),
        &context(),
    )
    .unwrap();
    let cwd = context().cwd;
    let text = plan.pool_text();
    for line in [
        format!("certfile = \"{}\"", cwd.join("tls/cert.pem").display()),
        "keyfile = \"/etc/tls/key.pem\"".to_owned(),
        format!("ca_certs = \"{}\"", cwd.join("clients.pem").display()),
        "cert_reqs = \"required\"".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
    let load = |f: fn(&mut ServeArgs)| {
        let plan = build(&args(f), &context())?;
        plan.load(&folder()).map(|_| ()).map_err(|e| e.join("\n"))
    };
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.certfile = Some("/nonexistent/cert.pem".into());
    })
    .unwrap_err();
    assert!(
        err.starts_with("--certfile: certfile: cannot read /nonexistent/cert.pem: "),
        "{err}"
    );
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.keyfile = Some("/nonexistent/key.pem".into());
    })
    .unwrap_err();
    assert!(
        err.starts_with("--keyfile: keyfile: only with certfile"),
        "{err}"
    );
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.certfile = Some("/nonexistent/cert.pem".into());
        a.cert_reqs = Some("required".into());
    })
    .unwrap_err();
    assert!(
        err.starts_with("--cert-reqs: cert_reqs: \"required\" needs ca_certs"),
        "{err}"
    );
    let err = load(|a| {
        a.python = Some("hello:app".into());
        a.certfile = Some("/nonexistent/cert.pem".into());
        a.cert_reqs = Some("sometimes".into());
    })
    .unwrap_err();
    assert!(err.contains("--cert-reqs: cert_reqs: must be"), "{err}");
    let err = load(|a| {
        a.php = Some(".".into());
        a.certfile = Some("/nonexistent/cert.pem".into());
    })
    .unwrap_err();
    assert!(
        err.starts_with("--certfile: TLS is served on the --http listener only"),
        "{err}"
    );
}
