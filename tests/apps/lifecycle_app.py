"""The hostile lifecycle scenarios' app: a worker that crashes, a request that hangs.

- /segv: dereferences NULL through ctypes: the worker dies of SIGSEGV mid-request.
- /sleep?s=N: answers after N seconds (a request past request_terminate_timeout).
- /pid: the worker's pid.
"""

import ctypes
import os
import time
from urllib.parse import parse_qs

TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def application(environ, start_response):
    # The last path segment: nginx passes the pool's location prefix along.
    path = "/" + environ.get("PATH_INFO", "").rsplit("/", 1)[-1]
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/segv":
        ctypes.string_at(0)
    if path == "/sleep":
        time.sleep(float(query.get("s", "1")))
    start_response("200 OK", TEXT)
    return [str(os.getpid()).encode()]
