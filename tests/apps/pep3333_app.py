"""A small app wrapped in wsgiref.validate.validator, for drover's PEP 3333 conformance test.

The validator checks what the server hands the app (the environ, wsgi.input, wsgi.errors,
start_response) and what the server does with the result (iterates it, calls close()), and
raises AssertionError on anything PEP 3333 does not allow. drover turns that into a 500 and
a traceback in its log, which the test looks for.
"""

from wsgiref.validate import validator


def app(environ, start_response):
    method = environ["REQUEST_METHOD"]
    body = b""
    if method == "POST":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.errors"].write("pep3333 %s %s\n" % (method, environ["PATH_INFO"]))
    environ["wsgi.errors"].flush()
    lines = [
        "method=" + method,
        "path_info=" + environ["PATH_INFO"],
        "query_string=" + environ.get("QUERY_STRING", ""),
        "content_type=" + environ.get("CONTENT_TYPE", ""),
        "content_length=" + environ.get("CONTENT_LENGTH", ""),
        "body=" + body.decode("latin-1"),
    ]
    out = ("\n".join(lines) + "\n").encode("utf-8")
    start_response(
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(out)))],
    )
    return [out]


application = validator(app)
