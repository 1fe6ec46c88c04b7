#!/usr/bin/env python3
"""What an ASGI app costs with no server at all (issue 31): python_peers.py's apps (the
FastAPI hello world and the bare ASGI app, the same code compare.py serves) awaited directly,
`await app(scope, receive, send)` in a loop on uvloop, with the scope a server builds for
the request wrk sends through nginx and trivial `receive` and `send`. The process's CPU
per request (time.process_time) is what a server that cost nothing would pay; against a
server's CPU per request measured in the same run, it bounds the ratio any server can
reach: (app alone) / (the peer's CPU per request).

    python3 benches/asgi_app_floor.py                         # both apps, 5 rounds of 20,000
    python3 benches/asgi_app_floor.py --app fastapp --rounds 9 --requests 10000
    python3 benches/asgi_app_floor.py --app bare --json        # one line, for compare.py

Two ways to run each request: "direct" awaits the app in the loop's one coroutine (the
floor), "task" runs each request in an asyncio Task of its own, as uvicorn, granian and
drover do (on CPython 3.11 a coroutine's first step runs only in a Task: the least a server
on asyncio pays on top of the app). Prints the median of the rounds, in µs of CPU.
"""

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in benches/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_peers  # noqa: E402
import uvloop  # noqa: E402

# What wrk asks nginx for: `GET /` with its Host header; nginx passes it on with its Host
# (proxy_pass to a unix socket: "localhost"; fastcgi_pass: HTTP_HOST, wrk's), and a server
# makes this scope of it (uvicorn's keys; drover's are the same).
SCOPE = {
    "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
    "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000), "scheme": "http", "method": "GET",
    "root_path": "", "path": "/", "raw_path": b"/", "query_string": b"",
    "headers": [(b"host", b"127.0.0.1:8080")],
}

REQUEST = {"type": "http.request", "body": b"", "more_body": False}


def load(name):
    """python_peers.APPS's module `name` (written to a temporary folder and imported, as a
    server imports it): its `app`."""
    folder = tempfile.mkdtemp(prefix="asgi-app-floor-")
    with open(f"{folder}/{name}.py", "w") as f:
        f.write(python_peers.APPS[f"{name}.py"])
    sys.path.insert(0, folder)
    return importlib.import_module(name).app


async def round_(app, requests, mode):
    """CPU seconds and wall seconds of `requests` requests; checks every answer's status."""
    statuses = []

    async def receive():
        return REQUEST

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    # Each request gets its own scope (an app writes into it: FastAPI puts its route, its
    # endpoint and the path params there), made before the clock starts.
    scopes = [dict(SCOPE, headers=list(SCOPE["headers"]), state={}) for _ in range(requests)]
    loop = asyncio.get_running_loop()
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "direct":
        for scope in scopes:
            await app(scope, receive, send)
    else:
        for scope in scopes:
            await loop.create_task(app(scope, receive, send))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if statuses != [200] * requests:
        raise SystemExit(f"the app answered {len(statuses)} of {requests}, statuses {sorted(set(statuses))}")
    return cpu, wall


async def measure(app, requests, rounds, mode):
    """{"cpu_us": median CPU µs per request, "rps": median requests per wall second, "rounds": [...]}"""
    await round_(app, min(requests, 2000), mode)  # warm-up: the framework's lazy set-up, caches
    runs = [await round_(app, requests, mode) for _ in range(rounds)]
    per = [cpu * 1e6 / requests for cpu, _ in runs]
    return {"cpu_us": statistics.median(per), "rps": statistics.median(requests / wall for _, wall in runs),
            "rounds": per}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=["fastapp", "bare", "both"], default="both",
                        help="python_peers.py's FastAPI hello world (fastapp), its bare app, or both")
    parser.add_argument("--requests", type=int, default=20000, help="per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", choices=["direct", "task", "both"], default="both")
    parser.add_argument("--json", action="store_true", help="one JSON object per app and mode, one a line")
    args = parser.parse_args()
    names = ["fastapp", "bare"] if args.app == "both" else [args.app]
    modes = ["direct", "task"] if args.mode == "both" else [args.mode]
    apps = {name: load(name) for name in names}
    for name in names:
        for mode in modes:
            got = uvloop.run(measure(apps[name], args.requests, args.rounds, mode))
            if args.json:
                print(json.dumps(dict(got, app=name, mode=mode)))
            else:
                print(f"{name}, {mode}: {got['cpu_us']:.1f} µs CPU per request (median of {args.rounds} rounds of "
                      f"{args.requests}; rounds {min(got['rounds']):.1f} to {max(got['rounds']):.1f}), "
                      f"{got['rps']:.0f} requests/s on one core")
    if not args.json:
        with open("/proc/loadavg") as f:
            print("load average", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
