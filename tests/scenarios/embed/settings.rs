//! Where a script's settings and `$_SERVER` come from on drover-php, as under php-fpm:
//! `[php.admin_ini]`'s `disable_functions`, `PHP_VALUE` read by PHP's request startup,
//! `.user.ini` files and php.ini's `[PATH=]` sections, the pool's `[env]`, and what an
//! unknown `[php.admin_ini]` name does at a reload.

use nix::sys::signal::Signal;

use super::Embed;
use crate::common::{Drover, Location, Nginx, Site, TIMEOUT, http};

const PID_PHP: &str = "<?php echo getmypid();";

/// `disable_functions` in `[php.admin_ini]` removes the functions as php.ini's would
/// (PHP 8: "Call to undefined function"), in every request, and `ini_set` cannot bring them
/// back; the same name through nginx's `PHP_ADMIN_VALUE` is refused with a log line.
#[test]
fn disable_functions_in_admin_ini_removes_them_for_good() {
    let site = Site::new();
    let probe = r#"<?php
function helper() { return 'helper'; }
echo var_export(ini_set('disable_functions', ''), true), ' ';
echo function_exists('system') ? 'system' : 'no-system', ' ';
echo function_exists('shell_exec') ? 'shell_exec' : 'no-shell_exec', ' ', helper(), ' ';
try { exec('true'); echo 'exec ran'; } catch (Error $e) { echo $e->getMessage(); }"#;
    site.script("probe.php", probe);
    site.script("admin.php", probe);
    let pool = Embed::new("www", 1).admin("disable_functions = \"exec,system\"\n");
    let drover = Drover::start(&site, &[&pool]);
    let socket = site.socket("www");
    let nginx = Nginx::start_php_with(
        &site,
        &socket,
        "/admin.php",
        r#"fastcgi_param PHP_ADMIN_VALUE "disable_functions=shell_exec";"#,
    );

    let expected =
        "false no-system shell_exec helper Call to undefined function exec()".to_string();
    // Twice in the one worker: the script's own function is declared again each time.
    for _ in 0..2 {
        let reply = http::get(&nginx.url("/probe.php"));
        assert_eq!((reply.status, &reply.body), (200, &expected), "{reply:?}");
    }
    let admin = http::get(&nginx.url("/admin.php"));
    assert_eq!(
        (admin.status, &admin.body),
        (200, &expected),
        "PHP_ADMIN_VALUE disable_functions took effect: {admin:?}"
    );
    drover.log.wait_for_line(
        "PHP_ADMIN_VALUE: unable to set 'disable_functions': set it in the pool's [php.admin_ini]",
        TIMEOUT,
    );
}

