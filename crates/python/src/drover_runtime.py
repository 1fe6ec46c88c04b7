"""drover's own Python, loaded into drover-python as the module `_drover`.

What is clearer in Python than through pyo3: gunicorn's `import_app` (an app, or an app
factory called with literal arguments), loading a hooks module or a gunicorn.conf.py, and
the `server`, `worker`, `req` and `resp` objects the hooks get, with the attributes hooks
written for gunicorn use. The Rust side (hooks.rs, zygote.rs, worker.rs) decides when each
hook runs.
"""

import ast
import http
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback


class AppImportError(Exception):
    """The app cannot be found or built from the `app` spec (gunicorn's own name)."""


def import_app(spec):
    """gunicorn's `util.import_app`: "module", "module:name" or "module:factory(literals)"."""
    module, _, obj = spec.partition(":")
    obj = obj or "application"
    mod = importlib.import_module(module)
    try:
        expression = ast.parse(obj.strip(), mode="eval").body
    except SyntaxError:
        raise AppImportError(
            "Failed to parse %r as an attribute name or function call." % obj
        ) from None
    if isinstance(expression, ast.Name):
        name, args, kwargs = expression.id, None, None
    elif isinstance(expression, ast.Call):
        if not isinstance(expression.func, ast.Name):
            raise AppImportError("Function reference must be a simple name: %r" % obj)
        name = expression.func.id
        try:
            args = [ast.literal_eval(arg) for arg in expression.args]
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in expression.keywords}
        except ValueError:
            raise AppImportError(
                "Failed to parse arguments as literal values: %r" % obj
            ) from None
        if None in kwargs:
            raise AppImportError("**kwargs are not literal arguments: %r" % obj)
    else:
        raise AppImportError(
            "Failed to parse %r as an attribute name or function call." % obj
        )
    try:
        app = getattr(mod, name)
    except AttributeError:
        raise AppImportError(
            "Failed to find attribute %r in %r." % (name, module)
        ) from None
    if args is not None:
        app = app(*args, **kwargs)
        if app is None:
            raise AppImportError(
                "The factory %r returned None, not a WSGI application." % obj
            )
    if not callable(app):
        raise AppImportError(
            "Application object must be callable: %s:%s is %s."
            % (module, obj, type(app).__name__)
        )
    return app


def load_hooks(spec):
    """`hooks`: a path to a .py file (a gunicorn.conf.py: run as a module named
    `__config__`, as gunicorn runs its config file), else a module name to import."""
    if os.sep in spec or spec.endswith(".py"):
        name = "__config__"
        loader = importlib.machinery.SourceFileLoader(name, spec)
        module_spec = importlib.util.spec_from_file_location(name, spec, loader=loader)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


class Log:
    """gunicorn's logger methods (`server.log`, `worker.log`): each call is one line on the
    process's stderr, which drover's error log takes, tagged with the pool and the pid."""

    def _write(self, level, msg, args, exc_info=False):
        try:
            text = msg % args if args else str(msg)
        except (TypeError, ValueError):
            text = "%s %r" % (msg, args)
        if exc_info:
            text += "\n" + traceback.format_exc().rstrip()
        sys.stderr.write("%s: %s\n" % (level, text))
        sys.stderr.flush()

    def debug(self, msg, *args, **kwargs):
        self._write("debug", msg, args, kwargs.get("exc_info", False))

    def info(self, msg, *args, **kwargs):
        self._write("info", msg, args, kwargs.get("exc_info", False))

    def warning(self, msg, *args, **kwargs):
        self._write("warning", msg, args, kwargs.get("exc_info", False))

    warn = warning

    def error(self, msg, *args, **kwargs):
        self._write("error", msg, args, kwargs.get("exc_info", False))

    def critical(self, msg, *args, **kwargs):
        self._write("critical", msg, args, kwargs.get("exc_info", False))

    def exception(self, msg, *args, **kwargs):
        self._write("error", msg, args, kwargs.get("exc_info", True))

    def log(self, level, msg, *args, **kwargs):
        self._write("log", msg, args, kwargs.get("exc_info", False))


class Server:
    """gunicorn's `server` (its Arbiter) as hooks see it: the pool's zygote."""

    def __init__(self, pool, workers, pid):
        self.pid = pid
        self.proc_name = pool
        self.num_workers = workers
        self.log = Log()


class Worker:
    """gunicorn's `worker` as hooks see it."""

    def __init__(self, pid, ppid, age, log):
        self.pid = pid
        self.ppid = ppid
        # How many workers this pool's zygote had forked when it forked this one (1, 2, ...).
        self.age = age
        self.log = log
        self.alive = True
        self.booted = False
        self.aborted = False

    def __repr__(self):
        return "<drover worker %d>" % self.pid


