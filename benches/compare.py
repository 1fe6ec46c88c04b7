#!/usr/bin/env python3
"""End-to-end comparison of drover against its peers, behind the same nginx.

Each backend runs the same app with the same number of workers on a unix socket (or a
loopback port) behind one nginx; wrk loads it through nginx; the PSS of every process of
the backend is summed from /proc/PID/smaps_rollup while the load runs. Backends run one
at a time, so they never compete for the machine. The output is one markdown table per
kind of workload, with drover's ratio against each peer measured in this same run:
absolute figures on a shared machine mean little, ratios from one run mean more.

    python3 benches/compare.py                      # everything, 10 s per point
    python3 benches/compare.py --workloads wsgi,flask --duration 5 --connections 50
    python3 benches/compare.py --rounds 3 --duration 5      # the median of 3, order rotated
    python3 benches/compare.py --baseline /path/to/old/target/release/drover   # before/after
    python3 benches/compare.py --workloads php,php-medium,php-pss,php-ondemand --connections 50

The workloads:

- php, php-medium (hello world; 1,000 records as JSON): throughput of a static pool of
  --workers. drover runs it twice, on its own SAPI ("drover-php", `runtime = "embed"`)
  and on php-cgi ("drover-cgi", `runtime = "cgi"`), beside php-fpm and php-cgi under
  spawn-fcgi; the ratios are drover-php's.
- php-symfony: the same pools serving a Symfony 5.4 micro-kernel app (the test suite's,
  tests/apps/symfony, on Debian's php-symfony-framework-bundle and twig bundle, installed
  when missing; its cache built with PHP's CLI before any backend starts: symfony.py),
  its route /hello/{name}: the autoloader, the kernel, the router, the controller and
  Response::send(), which calls fastcgi_finish_request().
- php-symfony-worker, php-twig-worker: the same app's /hello/{name} and its Twig page
  (/page), served by drover in PHP worker mode (`[php] worker`: the kernel booted once per
  worker, tests/apps/symfony/public/worker.php; and with `worker_boot = "zygote"`, booted
  once in the zygote, the workers forked from it) beside drover-php and php-fpm in classic
  mode (a kernel per request).
- php-wordpress: the same pools serving Debian's WordPress 6.1 on a MariaDB server of the
  run's own (wordpress.py; the packages installed when missing), its front page as an
  anonymous visitor sees it: the default theme, the first post, the queries.
- wsgi, flask: throughput of a static pool, drover against uWSGI, gunicorn and granian.
- asgi, http-wsgi, http-asgi: a FastAPI app behind nginx (drover over FastCGI, the peers
  over HTTP), and the WSGI and FastAPI apps with no nginx (wrk straight at each server's
  HTTP listener): drover against uvicorn, gunicorn and granian (python_peers.py).
- https-wsgi: http-wsgi over TLS, drover against granian's TLS (python_peers.py);
  https-wsgi-handshake: the same with a new connection (a full handshake) per request;
  https-asgi, https-asgi-handshake: the two with the FastAPI app on an ASGI pool, against
  granian --interface asgi with its TLS.
- php-pss: memory after --pss-requests requests spread evenly over 20 distinct PHP pages
  (each with its own classes and functions, so that OPcache holds 20 scripts), in a
  static pool of --workers and in a dynamic pool of twice that (start_servers =
  max_spare_servers = max_children, so that all of them run), drover-php and drover-cgi
  against php-fpm with the same pm keys: the PSS summed over every process of the
  backend (master, zygote, workers) once the load is over.
- php-ondemand: an ondemand pool (max_children = --workers, process_idle_timeout 1 s),
  nothing running: the time from exec to the backend's "ready" log line, the first
  request after it (at once, or --ondemand-delay ms later), the first request after
  process_idle_timeout retired that worker (a new worker: its pid is checked), and the
  next one (a warm worker).

php_pools.py holds the PHP pools and these two measurements; harness.py what every
measurement shares (processes, nginx, wrk).

The ASGI workloads (asgi*, http-asgi*) have rows that bound what any server can reach:
"nginx return 200" (nginx answering by itself; the asgi* workloads), and "app alone" and "app
alone (a Task each)" (asgi_app_floor.py: the same app awaited in a loop with no server, its
CPU per request); each takes its turn in the rounds like a backend. Name them in
--backends to run them; the lines under the targets then say what they bound.

"CPU µs/req" is the backend's own CPU time (every process of it, from /proc/PID/stat, user
+ system, reaped children included) over the load, divided by the requests answered: nginx
and wrk, which take most of a 2-core machine, are not in it: they have columns of their
own, over the same window (nginx's master and its one worker from /proc; wrk from this
process's reaped-children rusage).

Loopback only; every load is bounded: by --duration, php-pss by its request count and a
120 s cap, php-ondemand by 15 s per wait. Stops everything it started, by its PID.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in benches/ for the two modules beside this one
from harness import Backend, behind_nginx, cpu_ticks, drover_backend, free_port, pss_kib, wait_answer, wrk  # noqa: E402
import php_pools  # noqa: E402
import python_peers  # noqa: E402
import symfony  # noqa: E402
import wordpress  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

APPS = {
    "hello.py": """\
