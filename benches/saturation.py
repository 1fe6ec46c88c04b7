"""A PHP pool at 4x overload (issue 23): drover-php with `queue_timeout`, drover-php without
it, and php-fpm, the same static pool behind the same nginx, in one run.

Every request runs `sleep.php` (SERVICE_MS of usleep), so the pool serves at most
WORKERS / SERVICE_MS requests a second; an open-loop client sends OVERLOAD times that, one
request per new connection at a fixed rate for DURATION_S seconds, and waits up to
CLIENT_TIMEOUT_S for each answer. Figures per backend: the served requests' p50 and p99,
how many got 503 and how long their 503 took (p50, p99), and everything else (502s from a
full backlog, timeouts, resets) as errors.

    python3 benches/saturation.py [--drover target/release/drover] [--duration 10]

Needs nginx, php-fpm (8.2) and a drover built with drover-php beside it.
"""

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Backend, behind_nginx, drover_backend, wait_answer  # noqa: E402

WORKERS = 4
SERVICE_MS = 50
OVERLOAD = 4
QUEUE_TIMEOUT = "1s"
CLIENT_TIMEOUT_S = 30
BACKLOG = 511


def backends(work, drover):
    sock = f"{work}/drover.sock"
    user = 'user = "www-data"\n' if os.geteuid() == 0 else ""
    pool = f"""listen = "{sock}"
listen_mode = "0666"
listen_backlog = {BACKLOG}
{user}@QUEUE@
[pm]
mode = "static"
max_children = {WORKERS}
[php]
runtime = "embed"
"""
    out = [
        drover_backend(work, drover, pool.replace("@QUEUE@", f'queue_timeout = "{QUEUE_TIMEOUT}"'), sock,
                       f"drover-php queue_timeout={QUEUE_TIMEOUT}"),
        drover_backend(work, drover, pool.replace("@QUEUE@", ""), sock, "drover-php no queue_timeout"),
    ]
    fpm = f"""[global]
error_log = /proc/self/fd/2
daemonize = no
[www]
{'user = www-data' if os.geteuid() == 0 else ''}
listen = {work}/fpm.sock
listen.mode = 0666
listen.backlog = {BACKLOG}
pm = static
pm.max_children = {WORKERS}
"""
    with open(f"{work}/fpm.conf", "w") as f:
        f.write(fpm)
    fpm_bin = shutil.which("php-fpm") or shutil.which("php-fpm8.2") or "php-fpm"
    out.append(Backend("php-fpm", [fpm_bin, "-y", f"{work}/fpm.conf", "-F"] + (["-R"] if os.geteuid() == 0 else []),
                       f"unix:{work}/fpm.sock", ready=r"ready to handle connections"))
    return out


async def one(port, path):
    """One GET on a new connection: (seconds, status or an error's name)."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
            await writer.drain()
            data = await reader.read()
            writer.close()
        line = data.split(b"\r\n", 1)[0].split()
        status = int(line[1]) if len(line) > 1 else "empty"
    except TimeoutError:
        status = "timeout"
    except OSError as err:
        status = type(err).__name__
    return time.perf_counter() - started, status


async def load(port, rate, duration):
    """Open loop: a request every 1/rate s for `duration` s, whatever the answers do."""
    tasks = []
    start = time.perf_counter()
    for i in range(int(rate * duration)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(port, "/sleep.php")))
    return await asyncio.gather(*tasks)


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def ms(v):
    return "-" if v is None else f"{v * 1000:.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drover", default="target/release/drover")
    ap.add_argument("--duration", type=float, default=10)
    args = ap.parse_args()
    drover = os.path.abspath(args.drover)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    capacity = WORKERS * 1000 / SERVICE_MS
    rate = OVERLOAD * capacity
    print(f"static pool of {WORKERS}, {SERVICE_MS} ms a request: {capacity:.0f} req/s at most; "
          f"offered {rate:.0f} req/s for {args.duration:.0f} s, a new connection each; backlog {BACKLOG}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="drover-saturation-") as work:
        os.chmod(work, 0o755)
        os.makedirs(f"{work}/www")
        with open(f"{work}/www/sleep.php", "w") as f:
            f.write(f"<?php usleep({SERVICE_MS * 1000}); echo 'ok';\n")
        with open(f"{work}/bench.log", "w") as log:
            for backend in backends(work, drover):
                with behind_nginx(work, backend, log) as port:
                    backend.start(log)
                    if not wait_answer(f"http://127.0.0.1:{port}/sleep.php", time.time() + 20):
                        rows.append((backend.name, "did not answer"))
                        continue
                    began = time.perf_counter()
                    results = asyncio.run(load(port, rate, args.duration))
                    took = time.perf_counter() - began
                served = [t for t, s in results if s == 200]
                shed = [t for t, s in results if s == 503]
                errors = {}
                for _, s in results:
                    if s not in (200, 503):
                        errors[s] = errors.get(s, 0) + 1
                rows.append((backend.name, len(results), len(served), pct(served, 50), pct(served, 99),
                             len(shed), pct(shed, 50), pct(shed, 99), max((t for t, _ in results), default=0),
                             errors, took))
    print()
    print("| backend | sent | served | served p50 ms | served p99 ms | 503 | 503 p50 ms | 503 p99 ms "
          "| slowest answer ms | errors | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if len(row) == 2:
            print(f"| {row[0]} | {row[1]} |")
            continue
        name, sent, n, p50, p99, n503, s50, s99, slowest, errors, took = row
        err = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items(), key=str)) or "0"
        print(f"| {name} | {sent} | {n} | {ms(p50)} | {ms(p99)} | {n503} | {ms(s50)} | {ms(s99)} "
              f"| {ms(slowest)} | {err} | {took:.1f} |")
    if len(rows) == 3 and all(len(r) > 2 for r in rows):
        ours, fpm = rows[0], rows[2]
        if ours[4] and fpm[4]:
            print(f"\nserved p99: drover-php with queue_timeout / php-fpm = {ours[4] / fpm[4]:.2f}")


if __name__ == "__main__":
    main()