/// `PHP_VALUE` is applied before PHP starts the request, as php-fpm applies it: the
/// request's body is read under its `post_max_size`, `upload_max_filesize` and
/// `enable_post_data_reading`. The next request the one worker serves without it reads the
/// body as usual, and a value PHP rejects is logged naming the setting.
#[test]
fn php_value_governs_how_its_request_s_body_is_read() {
    let site = Site::new();
    let post = "<?php echo count($_POST), ' ', strlen(file_get_contents('php://input')), ' ', ini_get('post_max_size'), ' ', ini_get('enable_post_data_reading');";
    let upload = "<?php echo $_FILES['f']['error'] ?? 'none', ' ', ini_get('upload_max_filesize');";
    for name in ["post", "small-post", "raw"] {
        site.script(&format!("{name}.php"), post);
    }
    for name in ["upload", "small-upload"] {
        site.script(&format!("{name}.php"), upload);
    }
    site.script("pid.php", PID_PHP);
    let drover = Drover::start(&site, &[&Embed::new("www", 1)]);
    let socket = site.socket("www");
    let with_value = |script: &str, value: &str| {
        Location {
            pattern: format!("= /{script}"),
            ..Location::php(&socket)
        }
        .with(&format!("fastcgi_param PHP_VALUE \"{value}\";"))
    };
    let nginx = Nginx::start_locations(
        &site,
        &[
            with_value("small-post.php", "post_max_size=1K"),
            with_value("small-upload.php", "upload_max_filesize=1K"),
            with_value(
                "raw.php",
                "enable_post_data_reading=Off\nno_such_setting.at_all=1",
            ),
            Location::php(&socket),
        ],
    );
    let pid = http::get(&nginx.url("/pid.php")).body;
    let form = format!("a={}&b=1", "x".repeat(2000));
    let form_type = "application/x-www-form-urlencoded";
    let boundary = "drover-boundary-9";
    let file = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n{}\r\n--{boundary}--\r\n",
        "y".repeat(2000)
    );
    let file_type = format!("multipart/form-data; boundary={boundary}");

    let small_post = http::post(&nginx.url("/small-post.php"), form_type, form.as_bytes());
    let raw = http::post(&nginx.url("/raw.php"), form_type, form.as_bytes());
    let small_upload = http::post(&nginx.url("/small-upload.php"), &file_type, file.as_bytes());
    let plain_post = http::post(&nginx.url("/post.php"), form_type, form.as_bytes());
    let plain_upload = http::post(&nginx.url("/upload.php"), &file_type, file.as_bytes());

    let default_max = plain_post.body.split(' ').nth(2).unwrap_or("").to_string();
    assert_ne!(default_max, "1K");
    // Over post_max_size, PHP reads no form; php://input still has the body (php-fpm too).
    assert_eq!(
        small_post.body,
        format!("0 {} 1K 1", form.len()),
        "{small_post:?}"
    );
    // enable_post_data_reading=Off: no $_POST, the body in php://input (ini_get: "").
    assert_eq!(raw.body, format!("0 {} {default_max} ", form.len()));
    // UPLOAD_ERR_INI_SIZE
    assert_eq!(small_upload.body, "1 1K", "{small_upload:?}");
    assert_eq!(
        plain_post.body,
        format!("2 {} {default_max} 1", form.len()),
        "PHP_VALUE leaked"
    );
    let plain_upload_max = plain_upload.body.split(' ').nth(1).unwrap_or("");
    assert_eq!(plain_upload.body, format!("0 {plain_upload_max}"));
    assert_ne!(plain_upload_max, "1K", "PHP_VALUE leaked");
    assert_eq!(
        http::get(&nginx.url("/pid.php")).body,
        pid,
        "one worker served them all"
    );
    drover.log.wait_for_line(
        "PHP_VALUE: unable to set 'no_such_setting.at_all': PHP has no such setting",
        TIMEOUT,
    );
}

/// `.user.ini` files from the document root down to the script's directory apply to its
/// request, inner ones last, except what `[php.admin_ini]` locked; they are cached for
/// `user_ini.cache_ttl` (300 s) as php-fpm caches them. php.ini's `[PATH=dir]` section
/// applies to the scripts under that directory, `[HOST=name]` to the requests whose
/// `SERVER_NAME` is that name.
#[test]
fn user_ini_files_and_path_and_host_sections_apply() {
    let site = Site::new();
    let show = "<?php echo ini_get('memory_limit'), ' ', ini_get('max_input_vars'), ' ', ini_get('post_max_size'), ' ', ini_get('default_charset');";
    site.script("show.php", show);
    site.write("www/app/show.php", show);
    site.write("www/legacy/show.php", show);
    let docroot = site.docroot.display().to_string();
    site.write("www/.user.ini", "memory_limit = 99M\npost_max_size = 5M\n");
    site.write("www/app/.user.ini", "max_input_vars = 77\n");
    let ini = site.write(
        "php.ini",
        &format!(
            "[PATH={docroot}/legacy]\ndefault_charset = \"ISO-8859-1\"\n[HOST=shop.example]\nmax_input_nesting_level = 21\n"
        ),
    );
    let pool = Embed::new("www", 1)
        .php(&format!("ini_file = {:?}\n", ini.display().to_string()))
        .admin("post_max_size = \"3M\"\n");
    let drover = Drover::start(&site, &[&pool]);
    let socket = site.socket("www");
    let nginx = Nginx::start_php_with(
        &site,
        &socket,
        "/shop.php",
        "fastcgi_param SERVER_NAME Shop.Example;",
    );
    let nesting = "<?php echo ini_get('max_input_nesting_level');";
    site.script("shop.php", nesting);
    site.script("plain.php", nesting);

    let shop = http::get(&nginx.url("/shop.php")).body;
    let plain = http::get(&nginx.url("/plain.php")).body;
    let top = http::get(&nginx.url("/show.php")).body;
    let app = http::get(&nginx.url("/app/show.php")).body;
    let legacy = http::get(&nginx.url("/legacy/show.php")).body;

    let default_vars = top.split(' ').nth(1).unwrap_or("").to_string();
    assert_ne!(default_vars, "77");
    assert_eq!(top, format!("99M {default_vars} 3M UTF-8"));
    assert_eq!(app, "99M 77 3M UTF-8");
    assert_eq!(legacy, format!("99M {default_vars} 3M ISO-8859-1"));
    // [HOST=] for SERVER_NAME, compared in lower case, for that request only.
    assert_eq!(shop, "21");
    assert_ne!(plain, "21");
    // Cached: a change shows once user_ini.cache_ttl has passed, not at once.
    site.write("www/.user.ini", "memory_limit = 55M\n");
    for _ in 0..3 {
        assert_eq!(http::get(&nginx.url("/show.php")).body, top);
        assert_eq!(http::get(&nginx.url("/app/show.php")).body, app);
    }
    drop(drover);
}

