#!/usr/bin/env python3
"""PHP worker mode's own cost per request (issue 30): one static drover-php worker running a
bare `frankenphp_handle_request()` loop whose handler echoes two bytes, behind nginx, and
--requests sequential requests over one keep-alive connection, in --rounds rounds. The
worker's on-CPU time comes from /proc/PID/task/*/schedstat (every thread, nanoseconds),
read before and after each round; the worker is the pool's busiest process. What it
measures is what drover adds to each request in worker mode (the request scope, the
superglobals, the FastCGI exchange), not an app's work.

    python3 benches/worker_loop.py                       # 10 rounds of 2000 requests
    python3 benches/worker_loop.py --release OTHER/target/release

Prints the median over the rounds of the worker's CPU µs per request and the wall µs per
request. Loopback only; every wait is bounded; stops what it started, by pid.
"""

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import behind_nginx, descendants, drover_backend, wait_answer  # noqa: E402
from php_cpu import on_cpu_ns  # noqa: E402
from php_pools import pool_text  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = """<?php
ignore_user_abort(true);
$handler = static function (): void { echo 'ok'; };
while (frankenphp_handle_request($handler)) {
}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--release", default=f"{ROOT}/target/release")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="drover-worker-loop-")
    os.chmod(work, 0o755)
    script = f"{work}/loop.php"
    with open(script, "w") as f:
        f.write(LOOP)
    sock = f"{work}/drover.sock"
    pool = pool_text(sock, {"mode": "static", "max_children": 1}) + f'runtime = "embed"\nworker = "{script}"\n'
    backend = drover_backend(work, f"{args.release}/drover", pool, sock, "worker loop")
    with open(f"{work}/log", "w") as log:
        backend.start(log)
        with behind_nginx(work, backend, log, front=script) as port:
            wait_answer(f"http://127.0.0.1:{port}/", time.time() + 30)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

            def get():
                conn.request("GET", "/")
                reply = conn.getresponse()
                body = reply.read()
                assert reply.status == 200 and body == b"ok", (reply.status, body)

            for _ in range(200):
                get()
            pids = descendants(backend.proc.pid)
            cpus, walls = [], []
            for _ in range(args.rounds):
                before = {pid: on_cpu_ns(pid) for pid in pids}
                started = time.monotonic()
                for _ in range(args.requests):
                    get()
                wall = time.monotonic() - started
                worker = max(on_cpu_ns(pid) - before[pid] for pid in pids)
                cpus.append(worker / 1000 / args.requests)
                walls.append(wall * 1e6 / args.requests)
            conn.close()
    print(f"worker CPU µs/request: median {statistics.median(cpus):.1f} "
          f"(rounds: {', '.join(f'{c:.1f}' for c in cpus)}); wall µs/request: median {statistics.median(walls):.1f}")


if __name__ == "__main__":
    main()
