"""compare.py's ASGI and HTTP-listener workloads: drover's Python pools against the servers
a Python team runs today, with the same app and the same number of workers.

- asgi: a FastAPI hello world behind nginx. drover speaks FastCGI to nginx
  (`interface = "asgi"`); uvicorn (httptools, uvloop), gunicorn with its own ASGI worker
  (`-k asgi`) and with uvicorn's, and granian (`--interface asgi`) speak HTTP behind
  `proxy_pass`.
- http-wsgi: the WSGI hello world with no nginx, wrk straight at the pool's own HTTP
  listener (`protocol = "http"`), against granian (`--interface wsgi`) and gunicorn sync.
- http-asgi: the FastAPI hello world the same way, against granian (`--interface asgi`)
  and uvicorn.
- asgi-kept: the asgi workload with nginx keeping its upstream connections
  (`fastcgi_keep_conn on` for drover, an upstream block with `keepalive` for everyone).
- asgi-bare, asgi-bare-kept, http-asgi-bare: the same three with a bare ASGI app (no
  framework): what the server itself costs per request.
- https-wsgi: http-wsgi over TLS (a P-256 certificate made in the work folder): drover's
  `certfile`/`keyfile` against granian's `--ssl-certificate`/`--ssl-keyfile`. wrk keeps
  its connections, so this weighs the records' cost more than the handshakes'.
- https-wsgi-handshake: the same servers with every request on a new connection (wrk sends
  `Connection: close` and reconnects after each answer), so each request costs a full
  TLS handshake (ECDHE and the P-256 signature; wrk resumes no session): the handshake's
  cost more than the records'.
- https-asgi, https-asgi-handshake: the same two with the FastAPI hello world on an ASGI
  pool (TLS in the worker's hub) against granian `--interface asgi` with its TLS.
- beside the servers of the asgi* and http-asgi* workloads, what bounds them: "nginx return
  200" (behind nginx), and "app alone" and "app alone (a Task each)", the workload's app
  with no server (asgi_app_floor.py), whose CPU per request no server can go under.

Every peer listens on loopback (TCP) or a unix socket in the work folder.
"""

import json
import os
import subprocess
import sys

from harness import Backend, drover_backend, free_port

HERE = os.path.dirname(os.path.abspath(__file__))

APPS = {
    "bare.py": """\
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"14")]})
    await send({"type": "http.response.body", "body": b"Hello, world!\\n"})
""",
    "fastapp.py": """\
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

app = FastAPI()

@app.get("/", response_class=PlainTextResponse)
async def hello():
    return "Hello, world!\\n"
""",
}

WORKLOADS = ("asgi", "asgi-kept", "asgi-bare", "asgi-bare-kept", "http-wsgi", "http-asgi", "http-asgi-bare",
             "https-wsgi", "https-wsgi-handshake", "https-asgi", "https-asgi-handshake")

# (module, attribute) of each workload's app, in compare.py's apps folder.
APP = {"asgi": ("fastapp", "app"), "asgi-kept": ("fastapp", "app"), "asgi-bare": ("bare", "app"),
       "asgi-bare-kept": ("bare", "app"), "http-wsgi": ("hello", "application"), "http-asgi": ("fastapp", "app"),
       "http-asgi-bare": ("bare", "app"), "https-wsgi": ("hello", "application"),
       "https-wsgi-handshake": ("hello", "application"), "https-asgi": ("fastapp", "app"),
       "https-asgi-handshake": ("fastapp", "app")}


def certificate(work):
    """A self-signed P-256 certificate and its PKCS#8 key (granian takes no other) in `work`."""
    cert, key = f"{work}/tls.pem", f"{work}/tls.key"
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True)
    return cert, key


PIP = ["fastapi", "uvicorn", "httptools", "uvloop", "granian", "gunicorn"]


def _pool(work, workers, module, attr, listen, extra_pool="", extra_python=""):
    root = 'user = "root"\n' if os.geteuid() == 0 else ""
    # listen_mode is refused on a TCP address.
    mode = 'listen_mode = "0666"\n' if listen.startswith("/") else ""
    return f"""listen = "{listen}"
{mode}{root}{extra_pool}
[pm]
mode = "static"
max_children = {workers}
[python]
app = "{module}:{attr}"
python_path = ["{work}/apps"]
{extra_python}
"""


