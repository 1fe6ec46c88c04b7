"""The WSGI app of drover's process-management scenarios (tests/scenarios/pm/): a worker
that leaks memory on purpose, and a request that hangs.

Every route answers text/plain.
"""

import os
import time
from urllib.parse import parse_qs

TEXT = [("Content-Type", "text/plain; charset=utf-8")]

# What /leak keeps for the life of the worker.
LEAK = []
LEAK_BYTES = 2 * 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    """This process's resident memory, as drover reads it: /proc/self/statm's second field."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def leak(environ, start_response):
    """Keeps 2 MiB more for good (written, so resident), then answers
    `pid=PID rss=BYTES leaked=N`, the RSS read after the allocation."""
    LEAK.append(b"\x01" * LEAK_BYTES)
    body = "pid=%d rss=%d leaked=%d\n" % (os.getpid(), rss_bytes(), len(LEAK))
    start_response("200 OK", TEXT)
    return [body.encode()]


def sleep(environ, start_response):
    """Sleeps `seconds` (default 30), then answers `slept`."""
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    time.sleep(float(query.get("seconds", "30")))
    start_response("200 OK", TEXT)
    return [b"slept"]


def pid(environ, start_response):
    start_response("200 OK", TEXT)
    return [str(os.getpid()).encode()]


ROUTES = {"/leak": leak, "/sleep": sleep, "/pid": pid}


def application(environ, start_response):
    route = ROUTES.get(environ["PATH_INFO"])
    if route is None:
        start_response("404 Not Found", TEXT)
        return [b"no such route"]
    return route(environ, start_response)
