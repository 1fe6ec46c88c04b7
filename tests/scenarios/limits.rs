//! A pool's `rlimit_files` (php-fpm's): every process of the pool, the one drover execs
//! and what it forks, has that limit on open files, soft and hard, as `/proc/PID/limits`
//! shows; a limit the kernel or drover could not set is refused by `drover -t`, with the
//! file, line and key.

use crate::common::{
    Drover, PythonPool, Site, TIMEOUT, Tables, check_config, default_php_runtime, php_table,
    php_worker_comm, pool_toml, proc, python, wait_until,
};

/// `Max open files` of a process: (soft, hard).
fn open_files_limit(pid: i32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files in /proc/PID/limits");
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
fn rlimit_files_is_the_open_files_limit_of_every_process_of_the_pool() {
    let site = Site::new();
    python::install_apps(&site);
    let runtime = default_php_runtime();
    let php = Tables {
        name: "www",
        tables: format!(
            "rlimit_files = 3000\n[pm]\nmode = \"static\"\nmax_children = 2\n{}",
            php_table(runtime)
        ),
    };
    let py = PythonPool::wsgi("py")
        .max_children(2)
        .key("rlimit_files", "2500");
    let drover = Drover::start(&site, &[&php, &py]);

    // The PHP pool's processes: a php-cgi parent or a drover-php zygote, and two workers.
    let comm = php_worker_comm(runtime);
    let php_processes = wait_until(TIMEOUT, "the PHP pool's 3 processes", || {
        let found: Vec<i32> = drover
            .descendants()
            .into_iter()
            .filter(|&pid| proc::stat(pid).is_some_and(|s| s.comm == comm && s.state != 'Z'))
            .collect();
        (found.len() == 3).then_some(found)
    });
    for pid in php_processes {
        assert_eq!(open_files_limit(pid), (3000, 3000), "{comm} {pid}");
    }
    // The Python pool's zygote and the workers it forked.
    let zygote = python::wait_started(&drover.log, 0, "py", "python zygote", 1, TIMEOUT);
    let workers = python::wait_started(&drover.log, 0, "py", "worker", 2, TIMEOUT);
    for pid in zygote.into_iter().chain(workers) {
        assert_eq!(open_files_limit(pid), (2500, 2500), "drover-python {pid}");
    }
    // The master keeps its own.
    assert_ne!(open_files_limit(drover.pid()), (3000, 3000));
}

#[test]
fn rlimit_files_out_of_range_is_refused_with_file_line_and_why() {
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for (value, rule) in [
        ("0".to_owned(), "must be at least 1".to_owned()),
        (
            (nr_open + 1).to_string(),
            format!("must be at most {nr_open}: the kernel's fs.nr_open"),
        ),
    ] {
        let site = Site::new();
        let tables = format!(
            "rlimit_files = {value}\n[pm]\nmode = \"static\"\nmax_children = 2\n{}",
            php_table(default_php_runtime())
        );
        let text = pool_toml(&site.socket("www"), &tables);
        site.write("drover.toml", "error_log = \"stderr\"\n");
        site.write("pools.d/www.toml", &text);

        let out = check_config(&site);

        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "drover -t accepted it:\n{stderr}"
        );
        let line = 1 + text
            .lines()
            .position(|l| l.starts_with("rlimit_files"))
            .unwrap();
        let wanted = format!("pools.d/www.toml:{line}:1: rlimit_files: {rule}");
        assert!(
            stderr.contains(&wanted),
            "no {wanted:?} in stderr:\n{stderr}"
        );
    }
}
