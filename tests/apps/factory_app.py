"""App factories for drover's scenario tests: `app = "factory_app:create_app(...)"`, as
gunicorn takes "myapp:create_app()"."""

import os

from flask import Flask

# How many times a factory ran in this process (the zygote, or a worker without preload).
calls = []


def create_app(env="default", debug=None, **extra):
    """A plain WSGI app that answers with the arguments it was built with."""
    calls.append((env, debug, extra))

    def application(environ, start_response):
        body = "env=%r debug=%r extra=%r calls=%d pid=%d\n" % (
            env,
            debug,
            sorted(extra.items()),
            len(calls),
            os.getpid(),
        )
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body.encode()]

    return application


def create_flask_app():
    """Flask's recommended layout: the app is built by a function."""
    app = Flask(__name__)

    @app.route("/hello")
    def hello():
        return "hello from a Flask factory, pid %d\n" % os.getpid()

    return app


def not_an_app():
    return 42
