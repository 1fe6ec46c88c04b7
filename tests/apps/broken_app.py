"""An app module that cannot be imported: drover must report it once and stop the pool."""

raise RuntimeError("marker-import-failure")


def application(environ, start_response):
    start_response("200 OK", [])
    return [b"unreachable"]
