#!/usr/bin/env python3
"""Instructions per request, drover-php against php-fpm, counted by callgrind: the figures
to read on a shared machine, where times are noise (BENCHMARKS.md, sessions 8 and 9).

Each backend runs one worker (`pm = static`, 1 worker, max_requests = --requests) under
`valgrind --tool=callgrind` behind one nginx, and one client sends it 2 × --requests
requests over one keep-alive connection: the first worker fills OPcache and retires, the
second serves --requests requests with OPcache warm, and its profile (written when it
exits) is the one read. That profile also holds the worker's start and exit and what it
inherited at its fork (callgrind's counts of the parent up to the fork: PHP's startup), so
each backend runs twice, with workers of --requests and of twice that, and the difference
over --requests is the figure: the requests alone (--single: one run, session 9's method,
fixed costs spread over the requests). drover runs its drover-php zygote under valgrind through a
wrapper script beside a copy of the drover binary (the master runs natively); php-fpm runs
whole under valgrind (its children are forks). Both read the same php.ini and conf.d.

    python3 benches/callgrind.py                        # WordPress's front page, 25 requests
    python3 benches/callgrind.py --app symfony --requests 100   # the Symfony app's /hello/bench
    python3 benches/callgrind.py --requests 50 --keep   # keep the profiles (callgrind_annotate)
    python3 benches/callgrind.py --app symfony --requests 100 --libphp /var/lib/drover/libphp/libphp8.2.so

drover-php runs Debian's libphp (its pool's [env] sets LD_LIBRARY_PATH = "/usr/lib");
--libphp FILE adds drover-php-direct, whose pool's LD_LIBRARY_PATH is FILE's folder (the
copy `drover-php --bind-direct` writes, docs/php.md, "PHP's calls bound directly").

The apps: `wordpress` (compare.py's php-wordpress: wordpress.py's site, its front page) and
`symfony` (compare.py's php-symfony: symfony.py, its route /hello/bench).

Prints, per backend: instructions per request for the whole worker (its loop, PHP's
request startup and shutdown included), inside php_execute_script (the script; Debian's
php-fpm8.2 is stripped of the smaller functions' names) and outside it (the worker's loop,
the SAPI, PHP's request startup and shutdown), and drover-php's ratios to php-fpm. Runs as
root (the pools run as www-data); stops what it started, by PID.
"""

import argparse
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
from harness import Backend, behind_nginx  # noqa: E402
import symfony  # noqa: E402
import wordpress  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FPM = "/usr/sbin/php-fpm8.2"
TITLES = {"wordpress": "WordPress front page", "symfony": "Symfony 5.4 app's /hello/bench"}


def drover_backend(work, release, requests, name="drover-php", libdir="/usr/lib"):
    """drover with one drover-php pool whose zygote (and so its workers) runs under
    callgrind: a copy of drover beside a drover-php that execs valgrind. The zygote loads
    the libphp of libdir (LD_LIBRARY_PATH)."""
    folder = f"{work}/{name}"
    os.makedirs(f"{folder}/bin", exist_ok=True)
    os.makedirs(f"{folder}/pools.d", exist_ok=True)
    shutil.copy2(f"{release}/drover", f"{folder}/bin/drover")
    with open(f"{folder}/bin/drover-php", "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={work}/profiles/cg-{name}.%p "
                f"{release}/drover-php \"$@\"\n")
    os.chmod(f"{folder}/bin/drover-php", 0o755)
    with open(f"{folder}/drover.toml", "w") as f:
        f.write("")
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(f"""listen = "{work}/{name}.sock"
listen_mode = "0666"
user = "www-data"
group = "www-data"
[pm]
mode = "static"
max_children = 1
max_requests = {requests}
[env]
LD_LIBRARY_PATH = "{libdir}"
[php]
runtime = "embed"
""")
    return Backend(name, [f"{folder}/bin/drover", "-c", f"{folder}/drover.toml"], f"unix:{work}/{name}.sock")


def fpm_backend(work, requests):
    with open(f"{work}/fpm.conf", "w") as f:
        f.write(f"""[global]
error_log = /proc/self/fd/2
daemonize = no
log_level = notice
[www]
user = www-data
group = www-data
listen = {work}/fpm.sock
listen.mode = 0666
pm = static
pm.max_children = 1
pm.max_requests = {requests}
""")
    return Backend("php-fpm", ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/profiles/cg-fpm.%p",
                               FPM, "-y", f"{work}/fpm.conf", "-F", "-R"], f"unix:{work}/fpm.sock")


def second_worker(log_path, name):
    """The pid of the backend's second worker, from its log (None before it started):
    drover logs every worker's start, php-fpm only those it forks after the first."""
    text = open(log_path, errors="replace").read()
    if name.startswith("drover-php"):
        pids = re.findall(r"worker (\d+) started", text)[1:]
    else:
        pids = re.findall(r"child (\d+) started", text)
    return int(pids[0]) if pids else None


class Symfony:
    """compare.py's php-symfony app (symfony.py), its cache built before either backend
    starts."""

    path = symfony.PATH
    params = ""

    def __init__(self, work):
        symfony.install(work)
        self.front = f"{work}/www/{symfony.FRONT}"

    def stop(self):
        pass


