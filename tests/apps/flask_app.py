"""A Flask app for drover's scenario tests, as a user moving from gunicorn would have one."""

import os

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
