//! `drover -t`: each bad configuration is refused (exit 1) with a message naming the file,
//! the line and the key; a good one is printed with its defaults; `drover -c` refuses to
//! start on a bad one.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{Site, admin_bin, bin, check_config, php_runtime, pool_toml, run_bounded};

/// `[pm]` and `[php]` tables of a valid static pool, with `pm` lines added to `[pm]`.
fn tables(pm: &str, php: &str) -> String {
    format!("[pm]\nmode = \"static\"\nmax_children = 4\n{pm}\n[php]\nbinary = \"php-cgi\"\n{php}")
}

/// Writes `drover.toml` and `pools.d/NAME.toml` for each (NAME, text).
fn write_config(site: &Site, pools: &[(&str, &str)]) {
    site.write("drover.toml", "error_log = \"stderr\"\n");
    for (name, text) in pools {
        site.write(&format!("pools.d/{name}.toml"), text);
    }
}

/// Asserts that `drover -t` refused the site's config, and returns its stderr.
fn refused(site: &Site) -> String {
    let out = check_config(site);
    assert_eq!(
        out.status.code(),
        Some(1),
        "drover -t accepted it:\n{}",
        describe(&out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn describe(out: &Output) -> String {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    format!(
        "status {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    )
}

/// The 1-based number of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {text}"))
}

/// The stderr line that starts with `file:line:` (the file's path may be absolute) and
/// names `key`; panics with the whole stderr when there is none.
fn located<'a>(stderr: &'a str, file: &str, line: usize, key: &str) -> &'a str {
    let place = format!("{file}:{line}:");
    stderr
        .lines()
        .find(|l| l.contains(&place) && l.contains(key))
        .unwrap_or_else(|| panic!("no error naming {place} and {key:?} in stderr:\n{stderr}"))
}

#[test]
fn a_typo_names_file_line_key_and_the_likely_key() {
    let site = Site::new();
    let text = pool_toml(&site.socket("www"), &tables("max_chidren = 8\n", ""));
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "max_chidren"),
        "pm.max_chidren",
    );
    assert!(
        error.contains("max_children"),
        "no suggestion of max_children in {error:?}"
    );
}

#[test]
fn min_spare_above_max_spare_is_refused() {
    let pm = "[pm]\nmode = \"dynamic\"\nmax_children = 10\nmin_spare_servers = 5\nmax_spare_servers = 2\n";
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &format!("{pm}\n[php]\nbinary = \"php-cgi\"\n"),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    // The rule joins two keys; naming either one is right.
    let min = (line_of(&text, "min_spare_servers"), "pm.min_spare_servers");
    let max = (line_of(&text, "max_spare_servers"), "pm.max_spare_servers");
    let named = |(line, key): (usize, &str)| {
        stderr
            .lines()
            .any(|l| l.contains(&format!("pools.d/www.toml:{line}:")) && l.contains(key))
    };
    assert!(
        named(min) || named(max),
        "neither {min:?} nor {max:?} named in stderr:\n{stderr}"
    );
}

#[test]
fn start_servers_outside_min_max_spare_is_refused() {
    let pm = "[pm]\nmode = \"dynamic\"\nmax_children = 10\nstart_servers = 8\nmin_spare_servers = 2\nmax_spare_servers = 4\n";
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &format!("{pm}\n[php]\nbinary = \"php-cgi\"\n"),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "start_servers"),
        "pm.start_servers",
    );
}

#[test]
fn two_pools_on_one_listen_address_are_refused() {
    let site = Site::new();
    let text = pool_toml(&site.socket("shared"), &tables("", ""));
    write_config(&site, &[("a", &text), ("b", &text)]);

    let stderr = refused(&site);

    // Which of the two files carries the error is drover's choice.
    let line = line_of(&text, "listen =");
    let named = |file: &str| {
        stderr
            .lines()
            .any(|l| l.contains(&format!("pools.d/{file}:{line}:")) && l.contains("listen"))
    };
    assert!(
        named("a.toml") || named("b.toml"),
        "no error at a.toml:{line} or b.toml:{line} naming listen:\n{stderr}"
    );
}

#[test]
fn a_php_binary_that_does_not_exist_is_refused() {
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &tables("", "").replace("\"php-cgi\"", "\"/nonexistent/bin/php-cgi\""),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "binary"),
        "php.binary",
    );
}

