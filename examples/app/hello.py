"""The demo WSGI app (scripts/demo.sh serves it at /app/ through pools.d/app.toml).

A plain PEP 3333 app with no dependencies: `application` is the callable drover looks for
when pools.d/app.toml says app = "hello" (the same as "hello:application").

    GET  /app/          this page: what the worker saw of the request
    POST /app/echo      the size and SHA-256 of the request body, read from wsgi.input
    GET  /app/stream    five lines, sent to the client as the app yields them
    GET  /app/error     raises: the client gets a 500, drover's log the traceback, and
                        the worker lives on

A demo app: do not deploy it.
"""

import hashlib
import os
import pwd
import sys
import time

# Runs once, at import. With preload = true (the default) that is in the zygote, before the
# workers are forked: every worker shares this module, and shows the zygote's pid here.
# With preload = false each worker imports the app itself, and shows its own pid.
LOADED_IN_PID = os.getpid()


def application(environ, start_response):
    path = environ.get("PATH_INFO") or "/"
    if path == "/":
        return hello(environ, start_response)
    if path == "/echo" and environ["REQUEST_METHOD"] == "POST":
        return echo(environ, start_response)
    if path == "/stream":
        return stream(start_response)
    if path == "/error":
        environ["wsgi.errors"].write("hello.py: /error was asked for; raising on purpose\n")
        raise RuntimeError("an error on purpose, from examples/app/hello.py")
    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
    return [b"not found: try /, /echo (POST), /stream or /error under the mount\n"]


def hello(environ, start_response):
    lines = ["Hello from drover (Python WSGI)", ""]
    for key in (
        "REQUEST_METHOD",
        "REQUEST_URI",
        "SCRIPT_NAME",
        "PATH_INFO",
        "QUERY_STRING",
        "wsgi.url_scheme",
        "SERVER_SOFTWARE",
        "REMOTE_ADDR",
    ):
        lines.append(f"{key:<18} {environ.get(key, '')}")
    pid = os.getpid()
    loaded = "the zygote, preload = true" if LOADED_IN_PID != pid else "this worker, preload = false"
    lines += [
        f"{'Python':<18} {sys.version.split()[0]}",
        f"{'worker pid':<18} {pid}",
        f"{'app loaded in':<18} pid {LOADED_IN_PID} ({loaded})",
        f"{'worker user':<18} {pwd.getpwuid(os.geteuid()).pw_name}",
    ]
    body = ("\n".join(lines) + "\n").encode()
    start_response(
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]


def echo(environ, start_response):
    # wsgi.input is bounded by CONTENT_LENGTH: read() returns b"" at the end of the body.
    digest, size = hashlib.sha256(), 0
    while chunk := environ["wsgi.input"].read(64 * 1024):
        digest.update(chunk)
        size += len(chunk)
    start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
    return [f"{size} bytes, sha256 {digest.hexdigest()}\n".encode()]


def stream(start_response):
    # A generator: drover sends each chunk as it is yielded. nginx buffers FastCGI responses
    # unless told otherwise; X-Accel-Buffering: no makes it pass them on at once.
    start_response(
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"), ("X-Accel-Buffering", "no")],
    )

    def chunks():
        for n in range(1, 6):
            yield f"chunk {n} of 5 at {time.strftime('%H:%M:%S')}\n".encode()
            if n < 5:
                time.sleep(0.5)

    return chunks()
