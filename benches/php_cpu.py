#!/usr/bin/env python3
"""CPU time per request of the PHP backends, one request at a time: drover-php, drover-cgi
and php-fpm, each one static worker on the Symfony app (compare.py's php-symfony, its
cache built first: symfony.py), all running at once behind one nginx with a port each.
Rounds of --requests sequential requests over one keep-alive connection go to each
backend in turn (the order rotated every round). Each process's on-CPU time comes from
/proc/PID/task/*/schedstat (nanoseconds, every thread), read before and after its round.
One request at a time, the worker never waits behind another one: on a shared machine
this moves less than wrk's throughput (BENCHMARKS.md, 2026-12-02).

    python3 benches/php_cpu.py                  # 10 rounds of 100 requests, about 20 s
    python3 benches/php_cpu.py --rounds 20 --release OTHER/target/release
    python3 benches/php_cpu.py --direct         # and drover-php on the copy bound directly
    python3 benches/php_cpu.py --direct --app wordpress --requests 20   # WordPress's front page
    python3 benches/php_cpu.py --worker --worker-baseline OLD/target/release   # and PHP worker mode

The backend drover-php runs Debian's libphp (its pool's [env] sets LD_LIBRARY_PATH =
"/usr/lib", so the master leaves it alone); with --direct, drover-php-direct runs the copy
`drover-php --bind-direct` wrote into /var/lib/drover/libphp, which the master picks itself
(docs/php.md, "PHP's calls bound directly"). Both are checked to map the libphp meant.

Prints per backend the median over the rounds of the CPU time per request of all its
processes (drover: master, zygote, worker), of its busiest process (the worker), the wall
time per request, and the ratio to php-fpm. Runs as root (the pools run as www-data);
stops what it started, by PID.
"""

import argparse
import http.client
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
from harness import descendants, free_port, wait_answer  # noqa: E402
import symfony  # noqa: E402
import wordpress  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FPM = "/usr/sbin/php-fpm8.2"
DEBIAN_LIBPHP = "/usr/lib"
DIRECT_LIBPHP = "/var/lib/drover/libphp"


def drover(work, name, binary, runtime, libphp=None, php=""):
    folder = f"{work}/{name}"
    os.makedirs(f"{folder}/pools.d")
    open(f"{folder}/drover.toml", "w").close()
    # libphp: a folder whose libphp8.2.so drover-php's zygote loads instead of Debian's, and
    # whose conf.d, if it has one, replaces PHP's scan folder; "" for none (the master then
    # picks the copy bound directly if there is one).
    env = ""
    if libphp:
        env = f'[env]\nLD_LIBRARY_PATH = "{libphp}"\n'
        if os.path.isdir(f"{libphp}/conf.d"):
            env += f'PHP_INI_SCAN_DIR = "{libphp}/conf.d"\n'
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(f'listen = "{folder}/sock"\nlisten_mode = "0666"\nuser = "www-data"\n[pm]\nmode = "static"\n'
                f'max_children = 1\n{env}[php]\nruntime = "{runtime}"\n{php}')
    return [binary, "-c", f"{folder}/drover.toml"], f"{folder}/sock"


def fpm(work, name):
    folder = f"{work}/{name}"
    os.makedirs(folder)
    with open(f"{folder}/fpm.conf", "w") as f:
        f.write(f"[global]\nerror_log = /proc/self/fd/2\ndaemonize = no\n[www]\nuser = www-data\n"
                f"listen = {folder}/sock\nlisten.mode = 0666\npm = static\npm.max_children = 1\n")
    return [FPM, "-y", f"{folder}/fpm.conf", "-F", "-R"], f"{folder}/sock"


