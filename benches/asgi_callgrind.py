#!/usr/bin/env python3
"""Instructions per request of one ASGI worker, counted by callgrind, and where they go:
the figures to read on a shared machine, where times are noise.

drover runs one ASGI pool of one worker (`max_requests` = --requests) whose zygote, and so
its worker, runs under `valgrind --tool=callgrind` (a wrapper `drover-python` beside a copy
of the drover binary; the master runs natively). A client in this script sends the worker
its requests with a new connection each, as nginx does by default: FastCGI records on the
pool's unix socket (the params nginx's fastcgi_params sends), or with --http a GET on the
pool's own HTTP listener (`protocol = "http"`). The worker serves --requests and retires,
writing its profile; a second run with twice the requests, and the difference over
--requests, leaves the requests alone (the worker's start, its exit and what it inherited
from the zygote cancel out).

    python3 benches/asgi_callgrind.py                          # FastAPI's hello world, FastCGI
    python3 benches/asgi_callgrind.py --app bare --http        # a bare ASGI app, HTTP listener
    python3 benches/asgi_callgrind.py --release /path/to/target/release --keep
    python3 benches/asgi_callgrind.py --env PYTHONHASHSEED=0    # the pool's [env]: steadier counts

Python's counts move by 2-3% from run to run with a random hash seed (dicts collide
differently); with `--env PYTHONHASHSEED=0` two builds compare within a few hundred.

Prints instructions per request for the whole worker and by object (libpython, drover-python
itself: the hub, the scope, the ledger; uvloop; libc...), callgrind_annotate's
`--inclusive=no` totals per file. The kernel's part (the syscalls) is not counted by
callgrind. Loopback only; stops what it started, by its PID.
"""

import argparse
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import harness  # noqa: E402
import python_peers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(kind, body, rid=1):
    return struct.pack(">BBHHBx", 1, kind, rid, len(body), 0) + body


def pair(name, value):
    def size(n):
        return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
    return size(len(name)) + size(len(value)) + name + value


# What nginx's fastcgi_params (Debian's) sends for wrk's `GET /`.
PARAMS = b"".join(pair(k.encode(), v.encode()) for k, v in [
    ("QUERY_STRING", ""), ("REQUEST_METHOD", "GET"), ("CONTENT_TYPE", ""), ("CONTENT_LENGTH", ""),
    ("SCRIPT_NAME", "/"), ("REQUEST_URI", "/"), ("DOCUMENT_URI", "/"), ("DOCUMENT_ROOT", "/srv"),
    ("SERVER_PROTOCOL", "HTTP/1.1"), ("REQUEST_SCHEME", "http"), ("GATEWAY_INTERFACE", "CGI/1.1"),
    ("SERVER_SOFTWARE", "nginx/1.22.1"), ("REMOTE_ADDR", "127.0.0.1"), ("REMOTE_PORT", "40000"),
    ("SERVER_ADDR", "127.0.0.1"), ("SERVER_PORT", "8080"), ("SERVER_NAME", "localhost"),
    ("REDIRECT_STATUS", "200"), ("HTTP_HOST", "127.0.0.1:8080")])
FCGI_REQUEST = (record(1, b"\x00\x01\x00\x00\x00\x00\x00\x00") + record(4, PARAMS) + record(4, b"")
                + record(5, b""))
HTTP_REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def one(address, http):
    """One request on a new connection; True when it was answered 200."""
    family = socket.AF_INET if http else socket.AF_UNIX
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(120)
        sock.connect(address)
        sock.sendall(HTTP_REQUEST if http else FCGI_REQUEST)
        got = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            got += data
            # FastCGI: END_REQUEST (type 3) ends it; nginx would close the connection then.
            if not http and b"\x01\x03\x00\x01\x00\x08" in got:
                break
    return (b" 200 " in got[:16]) if http else (b"Hello" in got)


