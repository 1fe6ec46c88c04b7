#!/usr/bin/env python3
"""End-to-end comparison of drover against its peers, behind the same nginx.

Each backend runs the same app with the same number of workers on a unix socket (or a
loopback port) behind one nginx; wrk loads it through nginx; the PSS of every process of
the backend is summed from /proc/PID/smaps_rollup while the load runs. Backends run one
at a time, so they never compete for the machine. The output is one markdown table with
drover's ratio against each peer measured in this same run: absolute figures on a shared
machine mean little, ratios from one run mean more.

    python3 benches/compare.py                      # everything, 10 s per point
    python3 benches/compare.py --workloads wsgi,flask --duration 5 --connections 50
    python3 benches/compare.py --rounds 3 --duration 5      # the median of 3, order rotated
    python3 benches/compare.py --baseline /path/to/old/target/release/drover   # before/after

"CPU µs/req" is the backend's own CPU time (every process of it, from /proc/PID/stat, user
+ system, reaped children included) over the load, divided by the requests answered: nginx
and wrk, which take most of a 2-core machine, are not in it.

Loopback only; every load is bounded by --duration. Stops everything it started.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    """pid and every process below it."""
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out += descendants(int(child))
    except OSError:
        pass
    return out


def pss_kib(pid):
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                m = re.search(r"^Pss:\s+(\d+)", f.read(), re.M)
                total += int(m.group(1)) if m else 0
        except OSError:
            pass
    return total


def cpu_ticks(pid):
    """CPU time (clock ticks, user + system) of pid and every process below it, with what
    their reaped children used: /proc/PID/stat fields 14-17."""
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total


class Backend:
    """How to start one peer for one workload; `upstream` is nginx's directive for it."""

    def __init__(self, name, argv, upstream, env=None, cwd=None, kind="fastcgi"):
        self.name, self.argv, self.upstream, self.env, self.cwd, self.kind = name, argv, upstream, env, cwd, kind
        self.proc = None

    def start(self, log):
        env = dict(os.environ, **(self.env or {}))
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd,
                                     start_new_session=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            pids = descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()


def nginx_conf(work, port, backend, path):
    if backend.kind == "return":
        location = "location / { return 200 \"Hello, world!\\n\"; }"
    elif backend.kind == "http":
        location = f"location / {{ proxy_pass {backend.upstream}; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}"
    else:
        location = (f"location / {{ include /etc/nginx/fastcgi.conf; fastcgi_param SCRIPT_FILENAME {work}/www$fastcgi_script_name; "
                    f"fastcgi_pass {backend.upstream}; }}")
    user = "user root root;" if os.geteuid() == 0 else ""
    return f"""daemon off; worker_processes 1; {user} error_log {work}/nginx.err; pid {work}/nginx.pid;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {work}/ctmp; fastcgi_temp_path {work}/ftmp; proxy_temp_path {work}/ptmp;
  server {{ listen 127.0.0.1:{port}; {location} }}
}}
"""


def wait_answer(url, deadline):
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return True
        except Exception:
            time.sleep(0.005)
    return False