def on_cpu_ns(pid):
    """The on-CPU time of every thread of pid, in nanoseconds (0 once it is gone)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    except OSError:
        pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=100, help="sequential requests per backend per round")
    ap.add_argument("--release", default=os.path.join(ROOT, "target", "release"),
                    help="the folder with drover and drover-php")
    ap.add_argument("--libphp", action="append", default=[], metavar="LABEL=DIR",
                    help="one more drover-php backend, LABEL, whose zygote loads DIR/libphp8.2.so "
                         "(LD_LIBRARY_PATH in the pool's [env]) and reads DIR/conf.d if there is one "
                         "(PHP_INI_SCAN_DIR); repeatable")
    ap.add_argument("--libphp-release", help="the folder with drover and drover-php for the --libphp backends "
                    "(a drover-php built against that libphp's headers: PHP_CONFIG); default --release")
    ap.add_argument("--no-cgi", action="store_true", help="leave drover-cgi out")
    ap.add_argument("--worker", action="store_true",
                    help="and the Symfony app in PHP worker mode (its public/worker.php), booted in the worker and "
                         "in the zygote (worker_boot = \"zygote\")")
    ap.add_argument("--worker-baseline", metavar="DIR",
                    help="with --worker: the same two worker-mode backends on DIR/drover (another build), labelled "
                         "'(baseline)'")
    ap.add_argument("--app", choices=["symfony", "wordpress"], default="symfony",
                    help="symfony: symfony.py's /hello/bench; wordpress: wordpress.py's front page "
                         "(MariaDB in the work folder; its pages differ, so bodies are not compared)")
    ap.add_argument("--direct", action="store_true",
                    help=f"add drover-php-direct: drover-php on the copy of libphp bound directly in {DIRECT_LIBPHP} "
                         "(drover-php --bind-direct)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the pools run as www-data")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))
    work = tempfile.mkdtemp(prefix="drover-php-cpu-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/www")
    log = open(f"{work}/log", "w")
    site = None
    if args.app == "wordpress":
        site = wordpress.Site(work, log)
        front, path, params = wordpress.FRONT, "/", site.params
    else:
        symfony.install(work)
        front, path, params = f"{work}/www/{symfony.FRONT}", symfony.PATH, ""
    binary = os.path.join(args.release, "drover")
    specs = {"drover-php": drover(work, "drover-php", binary, "embed", DEBIAN_LIBPHP),
             "drover-cgi": drover(work, "drover-cgi", binary, "cgi"),
             "php-fpm": fpm(work, "php-fpm")}
    if args.no_cgi:
        del specs["drover-cgi"]
    folders = {"drover-php": DEBIAN_LIBPHP}
    if args.direct:
        if not os.path.exists(f"{DIRECT_LIBPHP}/libphp8.2.so"):
            sys.exit(f"no {DIRECT_LIBPHP}/libphp8.2.so: run drover-php --bind-direct")
        specs["drover-php-direct"] = drover(work, "drover-php-direct", binary, "embed")
        folders["drover-php-direct"] = DIRECT_LIBPHP
    if args.worker:
        if args.app != "symfony":
            sys.exit("--worker runs the Symfony app")
        script = f"{work}/www/{symfony.WORKER}"
        builds = [("", binary)]
        if args.worker_baseline:
            builds.append((" (baseline)", os.path.join(args.worker_baseline, "drover")))
        for label, build in builds:
            for boot, lines in (("", ""), (", zygote boot", 'worker_boot = "zygote"\n')):
                name = f"worker mode{boot}{label}"
                specs[name] = drover(work, f"worker{len(specs)}", build, "embed", DEBIAN_LIBPHP,
                                     f'worker = "{script}"\n{lines}')
                folders[name] = DEBIAN_LIBPHP
    for i, spec in enumerate(args.libphp):
        label, _, folder = spec.partition("=")
        folders[f"drover-php ({label})"] = os.path.abspath(folder)
        other = os.path.join(args.libphp_release or args.release, "drover")
        specs[f"drover-php ({label})"] = drover(work, f"libphp-{i}", other, "embed", os.path.abspath(folder))
    ports = {name: free_port() for name in specs}
    servers = "\n".join(
        f"server {{ listen 127.0.0.1:{ports[name]}; location / {{ include /etc/nginx/fastcgi.conf; "
        f"fastcgi_param SCRIPT_FILENAME {front}; fastcgi_param SCRIPT_NAME /index.php; {params} "
        f"fastcgi_pass unix:{sock}; }} }}" for name, (_, sock) in specs.items())
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(f"daemon off; worker_processes 1; user root root; error_log {work}/nginx.err; pid {work}/nginx.pid;\n"
                f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; client_body_temp_path {work}/ctmp; "
                f"fastcgi_temp_path {work}/ftmp;\n{servers}\n}}\n")
    nginx = subprocess.Popen(["nginx", "-c", f"{work}/nginx.conf", "-p", work], stdout=log, stderr=log)
    procs = {}
    try:
        for name, (argv, _) in specs.items():
            procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        conns = {}
        for name in specs:
            if not wait_answer(f"http://127.0.0.1:{ports[name]}{path}", time.time() + 60):
                sys.exit(f"{name}: no answer within 60 s (see {work}/log)")
            conns[name] = http.client.HTTPConnection("127.0.0.1", ports[name], timeout=60)
        for name, folder in folders.items():
            maps = ""
            for pid in descendants(procs[name].pid):
                try:
                    maps += open(f"/proc/{pid}/maps").read()
                except OSError:
                    pass
            if f"{folder}/libphp" not in maps:
                sys.exit(f"{name}: no process maps {folder}/libphp*")

        def get(name):
            conns[name].request("GET", path)
            response = conns[name].getresponse()
            body = response.read()
            if response.status != 200:
                sys.exit(f"{name}: {path} answered {response.status}")
            return body

        bodies = {}
        for name in specs:
            for _ in range(50):
                bodies[name] = get(name)
        if args.app == "symfony" and len(set(bodies.values())) != 1:
            sys.exit(f"the backends' bodies differ: {bodies}")
        rows = {name: [] for name in specs}
        names = list(specs)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                pids = descendants(procs[name].pid)
                before = {pid: on_cpu_ns(pid) for pid in pids}
                started = time.perf_counter()
                for _ in range(args.requests):
                    get(name)
                wall = time.perf_counter() - started
                used = {pid: on_cpu_ns(pid) - before[pid] for pid in pids}
                rows[name].append((sum(used.values()) / args.requests / 1000,
                                   max(used.values()) / args.requests / 1000, wall / args.requests * 1e6))
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait()
        if site:
            site.stop()
    median = {name: [statistics.median(row[i] for row in rows[name]) for i in range(3)] for name in rows}
    title = "WordPress's front page" if args.app == "wordpress" else "Symfony /hello/bench"
    print(f"{title}, one request at a time: {args.rounds} rounds of {args.requests} requests per "
          "backend, medians over the rounds.\n")
    print("| backend | CPU µs/request (all processes) | worker's CPU µs/request | wall µs/request | CPU ratio to php-fpm |")
    print("|---|---|---|---|---|")
    for name, (cpu, worker, wall) in median.items():
        print(f"| {name} | {cpu:.0f} | {worker:.0f} | {wall:.0f} | {cpu / median['php-fpm'][0]:.3f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