/// `$_SERVER` holds the worker's environment (with `clear_env`, the default, the pool's
/// `[env]` only), then the FastCGI params, which win; drover's own environment stays out.
#[test]
fn env_is_in_server_and_params_win() {
    let site = Site::new();
    site.script(
        "env.php",
        "<?php echo $_SERVER['APP_ENV'] ?? '-', ' ', $_SERVER['SHARED'] ?? '-', ' ', $_SERVER['DROVER_TEST_OUTSIDE'] ?? '-', ' ', getenv('APP_ENV');",
    );
    let pool = Embed::new("www", 1).env("APP_ENV = \"prod\"\nSHARED = \"from-env\"\n");
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\n",
    );
    site.write(
        "pools.d/www.toml",
        &crate::common::PoolFile::toml(&pool, &site),
    );
    let drover = Drover::spawn_with_env(&site, &[("DROVER_TEST_OUTSIDE", "leaked".as_ref())]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start_locations(
        &site,
        &[Location::php(&site.socket("www")).with(r#"fastcgi_param SHARED "from-param";"#)],
    );

    let reply = http::get(&nginx.url("/env.php"));

    assert_eq!(reply.body, "prod from-param - prod", "{reply:?}");
}

/// A `[php.admin_ini]` name PHP does not know fails the new generation's start with a line
/// naming the pool, the key and why; the running generation keeps serving.
#[test]
fn an_unknown_admin_ini_name_at_reload_keeps_the_old_pool_serving() {
    let site = Site::new();
    site.script("pid.php", PID_PHP);
    let drover = Drover::start(&site, &[&Embed::new("www", 1)]);
    let nginx = Nginx::start(&site, &site.socket("www"));
    let pid = http::get(&nginx.url("/pid.php")).body;

    let broken = Embed::new("www", 1).admin("no_such_setting = \"1\"\n");
    site.write(
        "pools.d/www.toml",
        &crate::common::PoolFile::toml(&broken, &site),
    );
    drover.signal(Signal::SIGHUP);

    let log = &drover.log;
    log.wait_for_line(
        "pool www: [php.admin_ini] no_such_setting = \"1\": PHP has no such setting",
        TIMEOUT,
    );
    log.wait_for_line(
        "pool www: the new generation failed to start; the old one keeps serving",
        TIMEOUT,
    );
    let reply = http::get(&nginx.url("/pid.php"));
    assert_eq!((reply.status, reply.body), (200, pid));
}

/// `drover -t` starts PHP as each embedded pool's zygote would, and refuses a
/// `[php.admin_ini]` name PHP has no setting for, or a value it refuses, naming the pool
/// file, the key and why.
#[test]
fn drover_t_refuses_an_admin_ini_name_php_does_not_know() {
    let site = Site::new();
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\n",
    );
    let file = site.path().join("pools.d/www.toml");
    let write = |admin: &str| {
        let pool = Embed::new("www", 1).admin(admin);
        site.write(
            "pools.d/www.toml",
            &crate::common::PoolFile::toml(&pool, &site),
        );
    };

    write("disable_functions = \"exec\"\n");
    let good = crate::common::check_config(&site);
    write("no_such_setting = \"1\"\n");
    let unknown = crate::common::check_config(&site);
    write("memory_limit = \"lots\"\n");
    let refused = crate::common::check_config(&site);

    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let said = |output: &std::process::Output| String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        said(&unknown).contains(&format!(
            "{}: [php.admin_ini] no_such_setting = \"1\": PHP has no such setting",
            file.display()
        )),
        "{}",
        said(&unknown)
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        said(&refused).contains(&format!(
            "{}: [php.admin_ini] memory_limit = \"lots\": PHP refuses this value",
            file.display()
        )),
        "{}",
        said(&refused)
    );
}

