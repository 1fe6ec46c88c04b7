#!/usr/bin/env python3
"""`drover serve` against gunicorn and granian: from starting the command to the first
answer, with the same WSGI app, the same number of workers and the same port, in the same
run (the servers take turns, round after round, so that the machine's noise falls on all
of them). Also the time from TERM to exit, nothing in flight.

    python3 benches/serve_start.py [--drover target/release/drover] [--workers 2] [--rounds 7]

Prints each server's median and its ratio to drover's (above 1: slower than drover).
Needs gunicorn and granian (`pip install gunicorn granian`) and drover-python beside drover.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

APP = """\
def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"Hello, world!\\n"]
"""


# How long a server gets to exit after TERM before it is counted as not stopping.
STOP_BOUND = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answered(port):
    """True when a GET / gets a 200 (a refused or reset connection is not an answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def commands(drover, workers, port):
    root = ["--set", "user=root"] if os.geteuid() == 0 else []
    return {
        "drover serve": [drover, "serve", "--python", "hello:application", "--http",
                         f"127.0.0.1:{port}", "-w", str(workers)] + root,
        "gunicorn": ["gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}",
                     "hello:application"],
        "granian": ["granian", "--interface", "wsgi", "--workers", str(workers), "--host",
                    "127.0.0.1", "--port", str(port), "hello:application"],
    }


def one(command, port, work):
    """(seconds to the first answer, seconds from TERM to exit)."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(work)}
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = start + 60
        while not answered(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} gave no answer (exit {process.poll()})")
            time.sleep(0.002)
        first = time.monotonic() - start
        term = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            # Counted apart: a server that did not stop is killed below.
            return first, None
        return first, time.monotonic() - term
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drover", default="target/release/drover")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    drover = str(Path(args.drover).resolve())
    work = Path(tempfile.mkdtemp(prefix="drover-serve-bench-"))
    try:
        (work / "hello.py").write_text(APP)
        results = {}
        for _ in range(args.rounds):
            for name, command in commands(drover, args.workers, 0).items():
                port = free_port()
                command = commands(drover, args.workers, port)[name]
                results.setdefault(name, []).append(one(command, port, work))
        def stops(runs):
            return [r[1] for r in runs if r[1] is not None]

        base = statistics.median(r[0] for r in results["drover serve"])
        base_stop = statistics.median(stops(results["drover serve"]) or [float("nan")])
        print(f"{args.workers} workers, {args.rounds} rounds, medians:")
        print(f"{'server':14} {'first answer':>13} {'ratio':>6} {'TERM to exit':>13} {'ratio':>6}")
        for name, runs in results.items():
            first = statistics.median(r[0] for r in runs)
            stop = statistics.median(stops(runs) or [float("nan")])
            hung = len(runs) - len(stops(runs))
            note = f"  ({hung} of {len(runs)} did not exit within {STOP_BOUND} s of TERM)" if hung else ""
            print(f"{name:14} {first * 1000:10.0f} ms {first / base:6.2f} "
                  f"{stop * 1000:10.0f} ms {stop / base_stop:6.2f}{note}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
