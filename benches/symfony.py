"""compare.py's and callgrind.py's Symfony app: the test suite's Symfony 5.4 micro kernel on
Debian's packages (tests/apps/symfony), copied into `work`/www/symfony, its cache built
before any pool serves it.

Why the cache is built first, by PHP's CLI: the request that builds it loads about 450
scripts a request never loads again (the container's compiler passes, the commands), and
they stay in the OPcache of the pool that built it. Every later request of that pool then
pays for them: PHP clears one pointer per cached function and class at every request's
start (zend_activate, `map_ptr`), 27,000 instructions more per request on this app
(BENCHMARKS.md, 2026-12-02). Built by whichever backend came first, the cache made that
backend's figures worse than the others'. And for opcache.file_update_protection (2 s)
after the cache is written, OPcache compiles its files at every request instead of caching
them: install() waits that long.
"""

import os
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "tests", "apps", "symfony")
AUTOLOAD = "/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php"
FRONT = "symfony/public/index.php"
WORKER = "symfony/public/worker.php"
PATH = "/hello/bench"
# OPcache's default opcache.file_update_protection, and a margin.
FILE_UPDATE_PROTECTION_S = 2.5


def install(work, build=True):
    """Copies the app into `work`/www/symfony and (`build`) builds its cache (var/, which
    the workers write: www-data's when this runs as root) with one request through PHP's
    CLI, run as the pools' user."""
    shutil.copytree(APP, f"{work}/www/symfony")
    os.makedirs(f"{work}/www/symfony/var", mode=0o777)
    os.chmod(f"{work}/www/symfony/var", 0o777)
    if not build:
        return
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "REQUEST_METHOD": "GET", "REQUEST_URI": PATH,
           "SCRIPT_NAME": "/index.php", "SCRIPT_FILENAME": f"{work}/www/{FRONT}"}
    as_user = ["runuser", "-u", "www-data", "--"] if os.geteuid() == 0 else []
    out = subprocess.run(as_user + ["env", "-i"] + [f"{k}={v}" for k, v in env.items()]
                         + ["php", f"{work}/www/{FRONT}"], capture_output=True, text=True)
    if "Hello bench" not in out.stdout:
        raise RuntimeError(f"the Symfony app's cache was not built: {out.stdout[:300]}{out.stderr[:300]}")
    # OPcache does not cache a file modified less than opcache.file_update_protection (2 s)
    # before the request: until then every request compiles the container's files again
    # (4 of them on /hello/bench). Waits until the newest file of the cache is older.
    newest = max(os.path.getmtime(os.path.join(folder, name))
                 for folder, _, names in os.walk(f"{work}/www/symfony/var") for name in names)
    time.sleep(max(0.0, newest + FILE_UPDATE_PROTECTION_S - time.time()))