def run(work, backend, site, requests):
    """2 × requests through nginx on one connection; the profile of the second worker."""
    log_path = f"{work}/{backend.name}.log"
    prefix = f"cg-{backend.name}" if backend.name.startswith("drover-php") else "cg-fpm"
    path = site.path
    with open(log_path, "w") as log, behind_nginx(work, backend, log, site.front, site.params) as port:
        backend.start(log)
        deadline = time.time() + 300
        conn = None
        while time.time() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.5)
        for _ in range(2 * requests - 1):
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                sys.exit(f"{backend.name}: {path} answered {response.status}")
        pid = second_worker(log_path, backend.name)
        if pid is None:
            sys.exit(f"{backend.name}: no second worker in {log_path}")
        profile = f"{work}/profiles/{prefix}.{pid}"
        while not os.path.exists(profile) and time.time() < deadline:
            time.sleep(0.5)
        # Let callgrind finish writing the file before the backend stops.
        time.sleep(2)
    return profile


def counts(profile):
    """(total instructions, php_execute_script's inclusive instructions) of a profile."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", profile],
                         capture_output=True, text=True, check=True).stdout
    number = lambda pattern: int(re.search(pattern, out, re.M).group(1).replace(",", ""))
    return (number(r"^\s*([\d,]+) \(100.0%\)\s+PROGRAM TOTALS"),
            number(r"^\s*([\d,]+) \([\d.]+%\)\s+\S*:php_execute_script\b"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=25,
                    help="max_requests: the requests the profiled worker serves (and twice that in the second run)")
    ap.add_argument("--release", default=os.path.join(ROOT, "target", "release"),
                    help="the folder with drover and drover-php")
    ap.add_argument("--keep", action="store_true", help="keep the work folder with the profiles")
    ap.add_argument("--app", choices=sorted(TITLES), default="wordpress", help="the app whose page is profiled")
    ap.add_argument("--libphp", metavar="FILE",
                    help="also drover-php-direct: drover-php on FILE's libphp (its folder in LD_LIBRARY_PATH), "
                         "e.g. /var/lib/drover/libphp/libphp8.2.so")
    ap.add_argument("--single", action="store_true",
                    help="one worker of --requests per backend (session 9's method), not two")
    args = ap.parse_args()
    if args.libphp and not os.path.isfile(args.libphp):
        sys.exit(f"no {args.libphp} (drover-php --bind-direct writes /var/lib/drover/libphp/libphp8.2.so)")
    # Stopped by SIGTERM, it still stops what it started (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))
    work = tempfile.mkdtemp(prefix="drover-callgrind-")
    os.chmod(work, 0o755)
    # The workers, www-data, write their own profiles when they exit.
    os.makedirs(f"{work}/profiles")
    os.chmod(f"{work}/profiles", 0o1777)
    if args.app == "wordpress":
        with open(f"{work}/setup.log", "w") as log:
            site = wordpress.Site(work, log)
        site.front, site.path = wordpress.FRONT, "/"
    else:
        site = Symfony(work)
    try:
        figures = {}
        makers = [lambda n: fpm_backend(work, n), lambda n: drover_backend(work, args.release, n)]
        if args.libphp:
            libdir = os.path.dirname(os.path.abspath(args.libphp))
            makers.append(lambda n: drover_backend(work, args.release, n, "drover-php-direct", libdir))
        for make in makers:
            # The second worker's profile holds what it inherited at its fork (the parent's
            # counts: PHP's startup) and its own start and exit besides its requests: a
            # worker of R requests and one of 2R, and the difference over R, leave only the
            # requests (--single: the one worker's counts over R, fixed costs included).
            runs = {}
            for n in (args.requests,) if args.single else (args.requests, 2 * args.requests):
                backend = make(n)
                print(f"# {backend.name}: {2 * n} requests under callgrind", file=sys.stderr, flush=True)
                runs[n] = counts(run(work, backend, site, n))
            if args.single:
                total, script = (x / args.requests for x in runs[args.requests])
            else:
                total, script = ((b - a) / args.requests for a, b in zip(runs[args.requests], runs[2 * args.requests]))
            figures[backend.name] = {"the whole worker": total, "php_execute_script": script,
                                     "outside php_execute_script": total - script}
    finally:
        site.stop()
    how = ("the second worker's counts over its requests, its start and exit and what it inherited from the "
           "fork included" if args.single else
           f"the difference between a worker of {2 * args.requests} requests and one of {args.requests}, "
           f"over {args.requests}: the requests alone")
    print(f"{TITLES[args.app]}, instructions per request (callgrind, OPcache warm; {how}):\n")
    ours = [name for name in figures if name != "php-fpm"]
    print("| instructions per request | " + " | ".join(ours) + " | php-fpm | "
          + " | ".join(f"{name} / php-fpm" for name in ours) + " |")
    print("|---" * (2 * len(ours) + 2) + "|")
    for key in figures["php-fpm"]:
        theirs = figures["php-fpm"][key]
        print(f"| {key} | " + " | ".join(f"{figures[name][key]:,.0f}" for name in ours) + f" | {theirs:,.0f} | "
              + " | ".join(f"{figures[name][key] / theirs:.3f}" for name in ours) + " |")
    if args.keep:
        print(f"\n(profiles in {work})", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
