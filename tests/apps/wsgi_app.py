"""A plain PEP 3333 app for drover's scenario tests: one route per behaviour under test.

Every route answers text/plain. Markers a test waits for in drover's log go to
wsgi.errors; files a test waits on are named in the query string (`marker=PATH`).
"""

import hashlib
import json
import os
import random
import sys
import threading
import time
from urllib.parse import parse_qs

TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def query(environ):
    """The query string's fields, one value each."""
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def wait_for_file(path, timeout=20.0):
    """True once `path` exists; False after `timeout` seconds (the test gave up)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def echo(environ, start_response):
    """What the app received, one `name=value` per line. PATH_INFO is decoded as PEP 3333
    asks: the server's bytes as latin-1, so the app re-encodes and decodes UTF-8."""
    path = environ["PATH_INFO"].encode("latin-1").decode("utf-8")
    lines = [
        "method=" + environ["REQUEST_METHOD"],
        "script_name=" + environ["SCRIPT_NAME"],
        "path_info=" + path,
        "query_string=" + environ.get("QUERY_STRING", ""),
        "content_length=" + environ.get("CONTENT_LENGTH", ""),
        "pid=%d" % os.getpid(),
    ]
    lines += ["get.%s=%s" % kv for kv in sorted(query(environ).items())]
    if environ["REQUEST_METHOD"] == "POST":
        size = int(environ.get("CONTENT_LENGTH") or 0)
        form = parse_qs(environ["wsgi.input"].read(size).decode("utf-8"))
        lines += ["post.%s=%s" % (k, v[0]) for k, v in sorted(form.items())]
    start_response("200 OK", TEXT + [("X-App", "wsgi")])
    return [("\n".join(lines) + "\n").encode("utf-8")]


def pid(environ, start_response):
    start_response("200 OK", TEXT)
    return [str(os.getpid()).encode()]


def upload_sha256(environ, start_response):
    """Reads wsgi.input in 64 KiB chunks; answers `LENGTH SHA256`."""
    digest, length = hashlib.sha256(), 0
    stream = environ["wsgi.input"]
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        digest.update(chunk)
        length += len(chunk)
    start_response("200 OK", TEXT)
    return [("%d %s" % (length, digest.hexdigest())).encode()]


def big(environ, start_response):
    """`size` reproducible random bytes; their sha256 in X-Sha256."""
    size = int(query(environ)["size"])
    data = random.Random(size).randbytes(size)
    start_response("200 OK", [
        ("Content-Type", "application/octet-stream"),
        ("X-Sha256", hashlib.sha256(data).hexdigest()),
    ])
    return [data]


def stream(environ, start_response):
    """`first` at once, then `last` only after the test created the marker file: the test
    creates it only once it has read `first`."""
    marker = query(environ)["marker"]
    start_response("200 OK", TEXT + [("X-Accel-Buffering", "no")])
    yield b"first\n"
    yield b"last\n" if wait_for_file(marker) else b"the marker never came\n"


def cookies(environ, start_response):
    start_response("200 OK", TEXT + [("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/")])
    return [b"two cookies"]


def write(environ, start_response):
    """The legacy write() callable, then the returned iterable."""
    write = start_response("200 OK", TEXT)
    write(b"written ")
    write(b"through write(), ")
    return [b"then returned"]


def exc_after_body(environ, start_response):
    """PEP 3333: start_response with exc_info after the head went out re-raises."""
    start_response("200 OK", TEXT + [("X-Accel-Buffering", "no")])
    yield b"partial-"
    try:
        raise RuntimeError("marker-exc-after-body")
    except RuntimeError:
        start_response("500 Internal Server Error", TEXT, sys.exc_info())
    yield b"never sent"


def exc_before_body(environ, start_response):
    """PEP 3333: start_response with exc_info before any body replaces the head."""
    start_response("200 OK", TEXT)
    try:
        raise ValueError("marker-exc-before-body")
    except ValueError:
        start_response("503 Service Unavailable", TEXT + [("X-Error", "replaced")], sys.exc_info())
    return [b"the app's own error page"]


class Closing:
    """An iterable whose close() says so on wsgi.errors: `marker-closed ID`."""

    def __init__(self, environ, chunks):
        self.errors = environ["wsgi.errors"]
        self.id = query(environ).get("id", "-")
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        self.errors.write("marker-closed %s\n" % self.id)
        self.errors.flush()


