//! The mapping, on text: what each php-fpm directive becomes, and what the report says.

use super::*;

/// `files` (name, text) as [`read`] would give them, in order, without includes.
fn items(files: &[(&str, &str)]) -> Vec<Read> {
    let mut out = Vec::new();
    for (file, text) in files {
        let place = |line| Place {
            file: (*file).to_owned(),
            line,
        };
        for item in ini::parse(text) {
            out.push(match item {
                Item::Section { name, line } => Read::Section {
                    place: place(line),
                    name,
                },
                Item::Entry {
                    key,
                    value,
                    written,
                    line,
                } => Read::Entry {
                    place: place(line),
                    key,
                    value,
                    written,
                },
                Item::Error { message, line } => Read::Error {
                    place: place(line),
                    message,
                },
            });
        }
    }
    out
}

fn import(files: &[(&str, &str)]) -> Import {
    map(&items(files), &Context::default())
}

fn pool(import: &Import, name: &str) -> toml::Table {
    let (_, doc) = import
        .pools
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no pool {name} in {import:?}"));
    doc.render().parse().expect("valid TOML")
}

fn note<'i>(import: &'i Import, needle: &str) -> &'i Note {
    import
        .report
        .iter()
        .find(|n| n.setting.contains(needle))
        .unwrap_or_else(|| panic!("no note on {needle}: {:#?}", import.report))
}

/// Debian's stock pool file, its comments left out.
const DEBIAN_WWW: &str = "[www]
user = www-data
group = www-data
listen = /run/php/php8.2-fpm.sock
listen.owner = www-data
listen.group = www-data
pm = dynamic
pm.max_children = 5
pm.start_servers = 2
pm.min_spare_servers = 1
pm.max_spare_servers = 3
";

#[test]
fn debians_stock_pool_is_carried_over_whole() {
    let import = import(&[("www.conf", DEBIAN_WWW)]);
    assert!(import.report.is_empty(), "{:#?}", import.report);
    let www = pool(&import, "www");
    assert_eq!(www["listen"].as_str(), Some("/run/php/php8.2-fpm.sock"));
    assert_eq!(www["user"].as_str(), Some("www-data"));
    assert_eq!(www["listen_owner"].as_str(), Some("www-data"));
    assert_eq!(www["pm"]["mode"].as_str(), Some("dynamic"));
    assert_eq!(www["pm"]["max_children"].as_integer(), Some(5));
    assert_eq!(www["pm"]["start_servers"].as_integer(), Some(2));
    assert_eq!(www["pm"]["max_spare_servers"].as_integer(), Some(3));
    assert!(
        www["php"].as_table().is_some(),
        "a [php] table names the runtime"
    );
}

#[test]
fn every_value_names_its_file_and_line() {
    let import = import(&[("www.conf", DEBIAN_WWW)]);
    let text = import.pools[0].1.render();
    let line = text
        .lines()
        .find(|l| l.starts_with("max_children"))
        .unwrap();
    assert!(line.ends_with("# www.conf:8 pm.max_children"), "{line}");
}

#[test]
fn ini_values_env_and_pool_substitution() {
    let import = import(&[(
        "a.conf",
        "[shop]\nlisten = /run/$pool.sock\npm = static\npm.max_children = 2\n\
         php_admin_value[memory_limit] = 96M\nphp_flag[display_errors] = off\n\
         php_value[opcache.enable] = 1\nphp_admin_flag[log_errors] = on\n\
         env[FOO] = bar\nenv[PATH] = $PATH\nrequest_slowlog_timeout = 5\n\
         slowlog = /var/log/$pool.slow\nrequest_terminate_timeout = 2m\n",
    )]);
    let shop = pool(&import, "shop");
    assert_eq!(shop["listen"].as_str(), Some("/run/shop.sock"));
    assert_eq!(
        shop["php"]["admin_ini"]["memory_limit"].as_str(),
        Some("96M")
    );
    assert_eq!(shop["php"]["admin_ini"]["log_errors"].as_str(), Some("1"));
    assert_eq!(shop["php"]["ini"]["display_errors"].as_str(), Some("0"));
    assert_eq!(shop["php"]["ini"]["opcache.enable"].as_str(), Some("1"));
    assert_eq!(shop["env"]["FOO"].as_str(), Some("bar"));
    assert!(shop["env"].get("PATH").is_none());
    assert!(note(&import, "env[PATH]").why.contains("own environment"));
    assert_eq!(shop["request_slowlog_timeout"].as_str(), Some("5s"));
    assert_eq!(shop["slowlog"].as_str(), Some("/var/log/shop.slow"));
    assert_eq!(shop["request_terminate_timeout"].as_str(), Some("2m"));
}

