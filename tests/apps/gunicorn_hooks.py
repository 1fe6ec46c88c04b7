"""A gunicorn.conf.py, used unchanged as drover's `[python] hooks` file: gunicorn settings
(plain module variables to drover) and the hooks, each logging one marker line."""

import os

bind = "127.0.0.1:8000"
workers = 4
max_requests = 1000
preload_app = True

SITE = os.environ["HOOKS_SITE"]
# The resource post_fork opens, one per worker.
resource = None


def on_starting(server):
    server.log.info("marker-on_starting pid=%d", server.pid)


def when_ready(server):
    server.log.info("marker-when_ready pid=%d", server.pid)
    if os.path.exists(os.path.join(SITE, "raise-when_ready")):
        raise RuntimeError("marker-when_ready-raised")


def pre_fork(server, worker):
    server.log.info("marker-pre_fork age=%d pid=%s", worker.age, worker.pid)


def worker_int(worker):
    worker.log.info("drover never calls this one, and says so")


def post_fork(server, worker):
    global resource
    resource = "resource-of-%d" % worker.pid
    with open(os.path.join(SITE, "post_fork.log"), "a") as f:
        f.write("%d\n" % worker.pid)
    server.log.info(
        "marker-post_fork pid=%d ppid=%d age=%d server=%d",
        worker.pid,
        worker.ppid,
        worker.age,
        server.pid,
    )


def post_worker_init(worker):
    worker.log.info("marker-post_worker_init pid=%d", worker.pid)


def pre_request(worker, req):
    if req.path == "/raise-pre":
        raise RuntimeError("marker-pre_request-raised")


def post_request(worker, req, environ, resp):
    worker.log.info(
        "marker-post_request %s %s query=%s status=%s pid=%d",
        req.method,
        req.path,
        req.query,
        resp.status,
        worker.pid,
    )


def worker_exit(server, worker):
    server.log.info("marker-worker_exit pid=%d", worker.pid)


def child_exit(server, worker):
    server.log.info("marker-child_exit pid=%d age=%d", worker.pid, worker.age)


def on_exit(server):
    server.log.info("marker-on_exit pid=%d", server.pid)


def worker_abort(worker):
    with open(os.path.join(SITE, "abort-%d" % worker.pid), "w") as f:
        f.write("worker_abort ran\n")
    worker.log.warning("marker-worker_abort pid=%d", worker.pid)
