//! PHP pools' two runtimes: which one a pool runs (drover-php where it can run PHP, unless
//! the pool says otherwise), the keys each reads, and what php-cgi cannot enforce.

use super::assume;
use super::*;

/// MINIMAL's `[php]` table replaced with `php`.
fn with_php(php: &str) -> String {
    MINIMAL.replace("[php]\nbinary = \"/bin/sh\"\n", php)
}

/// drover-php's answer to `--probe` where it can run PHP.
const USABLE: Result<&str, &str> = Ok("PHP 8.2.36 (embed)");

#[test]
fn a_php_pool_runs_drover_php_by_default_where_it_can_run_php() {
    assume(USABLE);
    let (_dir, config) = loaded(&[("www", &with_php("[php]\n"))]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    let embed = PhpRuntime::Embed {
        admin_ini: Default::default(),
        limit_extensions: vec![".php".into()],
        worker: None,
        boot_in_zygote: false,
    };
    assert_eq!(php.runtime, embed);

    // A pool written for php-cgi keeps running it.
    let (_dir, config) = loaded(&[("www", MINIMAL)]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert_eq!(php.runtime.name(), "cgi");
}

#[test]
fn a_php_pool_runs_php_cgi_where_drover_php_cannot_run_php() {
    assume(Err("built without PHP's headers"));
    let (_dir, config) = loaded(&[("www", &with_php("[php]\nbinary = \"/bin/sh\"\n"))]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert_eq!(php.runtime.name(), "cgi");
    // Without a binary, php-cgi is looked up on PATH: found or not, the pool is not embed.
    let dir = setup("", &[("www", &with_php("[php]\n"))]);
    if let Ok(config) = load_dir(&dir) {
        let Runtime::Php(php) = &config.pools[0].runtime else {
            panic!("php")
        };
        assert!(matches!(php.runtime, PhpRuntime::Cgi { .. }));
    }
}

#[test]
fn every_embed_key_is_read() {
    assume(USABLE);
    let dir = setup("", &[]);
    std::fs::write(dir.path().join("php.ini"), "").unwrap();
    let php = r#"[php]
runtime = "embed"
ini_file = "php.ini"
limit_extensions = [".php", ".phar"]
[php.ini]
memory_limit = "128M"
[php.admin_ini]
disable_functions = "exec,system"
opcache.validate_timestamps = false
"#;
    std::fs::write(dir.path().join("pools.d/www.toml"), with_php(php)).unwrap();
    let config = load_dir(&dir).unwrap();
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert_eq!(php.ini_file, Some(dir.path().join("php.ini")));
    assert_eq!(php.ini["memory_limit"], "128M");
    let PhpRuntime::Embed {
        admin_ini,
        limit_extensions,
        ..
    } = &php.runtime
    else {
        panic!("embed: {:?}", php.runtime)
    };
    assert_eq!(limit_extensions, &[".php", ".phar"]);
    assert_eq!(admin_ini["disable_functions"], "exec,system");
    assert_eq!(admin_ini["opcache.validate_timestamps"], "0");

    // [] lets any file run, as php-fpm's empty security.limit_extensions.
    let any = with_php("[php]\nruntime = \"embed\"\nlimit_extensions = []\n");
    let (_dir, config) = loaded(&[("www", &any)]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert!(
        matches!(&php.runtime, PhpRuntime::Embed { limit_extensions, .. } if limit_extensions.is_empty())
    );
}

#[test]
fn php_cgi_takes_the_ini_file_and_the_default_limit_extensions() {
    let dir = setup("", &[]);
    std::fs::write(dir.path().join("php.ini"), "").unwrap();
    let php = "[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\nini_file = \"php.ini\"\n\
               limit_extensions = [\".php\"]\n[php.admin_ini]\n";
    std::fs::write(dir.path().join("pools.d/www.toml"), with_php(php)).unwrap();
    let config = load_dir(&dir).unwrap();
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert_eq!(php.ini_file, Some(dir.path().join("php.ini")));
    assert_eq!(php.runtime.name(), "cgi");
}

#[test]
fn runtime_is_embed_or_cgi() {
    let e = only_error(&with_php("[php]\nruntime = \"fpm\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.runtime",
        "must be \"embed\" (drover-php) or \"cgi\"",
    );
}

#[test]
fn embed_where_drover_php_cannot_run_php_is_refused() {
    assume(Err("/usr/sbin/drover-php is missing"));
    let e = only_error(&with_php("[php]\nruntime = \"embed\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.runtime",
        "drover-php is not usable here: /usr/sbin/drover-php is missing",
    );
}

#[test]
fn a_binary_is_for_php_cgi_only() {
    assume(USABLE);
    let e = only_error(&with_php(
        "[php]\nruntime = \"embed\"\nbinary = \"/bin/sh\"\n",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "php.binary",
        "only for runtime = \"cgi\"",
    );
}

#[test]
fn what_php_cgi_cannot_enforce_is_refused() {
    let cgi = "[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\n";
    let e = only_error(&with_php(&format!(
        "{cgi}[php.admin_ini]\nallow_url_fopen = false\n"
    )));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "php.admin_ini",
        "php-cgi cannot enforce it",
    );
    assert!(
        e.rule.contains("ini_set") && e.rule.contains("runtime = \"embed\""),
        "{e}"
    );
    let e = only_error(&with_php(&format!(
        "{cgi}limit_extensions = [\".php\", \".phar\"]\n"
    )));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "php.limit_extensions",
        "php-cgi cannot enforce it",
    );
}

#[test]
fn php_cgi_running_other_files_than_the_named_script_is_refused_unless_any_file_may_run() {
    let cgi = "[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\n";
    // [] is what php-cgi does anyway: any file may run.
    let (_dir, config) = loaded(&[("www", &with_php(&format!("{cgi}limit_extensions = []\n")))]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    assert!(matches!(
        php.runtime,
        PhpRuntime::Cgi { any_file: true, .. }
    ));
    for (setting, line, rule) in [
        (
            "\"cgi.fix_pathinfo\" = \"1\"",
            10,
            "cgi.fix_pathinfo on lets php-cgi run any file up the path",
        ),
        ("\"cgi.fix_pathinfo\" = \"On\"", 10, "cgi.fix_pathinfo on"),
        ("cgi.fix_pathinfo = true", 10, "cgi.fix_pathinfo on"),
        (
            "\"cgi.discard_path\" = \"0\"",
            10,
            "cgi.discard_path off lets php-cgi run the PATH_TRANSLATED",
        ),
    ] {
        let e = only_error(&with_php(&format!("{cgi}[php.ini]\n{setting}\n")));
        assert_at(&e, "pools.d/www.toml", line, "php.ini", rule);
        assert!(e.rule.contains("limit_extensions = []"), "{e}");
        loaded(&[(
            "www",
            &with_php(&format!(
                "{cgi}limit_extensions = []\n[php.ini]\n{setting}\n"
            )),
        )]);
    }
    // The safe values, written, are the pool's own.
    for setting in [
        "\"cgi.fix_pathinfo\" = \"0\"",
        "\"cgi.fix_pathinfo\" = \"off\"",
        "\"cgi.discard_path\" = \"1\"",
    ] {
        loaded(&[("www", &with_php(&format!("{cgi}[php.ini]\n{setting}\n")))]);
    }
}

#[test]
fn a_refusal_says_why_the_pool_runs_php_cgi() {
    assume(Err("built without PHP's headers"));
    let errors = pool_errors(&with_php(
        "[php]\n[php.admin_ini]\nallow_url_fopen = false\n",
    ));
    let e = errors
        .iter()
        .find(|e| e.key == "php.admin_ini")
        .unwrap_or_else(|| panic!("{}", ConfigErrors(errors.clone())));
    assert!(
        e.rule.ends_with("(this pool runs php-cgi because drover-php is not usable here: built without PHP's headers)"),
        "{e}"
    );
    assume(USABLE);
    let e = only_error(&with_php(
        "[php]\nbinary = \"/bin/sh\"\n[php.admin_ini]\nx = 1\n",
    ));
    assert!(
        e.rule
            .ends_with("(this pool runs php-cgi because it names a binary)"),
        "{e}"
    );
}

#[test]
fn limit_extensions_are_suffixes_with_their_dot() {
    assume(USABLE);
    let errors = pool_errors(&with_php(
        "[php]\nruntime = \"embed\"\nlimit_extensions = [\".php\", \"php\", \".p hp\", \".\"]\n",
    ));
    let values: Vec<_> = errors
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_deref()))
        .collect();
    assert_eq!(
        values,
        [
            ("php.limit_extensions", Some("\"php\"")),
            ("php.limit_extensions", Some("\".p hp\"")),
            ("php.limit_extensions", Some("\".\"")),
        ],
        "{}",
        ConfigErrors(errors.clone())
    );
    assert!(errors[0].rule.contains("like \".php\""));
}

#[test]
fn a_missing_ini_file_is_refused() {
    let e = only_error(&MINIMAL.replace("[php]\n", "[php]\nini_file = \"/nonexistent/php.ini\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.ini_file",
        "/nonexistent/php.ini",
    );
    let e = only_error(&MINIMAL.replace("[php]\n", "[php]\nini_file = \"/\"\n"));
    assert_at(&e, "pools.d/www.toml", 8, "php.ini_file", "is not a file");
}

#[test]
fn an_embed_pool_renders_and_loads_back_the_same() {
    assume(USABLE);
    let php = "[php]\nlimit_extensions = [\".php\", \".phar\"]\n[php.ini]\nmemory_limit = \"64M\"\n\
               [php.admin_ini]\n\"opcache.enable\" = 1\n";
    let (_dir, config) = loaded(&[("www", &with_php(php))]);
    let text = config.render();
    let block = text.split("# pool www (").nth(1).unwrap();
    assert!(
        block.contains("runtime = \"embed\"\n# binary = (runtime = \"cgi\" only)\n"),
        "{block}"
    );
    let (_dir2, again) = loaded(&[("www", block.split_once('\n').unwrap().1)]);
    let (mut a, b) = (config.pools[0].clone(), again.pools[0].clone());
    a.file = b.file.clone();
    assert_eq!(a, b, "rendered:\n{text}");
}

#[test]
fn drover_php_takes_listen_allowed_clients_and_php_cgi_does_not() {
    assume(USABLE);
    let tcp = |php: &str| {
        with_php(php).replace(
            "listen = \"/run/drover/www.sock\"",
            "listen = \"127.0.0.1:9000\"\nlisten_allowed_clients = [\"127.0.0.1\"]",
        )
    };
    let (_dir, config) = loaded(&[("www", &tcp("[php]\n"))]);
    assert_eq!(config.pools[0].listen_allowed_clients.len(), 1);
    let e = only_error(&tcp("[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        2,
        "listen_allowed_clients",
        "php-cgi does not enforce it",
    );
    assert!(e.rule.contains("runtime = \"embed\""), "{e}");
}

#[test]
fn php_fpm_sapi_settings_drover_php_does_not_act_on_are_refused_unless_at_its_behaviour() {
    assume(USABLE);
    // At the value drover-php behaves as (php-fpm's defaults): accepted, whatever the form.
    let fine =
        "[php]\nruntime = \"embed\"\n[php.ini]\n\"cgi.nph\" = \"off\"\ncgi.rfc2616_headers = 0\n";
    loaded(&[("www", &with_php(fine))]);

    let e = only_error(&with_php(
        "[php]\nruntime = \"embed\"\n[php.admin_ini]\ncgi.rfc2616_headers = 1\n",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "php.admin_ini.cgi.rfc2616_headers",
        "drover-php does not honour cgi.rfc2616_headers",
    );
    let e = only_error(&with_php(
        "[php]\nruntime = \"embed\"\n[php.ini]\n\"fastcgi.error_header\" = \"HTTP/1.0 550 Oops\"\n",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        10,
        "php.ini.\"fastcgi.error_header\"",
        "drover-php does not honour fastcgi.error_header",
    );
    // php-cgi acts on them itself.
    loaded(&[(
        "www",
        &with_php("[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\n[php.ini]\n\"cgi.nph\" = 1\n"),
    )]);
}

/// php-fpm's `pm.status_path`, `ping.path` and `ping.response`: drover-php's workers answer
/// them (the status from `status_listen`, which it needs); php-cgi cannot, so a php-cgi
/// pool refuses them; a path is a path.
#[test]
fn status_and_ping_paths_are_drover_php_s_and_the_status_needs_status_listen() {
    assume(USABLE);
    let embed = |top: &str| format!("{top}\n{}", with_php("[php]\nruntime = \"embed\"\n"));
    let (_dir, config) = loaded(&[(
        "www",
        &embed(
            "status_listen = \"/run/drover/www-status.sock\"\nstatus_path = \"/status\"\n\
             ping_path = \"/ping\"\nping_response = \"ok\"",
        ),
    )]);
    let pool = &config.pools[0];
    assert_eq!(pool.status_path.as_deref(), Some("/status"));
    assert_eq!(pool.ping_path.as_deref(), Some("/ping"));
    assert_eq!(pool.ping_response, "ok");
    let (_dir, config) = loaded(&[("www", &embed("ping_path = \"/ping\""))]);
    assert_eq!(config.pools[0].ping_response, "pong");

    let e = only_error(&embed("status_path = \"/status\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "status_path",
        "needs status_listen",
    );
    let e = only_error(&embed("ping_path = \"ping\""));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "ping_path",
        "must be a path starting with /",
    );
    let e = only_error(&embed(
        "status_listen = \"/run/s.sock\"\nstatus_path = \"/s\"\nping_path = \"/s\"",
    ));
    assert_at(
        &e,
        "pools.d/www.toml",
        3,
        "ping_path",
        "must differ from status_path",
    );
    let e = only_error(&format!("ping_path = \"/ping\"\n{MINIMAL}"));
    assert_at(
        &e,
        "pools.d/www.toml",
        1,
        "ping_path",
        "drover's own workers answer it",
    );
}

#[test]
fn worker_mode_takes_an_existing_script_on_drover_php_only() {
    assume(USABLE);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("worker.php");
    std::fs::write(&script, "<?php").unwrap();
    let table = format!("[php]\nworker = {script:?}\n");
    let (_dir, config) = loaded(&[("www", &with_php(&table))]);
    let Runtime::Php(php) = &config.pools[0].runtime else {
        panic!("php")
    };
    let PhpRuntime::Embed {
        worker,
        boot_in_zygote,
        ..
    } = &php.runtime
    else {
        panic!("embed: {:?}", php.runtime)
    };
    assert_eq!(worker.as_deref(), Some(script.as_path()));
    assert!(!boot_in_zygote);
    // What drover-php is told of it: the master's runtime::php::embed::plan, tested there
    // (runtime's `a_worker_script_is_passed_to_drover_php`).

    let e = only_error(&with_php("[php]\nworker = \"/nonexistent/worker.php\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.worker",
        "/nonexistent/worker.php",
    );
    let e = only_error(&with_php("[php]\nworker_boot = \"zygote\"\n"));
    assert_at(
        &e,
        "pools.d/www.toml",
        8,
        "php.worker_boot",
        "set [php] worker too",
    );
    let e = only_error(&with_php(&format!("{table}worker_boot = \"master\"\n")));
    assert_at(
        &e,
        "pools.d/www.toml",
        9,
        "php.worker_boot",
        "must be \"worker\"",
    );
    let cgi = format!("[php]\nruntime = \"cgi\"\nbinary = \"/bin/sh\"\nworker = {script:?}\n");
    let e = only_error(&with_php(&cgi));
    assert_at(&e, "pools.d/www.toml", 10, "php.worker", "needs drover-php");
}