#[test]
fn unknown_and_unsupported_directives_are_reported_with_file_and_line() {
    let import = import(&[(
        "pool.d/x.conf",
        "[x]\nlisten = 127.0.0.1:9000\npm = static\npm.max_children = 1\n\
         listen.owner = nobody\nlisten.acl_users = a,b\nchroot = /srv\nfrobnicate = 1\n\
         pm.start_servers = 3\ncatch_workers_output = yes\n",
    )]);
    let unknown = note(&import, "frobnicate");
    assert_eq!(unknown.place, "pool.d/x.conf:8");
    assert!(unknown.why.starts_with("unknown directive"), "{unknown}");
    assert_eq!(
        unknown.to_string(),
        "pool.d/x.conf:8: frobnicate = 1: unknown directive: not a php-fpm pool directive \
         (php-fpm would refuse to start)"
    );
    assert_eq!(note(&import, "listen.owner").place, "pool.d/x.conf:5");
    assert!(
        note(&import, "listen.acl_users")
            .why
            .starts_with("no equivalent")
    );
    assert!(note(&import, "chroot").why.starts_with("no equivalent"));
    assert!(
        note(&import, "pm.start_servers")
            .why
            .contains("pm = static")
    );
    assert!(
        note(&import, "catch_workers_output")
            .why
            .starts_with("not needed")
    );
    let x = pool(&import, "x");
    assert!(x.get("listen_owner").is_none());
    assert!(x["pm"].get("start_servers").is_none());
    assert_eq!(import.report.len(), 6, "{:#?}", import.report);
}

#[test]
fn global_section_and_entries_before_any_section_go_to_drover_toml() {
    let import = import(&[
        (
            "php-fpm.conf",
            "pid = /run/php/fpm.pid\n[global]\nerror_log = /var/log/fpm.log\nlog_level = notice\n\
             daemonize = no\nemergency_restart_threshold = 10\nemergency_restart_interval = 1m\n\
             process_control_timeout = 10s\nsyslog.facility = daemon\n",
        ),
        ("www.conf", DEBIAN_WWW),
    ]);
    let global: toml::Table = import.global.render().parse().unwrap();
    assert_eq!(global["pid_file"].as_str(), Some("/run/php/fpm.pid"));
    assert_eq!(global["error_log"].as_str(), Some("/var/log/fpm.log"));
    assert_eq!(global["log_level"].as_str(), Some("notice"));
    assert_eq!(global["emergency_restart_threshold"].as_integer(), Some(10));
    assert_eq!(global["emergency_restart_interval"].as_str(), Some("1m"));
    assert_eq!(global["process_control_timeout"].as_str(), Some("10s"));
    assert_eq!(note(&import, "daemonize").place, "php-fpm.conf:5");
    assert!(
        note(&import, "syslog.facility")
            .why
            .starts_with("no equivalent")
    );
    assert_eq!(import.pools.len(), 1);
}

