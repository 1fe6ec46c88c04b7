"""The WSGI app of the capacity scenarios (tests/scenarios/capacity/): a request that holds
its worker until the test releases it, and a quick one.

`/hold?n=N` writes this worker's pid to `$HOLD_DIR/held-N`, then waits until
`$HOLD_DIR/release` exists (bounded: 30 s, so that a failed test leaves nothing running)
and answers `released N`. `/hello` answers `hello`. Both text/plain.
"""

import os
import time
from urllib.parse import parse_qs

TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def hold(environ, start_response):
    folder = os.environ["HOLD_DIR"]
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    n = query.get("n", "0")
    with open(os.path.join(folder, "held-%s.tmp" % n), "w") as out:
        out.write(str(os.getpid()))
    os.rename(os.path.join(folder, "held-%s.tmp" % n), os.path.join(folder, "held-" + n))
    deadline = time.monotonic() + 30
    release = os.path.join(folder, "release")
    while time.monotonic() < deadline and not os.path.exists(release):
        time.sleep(0.02)
    start_response("200 OK", TEXT)
    return [("released %s" % n).encode()]


def hello(environ, start_response):
    start_response("200 OK", TEXT)
    return [b"hello"]


ROUTES = {"/hold": hold, "/hello": hello}


def application(environ, start_response):
    route = ROUTES.get(environ["PATH_INFO"])
    if route is None:
        start_response("404 Not Found", TEXT)
        return [b"no such route"]
    return route(environ, start_response)
