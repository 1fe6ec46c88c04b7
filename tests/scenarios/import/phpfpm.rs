//! `drover import php-fpm` on real files: Debian's stock configuration, and a pool with the
//! settings operators carry over most.

use std::path::{Path, PathBuf};

use super::{edit, import, stdout, text};
use crate::common::{Drover, Nginx, PhpFpm, Site, TIMEOUT, check_config, http, proc};

const STOCK_CONF: &str = "/etc/php/8.2/fpm/php-fpm.conf";
const STOCK_POOL: &str = "/etc/php/8.2/fpm/pool.d/www.conf";

/// What both servers must answer alike: who runs the script, under which SAPI, with which
/// php.ini values.
const PAGE: &str = r#"<?php
echo "sapi=", PHP_SAPI, "\n";
echo "user=", posix_getpwuid(posix_geteuid())["name"], "\n";
echo "memory_limit=", ini_get("memory_limit"), "\n";
echo "display_errors=", ini_get("display_errors"), "\n";
echo "max_execution_time=", ini_get("max_execution_time"), "\n";
echo "script=", $_SERVER["SCRIPT_NAME"], "\n";
echo "sum=", array_sum(range(1, 100)), "\n";
"#;

/// php-fpm itself, from a copy of the stock files whose paths point into the site.
fn stock_fpm(site: &Site, socket: &Path) -> PhpFpm {
    let dir = site.path().join("fpm");
    let pool = std::fs::read_to_string(STOCK_POOL).expect("read the stock www.conf");
    let pool = pool.replace(
        "listen = /run/php/php8.2-fpm.sock",
        &format!("listen = {}", socket.display()),
    );
    assert!(
        pool.contains(&socket.display().to_string()),
        "no listen line in {STOCK_POOL}"
    );
    site.write("fpm/pool.d/www.conf", &pool);
    let conf = site.write(
        "fpm/php-fpm.conf",
        &format!(
            "[global]\npid = {dir}/php-fpm.pid\nerror_log = {dir}/php-fpm.log\n\
             include = {dir}/pool.d/*.conf\n",
            dir = dir.display()
        ),
    );
    PhpFpm::run(&conf, &[socket])
}