def wrk(url, connections, duration):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", url],
                         capture_output=True, text=True, timeout=duration + 30).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def pct(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", out, re.M)
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors += sum(int(x) for x in m.groups()) if m else 0
    return rps, pct(50), pct(99), errors


def backends_for(workload, work, workers, drover, baseline=""):
    sock = lambda name: f"{work}/{name}.sock"
    py_app = {"wsgi": ("hello", "application"), "flask": ("flaskapp", "app")}
    out = []
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
    elif workload in ("php", "php-medium"):
        pool = f"""listen = "{sock('drover')}"
listen_mode = "0666"
{'user = "www-data"' if os.geteuid() == 0 else ''}
[pm]
mode = "static"
max_children = {workers}
[php]
"""
        out.append(drover_backend(work, drover, pool, sock("drover")))
        if baseline:
            out.append(drover_backend(work, baseline, pool, sock("drover"), "drover (baseline)"))
        fpm = f"""[global]
error_log = {work}/fpm.log
daemonize = no
[www]
{'user = www-data' if os.geteuid() == 0 else ''}
listen = {sock('fpm')}
listen.mode = 0666
pm = static
pm.max_children = {workers}
"""
        with open(f"{work}/fpm.conf", "w") as f:
            f.write(fpm)
        fpm_bin = shutil.which("php-fpm") or next((shutil.which(f"php-fpm8.{m}") for m in range(9, 0, -1)
                                                   if shutil.which(f"php-fpm8.{m}")), "php-fpm")
        out.append(Backend("php-fpm", [fpm_bin, "-y", f"{work}/fpm.conf", "-F"] + (["-R"] if os.geteuid() == 0 else []),
                           f"unix:{sock('fpm')}"))
        if shutil.which("spawn-fcgi"):
            argv = ["spawn-fcgi", "-n", "-s", sock("spawn"), "-M", "0666", "-F", "1"]
            if os.geteuid() == 0:
                argv += ["-u", "www-data"]
            out.append(Backend("php-cgi (spawn-fcgi)", argv + ["--", shutil.which("php-cgi")], f"unix:{sock('spawn')}",
                               env={"PHP_FCGI_CHILDREN": str(workers), "PHP_FCGI_MAX_REQUESTS": "0"}))
    out.append(Backend("nginx return 200", [], "", kind="return"))
    return out


def drover_backend(work, drover, pool, sock, name="drover"):
    folder = f"{work}/{re.sub(r'[^a-z0-9-]', '', name.replace('+', '-'))}"
    os.makedirs(f"{folder}/pools.d", exist_ok=True)
    with open(f"{folder}/drover.toml", "w") as f:
        f.write("")
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(pool)
    return Backend(name, [drover, "-c", f"{folder}/drover.toml"], f"unix:{sock}")


def run_point(work, backend, workload, connections, duration, log):
    """Starts nginx (+ the backend), measures start-up, warms up, loads, samples PSS."""
    port = free_port()
    path = {"php": "/hello.php", "php-medium": "/medium.php"}.get(workload, "/")
    url = f"http://127.0.0.1:{port}{path}"
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(nginx_conf(work, port, backend, path))
    nginx = subprocess.Popen(["nginx", "-c", f"{work}/nginx.conf", "-p", work], stdout=log, stderr=log)
    try:
        # Start-up is timed from the backend's exec, with nginx already listening.
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.005)
        started = time.time()
        if backend.argv:
            backend.start(log)
        if not wait_answer(url, time.time() + 30):
            return None
        startup_ms = (time.time() - started) * 1000
        wrk(url, connections, 1)  # warm-up: caches, lazy imports
        samples = []
        pid = backend.proc.pid if backend.proc else None

        def sample():
            time.sleep(duration / 2)
            if pid:
                samples.append(pss_kib(pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        ticks = cpu_ticks(pid) if pid else 0
        rps, p50, p99, errors = wrk(url, connections, duration)
        # The backend's own CPU per request (nginx and wrk excluded): on 2 cores they take
        # most of the machine, and this is where backends differ.
        used = (cpu_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK") if pid else 0
        cpu_us = used * 1e6 / (rps * duration) if pid and rps else None
        sampler.join()
        return dict(rps=rps, p50=p50, p99=p99, errors=errors, pss=samples[0] / 1024 if samples else None,
                    startup=startup_ms, cpu_us=cpu_us)
    finally:
        backend.stop()
        nginx.send_signal(signal.SIGQUIT)
        try:
            nginx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait()


def ensure_tools(workloads):
    missing_apt = [pkg for tool, pkg in [("nginx", "nginx"), ("wrk", "wrk"), ("php-cgi", "php-cgi"),
                                         ("spawn-fcgi", "spawn-fcgi")] if not shutil.which(tool)]
    if not any(shutil.which(f"php-fpm8.{m}") for m in range(9)) and not shutil.which("php-fpm"):
        missing_apt.append("php-fpm")
    if missing_apt and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing_apt], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    missing_pip = [pkg for tool, pkg in [("gunicorn", "gunicorn"), ("uwsgi", "uwsgi"), ("granian", "granian")]
                   if not shutil.which(tool)]
    try:
        import flask  # noqa: F401
    except ImportError:
        missing_pip.append("flask")
    if missing_pip:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing_pip], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="php,php-medium,wsgi,flask")
    ap.add_argument("--connections", default="50,200")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--backends", default="", help="comma list of backend names to run (default all)")
    ap.add_argument("--baseline", default="",
                    help="another drover binary (e.g. an earlier commit's target/release/drover, its "
                         "drover-python beside it), run as the backend 'drover (baseline)' in the same run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each point this many times, rotating the backends' order each round, "
                         "and report each backend's median run (by req/s)")
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    ensure_tools(workloads)
    subprocess.run(["cargo", "build", "--workspace", "--release", "-q"], cwd=ROOT, check=True)
    drover = os.path.join(ROOT, "target/release/drover")
    work = tempfile.mkdtemp(prefix="drover-bench-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/apps")
    os.makedirs(f"{work}/www")
    for name, text in APPS.items():
        folder = "www" if name.endswith(".php") else "apps"
        with open(f"{work}/{folder}/{name}", "w") as f:
            f.write(text)
        os.chmod(f"{work}/{folder}/{name}", 0o644)
    rows = []
    with open(f"{work}/bench.log", "w") as log:
        for workload in workloads:
            for connections in [int(c) for c in args.connections.split(",")]:
                backends = [b for b in backends_for(workload, work, args.workers, drover, args.baseline)
                            if not args.backends or b.name in args.backends.split(",") or b.name.startswith("drover")]
                runs = {b.name: [] for b in backends}
                for r in range(args.rounds):
                    # A shared machine drifts: rotate who goes first, so no backend always
                    # runs in the same slot.
                    shift = r % len(backends)
                    for backend in backends[shift:] + backends[:shift]:
                        print(f"# {workload} c={connections} round {r + 1}: {backend.name}", file=sys.stderr, flush=True)
                        runs[backend.name].append(run_point(work, backend, workload, connections, args.duration, log))
                results = {name: median_run(measured) for name, measured in runs.items()}
                rows.append((workload, connections, results))
    print(table(rows, args))
    print(f"\n(work folder with logs: {work})", file=sys.stderr)