def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"Hello, world!\\n"]
""",
    "flaskapp.py": """\
from flask import Flask
app = Flask(__name__)

@app.route("/")
def hello():
    return "Hello, world!\\n"
""",
    "hello.php": "<?php echo \"Hello, world!\\n\";\n",
    "medium.php": """<?php
$items = [];
for ($i = 0; $i < 1000; $i++) {
    $items[] = ['id' => $i, 'name' => "item $i", 'tags' => ['a', 'b'], 'price' => $i * 1.5];
}
header('Content-Type: application/json');
echo json_encode($items);
""",
}

# php-symfony's app, and the worker-mode workloads': the test suite's Symfony 5.4 micro
# kernel on Debian's packages (tests/apps/symfony), copied into www/symfony.
SYMFONY_AUTOLOAD = symfony.AUTOLOAD
SYMFONY_FRONT = symfony.FRONT
SYMFONY_WORKER = symfony.WORKER

# PHP worker mode (issue 20): the Symfony app's hello route and its Twig page, drover in
# worker mode beside drover-php classic and php-fpm classic.
WORKER_THROUGHPUT = ("php-symfony-worker", "php-twig-worker")
THROUGHPUT = ("php", "php-medium", "php-symfony", "php-wordpress", "wsgi", "flask") + WORKER_THROUGHPUT \
    + python_peers.WORKLOADS
PHP_THROUGHPUT = ("php", "php-medium", "php-symfony", "php-wordpress")
# The real apps: issue 24's target is 1.0x php-fpm on them.
REAL_APPS = ("php-symfony", "php-wordpress")
WORKLOADS = THROUGHPUT + ("php-pss", "php-ondemand")


def backends_for(workload, work, workers, drover, baseline=""):
    sock = lambda name: f"{work}/{name}.sock"
    py_app = {"wsgi": ("hello", "application"), "flask": ("flaskapp", "app")}
    out = []
    if workload in python_peers.WORKLOADS:
        return python_peers.backends(workload, work, workers, drover, baseline)
    if workload in py_app:
        module, attr = py_app[workload]
        pool = f"""listen = "{sock('drover')}"