def run(work, release, app, http, requests, env=()):
    """Serves 2 × requests (a worker of `requests` and its successor); the first worker's
    profile."""
    name = f"{app}-{'http' if http else 'fcgi'}-{requests}"
    folder = f"{work}/{name}"
    os.makedirs(f"{folder}/bin")
    os.makedirs(f"{folder}/pools.d")
    shutil.copy2(f"{release}/drover", f"{folder}/bin/drover")
    with open(f"{folder}/bin/drover-python", "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={work}/profiles/{name}.%p "
                f"{release}/drover-python \"$@\"\n")
    os.chmod(f"{folder}/bin/drover-python", 0o755)
    open(f"{folder}/drover.toml", "w").close()
    if http:
        port = harness.free_port()
        listen, address, extra = f"127.0.0.1:{port}", ("127.0.0.1", port), 'protocol = "http"\n'
    else:
        listen = address = f"{work}/{name}.sock"
        extra = ""
    pool = python_peers._pool(work, 1, app, "app", listen, extra_pool=extra,
                              extra_python='interface = "asgi"\n')
    pool = pool.replace("max_children = 1\n", f"max_children = 1\nmax_requests = {requests}\n")
    if env:
        pool += "[env]\n" + "".join(f'{key} = "{value}"\n' for key, value in (e.split("=", 1) for e in env))
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(pool)
    log_path = f"{work}/{name}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([f"{folder}/bin/drover", "-c", f"{folder}/drover.toml"], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 300
            while True:
                try:
                    if one(address, http):
                        break
                except OSError:
                    pass
                if time.time() > deadline or proc.poll() is not None:
                    sys.exit(f"{name}: no answer (see {log_path})")
                time.sleep(0.5)
            for _ in range(2 * requests - 1):
                if not one(address, http):
                    sys.exit(f"{name}: a request was not answered 200")
            pids = re.findall(r"worker (\d+) started", open(log_path, errors="replace").read())
            profile = f"{work}/profiles/{name}.{pids[0]}"
            while not os.path.exists(profile) and time.time() < deadline:
                time.sleep(0.5)
            time.sleep(2)
        finally:
            pids = harness.descendants(proc.pid)
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in pids:
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
                proc.wait()
    return profile


def by_object(profile):
    """{object file: instructions} of a profile, and its total."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", profile],
                         capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"^\s*([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", out, re.M).group(1).replace(",", ""))
    objects = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.+?)(?: \[([^\[\]]+)\])?\s*$", line)
        if m and m.group(2) != "PROGRAM TOTALS":
            # A function inlined from a header is shown without its object: by its source.
            where = m.group(3) or ("libpython" if "Python-3" in m.group(2) else
                                   "drover-python" if "/rustc/" in m.group(2) or "crates" in m.group(2) else "other")
            obj = os.path.basename(where)
            obj = re.sub(r"\.cpython-.*\.so$", ".so", obj)
            obj = "uvloop" if "uvloop" in where else "libpython" if "libpython" in obj else obj
            objects[obj] = objects.get(obj, 0) + int(m.group(1).replace(",", ""))
    return total, objects


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--release", default=os.path.join(ROOT, "target", "release"),
                    help="the folder with drover and drover-python")
    ap.add_argument("--app", choices=["fastapp", "bare"], default="fastapp")
    ap.add_argument("--http", action="store_true", help="the pool's own HTTP listener, not FastCGI")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep the work folder with the profiles")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="an [env] key of the pool")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="drover-asgi-callgrind-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/profiles")
    os.chmod(f"{work}/profiles", 0o1777)
    os.makedirs(f"{work}/apps")
    for name, text in python_peers.APPS.items():
        with open(f"{work}/apps/{name}", "w") as f:
            f.write(text)
    runs = {}
    for n in (args.requests, 2 * args.requests):
        print(f"# {args.app}: {2 * n} requests under callgrind", file=sys.stderr, flush=True)
        runs[n] = by_object(run(work, os.path.abspath(args.release), args.app, args.http, n, args.env))
    (a, objs_a), (b, objs_b) = runs[args.requests], runs[2 * args.requests]
    n = args.requests
    print(f"{args.app} over {'HTTP' if args.http else 'FastCGI'}, a new connection per request: "
          f"instructions per request (callgrind; workers of {2 * n} and {n} requests, the difference over {n})\n")
    print("| object | instructions per request | share |")
    print("|---|---|---|")
    total = (b - a) / n
    rows = {obj: (objs_b.get(obj, 0) - objs_a.get(obj, 0)) / n for obj in set(objs_a) | set(objs_b)}
    for obj, count in sorted(rows.items(), key=lambda kv: -kv[1]):
        if abs(count) >= total * 0.005:
            print(f"| {obj} | {count:,.0f} | {count / total:.1%} |")
    print(f"| **the whole worker** | **{total:,.0f}** | |")
    if args.keep:
        print(f"\n(profiles in {work})", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