def median_run(measured):
    """The run with the median req/s (None when the backend never started)."""
    ok = sorted((r for r in measured if r), key=lambda r: r["rps"])
    return ok[len(ok) // 2] if ok else None


def table(rows, args):
    rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
    lines = [f"wrk -t1, {args.duration} s per point{rounds}, {args.workers} workers each, through nginx (1 worker process).",
             "",
             "| workload | conns | backend | req/s | p50 ms | p99 ms | errors | PSS MiB | start ms | CPU µs/req | drover req/s ratio | drover PSS ratio | drover CPU ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def ratios(ours, r, template):
        if not ours or not r:
            return "", ""
        rps = f"{ours['rps'] / r['rps']:.2f}×" if r["rps"] else ""
        pss = f"{ours['pss'] / r['pss']:.2f}" if ours.get("pss") and r.get("pss") else ""
        return template.format(rps) if rps else "", template.format(pss) if pss else ""

    for workload, connections, results in rows:
        ours, warm = results.get("drover"), results.get("drover + warmup")
        for name, r in results.items():
            if r is None:
                lines.append(f"| {workload} | {connections} | {name} | failed to start | | | | | | | | | |")
                continue
            ratio = pss_ratio = cpu_ratio = ""
            if ours and ours.get("cpu_us") and r.get("cpu_us") and name != "drover":
                cpu_ratio = f"{ours['cpu_us'] / r['cpu_us']:.2f}"
            if name != "drover" and name != "drover + warmup":
                ratio, pss_ratio = ratios(ours, r, "{}")
                # drover with `warmup`, against the same peer, in brackets.
                warm_rps, warm_pss = ratios(warm, r, " ({} warmup)")
                ratio, pss_ratio = ratio + warm_rps, pss_ratio + warm_pss
            pss = f"{r['pss']:.1f}" if r.get("pss") else "–"
            cpu = f"{r['cpu_us']:.1f}" if r.get("cpu_us") else "–"
            lines.append(f"| {workload} | {connections} | {name} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | "
                         f"{r['errors']} | {pss} | {r['startup']:.0f} | {cpu} | {ratio} | {pss_ratio} | {cpu_ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