listen_mode = "0666"
{'user = "root"' if os.geteuid() == 0 else ''}
[pm]
mode = "static"
max_children = {workers}
[python]
app = "{module}:{attr}"
python_path = ["{work}/apps"]
"""
        out.append(drover_backend(work, drover, pool, sock("drover")))
        if baseline:
            out.append(drover_backend(work, baseline, pool, sock("drover"), "drover (baseline)"))
        # The same pool with `warmup`: one request through the app in the zygote before fork.
        out.append(drover_backend(work, drover, pool + 'warmup = ["/"]\n', sock("drover"), "drover + warmup"))
        out.append(Backend("uWSGI (FastCGI)", ["uwsgi", "--fastcgi-socket", sock("uwsgi"), "--chmod-socket=666",
                                              "--master", "--processes", str(workers), "--module", f"{module}:{attr}",
                                              "--disable-logging", "--die-on-term", "--need-app", "--listen", "511"],
                           f"unix:{sock('uwsgi')}", cwd=f"{work}/apps"))
        out.append(Backend("gunicorn sync", ["gunicorn", "-w", str(workers), "-b", f"unix:{sock('gunicorn')}",
                                             f"{module}:{attr}"], f"http://unix:{sock('gunicorn')}:", cwd=f"{work}/apps",
                           kind="http"))
        out.append(Backend("gunicorn gthread", ["gunicorn", "-w", str(workers), "-k", "gthread", "--threads", "4", "-b",
                                                f"unix:{sock('gthread')}", f"{module}:{attr}"],
                           f"http://unix:{sock('gthread')}:", cwd=f"{work}/apps", kind="http"))
        port = free_port()
        out.append(Backend("granian (HTTP)", ["granian", "--interface", "wsgi", "--workers", str(workers), "--host",
                                              "127.0.0.1", "--port", str(port), "--no-ws", f"{module}:{attr}"],
                           f"http://127.0.0.1:{port}", cwd=f"{work}/apps", kind="http"))
    elif workload in WORKER_THROUGHPUT:
        pm = {"mode": "static", "max_children": workers}
        out.append(php_pools.worker_backend(work, drover, pm, f"{work}/www/{SYMFONY_WORKER}"))
        out.append(php_pools.worker_backend(work, drover, pm, f"{work}/www/{SYMFONY_WORKER}", zygote=True))
        out += [b for b in php_pools.php_backends(work, drover, baseline, pm) if b.name != "drover-cgi"]
        return out
    elif workload in PHP_THROUGHPUT:
        # drover-php, drover-cgi, the baseline, php-fpm: the same static pool.
        out += php_pools.php_backends(work, drover, baseline, {"mode": "static", "max_children": workers})
        if shutil.which("spawn-fcgi"):
            argv = ["spawn-fcgi", "-n", "-s", sock("spawn"), "-M", "0666", "-F", "1"]
            if os.geteuid() == 0:
                argv += ["-u", "www-data"]
            out.append(Backend("php-cgi (spawn-fcgi)", argv + ["--", shutil.which("php-cgi")], f"unix:{sock('spawn')}",
                               env={"PHP_FCGI_CHILDREN": str(workers), "PHP_FCGI_MAX_REQUESTS": "0"}))
    out.append(Backend("nginx return 200", [], "", kind="return"))
    return out


def run_point(work, backend, workload, connections, duration, log, site=None):
    """Starts nginx (+ the backend), measures start-up, warms up, loads, samples PSS.
    `site`: php-wordpress's WordPress (wordpress.Site)."""
    path = {"php": "/hello.php", "php-medium": "/medium.php", "php-symfony": "/hello/bench",
            "php-symfony-worker": "/hello/bench", "php-twig-worker": "/page"}.get(workload, "/")
    # Worker mode runs its worker script whatever the request names; SCRIPT_FILENAME and
    # SCRIPT_NAME are the classic front controller's for every backend.
    front = {"php-symfony": SYMFONY_FRONT, "php-symfony-worker": SYMFONY_FRONT, "php-twig-worker": SYMFONY_FRONT,
             "php-wordpress": wordpress.FRONT}.get(workload)
    params = site.params if workload == "php-wordpress" else ""
    if backend.kind == "app":
        return python_peers.run_app_alone(backend, log)
    with behind_nginx(work, backend, log, front, params) as port:
        url = f"{backend.scheme}://127.0.0.1:{port}{path}"
        # Start-up is timed from the backend's exec, with nginx already listening.
        started = time.time()
        if backend.argv:
            backend.start(log)
        if not wait_answer(url, time.time() + 30):
            return "no answer within 30 s"
        startup_ms = (time.time() - started) * 1000
        # Warm-up: caches, lazy imports. WordPress's page takes a worker 100-250 ms here:
        # the requests 50 connections leave queued after a 1 s warm-up would take the
        # workers for the first seconds of the load (no answer in a 5 s run), so it warms
        # up on 4 connections.
        wrk(url, 4 if workload == "php-wordpress" else connections, 1, backend.close)
        samples = []
        pid = backend.proc.pid if backend.proc else None

        def sample():
            time.sleep(duration / 2)
            if pid:
                samples.append(pss_kib(pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        # nginx's master (its pid file, written by now), whose tree holds its one worker.
        nginx = None
        if backend.kind != "direct":
            with open(f"{work}/nginx.pid") as f:
                nginx = int(f.read())
        ticks = cpu_ticks(pid) if pid else 0
        nginx_ticks = cpu_ticks(nginx) if nginx else 0
        # wrk is the one child this process reaps during the load.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        rps, p50, p99, errors = wrk(url, connections, duration, backend.close)
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The backend's own CPU per request (nginx and wrk excluded): on 2 cores they take
        # most of the machine, and this is where backends differ.
        tick, answered = os.sysconf("SC_CLK_TCK"), rps * duration
        used = (cpu_ticks(pid) - ticks) / tick if pid else 0
        cpu_us = used * 1e6 / answered if pid and rps else None
        # nginx's and wrk's, over the same window: what the FastCGI module costs nginx
        # against its proxy module, and what is left of the cores for the backend.
        nginx_us = (cpu_ticks(nginx) - nginx_ticks) / tick * 1e6 / answered if nginx and rps else None
        wrk_s = (reaped.ru_utime + reaped.ru_stime) - (children.ru_utime + children.ru_stime)
        wrk_us = wrk_s * 1e6 / answered if rps else None
        sampler.join()
        return dict(rps=rps, p50=p50, p99=p99, errors=errors, pss=samples[0] / 1024 if samples else None,
                    startup=startup_ms, cpu_us=cpu_us, nginx_us=nginx_us, wrk_us=wrk_us)


def points(workload, work, args, drover, log, site=None):
    """The points of one workload: (variant, backends, measure, the key of the median run),
    where measure(backend) runs the backend once: a dict of figures, or why there are none."""
    if workload in THROUGHPUT:
        for connections in [int(c) for c in args.connections.split(",")]:
            yield (connections, backends_for(workload, work, args.workers, drover, args.baseline),
                   lambda b, c=connections: run_point(work, b, workload, c, args.duration, log, site), "rps")
    elif workload == "php-pss":
        connections = int(args.connections.split(",")[0])
        for label, pm in php_pools.pss_pools(args.workers):
            yield (label, php_pools.php_backends(work, drover, args.baseline, pm),
                   lambda b: php_pools.run_pss(work, b, args.pss_requests, connections, log), "pss")
    elif workload == "php-ondemand":
        yield (f"ondemand {args.workers}",
               php_pools.php_backends(work, drover, args.baseline, php_pools.ondemand_pm(args.workers)),
               lambda b: php_pools.run_ondemand(work, b, log, args.ondemand_delay), "first_ms")


def ensure_tools(workloads):
    missing_apt = [pkg for tool, pkg in [("nginx", "nginx"), ("wrk", "wrk"), ("php-cgi", "php-cgi"),
                                         ("spawn-fcgi", "spawn-fcgi")] if not shutil.which(tool)]
    if not any(shutil.which(f"php-fpm8.{m}") for m in range(9)) and not shutil.which("php-fpm"):
        missing_apt.append("php-fpm")
    if any(w in workloads for w in ("php-symfony",) + WORKER_THROUGHPUT) and not os.path.exists(SYMFONY_AUTOLOAD):
        missing_apt += ["php-symfony-framework-bundle", "php-symfony-twig-bundle", "php-twig"]
    if "php-wordpress" in workloads:
        missing_apt += wordpress.missing()
    if missing_apt and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing_apt], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    missing_pip = [pkg for tool, pkg in [("gunicorn", "gunicorn"), ("uwsgi", "uwsgi"), ("granian", "granian")]
                   if not shutil.which(tool)]
    if any(w in python_peers.WORKLOADS for w in workloads):
        missing_pip += [pkg for pkg in python_peers.PIP if pkg not in missing_pip and not _importable(pkg)]
    try:
        import flask  # noqa: F401
    except ImportError:
        missing_pip.append("flask")
    if missing_pip:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing_pip], check=True)


