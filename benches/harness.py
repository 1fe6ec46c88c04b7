"""What compare.py's measurements share: the processes of a backend (its PSS, its CPU time,
whether one has exited), how to start and stop a backend, nginx in front of it, and the
clients (wrk, one timed request).

Every process here is started by this code and stopped by its PID; nothing listens
beyond loopback and unix sockets in the work folder.
"""

import contextlib
import http.client
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.request


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


def pss_kib(pid, tree=True):
    """The PSS of pid and every process below it (only pid's own with tree=False)."""
    total = 0
    for p in descendants(pid) if tree else [pid]:
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


def gone(pid):
    """True once pid has exited and its parent has reaped it (php-fpm's master still counts
    an unreaped child as idle, and starts no worker for a request that comes meanwhile)."""
    return not os.path.exists(f"/proc/{pid}")


class Backend:
    """How to start one peer for one workload; `upstream` is nginx's directive for it;
    `ready` a pattern of the log line it writes once it takes requests. Kinds: "fastcgi" and
    "http" (nginx passes to `upstream`), "return" (nginx answers itself), "direct" (no
    nginx: the backend answers HTTP on `port`), "app" (no server and no nginx: `argv` runs
    the app by itself and prints its figures, python_peers.run_app_alone)."""

    def __init__(self, name, argv, upstream, env=None, cwd=None, kind="fastcgi", ready=None, port=None):
        self.name, self.argv, self.upstream, self.env, self.cwd, self.kind = name, argv, upstream, env, cwd, kind
        self.ready = ready
        # nginx keeps its connections to the backend (an upstream block with `keepalive`;
        # FastCGI: `fastcgi_keep_conn on`), where by default it opens one per request.
        self.keep = False
        # kind "direct": the loopback port the backend itself answers HTTP on.
        self.port = port
        # "https": the backend's own listener speaks TLS (a "direct" backend).
        self.scheme = "http"
        # wrk asks for a new connection per request (`Connection: close`).
        self.close = False
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


def drover_backend(work, drover, pool, sock, name="drover"):
    """drover with one pool (the pool file's text), in a folder of its own."""
    folder = f"{work}/{re.sub(r'[^a-z0-9-]', '', name.replace('+', '-'))}"
    os.makedirs(f"{folder}/pools.d", exist_ok=True)
    with open(f"{folder}/drover.toml", "w") as f:
        f.write("")
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(pool)
    return Backend(name, [drover, "-c", f"{folder}/drover.toml"], f"unix:{sock}", ready=r"\bready: \d+ pools")


def nginx_conf(work, port, backend, front=None, params=""):
    """`front`: the script every FastCGI request runs (an app's front controller, under
    www/, or an absolute path), whatever its URI; None: the script the URI names.
    `params`: more fastcgi_param lines for the app (they win over fastcgi.conf's)."""
    script = (front if front.startswith("/") else f"{work}/www/{front}") if front else f"{work}/www$fastcgi_script_name"
    upstream, pool = backend.upstream, ""
    if backend.keep and backend.kind in ("http", "fastcgi"):
        # The same address in an upstream block that keeps up to 64 idle connections.
        server = upstream.removeprefix("http://").removesuffix(":") if backend.kind == "http" else upstream
        pool = f"upstream backend {{ server {server}; keepalive 64; }}"
        upstream = "http://backend" if backend.kind == "http" else "backend"
    if backend.kind == "return":
        location = "location / { return 200 \"Hello, world!\\n\"; }"
    elif backend.kind == "http":
        location = f"location / {{ proxy_pass {upstream}; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}"
    else:
        name = f"fastcgi_param SCRIPT_NAME /{front.rsplit('/', 1)[-1]}; " if front else ""
        keep = "fastcgi_keep_conn on; " if backend.keep else ""
        location = (f"location / {{ include /etc/nginx/fastcgi.conf; fastcgi_param SCRIPT_FILENAME {script}; {name}"
                    f"{params} {keep}fastcgi_pass {upstream}; }}")
    user = "user root root;" if os.geteuid() == 0 else ""
    return f"""daemon off; worker_processes 1; {user} error_log {work}/nginx.err; pid {work}/nginx.pid;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {work}/ctmp; fastcgi_temp_path {work}/ftmp; proxy_temp_path {work}/ptmp;
  {pool} server {{ listen 127.0.0.1:{port}; {location} }}
}}
"""


@contextlib.contextmanager
def behind_nginx(work, backend, log, front=None, params=""):
    """nginx in front of `backend`, listening on the port this yields (a "direct" backend:
    its own port, no nginx); on the way out, stops the backend (if it was started) and
    nginx. `front`, `params`: see nginx_conf."""
    if backend.kind == "direct":
        # wrk straight at the backend's own HTTP listener: no nginx in between.
        try:
            yield backend.port
        finally:
            backend.stop()
        return
    port = free_port()
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(nginx_conf(work, port, backend, front, params))
    nginx = subprocess.Popen(["nginx", "-c", f"{work}/nginx.conf", "-p", work], stdout=log, stderr=log)
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.005)
        yield port
    finally:
        backend.stop()
        nginx.send_signal(signal.SIGQUIT)
        try:
            nginx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait()


def wait_answer(url, deadline):
    # A TLS backend's certificate is the bench's own, self-signed.
    context = ssl._create_unverified_context() if url.startswith("https:") else None
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as r:
                if r.status == 200:
                    return True
        except Exception:
            time.sleep(0.005)
    return False


def timed_get(port, path, timeout=10):
    """One GET through nginx on a new connection: (milliseconds, status, body); status None
    when no answer came within `timeout` seconds."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        status, body = resp.status, resp.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as err:
        status, body = None, f"{type(err).__name__}: {err}"
    finally:
        conn.close()
    return (time.perf_counter() - started) * 1000, status, body


def wrk(url, connections, duration, close=False):
    # --timeout: a real app's page behind 2 workers and 50 connections, on a loaded machine,
    # waits longer than wrk's default 2 s in the queue; wrk would count it as no answer.
    # close: every request on a new connection (wrk reconnects after each answer).
    header = ["-H", "Connection: close"] if close else []
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "30s", "--latency"] + header
                         + [url],
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
