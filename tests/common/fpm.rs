//! A real php-fpm 8.2 (Debian's `php8.2-fpm`), for tests that compare drover-php with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{Site, TIMEOUT, proc, wait_until};

pub const PHP_FPM: &str = "/usr/sbin/php-fpm8.2";

/// One php-fpm pool: its name, socket and extra pool-file lines
/// (`php_admin_value[cgi.fix_pathinfo] = 0`).
pub struct FpmPool {
    pub name: String,
    pub socket: PathBuf,
    pub lines: String,
}

impl FpmPool {
    /// A static pool of one child listening on `<site>/<name>.sock`.
    pub fn new(site: &Site, name: &str, lines: &str) -> FpmPool {
        FpmPool {
            name: name.to_owned(),
            socket: site.path().join(format!("{name}.sock")),
            lines: lines.to_owned(),
        }
    }
}

/// php-fpm in the foreground with the site's php-fpm.conf, killed (with its children) on
/// drop. It reads the system's php.ini (`/etc/php/8.2/fpm/php.ini`), as operators run it.
pub struct PhpFpm(Child);

impl PhpFpm {
    pub fn start(site: &Site, pools: &[FpmPool]) -> PhpFpm {
        let dir = site.path().display().to_string();
        // As root, the children run as www-data (php-fpm refuses root children).
        let user = if proc::running_as_root() {
            "user = www-data\ngroup = www-data\n"
        } else {
            ""
        };
        let mut conf =
            format!("[global]\npid = {dir}/php-fpm.pid\nerror_log = {dir}/php-fpm.log\n\n");
        for pool in pools {
            conf.push_str(&format!(
                "[{}]\n{user}listen = {}\nlisten.mode = 0666\npm = static\npm.max_children = 1\n\
                 catch_workers_output = yes\n{}\n\n",
                pool.name,
                pool.socket.display(),
                pool.lines
            ));
        }
        let conf = site.write("php-fpm.conf", &conf);
        let sockets: Vec<&Path> = pools.iter().map(|pool| pool.socket.as_path()).collect();
        PhpFpm::run(&conf, &sockets)
    }

    /// php-fpm with the configuration file `conf`, once it listens on every one of
    /// `sockets`.
    pub fn run(conf: &Path, sockets: &[&Path]) -> PhpFpm {
        let child = Command::new(PHP_FPM)
            .args(["--nodaemonize", "--fpm-config"])
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{PHP_FPM} (package php8.2-fpm): {e}"));
        let fpm = PhpFpm(child);
        for socket in sockets {
            wait_until(TIMEOUT, "php-fpm to listen", || {
                std::os::unix::net::UnixStream::connect(socket).ok()
            });
        }
        fpm
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        proc::kill_tree(self.0.id() as i32);
        let _ = self.0.wait();
    }
}

/// php-fpm with two pools, `cgi.fix_pathinfo` 1 and 0, for tests that compare drover-php's
/// path variables with it: what `pages` gives for each pool's socket, in that order,
/// php-fpm stopped after.
pub fn fix_pathinfo_1_and_0<T>(site: &Site, pages: impl Fn(&Path) -> T) -> (T, T) {
    let pools = [
        FpmPool::new(site, "fpm1", ""),
        FpmPool::new(site, "fpm0", "php_admin_value[cgi.fix_pathinfo] = 0"),
    ];
    let _fpm = PhpFpm::start(site, &pools);
    (pages(&pools[0].socket), pages(&pools[1].socket))
}
