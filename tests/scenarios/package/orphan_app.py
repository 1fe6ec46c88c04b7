"""A WSGI app that leaves an orphan behind: each request double-forks a `sleep` whose
parent exits at once, so the sleep is handed to drover (the subreaper, or PID 1). GET
/PATH?SECONDS: the sleep's argument is SECONDS, which the test also uses to find it."""

import os


def application(environ, start_response):
    seconds = environ.get("QUERY_STRING") or "0.2"
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, 4096)
            os.execvp("sleep", ["sleep", seconds])
        os._exit(0)
    os.waitpid(child, 0)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"spawned\n"]