def _importable(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def build():
    """Builds the workspace (release profile, CARGO_TARGET_DIR honoured) and returns the path
    of drover, checking that drover-admin, drover-php and drover-python are beside it."""
    subprocess.run(["cargo", "build", "--workspace", "--release", "-q"], cwd=ROOT, check=True)
    release = os.path.join(ROOT, os.environ.get("CARGO_TARGET_DIR", "target"), "release")
    for binary in ("drover", "drover-admin", "drover-php", "drover-python"):
        if not os.access(os.path.join(release, binary), os.X_OK):
            sys.exit(f"{release}/{binary} is missing after the build")
    probe = subprocess.run([os.path.join(release, "drover-php"), "--probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"# drover-php cannot run PHP here, its rows will fail: {probe.stdout}{probe.stderr}", file=sys.stderr)
    return os.path.join(release, "drover")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma list of: {', '.join(WORKLOADS)}")
    ap.add_argument("--connections", default="50,200", help="wrk's connections, one point each (php-pss: the first)")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--pss-requests", type=int, default=10000, help="php-pss: the requests before PSS is read")
    ap.add_argument("--ondemand-delay", type=int, default=0,
                    help="php-ondemand: milliseconds between the ready line and the first request (0: at once, "
                         "as requests waiting on a restart would)")
    ap.add_argument("--backends", default="", help="comma list of backend names to run (default all)")
    ap.add_argument("--baseline", default="",
                    help="another drover binary (e.g. an earlier commit's target/release/drover, its "
                         "drover-python beside it), run as the backend 'drover (baseline)' in the same run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each point this many times, rotating the backends' order each round, "
                         "and report each backend's median run (by req/s; php-pss: by PSS; php-ondemand: "
                         "by first request)")
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        sys.exit(f"unknown workloads {', '.join(unknown)}: pick from {', '.join(WORKLOADS)}")
    ensure_tools(workloads)
    drover = build()
    work = tempfile.mkdtemp(prefix="drover-bench-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/apps")
    os.makedirs(f"{work}/www")
    for name, text in dict(APPS, **php_pools.scripts(), **python_peers.APPS).items():
        folder = "www" if name.endswith(".php") else "apps"
        with open(f"{work}/{folder}/{name}", "w") as f:
            f.write(text)
        os.chmod(f"{work}/{folder}/{name}", 0o644)
    # Its cache built now, so that no backend's OPcache holds what building it loaded.
    symfony.install(work, build=any(w in workloads for w in ("php-symfony",) + WORKER_THROUGHPUT))
    rows = []
    with open(f"{work}/bench.log", "w") as log:
        site = wordpress.Site(work, log) if "php-wordpress" in workloads else None
        try:
            measure_all(workloads, work, args, drover, log, site, rows)
        finally:
            if site:
                site.stop()
    print(report(rows, args))
    print(f"\n(work folder with logs: {work})", file=sys.stderr)


def measure_all(workloads, work, args, drover, log, site, rows):
    """Every point of every workload, each backend --rounds times: a row each in `rows`."""
    for workload in workloads:
        for variant, backends, measure, key in points(workload, work, args, drover, log, site):
            backends = [b for b in backends
                        if not args.backends or b.name in args.backends.split(",") or b.name.startswith("drover")]
            runs = {b.name: [] for b in backends}
            for r in range(args.rounds):
                # A shared machine drifts: rotate who goes first, so no backend always
                # runs in the same slot.
                shift = r % len(backends)
                for backend in backends[shift:] + backends[:shift]:
                    print(f"# {workload} {variant} round {r + 1}: {backend.name}", file=sys.stderr, flush=True)
                    runs[backend.name].append(measure(backend))
            results = {name: median_run(measured, key) for name, measured in runs.items()}
            rows.append((workload, variant, results))


def median_run(measured, key):
    """The run with the median `key`; when no run has figures, why the first one failed."""
    ok = sorted((r for r in measured if isinstance(r, dict)), key=lambda r: r[key])
    return ok[len(ok) // 2] if ok else measured[0]


def report(rows, args):
    """The table of each kind of workload that ran, then issue 12's targets."""
    parts = []
    for kind, render in [(THROUGHPUT, table), (("php-pss",), php_pools.pss_table),
                         (("php-ondemand",), php_pools.ondemand_table)]:
        chosen = [row for row in rows if row[0] in kind]
        if chosen:
            parts.append(render(chosen, args))
    parts.append(targets(rows))
    parts.append(python_peers.targets(rows))
    return "\n\n".join(p for p in parts if p)


def table(rows, args):
    rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
    lines = [f"wrk -t1, {args.duration} s per point{rounds}, {args.workers} workers each, through nginx (1 worker "
             "process; http-* workloads: no nginx, wrk straight at each server). Ratios: drover's (PHP: drover-php's) "
             "over the row's. nginx and wrk µs/req: their CPU over the same load; cores busy: req/s × (the "
             "backend's + nginx's + wrk's CPU per request). \"app alone\" rows: the app with no server, one "
             "process (asgi_app_floor.py), req/s its loop's on one core.",
             "",
             "| workload | conns | backend | req/s | p50 ms | p99 ms | errors | PSS MiB | start ms | CPU µs/req | nginx µs/req | wrk µs/req | cores busy | drover req/s ratio | drover PSS ratio | drover CPU ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def ratios(ours, r, template):
        if not ours or not r:
            return "", ""
        rps = f"{ours['rps'] / r['rps']:.2f}×" if r["rps"] else ""
        pss = f"{ours['pss'] / r['pss']:.2f}" if ours.get("pss") and r.get("pss") else ""
        return template.format(rps) if rps else "", template.format(pss) if pss else ""

    for workload, connections, results in rows:
        # The row the ratios are of: drover, drover-php in a PHP point, drover's worker mode
        # in a worker-mode point.
        ours_name = ("drover worker mode" if workload in WORKER_THROUGHPUT
                     else "drover-php" if workload in PHP_THROUGHPUT else "drover")
        ours, warm = results.get(ours_name), results.get("drover + warmup")
        ours, warm = (x if isinstance(x, dict) else None for x in (ours, warm))
        for name, r in results.items():
            if not isinstance(r, dict):
                lines.append(php_pools.failed([workload, str(connections), name], r, 16))
                continue
            ratio = pss_ratio = cpu_ratio = ""
            if ours and ours.get("cpu_us") and r.get("cpu_us") and name != ours_name:
                cpu_ratio = f"{ours['cpu_us'] / r['cpu_us']:.2f}"
            if name != ours_name and name != "drover + warmup" and not r.get("alone"):
                ratio, pss_ratio = ratios(ours, r, "{}")
                # drover with `warmup`, against the same peer, in brackets.
                warm_rps, warm_pss = ratios(warm, r, " ({} warmup)")
                ratio, pss_ratio = ratio + warm_rps, pss_ratio + warm_pss
            show = lambda key, form: form.format(r[key]) if r.get(key) is not None else "–"
            spent = [r.get(key) or 0 for key in ("cpu_us", "nginx_us", "wrk_us")]
            busy = f"{r['rps'] * sum(spent) / 1e6:.2f}" if not r.get("alone") and any(spent) else "–"
            lines.append(f"| {workload} | {connections} | {name} | {r['rps']:.0f} | {show('p50', '{:.2f}')} | "
                         f"{show('p99', '{:.2f}')} | {r['errors']} | {show('pss', '{:.1f}')} | "
                         f"{show('startup', '{:.0f}')} | {show('cpu_us', '{:.1f}')} | {show('nginx_us', '{:.1f}')} | "
                         f"{show('wrk_us', '{:.1f}')} | {busy} | {ratio} | {pss_ratio} | {cpu_ratio} |")
    return "\n".join(lines)


def targets(rows):
    """Issue 12's targets: drover-php against php-fpm, in this run."""
    lines = []
    met = lambda ok: "met" if ok else "**not met**"
    for workload, variant, results in rows:
        ours, fpm = results.get("drover-php"), results.get("php-fpm")
        if not isinstance(ours, dict) or not isinstance(fpm, dict):
            continue
        if workload in PHP_THROUGHPUT:
            if not fpm["rps"]:
                lines.append(f"- {workload}, {variant} connections: php-fpm answered nothing in the run")
                continue
            rps = ours["rps"] / fpm["rps"]
            # The real apps: issue 24's target (where PHP's own work dominates).
            want = 1.0 if workload in REAL_APPS else 1.05
            line = f"- {workload}, {variant} connections: req/s {rps:.2f}× php-fpm's (target ≥ {want:.2f}×: {met(rps >= want)})"
            if ours.get("cpu_us") and fpm.get("cpu_us"):
                cpu = ours["cpu_us"] / fpm["cpu_us"]
                line += f"; CPU per request {cpu:.2f}× (target ≤ 0.95×: {met(cpu <= 0.95)})"
            lines.append(line)
        elif workload == "php-pss":
            pss = ours["pss"] / fpm["pss"]
            lines.append(f"- php-pss, {variant}: PSS after the load {pss:.2f}× php-fpm's ({ours['pss']:.1f} against "
                         f"{fpm['pss']:.1f} MiB; target ≤ 1.0×: {met(pss <= 1.0)})")
    for (workload, variant, results), name in ((row, name) for row in rows
                                               for name in ("drover worker mode", "drover worker mode, zygote boot")):
        ours, fpm = results.get(name), results.get("php-fpm")
        if workload not in WORKER_THROUGHPUT or not isinstance(ours, dict) or not isinstance(fpm, dict) \
                or not fpm["rps"]:
            continue
        rps = ours["rps"] / fpm["rps"]
        line = f"- {workload}, {variant} connections, {name}: req/s {rps:.2f}× php-fpm's (issue 20: ≥ 3×: {met(rps >= 3)})"
        if ours.get("cpu_us") and fpm.get("cpu_us"):
            cpu = ours["cpu_us"] / fpm["cpu_us"]
            line += f"; CPU per request {cpu:.2f}× (≤ 0.3×: {met(cpu <= 0.3)})"
        if ours.get("pss") and fpm.get("pss"):
            pss = ours["pss"] / fpm["pss"]
            line += f"; PSS {pss:.2f}× (≤ 1.2×: {met(pss <= 1.2)})"
        lines.append(line)
    if not lines:
        return ""
    return "Against issue 12's targets (drover-php over php-fpm, this run):\n\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