fn page(nginx: &Nginx) -> String {
    let reply = http::get(&nginx.url("/page.php"));
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

/// The site's drover.toml as imported, minus the paths that belong to the system's
/// php-fpm (its pid file and log), so that the test's drover logs to its stderr.
fn local_global(site: &Site) {
    edit(
        &site.path().join("drover.toml"),
        &["pid_file", "error_log"],
        "error_log = \"stderr\"\n",
    );
}

/// The imported pool file, listening in the site instead of php-fpm's `/run/php`.
fn local_listen(pool: &Path, socket: &Path) {
    let mut keys = vec!["listen"];
    if !proc::running_as_root() {
        // Only root may give the socket to www-data.
        keys.extend(["listen_owner", "listen_group"]);
    }
    edit(pool, &keys, &format!("listen = \"{}\"\n", socket.display()));
}

#[test]
fn debians_stock_configuration_imports_and_serves_the_page_php_fpm_serves() {
    let site = Site::new();
    site.script("page.php", PAGE);
    let out = import(&[
        "php-fpm",
        "-o",
        &site.path().display().to_string(),
        STOCK_CONF,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report = stdout(&out);
    assert!(
        report.contains("Every setting was carried over."),
        "{report}"
    );
    assert!(report.contains("passes"), "{report}");

    // The files as written pass drover -t, with the stock pool's values.
    let checked = check_config(&site);
    assert!(checked.status.success(), "{}", text(&checked));
    let resolved = stdout(&checked);
    for expected in [
        "listen = \"/run/php/php8.2-fpm.sock\"",
        "user = \"www-data\"",
        "mode = \"dynamic\"",
        "max_children = 5",
        "start_servers = 2",
        "min_spare_servers = 1",
        "max_spare_servers = 3",
        "ini_file = \"/etc/php/8.2/fpm/php.ini\"",
    ] {
        assert!(resolved.contains(expected), "no {expected} in:\n{resolved}");
    }

    // php-fpm's page, then drover's, from the same stock files.
    let fpm_socket = site.path().join("fpm.sock");
    let fpm_page = {
        let _fpm = stock_fpm(&site, &fpm_socket);
        let nginx = Nginx::start(&site, &fpm_socket);
        page(&nginx)
    };
    local_global(&site);
    let socket = site.socket("www");
    local_listen(&site.path().join("pools.d/www.toml"), &socket);
    // The imported pool runs as www-data, as php-fpm's did.
    let drover = Drover::spawn_reachable(&site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start(&site, &socket);
    let drover_page = page(&nginx);

    assert!(fpm_page.contains("sapi=fpm-fcgi"), "{fpm_page}");
    assert!(fpm_page.contains("user=www-data"), "{fpm_page}");
    assert_eq!(
        drover_page,
        fpm_page,
        "drover's page differs from php-fpm's; drover's log:\n{}",
        drover.log.text()
    );
}

#[test]
fn a_pools_ini_env_pm_and_slowlog_round_trip_and_an_unknown_directive_is_reported() {
    let site = Site::new();
    site.script(
        "env.php",
        "<?php echo 'memory_limit=', ini_get('memory_limit'), \"\\n\", 'FOO=', getenv('FOO'), \"\\n\";\n\
         ini_set('memory_limit', '1G'); echo 'after_ini_set=', ini_get('memory_limit'), \"\\n\";\n",
    );
    let socket = site.socket("shop");
    let user = if proc::running_as_root() {
        "user = root\n"
    } else {
        ""
    };
    let conf = format!(
        "; a pool as an operator writes one\n[shop]\n{user}listen = {socket}\nlisten.mode = 0666\n\
         pm = dynamic\npm.max_children = 4\npm.start_servers = 2\npm.min_spare_servers = 1\n\
         pm.max_spare_servers = 3\nphp_admin_value[memory_limit] = 96M\nenv[FOO] = bar-$pool\n\
         request_slowlog_timeout = 5s\nslowlog = {dir}/$pool.slow.log\nfrobnicate = yes\n",
        socket = socket.display(),
        dir = site.path().display(),
    );
    let file = site.write("fpm/shop.conf", &conf);
    let unknown_line = 1 + conf
        .lines()
        .position(|l| l.starts_with("frobnicate"))
        .unwrap();

    let out = import(&[
        "php-fpm",
        "-o",
        &site.path().display().to_string(),
        &file.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report = stdout(&out);
    let expected = format!(
        "{}:{unknown_line}: frobnicate = yes: unknown directive",
        file.display()
    );
    assert!(report.contains(&expected), "no {expected:?} in:\n{report}");

    let checked = check_config(&site);
    assert!(checked.status.success(), "{}", text(&checked));
    let resolved = stdout(&checked);
    for expected in [
        "[php.admin_ini]\nmemory_limit = \"96M\"".to_owned(),
        "FOO = \"bar-shop\"".to_owned(),
        "mode = \"dynamic\"".to_owned(),
        "request_slowlog_timeout = \"5s\"".to_owned(),
        format!("slowlog = \"{}/shop.slow.log\"", site.path().display()),
    ] {
        assert!(
            resolved.contains(&expected),
            "no {expected} in:\n{resolved}"
        );
    }

    let drover = Drover::spawn(&site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start(&site, &socket);
    let reply = http::get(&nginx.url("/env.php"));
    assert_eq!(
        reply.body,
        "memory_limit=96M\nFOO=bar-shop\nafter_ini_set=96M\n",
        "{reply:?}; drover's log:\n{}",
        drover.log.text()
    );
}

#[test]
fn existing_files_are_not_overwritten_without_force() {
    let site = Site::new();
    let file = site.write(
        "fpm/www.conf",
        "[www]\nlisten = /run/x.sock\npm = static\npm.max_children = 1\n",
    );
    let pool: PathBuf = site.write("pools.d/www.toml", "# mine\n");
    let dir = site.path().display().to_string();
    let file = file.display().to_string();

    let out = import(&["php-fpm", "-o", &dir, &file]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("already exist"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&pool).unwrap(), "# mine\n");
    assert!(
        !site.path().join("drover.toml").exists(),
        "a file was written"
    );

    let out = import(&["php-fpm", "--force", "-o", &dir, &file]);
    assert!(text(&out).contains("wrote"), "{}", text(&out));
    assert!(
        std::fs::read_to_string(&pool)
            .unwrap()
            .contains("max_children = 1")
    );
}
