"""A WSGI app for the hooks and abort scenario tests (`tests/apps/gunicorn_hooks.py` is its
hooks file, a gunicorn.conf.py)."""

import os
import sys
import time

print("marker-app-imported pid=%d" % os.getpid(), file=sys.stderr, flush=True)

SITE = os.environ["HOOKS_SITE"]


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/sleep":
        # Stuck: request_terminate_timeout aborts it; the finally block must run.
        try:
            time.sleep(30)
        finally:
            with open(os.path.join(SITE, "finally-%d" % os.getpid()), "w") as f:
                f.write("finally ran\n")
    if path == "/swallow":
        # An app that swallows the abort and stays in the request: SIGKILL after the grace.
        try:
            time.sleep(30)
        except BaseException:
            time.sleep(30)
    if path == "/resource":
        # What post_fork opened in this worker.
        hooks = sys.modules.get("__config__")
        body = "pid=%d resource=%s\n" % (os.getpid(), getattr(hooks, "resource", None))
    else:
        body = "pid=%d\n" % os.getpid()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body.encode()]
