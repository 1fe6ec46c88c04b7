//! A MariaDB server of the test's own (Debian's `mariadb-server`): its data folder, socket
//! and temporary folder in the site, no option file read, no TCP port, killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::common::{Site, TIMEOUT, proc, run_bounded, wait_until};

pub const MARIADBD: &str = "/usr/sbin/mariadbd";

pub struct MariaDb {
    child: Child,
    /// Its unix socket, which the apps' configurations name.
    pub socket: PathBuf,
}

impl MariaDb {
    /// A fresh data folder under the site and a server on it, once it answers; the user
    /// `app` (password `app`) may do anything on the databases `databases` creates.
    pub fn start(site: &Site, databases: &[&str]) -> MariaDb {
        let data = site.path().join("mariadb");
        // Its own temporary folder: in /tmp, a bootstrap's temporary table once vanished
        // under it ("Could not remove temporary table '/tmp/#sql-temptable-...'", then
        // "Unknown table 'mysql.tmp_user_sys'") while the other tests ran.
        let tmp = site.path().join("mariadb-tmp");
        std::fs::create_dir(&tmp).unwrap();
        let install = run_bounded(
            Command::new("mariadb-install-db")
                .arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--tmpdir={}", tmp.display()))
                .args(["--user=root", "--auth-root-authentication-method=socket"])
                .arg("--skip-test-db"),
        );
        assert!(
            install.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&install.stderr)
        );
        let socket = site.path().join("mariadb.sock");
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!(
                "--log-error={}",
                site.path().join("mariadb.log").display()
            ))
            .arg(format!(
                "--pid-file={}",
                site.path().join("mariadb.pid").display()
            ))
            .args(["--skip-networking", "--skip-log-bin", "--user=root"])
            .args(["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{MARIADBD} (package mariadb-server): {e}"));
        let db = MariaDb { child, socket };
        wait_until(TIMEOUT, "mariadbd to listen", || {
            std::os::unix::net::UnixStream::connect(&db.socket).ok()
        });
        let mut sql = String::from("CREATE USER 'app'@'localhost' IDENTIFIED BY 'app';");
        for name in databases {
            sql.push_str(&format!(
                "CREATE DATABASE `{name}`; GRANT ALL ON `{name}`.* TO 'app'@'localhost';"
            ));
        }
        db.sql(&sql);
        db
    }

    /// Runs `statements` as root through the socket.
    pub fn sql(&self, statements: &str) {
        let out = run_bounded(
            Command::new("mariadb")
                .arg(format!("--socket={}", self.socket.display()))
                .args(["-uroot", "-e", statements]),
        );
        assert!(
            out.status.success(),
            "mariadb -e {statements:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        proc::kill_tree(self.child.id() as i32);
        let _ = self.child.wait();
    }
}