/// php-fpm's `php_admin_value[extension]`: `extension` in `[php.admin_ini]` loads the
/// extension for every worker (at PHP's startup, with php.ini's), a pool without it does
/// not have it, and `drover -t` refuses one PHP cannot load, with PHP's reason. The pools
/// read a php.ini of their own and no conf.d (`PHP_INI_SCAN_DIR` empty), where Debian's
/// enables every installed extension.
#[test]
fn an_admin_ini_extension_is_loaded_for_the_pool_and_a_missing_one_is_refused() {
    let site = Site::new();
    let dir = String::from_utf8(
        std::process::Command::new("php-config8.2")
            .arg("--extension-dir")
            .output()
            .expect("php-config8.2")
            .stdout,
    )
    .unwrap();
    site.write("php.ini", &format!("extension_dir = \"{}\"\n", dir.trim()));
    let script = "<?php echo function_exists('cal_days_in_month') ? cal_days_in_month(CAL_GREGORIAN, 2, 2024) : 'none';";
    for folder in ["with", "without"] {
        std::fs::create_dir_all(site.docroot.join(folder)).unwrap();
        site.script(&format!("{folder}/cal.php"), script);
    }
    let pool = |name: &str, admin: &str| {
        Embed::new(name, 1)
            .php(&format!(
                "ini_file = \"{}\"",
                site.path().join("php.ini").display()
            ))
            .env("PHP_INI_SCAN_DIR = \"\"")
            .admin(admin)
    };
    let with = pool("with", "extension = \"calendar\"");
    let without = pool("without", "");
    let drover = Drover::start(&site, &[&with, &without]);
    let location = |folder: &str| Location {
        pattern: format!(r"~ ^/{folder}/.*\.php$"),
        ..Location::php(&site.socket(folder))
    };
    let nginx = Nginx::start_locations(&site, &[location("with"), location("without")]);

    let loaded = http::get(&nginx.url("/with/cal.php"));
    let absent = http::get(&nginx.url("/without/cal.php"));

    assert_eq!(
        (loaded.status, loaded.body.as_str()),
        (200, "29"),
        "drover's log:\n{}",
        drover.log.text()
    );
    assert_eq!((absent.status, absent.body.as_str()), (200, "none"));
    drop(drover);

    // drover -t: an extension PHP cannot load.
    site.write(
        "pools.d/with.toml",
        &crate::common::PoolFile::toml(&pool("with", "extension = \"no_such_ext\""), &site),
    );
    let checked = crate::common::check_config(&site);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(1), "{said}");
    assert!(
        said.contains("extension = \"no_such_ext\": PHP could not load this extension")
            && said.contains("Unable to load dynamic library 'no_such_ext'"),
        "{said}"
    );
}

/// A drover-php pool on TCP with `listen_allowed_clients`, asked straight on its socket by
/// `drover ctl probe` (from 127.0.0.1): a pool that allows 127.0.0.1 serves, and its script
/// does not see the list (`FCGI_WEB_SERVER_ADDRS`, how the master passes it) in `$_SERVER`
/// or `getenv()`, as php-fpm keeps `listen.allowed_clients` to itself; a pool that allows
/// only another address closes the connection and logs the refusal.
#[test]
fn listen_allowed_clients_is_enforced_and_not_shown_to_scripts() {
    struct OnPort(String, String);
    impl crate::common::PoolFile for OnPort {
        fn name(&self) -> &str {
            &self.0
        }
        fn toml(&self, _: &Site) -> String {
            self.1.clone()
        }
    }
    let site = Site::new();
    site.script(
        "env.php",
        "<?php echo $_SERVER['FCGI_WEB_SERVER_ADDRS'] ?? '-', ' ', getenv('FCGI_WEB_SERVER_ADDRS') ?: '-';",
    );
    let free_port = || {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        taken.local_addr().expect("local addr").port()
    };
    let on_port = |name: &str, allowed: &str| {
        let toml = crate::common::PoolFile::toml(&Embed::new(name, 1), &site)
            .replace(
                &format!("listen = \"{}\"", site.socket(name).display()),
                &format!(
                    "listen = \"127.0.0.1:{}\"\nlisten_allowed_clients = [\"{allowed}\"]",
                    free_port()
                ),
            )
            .replace("listen_mode = \"0666\"\n", "");
        OnPort(name.to_owned(), toml)
    };
    let (open, closed) = (on_port("open", "127.0.0.1"), on_port("closed", "10.9.8.7"));
    let drover = Drover::start(&site, &[&open, &closed]);
    let config = site.path().join("drover.toml");
    let script = site.docroot.join("env.php").display().to_string();
    let timeout = format!("{}s", TIMEOUT.as_secs());
    let probe = |pool: &str| {
        crate::common::probe(
            &config,
            &[
                pool,
                "/env.php",
                "--script",
                &script,
                "--body",
                "--timeout",
                &timeout,
            ],
        )
    };

    let served = probe("open");
    let refused = probe("closed");

    assert_eq!(served.code, Some(0), "{served:#?}\n{}", drover.log.text());
    assert!(served.stdout.ends_with("\n- -"), "{served:#?}");
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    drover
        .log
        .wait_for_line("refused a connection from 127.0.0.1", TIMEOUT);
}

