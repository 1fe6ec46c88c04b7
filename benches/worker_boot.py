#!/usr/bin/env python3
"""PHP worker mode: where the worker script boots (issue 20, item 6). The test suite's
Symfony 5.4 app (tests/apps/symfony, its worker script public/worker.php) in a drover-php
pool with `worker_boot = "worker"` (each worker boots the kernel) and `"zygote"` (the zygote
boots it once and forks the workers from it), behind the same nginx:

- static --workers: exec to the first answer, and the PSS summed over the pool's processes
  after a bounded wrk load (--duration s, 50 connections) of the hello route;
- ondemand (max_children --workers, process_idle_timeout 1 s): the first request once the
  idle timeout has retired every worker, which needs a new worker: its fork (and, booting
  per worker, the kernel's boot) is in that request's time; then the next request (warm).

    python3 benches/worker_boot.py --workers 4 --duration 10

Loopback only; every wait is bounded; stops what it started, by pid.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import SYMFONY_APP, SYMFONY_FRONT, SYMFONY_WORKER, build  # noqa: E402
from harness import behind_nginx, descendants, drover_backend, pss_kib, timed_get, wait_answer, wrk  # noqa: E402
from php_pools import pool_text  # noqa: E402

IDLE = "1s"
WAIT_S = 20


def backend(work, drover, pm, boot):
    sock = f"{work}/drover.sock"
    pool = pool_text(sock, pm) + (f'runtime = "embed"\nworker = "{work}/www/{SYMFONY_WORKER}"\n'
                                  f'worker_boot = "{boot}"\n')
    return drover_backend(work, drover, pool, sock, f"worker_boot = {boot}")


def workers_of(pid):
    """The pool's workers below drover `pid`: drover-php processes whose parent is the
    zygote (a drover-php too)."""
    comm = {}
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                comm[p] = f.read().strip()
        except OSError:
            pass
    out = []
    for p, name in comm.items():
        try:
            with open(f"/proc/{p}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if name == "drover-php" and comm.get(parent) == "drover-php":
            out.append(p)
    return out


def static_point(work, drover, workers, duration, boot, log):
    b = backend(work, drover, {"mode": "static", "max_children": workers}, boot)
    with behind_nginx(work, b, log, SYMFONY_FRONT) as port:
        url = f"http://127.0.0.1:{port}/hello/bench"
        started = time.perf_counter()
        b.start(log)
        if not wait_answer(url, time.time() + WAIT_S):
            return f"no answer within {WAIT_S} s"
        first_ms = (time.perf_counter() - started) * 1000
        rps, p50, p99, errors = wrk(url, 50, duration)
        return dict(first_ms=first_ms, rps=rps, p99=p99, errors=errors, pss=pss_kib(b.proc.pid) / 1024)


def ondemand_point(work, drover, workers, boot, log):
    pm = {"mode": "ondemand", "max_children": workers, "process_idle_timeout": IDLE}
    b = backend(work, drover, pm, boot)
    with behind_nginx(work, b, log, SYMFONY_FRONT) as port:
        b.start(log)
        url = f"http://127.0.0.1:{port}/hello/bench"
        if not wait_answer(url, time.time() + WAIT_S):
            return f"no answer within {WAIT_S} s"
        deadline = time.time() + WAIT_S
        while workers_of(b.proc.pid) and time.time() < deadline:
            time.sleep(0.01)
        if workers_of(b.proc.pid):
            return "the idle worker was not retired"
        cold_ms, status, _ = timed_get(port, "/hello/bench")
        warm_ms, status2, _ = timed_get(port, "/hello/bench")
        if status != 200 or status2 != 200:
            return f"answered {status}, {status2}"
        return dict(cold_ms=cold_ms, warm_ms=warm_ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10)
    args = ap.parse_args()
    drover = build()
    work = tempfile.mkdtemp(prefix="drover-boot-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/www")
    shutil.copytree(SYMFONY_APP, f"{work}/www/symfony")
    os.makedirs(f"{work}/www/symfony/var", mode=0o777)
    os.chmod(f"{work}/www/symfony/var", 0o777)
    rows = {}
    with open(f"{work}/bench.log", "w") as log:
        for boot in ("worker", "zygote"):
            print(f"# worker_boot = {boot}", file=sys.stderr, flush=True)
            rows[boot] = (static_point(work, drover, args.workers, args.duration, boot, log),
                          ondemand_point(work, drover, args.workers, boot, log))
    print(f"Symfony hello route, {args.workers} workers, through nginx; wrk -t1 -c50 {args.duration} s. "
          "Ratios: zygote over worker.\n")
    print("| worker_boot | exec to first answer ms | req/s | p99 ms | errors | PSS MiB after the load | "
          "ondemand: request needing a new worker ms | next request ms |")
    print("|---|---|---|---|---|---|---|---|")
    for boot, (s, o) in rows.items():
        cells = [boot]
        cells += ([f"{s['first_ms']:.0f}", f"{s['rps']:.0f}", f"{s['p99']:.2f}", str(s["errors"]), f"{s['pss']:.1f}"]
                  if isinstance(s, dict) else [f"failed: {s}", "", "", "", ""])
        cells += ([f"{o['cold_ms']:.1f}", f"{o['warm_ms']:.1f}"] if isinstance(o, dict) else [f"failed: {o}", ""])
        print("| " + " | ".join(cells) + " |")
    w, z = rows["worker"], rows["zygote"]
    if all(isinstance(x, dict) for x in (w[0], z[0], w[1], z[1])):
        print(f"\nzygote / worker: PSS {z[0]['pss'] / w[0]['pss']:.2f}×, first answer "
              f"{z[0]['first_ms'] / w[0]['first_ms']:.2f}×, a new worker's first request "
              f"{z[1]['cold_ms'] / w[1]['cold_ms']:.2f}×")
    print(f"\n(work folder with logs: {work})", file=sys.stderr)


if __name__ == "__main__":
    main()
