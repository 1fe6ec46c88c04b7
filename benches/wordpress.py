"""compare.py's php-wordpress app: Debian's WordPress 6.1 (`wordpress`, its default theme
from `wordpress-theme-twentytwentythree`) on a MariaDB server of the run's own
(`mariadb-server`: its data folder and socket in the work folder, no TCP port), installed
by WordPress's own wp_install() with its first post, pretty permalinks on.

Debian's wp-config.php reads /etc/wordpress/config-$WORDPRESS_CONFIG.php: this writes
config-drover-test.php there (the scenario tests write the same file), which takes the
database's name and socket from the request's FastCGI params. The page measured is the
front page, as an anonymous visitor sees it (the theme's templates, the first post, the
queries), with `Host: localhost` (the site's address) given to PHP by nginx.
"""

import os
import subprocess
import time

PACKAGES = ["wordpress", "wordpress-theme-twentytwentythree", "mariadb-server", "php"]
WP = "/usr/share/wordpress"
MARIADBD = "/usr/sbin/mariadbd"
CONFIG_FILE = "/etc/wordpress/config-drover-test.php"
# The configuration the scenario tests write too (tests/scenarios/embed/apps/wordpress.rs).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "scenarios",
                       "embed", "apps", "wordpress-config.php")) as f:
    CONFIG = f.read()
INSTALL = r"""<?php
$_SERVER['HTTP_HOST'] = 'localhost';
$_SERVER['WORDPRESS_CONFIG'] = 'drover-test';
$_SERVER['DROVER_WP_DB'] = $argv[1];
$_SERVER['DROVER_WP_DB_SOCKET'] = $argv[2];
define('WP_INSTALLING', true);
require '/usr/share/wordpress/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
wp_install('drover bench', 'admin', 'admin@example.com', true, '', 'admin-password');
update_option('permalink_structure', '/%year%/%monthnum%/%day%/%postname%/');
echo 'installed';
"""
FRONT = f"{WP}/index.php"


def missing():
    """The packages to install for php-wordpress (empty when all are here)."""
    files = [f"{WP}/wp-settings.php", f"{WP}/wp-content/themes/twentytwentythree", MARIADBD, "/usr/bin/php"]
    return PACKAGES if not all(os.path.exists(f) for f in files) else []


class Site:
    """MariaDB in `work`/mariadb with the database `wordpress`, WordPress installed in it;
    `params`: the fastcgi_param lines nginx adds for it. stop() ends MariaDB, by its PID."""

    def __init__(self, work, log):
        data, self.socket = f"{work}/mariadb", f"{work}/mariadb.sock"
        subprocess.run(["mariadb-install-db", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db"],
                       stdout=log, stderr=log, check=True)
        self.proc = subprocess.Popen([MARIADBD, "--no-defaults", f"--datadir={data}", f"--socket={self.socket}",
                                      f"--log-error={work}/mariadb.log", f"--pid-file={work}/mariadb.pid",
                                      "--skip-networking", "--skip-log-bin", "--user=root",
                                      "--innodb-buffer-pool-size=64M"], stdout=log, stderr=log)
        deadline = time.time() + 30
        while not os.path.exists(self.socket) and time.time() < deadline:
            time.sleep(0.05)
        self.sql("CREATE USER 'app'@'localhost' IDENTIFIED BY 'app'; CREATE DATABASE wordpress; "
                 "GRANT ALL ON wordpress.* TO 'app'@'localhost';")
        current = open(CONFIG_FILE).read() if os.path.exists(CONFIG_FILE) else None
        if current != CONFIG:
            with open(CONFIG_FILE, "w") as f:
                f.write(CONFIG)
        with open(f"{work}/install-wordpress.php", "w") as f:
            f.write(INSTALL)
        out = subprocess.run(["php", f"{work}/install-wordpress.php", "wordpress", self.socket],
                             capture_output=True, text=True)
        if not out.stdout.endswith("installed"):
            raise RuntimeError(f"WordPress's install: {out.stdout}{out.stderr}")
        self.params = (f"fastcgi_param WORDPRESS_CONFIG drover-test; fastcgi_param DROVER_WP_DB wordpress; "
                       f"fastcgi_param DROVER_WP_DB_SOCKET {self.socket}; fastcgi_param HTTP_HOST localhost; "
                       "fastcgi_param SERVER_PORT 80;")

    def sql(self, statements):
        subprocess.run(["mariadb", f"--socket={self.socket}", "-uroot", "-e", statements], check=True)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