def backends(workload, work, workers, drover, baseline=""):
    """The backends of one workload: drover first (the ratios are its)."""
    module, attr = APP[workload]
    spec = f"{module}:{attr}"
    apps = f"{work}/apps"
    w = str(workers)
    out = []
    if workload.startswith("asgi"):
        sock = f"{work}/drover.sock"
        pool = _pool(work, workers, module, attr, sock, extra_python='interface = "asgi"\n')
        out.append(drover_backend(work, drover, pool, sock))
        if baseline:
            out.append(drover_backend(work, baseline, pool, sock, "drover (baseline)"))
        uv = f"{work}/uvicorn.sock"
        out.append(Backend("uvicorn", ["uvicorn", "--workers", w, "--uds", uv, "--http", "httptools", "--loop", "uvloop",
                                       "--no-access-log", "--log-level", "warning", spec],
                           f"http://unix:{uv}:", cwd=apps, kind="http"))
        # gunicorn's own ASGI worker (since 24), and uvicorn's worker under gunicorn.
        for name, worker in [("gunicorn asgi", "asgi"), ("gunicorn + UvicornWorker", "uvicorn.workers.UvicornWorker")]:
            gu = f"{work}/gunicorn-{worker.split('.')[0]}.sock"
            out.append(Backend(name, ["gunicorn", "-w", w, "-k", worker, "-b", f"unix:{gu}", spec],
                               f"http://unix:{gu}:", cwd=apps, kind="http"))
        port = free_port()
        out.append(Backend("granian (asgi)", ["granian", "--interface", "asgi", "--workers", w, "--host", "127.0.0.1",
                                              "--port", str(port), "--no-ws", spec],
                           f"http://127.0.0.1:{port}", cwd=apps, kind="http"))
        for backend in out:
            backend.keep = workload.endswith("-kept")
        # nginx answering by itself: what nginx and wrk reach with no backend's work at all.
        out.append(Backend("nginx return 200", [], "", kind="return"))
        return out + app_alone(module)
    # No nginx: every backend answers HTTP on its own loopback port.
    interface = "asgi" if workload.startswith(("http-asgi", "https-asgi")) else "wsgi"
    port = free_port()
    tls = workload.startswith("https-")
    extra = 'protocol = "http"\n'
    if tls:
        cert, key = certificate(work)
        extra += f'certfile = "{cert}"\nkeyfile = "{key}"\n'
    pool = _pool(work, workers, module, attr, f"127.0.0.1:{port}", extra_pool=extra,
                 extra_python='interface = "asgi"\n' if interface == "asgi" else "")
    ours = drover_backend(work, drover, pool, "")
    ours.kind, ours.port = "direct", port
    out.append(ours)
    if tls:
        ours.scheme = "https"
        port = free_port()
        out.append(Backend(f"granian ({interface}+TLS)", ["granian", "--interface", interface, "--workers", w, "--host",
                                                   "127.0.0.1", "--port", str(port), "--no-ws", "--ssl-certificate",
                                                   cert, "--ssl-keyfile", key, spec],
                           "", cwd=apps, kind="direct", port=port))
        out[-1].scheme = "https"
        for backend in out:
            backend.close = workload.endswith("-handshake")
        return out
    if baseline:
        # The same pool on the same port: backends run one at a time.
        base = drover_backend(work, baseline, pool, "", "drover (baseline)")
        base.kind, base.port = "direct", port
        out.append(base)
    port = free_port()
    out.append(Backend(f"granian ({interface})", ["granian", "--interface", interface, "--workers", w, "--host",
                                                  "127.0.0.1", "--port", str(port), "--no-ws", spec],
                       "", cwd=apps, kind="direct", port=port))
    port = free_port()
    if interface == "wsgi":
        out.append(Backend("gunicorn sync", ["gunicorn", "-w", w, "-b", f"127.0.0.1:{port}", spec],
                           "", cwd=apps, kind="direct", port=port))
    else:
        out.append(Backend("uvicorn", ["uvicorn", "--workers", w, "--host", "127.0.0.1", "--port", str(port), "--http",
                                       "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning",
                                       spec], "", cwd=apps, kind="direct", port=port))
        out += app_alone(module)
    return out


def app_alone(module):
    """The app with no server (asgi_app_floor.py: awaited in a loop, or a Task each), run as
    a backend of the workload so that it takes its turn in the same rounds."""
    return [Backend(name, [sys.executable, f"{HERE}/asgi_app_floor.py", "--app", module, "--mode", mode, "--json",
                           "--requests", "10000", "--rounds", "3"], "", kind="app")
            for name, mode in (("app alone", "direct"), ("app alone (a Task each)", "task"))]


def run_app_alone(backend, log):
    """One run of an "app alone" backend: compare.py's figures of a point (no latency, no
    memory: a loop in one process)."""
    done = subprocess.run(backend.argv, stdout=subprocess.PIPE, stderr=log, text=True, timeout=600)
    if done.returncode != 0:
        return f"asgi_app_floor.py exited with {done.returncode}"
    got = json.loads(done.stdout.splitlines()[-1])
    return dict(rps=got["rps"], p50=None, p99=None, errors=0, pss=None, startup=None, cpu_us=got["cpu_us"],
                alone=True)