/// Issue 34: `drover -t` as root started the pool's PHP set-up as root, loading an
/// `LD_PRELOAD` library of the pool's `[env]` (and its php.ini, its extensions), which the
/// pool's user may have written. The check now runs as the pool's user, as its zygote does:
/// a library that records who loaded it, preloaded by the pool's `[env]` or named by an
/// `extension=` of the php.ini the pool's user wrote, records `nobody` each time.
#[test]
fn drover_t_runs_a_pool_s_php_start_up_as_the_pool_s_user() {
    use std::os::unix::fs::PermissionsExt;
    if !crate::common::proc::running_as_root() {
        println!("skipped: needs root, to check a pool of nobody");
        return;
    }
    let site = Site::new();
    let shared = site.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = shared.join("loaded-by");
    // Two libraries, each writing `TAG EUID` to the marker when it is loaded.
    let library = |tag: &str| {
        let source = shared.join(format!("{tag}.c"));
        std::fs::write(
            &source,
            format!(
                "#include <stdio.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void record(void) {{\n\
                 FILE *f = fopen(\"{}\", \"a\"); if (f) {{ fprintf(f, \"{tag} %d\\n\", (int)geteuid()); fclose(f); }} }}\n",
                marker.display()
            ),
        )
        .unwrap();
        let library = shared.join(format!("{tag}.so"));
        let built = crate::common::run_bounded(
            std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .arg(&library)
                .arg(&source),
        );
        assert!(built.status.success(), "{built:?}");
        library
    };
    let preload = library("preload");
    let extension = library("extension");
    // The pool's php.ini, written by its user, loads an extension of theirs.
    let ini = shared.join("php.ini");
    std::fs::write(&ini, format!("extension={}\n", extension.display())).unwrap();
    nix::unistd::chown(
        &ini,
        Some(nix::unistd::User::from_name("nobody").unwrap().unwrap().uid),
        None,
    )
    .unwrap();
    // Copies of drover, drover-admin and drover-php that nobody may run.
    let bin = site.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let php = crate::common::php_runtime().expect("drover-php");
    for from in [
        std::path::Path::new(crate::common::bin()),
        std::path::Path::new(crate::common::admin_bin()),
        php,
    ] {
        std::fs::copy(from, bin.join(from.file_name().unwrap())).unwrap();
    }
    site.write(
        "drover.toml",
        "error_log = \"stderr\"\nlog_level = \"info\"\n",
    );
    let pool = crate::common::AsUser {
        pool: Embed::new("www", 1)
            .php(&format!("ini_file = \"{}\"\n", ini.display()))
            .admin("disable_functions = \"exec\"\n")
            .env(&format!("LD_PRELOAD = \"{}\"\n", preload.display())),
        user: "nobody",
        group: "nogroup",
    };
    site.write(
        "pools.d/www.toml",
        &crate::common::PoolFile::toml(&pool, &site),
    );

    let checked = crate::common::run_bounded(
        std::process::Command::new(bin.join("drover"))
            .arg("-t")
            .arg("-c")
            .arg(site.path().join("drover.toml")),
    );

    // The extension is no PHP module (PHP warns and goes on): what matters is who loaded it.
    let said = String::from_utf8_lossy(&checked.stderr);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let loaded = std::fs::read_to_string(&marker).unwrap_or_default();
    for tag in ["preload", "extension"] {
        assert!(
            loaded.lines().any(|l| l.starts_with(&format!("{tag} "))),
            "the check never loaded the pool's {tag} library: {loaded:?} {said}"
        );
    }
    for line in loaded.lines() {
        assert_eq!(
            line.split(' ').nth(1),
            Some(nobody.uid.to_string().as_str()),
            "drover -t ran the pool's PHP start-up as another user: {line} ({said})"
        );
    }
    eprintln!(
        "drover -t, as root: {loaded:?}, exit {:?}",
        checked.status.code()
    );
}
