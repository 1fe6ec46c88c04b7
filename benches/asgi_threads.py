#!/usr/bin/env python3
"""Where an ASGI pool's CPU goes, thread by thread: drover serving compare.py's bare ASGI
app (or FastAPI's) behind nginx, loaded by wrk, with nginx opening a new FastCGI connection
per request (its default) or keeping them (`keep`). Prints req/s and, for every thread of
every drover process that used CPU in the 5 s load, its CPU in µs per request (from
/proc/PID/task/TID/stat): the worker's loop ("drover-python"), its accept thread
("accept"), the master ("drover").

    python3 benches/asgi_threads.py target/release/drover new 1       # 1 worker, bare app
    python3 benches/asgi_threads.py target/release/drover keep 2 fastapp
    python3 benches/asgi_threads.py target/release/drover new 1 bare thread   # accepts on a thread

The workers accept on their loop's thread through io_uring; `thread` as the fifth argument
makes them take the fallback, a thread blocked in accept() (the pool's
`DROVER_ASGI_ACCEPT_THREAD`, internal), for a comparison in the same build.

Uses the release build given; loopback only; stops what it started.
"""

import glob
import os
import sys
import tempfile
import time

import harness
import python_peers


def threads(root):
    """{(pid, tid, comm): CPU ticks} of every thread of `root` and its descendants."""
    out = {}
    for pid in harness.descendants(root) + [root]:
        for path in glob.glob(f"/proc/{pid}/task/*/stat"):
            try:
                text = open(path).read()
            except OSError:
                continue
            close = text.rfind(")")
            fields = text[close + 2:].split()
            comm = text[text.find("(") + 1:close]
            out[(pid, path.split("/")[4], comm)] = int(fields[11]) + int(fields[12])
    return out


def main():
    drover, mode = os.path.abspath(sys.argv[1]), sys.argv[2]
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    app = sys.argv[4] if len(sys.argv) > 4 else "bare"
    thread = len(sys.argv) > 5 and sys.argv[5] == "thread"
    work = tempfile.mkdtemp(prefix="drover-threads-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/apps")
    for name, text in python_peers.APPS.items():
        with open(f"{work}/apps/{name}", "w") as f:
            f.write(text)
    sock = f"{work}/drover.sock"
    pool = python_peers._pool(work, workers, app, "app", sock, extra_python='interface = "asgi"\n')
    if thread:
        pool += '[env]\nDROVER_ASGI_ACCEPT_THREAD = "1"\n'
    backend = harness.drover_backend(work, drover, pool, sock)
    backend.keep = mode == "keep"
    ticks = os.sysconf("SC_CLK_TCK")
    with open(f"{work}/log", "w") as log:
        backend.start(log)
        with harness.behind_nginx(work, backend, log) as port:
            url = f"http://127.0.0.1:{port}/"
            harness.wait_answer(url, time.time() + 20)
            harness.wrk(url, 20, 1)
            before = threads(backend.proc.pid)
            rps, _, p99, errors = harness.wrk(url, 20, 5)
            after = threads(backend.proc.pid)
    requests = rps * 5
    print(f"{mode} connections, {workers} workers, {app}{', accept thread' if thread else ''}: {rps:.0f} req/s, p99 {p99:.2f} ms, {errors} errors")
    total = 0
    for key, value in sorted(after.items()):
        used = value - before.get(key, 0)
        total += used
        if used:
            print(f"  {key[2]:<14} pid {key[0]} tid {key[1]}: {used * 1e6 / ticks / requests:.1f} µs/request")
    print(f"  all threads: {total * 1e6 / ticks / requests:.1f} µs/request")


if __name__ == "__main__":
    main()