#[test]
fn a_duration_without_a_unit_is_refused() {
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &format!("request_terminate_timeout = \"30\"\n\n{}", tables("", "")),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "request_terminate_timeout"),
        "request_terminate_timeout",
    );
}

#[test]
fn every_error_in_a_file_is_reported() {
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &format!(
            "request_terminate_timeout = \"30\"\n\n{}",
            tables("max_chidren = 8\n", "")
        ),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "request_terminate_timeout"),
        "request_terminate_timeout",
    );
    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "max_chidren"),
        "pm.max_chidren",
    );
}

#[test]
fn a_valid_config_is_printed_with_its_defaults() {
    let site = Site::new();
    let text = pool_toml(&site.socket("www"), &tables("", ""));
    write_config(&site, &[("www", &text)]);

    let out = check_config(&site);

    assert_eq!(
        out.status.code(),
        Some(0),
        "drover -t refused a valid config:\n{}",
        describe(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("www"), "pool www not printed:\n{stdout}");
    assert!(
        stdout.contains("listen_backlog = 511"),
        "default listen_backlog not printed:\n{stdout}"
    );
}

#[test]
fn drover_refuses_to_start_on_a_bad_config() {
    let site = Site::new();
    let socket = site.socket("www");
    let text = pool_toml(&socket, &tables("max_chidren = 8\n", ""));
    write_config(&site, &[("www", &text)]);

    let out = run_bounded(
        Command::new(bin())
            .arg("-c")
            .arg(site.path().join("drover.toml")),
    );

    assert_eq!(
        out.status.code(),
        Some(1),
        "drover -c on a bad config:\n{}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "max_chidren"),
        "pm.max_chidren",
    );
    assert!(!socket.exists(), "the pool's socket was created");
    let all = format!("{stderr}{}", String::from_utf8_lossy(&out.stdout));
    assert!(!all.contains("started"), "something was started:\n{all}");
}

#[test]
fn a_python_pool_without_drover_python_beside_drover_is_refused() {
    let site = Site::new();
    crate::common::python::install_apps(&site);
    let pool = crate::common::PythonPool::wsgi("app");
    write_config(
        &site,
        &[("app", &crate::common::PoolFile::toml(&pool, &site))],
    );
    // drover copied alone into a folder (with drover-admin, which runs its -t), as an
    // operator who installs its own binaries and not drover-python would.
    let lone = site.path().join("bin/drover");
    std::fs::create_dir_all(lone.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &lone).unwrap();
    std::fs::copy(admin_bin(), lone.with_file_name("drover-admin")).unwrap();
    // Another test's fork may still hold a copy open for writing (ETXTBSY) for a moment:
    // drover's own, or drover-admin's, which drover execs for --version.
    crate::common::wait_until(
        crate::common::TIMEOUT,
        "the copies to be executable",
        || match Command::new(&lone).arg("--version").output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => None,
            Ok(out) if String::from_utf8_lossy(&out.stderr).contains("Text file busy") => None,
            other => Some(other.expect("run the copy")),
        },
    );
    let mut command = Command::new(&lone);
    command
        .arg("-t")
        .arg("-c")
        .arg(site.path().join("drover.toml"));

    let out = run_bounded(&mut command);

    assert_eq!(
        out.status.code(),
        Some(1),
        "drover -t accepted it:\n{}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wanted = format!(
        "pools.d/app.toml: python: the Python runtime {} is missing",
        lone.with_file_name("drover-python").display()
    );
    assert!(
        stderr.contains(&wanted),
        "no {wanted:?} in stderr:\n{stderr}"
    );
    // With drover-python beside it, the same configuration is valid.
    std::fs::copy(
        crate::common::python_runtime(),
        lone.with_file_name("drover-python"),
    )
    .unwrap();
    let out = run_bounded(&mut command);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[test]
fn an_env_value_execve_would_refuse_is_an_error_at_its_line() {
    let site = Site::new();
    // 200 KB: a file drover reads, a string Linux refuses at the worker's execve (E2BIG).
    let value = "x".repeat(200_000);
    let text = pool_toml(
        &site.socket("www"),
        &format!("{}\n[env]\nBIG = \"{value}\"\n", tables("", "")),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "BIG ="),
        "env.BIG",
    );
    assert!(error.contains("MAX_ARG_STRLEN"), "no rule in {error:?}");
}