class Request:
    """gunicorn's `req` as `pre_request` and `post_request` see it, from the environ."""

    def __init__(self, environ):
        self.method = environ.get("REQUEST_METHOD", "")
        uri = environ.get("REQUEST_URI")
        if uri is None:
            uri = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
            if environ.get("QUERY_STRING"):
                uri += "?" + environ["QUERY_STRING"]
        self.uri = uri
        self.path = uri.split("?", 1)[0]
        self.query = environ.get("QUERY_STRING", "")
        self.version = environ.get("SERVER_PROTOCOL", "HTTP/1.1")
        self.headers = [
            (key[5:].replace("_", "-"), value)
            for key, value in environ.items()
            if key.startswith("HTTP_")
        ]
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                self.headers.append((key.replace("_", "-"), environ[key]))


class Response:
    """gunicorn's `resp` as `post_request` sees it: the status that went out."""

    def __init__(self, code):
        self.status_code = code
        if code is None:
            self.status = None
        else:
            try:
                self.status = "%d %s" % (code, http.HTTPStatus(code).phrase)
            except ValueError:
                self.status = str(code)


class RequestTerminated(SystemExit):
    """Raised inside a request past `request_terminate_timeout` (gunicorn's worker does
    `sys.exit(1)` there): a SystemExit, so `except Exception:` in the app does not swallow it,
    while `finally:` blocks and error trackers' middleware see it."""


# gunicorn hooks drover has no moment for, and why: a hooks file that defines one is told
# so when it loads, rather than the hook being skipped in silence.
UNCALLED = {
    "pre_exec": "drover never re-executes a running master; a reload starts new zygotes",
    "on_reload": "a reload starts a new zygote, which calls on_starting",
    "worker_int": "a worker's INT and QUIT are not hooked; TERM retires it after its request",
    "nworkers_changed": "drover's master sizes the pool",
    "ssl_context": "drover speaks no TLS; the web server in front does",
}


class Hooks:
    """The hooks module and the objects its functions get, in a zygote or a worker."""

    def __init__(self, spec, pool, workers):
        self.module = load_hooks(spec) if spec else None
        self.server = Server(pool, workers, os.getpid())
        self.worker = None
        # The request pre_request saw, for post_request.
        self.req = None
        for name, why in UNCALLED.items():
            if self.has(name):
                self.server.log.warning(
                    "the hooks file defines %s, which drover does not call: %s", name, why
                )

    def has(self, name):
        return callable(getattr(self.module, name, None))

    def _call(self, name, *args):
        hook = getattr(self.module, name, None)
        if callable(hook):
            hook(*args)

    def _logged(self, name, *args):
        try:
            self._call(name, *args)
        except Exception:
            self.server.log.exception("the %s hook raised; drover carries on", name)

    # In the zygote.

    def on_starting(self):
        self._call("on_starting", self.server)

    def pre_fork(self, age):
        # gunicorn's worker object before the fork: no pid yet.
        self._logged("pre_fork", self.server, Worker(None, os.getpid(), age, self.server.log))

    def when_ready(self):
        self._logged("when_ready", self.server)

    def child_exit(self, pid, age):
        self._logged("child_exit", self.server, Worker(pid, os.getpid(), age, self.server.log))

    def on_exit(self):
        self._logged("on_exit", self.server)

    # In a worker.

    def post_fork(self, age):
        # The server as the worker sees it: its pid is the zygote's.
        self.server.pid = os.getppid()
        self.worker = Worker(os.getpid(), os.getppid(), age, self.server.log)
        self._call("post_fork", self.server, self.worker)

    def post_worker_init(self):
        self.worker.booted = True
        self._call("post_worker_init", self.worker)

    def worker_exit(self):
        self.worker.alive = False
        self._logged("worker_exit", self.server, self.worker)

    def pre_request(self, environ):
        self.req = Request(environ)
        self._logged("pre_request", self.worker, self.req)

    def post_request(self, environ, code):
        req = self.req or Request(environ)
        self.req = None
        self._logged("post_request", self.worker, req, environ, Response(code))

    def worker_abort(self):
        """The request is past request_terminate_timeout: gunicorn's worker_abort, then the
        exception to raise inside the request."""
        self.worker.alive = False
        self.worker.aborted = True
        self._logged("worker_abort", self.worker)
        return RequestTerminated("drover: the request ran past request_terminate_timeout")