#[test]
fn a_later_directive_overrides_and_the_earlier_is_reported() {
    let import = import(&[
        (
            "a.conf",
            "[www]\nlisten = /a.sock\npm = static\npm.max_children = 2\n",
        ),
        ("b.conf", "[www]\npm.max_children = 7\n"),
    ]);
    assert_eq!(
        pool(&import, "www")["pm"]["max_children"].as_integer(),
        Some(7)
    );
    let old = note(&import, "pm.max_children = 2");
    assert_eq!(old.place, "a.conf:4");
    assert!(old.why.contains("b.conf:2"), "{old}");
}

#[test]
fn listen_spellings() {
    let listen = |v: &str| listen(v).map(|(a, _, note)| (a, note.is_some()));
    assert_eq!(listen("9000"), Ok(("9000".into(), false)));
    assert_eq!(listen("[::]:9000"), Ok(("[::]:9000".into(), false)));
    assert_eq!(
        listen("localhost:9000"),
        Ok(("127.0.0.1:9000".into(), true))
    );
    assert_eq!(listen("*:9000"), Ok(("9000".into(), true)));
    assert_eq!(listen("run/x.sock"), Ok(("run/x.sock".into(), true)));
    assert!(listen("db.example:9000").is_err());
}

#[test]
fn times_and_integers_as_php_fpm_reads_them() {
    assert_eq!(parse_time("30"), Some("30s".into()));
    assert_eq!(parse_time("5m"), Some("5m".into()));
    assert_eq!(parse_time("1d"), Some("1d".into()));
    assert_eq!(parse_time("1.5s"), None);
    assert_eq!(parse_time("s"), None);
    assert_eq!(parse_int("-1"), Some(-1));
    assert_eq!(parse_int("1e3"), None);
}

#[test]
fn slowlog_without_its_file_or_longer_than_terminate_is_refused() {
    let import = import(&[(
        "a.conf",
        "[a]\nlisten = /a.sock\npm = static\npm.max_children = 1\nrequest_slowlog_timeout = 5s\n\
         [b]\nlisten = /b.sock\npm = static\npm.max_children = 1\nslowlog = /b.slow\n\
         request_slowlog_timeout = 10s\nrequest_terminate_timeout = 5s\n",
    )]);
    assert!(pool(&import, "a").get("request_slowlog_timeout").is_none());
    assert!(pool(&import, "b").get("request_slowlog_timeout").is_none());
    let notes: Vec<&Note> = import
        .report
        .iter()
        .filter(|n| n.setting.starts_with("request_slowlog_timeout"))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:#?}");
    assert!(notes[0].why.contains("needs slowlog"));
    assert!(
        notes[1]
            .why
            .contains("shorter than request_terminate_timeout")
    );
}

#[test]
fn unparsable_lines_and_empty_includes_are_reported() {
    let mut read = items(&[("a.conf", "[a]\nlisten\n")]);
    read.push(Read::Include {
        place: Place {
            file: "a.conf".into(),
            line: 3,
        },
        pattern: "pool.d/*.conf".into(),
        matched: 0,
    });
    let import = map(&read, &Context::default());
    assert_eq!(import.report[0].place, "a.conf:2");
    assert!(import.report[1].why.contains("matched no file"));
}

#[test]
fn a_pool_name_that_cannot_be_a_file_name_is_refused() {
    let import = import(&[
        (
            "a.conf",
            "[../x]\nlisten = /a.sock\n[www]\nlisten = /b.sock\n",
        ),
        ("b.conf", "[/abs/x]\n[www@2]\n[.hidden]\n"),
    ]);
    let refused: Vec<(&str, &str)> = import
        .refused
        .iter()
        .map(|n| (n.place.as_str(), n.setting.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            ("a.conf:1", "[../x]"),
            ("b.conf:1", "[/abs/x]"),
            ("b.conf:2", "[www@2]"),
            ("b.conf:3", "[.hidden]")
        ]
    );
    assert!(
        import.refused[0].why.contains("[A-Za-z0-9_.-]+"),
        "{:?}",
        import.refused
    );
    assert!(import.pools.iter().all(|(name, _)| name == "www"));
}