#[test]
fn listen_allowed_clients_on_a_php_pool_is_refused_with_what_to_do_instead() {
    let site = Site::new();
    let text = format!(
        "listen = \"127.0.0.1:0\"\nlisten_allowed_clients = [\"127.0.0.1\"]\n{}",
        tables("", "")
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "listen_allowed_clients"),
        "listen_allowed_clients",
    );
    assert!(
        error.contains("php-cgi does not enforce it") && error.contains("firewall"),
        "no rule in {error:?}"
    );
}

/// What `drover-php --probe` says here: `Ok` with its line, or why it cannot run PHP
/// (missing while its crate is not in the workspace, or built without PHP's headers).
fn drover_php_answer() -> Result<String, String> {
    let Some(program) = php_runtime() else {
        return Err(format!(
            "{} is missing",
            Path::new(bin()).with_file_name("drover-php").display()
        ));
    };
    let out = run_bounded(Command::new(program).arg("--probe"));
    let line = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    match out.status.code() {
        Some(0) => Ok(line(&out.stdout)),
        _ => Err(line(&out.stdout)),
    }
}

#[test]
fn a_php_pool_without_a_runtime_runs_drover_php_only_where_it_can_run_php() {
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        "[pm]\nmode = \"ondemand\"\nmax_children = 2\n\n[php]\n",
    );
    write_config(&site, &[("www", &text)]);

    let out = check_config(&site);

    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    match drover_php_answer() {
        Ok(_) => assert!(
            stdout.contains("runtime = \"embed\"\n"),
            "{}",
            describe(&out)
        ),
        Err(why) => {
            assert!(stdout.contains("runtime = \"cgi\"\n"), "{}", describe(&out));
            assert!(
                stderr.contains(&format!(
                    "run on php-cgi: drover-php is not usable here: {why}"
                )),
                "{}",
                describe(&out)
            );
        }
    }
}

#[test]
fn embed_where_drover_php_cannot_run_php_is_refused_with_why() {
    let Err(why) = drover_php_answer() else {
        return; // drover-php runs PHP here: nothing to refuse.
    };
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        "[pm]\nmode = \"static\"\nmax_children = 2\n\n[php]\nruntime = \"embed\"\n",
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "runtime"),
        "php.runtime",
    );
    assert!(
        error.contains(&format!("drover-php is not usable here: {why}")),
        "no reason in {error:?}"
    );
}

#[test]
fn what_php_cgi_cannot_enforce_is_refused_at_its_key() {
    let site = Site::new();
    let text = pool_toml(
        &site.socket("www"),
        &tables(
            "",
            "runtime = \"cgi\"\nlimit_extensions = [\".php\", \".phar\"]\n\n[php.admin_ini]\ndisable_functions = \"exec\"\n",
        ),
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    for (needle, key) in [
        ("limit_extensions", "php.limit_extensions"),
        ("[php.admin_ini]", "php.admin_ini"),
    ] {
        let error = located(&stderr, "pools.d/www.toml", line_of(&text, needle), key);
        assert!(
            error.contains("php-cgi cannot enforce it"),
            "no rule in {error:?}"
        );
    }
}

#[test]
fn access_log_on_a_php_cgi_pool_is_refused_at_load() {
    let site = Site::new();
    let text = format!(
        "listen = \"127.0.0.1:0\"\naccess_log = \"/tmp/www.access\"\n{}",
        tables("", "")
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "access_log"),
        "access_log",
    );
    assert!(
        error.contains("php-cgi cannot know a response's status"),
        "no rule in {error:?}"
    );
}

#[test]
fn an_unknown_access_format_token_names_file_line_key() {
    let site = Site::new();
    let text = format!(
        "listen = \"127.0.0.1:0\"\naccess_format = \"%R %z\"\n{}",
        tables("", "")
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "access_format"),
        "access_format",
    );
    assert!(error.contains("unknown token %z"), "no rule in {error:?}");
}

#[test]
fn a_bad_access_format_modifier_names_file_line_key_and_the_allowed_ones() {
    let site = Site::new();
    let text = format!(
        "listen = \"127.0.0.1:0\"\naccess_format = \"%R %{{mili}}d %{{giga}}M\"\n{}",
        tables("", "")
    );
    write_config(&site, &[("www", &text)]);

    let stderr = refused(&site);

    let error = located(
        &stderr,
        "pools.d/www.toml",
        line_of(&text, "access_format"),
        "access_format",
    );
    assert!(
        error.contains(
            "%{giga}M: the modifier of %M must be bytes, kilo, kilobytes, mega or megabytes"
        ),
        "no rule in {error:?}"
    );
}