# Issue 15's and issue 31's targets: drover's req/s over each peer's, in the same run.
TARGETS = {
    "asgi": {"uvicorn": 1.5, "granian (asgi)": 1.2, "gunicorn asgi": 2.0},
    "asgi-kept": {"uvicorn": 1.5},
    "asgi-bare": {"uvicorn": 1.5},
    "asgi-bare-kept": {"uvicorn": 1.5},
    "http-asgi-bare": {"granian (asgi)": 1.2},
    "http-wsgi": {"granian (wsgi)": 1.2, "gunicorn sync": 3.0},
    "http-asgi": {"granian (asgi)": 1.2, "uvicorn": 1.2},
}


def targets(rows):
    """Lines saying, for each point of these workloads, whether drover met issues 15's and 31's
    req/s targets in this run."""
    lines = []
    for workload, connections, results in rows:
        ours = results.get("drover")
        if workload not in TARGETS or not isinstance(ours, dict):
            continue
        for peer, target in TARGETS[workload].items():
            theirs = results.get(peer)
            if not isinstance(theirs, dict) or not theirs["rps"]:
                continue
            ratio = ours["rps"] / theirs["rps"]
            verdict = "met" if ratio >= target else "**not met**"
            line = f"- {workload}, {connections} connections: {ratio:.2f}× {peer}'s req/s (target ≥ {target}×: {verdict})"
            if ours.get("cpu_us") and theirs.get("cpu_us"):
                line += f"; CPU per request {ours['cpu_us'] / theirs['cpu_us']:.2f}×"
            lines.append(line)
    if not lines:
        return ""
    text = "Against issues 15's and 31's targets (drover over each peer, this run):\n\n" + "\n".join(lines)
    floor = bounds(rows)
    return text + "\n\nWhat bounds them (this run):\n\n" + "\n".join(floor) if floor else text


def bounds(rows):
    """For each point with an "app alone" row: the least CPU per request a server could
    take (the app's own) against each target's peer, and the req/s a server that cost
    nothing could reach with nginx and wrk as they were in drover's run: every core of the
    machine theirs, at most cores / (app + nginx + wrk per request), and no more than one
    core each for nginx's one worker and wrk's one thread; or with as much CPU as the peer's
    run had (its server's, nginx's and wrk's per request, times its req/s), the peer's req/s
    times (the peer's + its nginx's + its wrk's CPU per request) / (app + nginx + wrk)."""
    lines = []
    cores = os.cpu_count()
    for workload, connections, results in rows:
        app, task, ours = (results.get(name) for name in ("app alone", "app alone (a Task each)", "drover"))
        if workload not in TARGETS or not isinstance(app, dict):
            continue
        task_us = f" ({task['cpu_us']:.1f} in a Task each)" if isinstance(task, dict) else ""
        line = f"- {workload}, {connections} connections: the app alone {app['cpu_us']:.1f} µs per request{task_us}"
        if isinstance(ours, dict) and ours.get("wrk_us"):
            nginx, wrk = ours.get("nginx_us") or 0, ours["wrk_us"]
            ceiling = min(cores * 1e6 / (app["cpu_us"] + nginx + wrk), 1e6 / wrk, 1e6 / nginx if nginx else 1e9)
            line += (f"; with nginx's {nginx:.1f} and wrk's {wrk:.1f} µs per request of drover's run, a server "
                     f"that cost nothing would answer at most {ceiling:.0f} req/s on {cores} cores")
        else:
            ceiling = None
        alone = results.get("nginx return 200")
        if isinstance(alone, dict):
            line += f"; nginx answering by itself {alone['rps']:.0f} req/s"
        for peer, target in TARGETS[workload].items():
            theirs = results.get(peer)
            if not isinstance(theirs, dict) or not theirs.get("cpu_us") or not theirs["rps"]:
                continue
            line += f"; against {peer}: CPU per request ≥ {app['cpu_us'] / theirs['cpu_us']:.2f}×"
            if isinstance(task, dict):
                line += f" ({task['cpu_us'] / theirs['cpu_us']:.2f}× with a Task each)"
            if ceiling:
                # The same cores as the peer's run had busy (this machine is shared): req/s
                # in inverse proportion to the CPU every process spends per request.
                spent = theirs["cpu_us"] + (theirs.get("nginx_us") or 0) + (theirs.get("wrk_us") or 0)
                line += (f", req/s ≤ {ceiling / theirs['rps']:.2f}× with {cores} idle cores, "
                         f"≤ {spent / (app['cpu_us'] + nginx + wrk):.2f}× with the cores its run had busy "
                         f"(target ≥ {target}×)")
            if isinstance(alone, dict):
                line += f", nginx alone {alone['rps'] / theirs['rps']:.2f}×"
        lines.append(line)
    return lines
