"""A Flask app for drover's scenario tests, as a user moving from gunicorn would have one."""

import os
import time

from flask import Flask, request, url_for

app = Flask(__name__)


@app.route("/echo", methods=["GET", "POST"])
def echo():
    lines = ["method=" + request.method, "pid=%d" % os.getpid()]
    lines += ["get.%s=%s" % kv for kv in sorted(request.args.items())]
    lines += ["post.%s=%s" % kv for kv in sorted(request.form.items())]
    return "\n".join(lines) + "\n", 200, {"Content-Type": "text/plain; charset=utf-8"}


@app.route("/hello")
def hello():
    lines = [
        "script_root=" + request.script_root,
        "path=" + request.path,
        "url_for=" + url_for("hello"),
        "url_for_echo=" + url_for("echo", q="1"),
    ]
    return "\n".join(lines) + "\n", 200, {"Content-Type": "text/plain; charset=utf-8"}


@app.route("/doze")
def doze():
    """Sleeps, then answers what its own request carried: with threads = N, requests
    overlapping in one worker each still see their own args (Flask's request context)."""
    time.sleep(float(request.args.get("s", "1")))
    lines = ["id=" + request.args.get("id", ""), "pid=%d" % os.getpid()]
    return "\n".join(lines) + "\n", 200, {"Content-Type": "text/plain; charset=utf-8"}