def closing(environ, start_response):
    start_response("200 OK", TEXT)
    return Closing(environ, [b"closing ", b"body"])


def endless(environ, start_response):
    """Streams 1 KiB every 20 ms for up to 30 s; close() reports as for /closing."""

    def chunks():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            yield b"x" * 1023 + b"\n"
            time.sleep(0.02)

    start_response("200 OK", TEXT + [("X-Accel-Buffering", "no")])
    return Closing(environ, chunks())


def errors(environ, start_response):
    err = environ["wsgi.errors"]
    err.write("marker-wsgi-errors one\n")
    err.writelines(["marker-wsgi-errors two\n"])
    err.flush()
    return pid(environ, start_response)


def fail(environ, start_response):
    raise RuntimeError("marker-app-exception")


def bad_status(environ, start_response):
    start_response("OK", TEXT)
    return [b"a status without a code"]


def bad_header(environ, start_response):
    start_response("200 OK", TEXT + [("X-Marker-Bad-Header", "a\nInjected: 1")])
    return [b"a header with a line break"]


# The warm-up requests (drover's `warmup`) this process holds the results of, as "PID:QUERY":
# filled in the zygote, inherited by every worker it forks.
WARMED = []


def warm(environ, start_response):
    """A warm-up request records itself; any request answers with what this process holds."""
    if environ.get("DROVER_WARMUP") == "1":
        WARMED.append("%d:%s" % (os.getpid(), environ.get("QUERY_STRING", "")))
    start_response("200 OK", TEXT)
    return [("pid=%d warmed=%s" % (os.getpid(), ",".join(WARMED))).encode()]


# Environs the app keeps after their response, as a debugging middleware might.
KEPT = []


def keep(environ, start_response):
    KEPT.append(environ)
    start_response("200 OK", TEXT)
    return [b"kept %d" % len(KEPT)]


def sleep(environ, start_response):
    """Creates the marker file, then takes 2 s."""
    open(query(environ)["marker"], "w").close()
    time.sleep(2)
    start_response("200 OK", TEXT)
    return [b"done"]


def print_json(environ, start_response):
    """Prints one JSON line to stdout, as an app logging for a collector does, and answers
    with that line. `id` names it; `pad` adds that many bytes to it."""
    q = query(environ)
    record = {"event": "marker-print", "id": q.get("id", ""), "pid": os.getpid()}
    record["text"] = 'tab\there, "quoted"' + "x" * int(q.get("pad", "0"))
    line = json.dumps(record)
    print(line, flush=True)
    start_response("200 OK", TEXT)
    return [line.encode()]


def remote(environ, start_response):
    """Who the server says the client is: REMOTE_ADDR and wsgi.url_scheme."""
    lines = [
        "remote_addr=" + environ.get("REMOTE_ADDR", ""),
        "url_scheme=" + environ["wsgi.url_scheme"],
        "pid=%d" % os.getpid(),
    ]
    start_response("200 OK", TEXT)
    return [("\n".join(lines) + "\n").encode()]


def nap(environ, start_response):
    """Takes 50 ms, then answers the pid: concurrent naps need several workers."""
    time.sleep(0.05)
    return pid(environ, start_response)


def doze(environ, start_response):
    """Sleeps `s` seconds (releasing the GIL, as a database wait does), then answers the
    pid and the thread: threads = N overlaps N of these in one worker."""
    time.sleep(float(query(environ).get("s", "1")))
    start_response("200 OK", TEXT)
    body = "pid=%d\nthread=%d\nmultithread=%s\n" % (
        os.getpid(),
        threading.get_ident(),
        environ["wsgi.multithread"],
    )
    return [body.encode()]


ROUTES = {
    "/pid": pid,
    "/doze": doze,
    "/nap": nap,
    "/remote": remote,
    "/upload-sha256": upload_sha256,
    "/big": big,
    "/stream": stream,
    "/cookies": cookies,
    "/write": write,
    "/exc-after-body": exc_after_body,
    "/exc-before-body": exc_before_body,
    "/closing": closing,
    "/endless": endless,
    "/errors": errors,
    "/fail": fail,
    "/bad-status": bad_status,
    "/bad-header": bad_header,
    "/sleep": sleep,
    "/warm": warm,
    "/keep": keep,
    "/print-json": print_json,
}


def application(environ, start_response):
    """Any other path echoes the request."""
    return ROUTES.get(environ["PATH_INFO"], echo)(environ, start_response)