#[test]
fn the_php_ini_php_fpm_loads_is_named() {
    let context = Context {
        php_ini: Some("/etc/php/8.2/fpm/php.ini".into()),
    };
    let import = map(&items(&[("www.conf", DEBIAN_WWW)]), &context);
    assert_eq!(
        pool(&import, "www")["php"]["ini_file"].as_str(),
        Some("/etc/php/8.2/fpm/php.ini")
    );
}

#[test]
fn the_docker_images_stderr_is_drovers_stderr() {
    let import = import(&[(
        "docker.conf",
        "[global]\nerror_log = /proc/self/fd/2\n[www]\nlisten = 9000\n",
    )]);
    let global: toml::Table = import.global.render().parse().unwrap();
    assert_eq!(global["error_log"].as_str(), Some("stderr"));
    assert_eq!(pool(&import, "www")["listen"].as_str(), Some("9000"));
}

#[test]
fn php_fpms_sample_access_format_passes_through_unchanged() {
    let import = import(&[(
        "www.conf",
        "[www]\nlisten = 9000\naccess.log = /var/log/www.access\n\
         access.format = \"%R - %u %t \\\"%m %r%Q%q\\\" %s %f %{mili}d %{kilo}M %C%%\"\n",
    )]);
    let www = pool(&import, "www");
    assert_eq!(
        www["access_format"].as_str(),
        Some(r#"%R - %u %t "%m %r%Q%q" %s %f %{mili}d %{kilo}M %C%%"#),
        "{:#?}",
        import.report
    );
    assert_eq!(www["access_log"].as_str(), Some("/var/log/www.access"));
}

/// `pm.status_path` and `ping.path` are answered on the pool's socket as php-fpm answers
/// them; the status needs a `status_listen`, added beside a unix socket when php-fpm's pool
/// has no `pm.status_listen`, and not invented for a TCP pool.
#[test]
fn status_and_ping_paths_carry_over_with_a_status_listen() {
    let unix = import(&[(
        "pool.d/www.conf",
        "[www]\nlisten = /run/php/php8.2-fpm.sock\npm = static\npm.max_children = 1\n\
         pm.status_path = /status\nping.path = /ping\nping.response = alive\n",
    )]);
    let www = pool(&unix, "www");
    assert_eq!(www["status_path"].as_str(), Some("/status"));
    assert_eq!(
        www["status_listen"].as_str(),
        Some("/run/php/php8.2-fpm-status.sock")
    );
    assert_eq!(www["ping_path"].as_str(), Some("/ping"));
    assert_eq!(www["ping_response"].as_str(), Some("alive"));
    assert!(note(&unix, "pm.status_path").why.contains("status_listen"));

    let tcp = import(&[(
        "pool.d/www.conf",
        "[www]\nlisten = 127.0.0.1:9000\npm = static\npm.max_children = 1\n\
         pm.status_path = /status\n",
    )]);
    let www = pool(&tcp, "www");
    assert!(www.get("status_path").is_none());
    assert!(
        note(&tcp, "pm.status_path")
            .why
            .starts_with("not carried over")
    );
}

#[test]
fn process_dumpable_is_carried_over() {
    let dumpable = import(&[(
        "a.conf",
        "[a]\nlisten = /run/a.sock\npm = static\npm.max_children = 1\nprocess.dumpable = yes\n",
    )]);
    assert!(dumpable.report.is_empty(), "{:#?}", dumpable.report);
    assert_eq!(
        pool(&dumpable, "a")["process_dumpable"].as_bool(),
        Some(true)
    );
    // `no` is drover's default as it is php-fpm's: nothing to write.
    let not = import(&[(
        "b.conf",
        "[b]\nlisten = /run/b.sock\npm = static\npm.max_children = 1\nprocess.dumpable = no\n",
    )]);
    assert!(not.report.is_empty(), "{:#?}", not.report);
    assert!(pool(&not, "b").get("process_dumpable").is_none());
}
