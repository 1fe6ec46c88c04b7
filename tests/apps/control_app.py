"""The WSGI app of drover's control-plane scenarios (tests/scenarios/control/): a request
slow three functions deep for the slowlog, the pool's [env] echoed for reload, a 500
for `drover ctl probe`, and a request held until the test releases it for `drover ctl top`.

Every route answers text/plain.
"""

import os
import time

TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def level3():
    time.sleep(3)


def level2():
    level3()


def level1():
    level2()


def slow(environ, start_response):
    """Sleeps 3 s three functions deep, then answers `slept PID`."""
    level1()
    start_response("200 OK", TEXT)
    return [("slept %d" % os.getpid()).encode()]


def greeting(environ, start_response):
    """`greeting=VALUE`: the pool's [env] GREETING, which tells the test which generation
    of the pool served the request."""
    start_response("200 OK", TEXT)
    return [("greeting=%s" % os.environ.get("GREETING", "")).encode()]


def fail(environ, start_response):
    """A 500, for `drover ctl probe`'s failing check."""
    start_response("500 Internal Server Error", TEXT)
    return [b"failed"]


def hold(environ, start_response):
    """`/hold?n=N`: records the worker's pid in <site>/held-N, then holds the worker until
    the test creates <site>/release (at most 30 s, so a failed test leaves nothing
    running)."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    n = int(environ.get("QUERY_STRING", "n=0").split("=")[-1])
    with open("%s/held-%d.tmp" % (site, n), "w") as f:
        f.write(str(os.getpid()))
    os.rename("%s/held-%d.tmp" % (site, n), "%s/held-%d" % (site, n))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not os.path.exists(site + "/release"):
        time.sleep(0.02)
    released = os.path.exists(site + "/release")
    start_response("200 OK", TEXT)
    return [("released %d" % n if released else "not released %d" % n).encode()]


ROUTES = {"/slow": slow, "/greeting": greeting, "/fail": fail, "/hold": hold}


def application(environ, start_response):
    route = ROUTES.get(environ["PATH_INFO"])
    if route is None:
        start_response("404 Not Found", TEXT)
        return [b"no such route"]
    return route(environ, start_response)
