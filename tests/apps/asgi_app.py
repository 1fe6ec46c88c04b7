"""ASGI fixtures for drover's scenario tests (interface = "asgi").

- `app`: FastAPI. Its lifespan opens a resource (a file) and notes `startup PID` and
  `shutdown PID` in `lifespan.log` beside this file; routes read the resource from the
  lifespan state.
- `scope_app`: a bare ASGI app that echoes its scope as JSON and does not speak lifespan
  (it raises on any other scope type, as many hand-written apps do).
- `failing_app`: its lifespan startup fails with a message.
"""

import asyncio
import hashlib
import json
import os
import sys
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, StreamingResponse

HERE = os.path.dirname(os.path.abspath(__file__))


def note(event):
    with open(os.path.join(HERE, "lifespan.log"), "a") as log:
        log.write(f"{event} {os.getpid()}\n")


@asynccontextmanager
async def lifespan(app):
    resource = open(os.path.join(HERE, "resource.txt"), "a")
    note("startup")
    yield {"resource": resource}
    resource.close()
    note("shutdown")


app = FastAPI(lifespan=lifespan)


@app.get("/hello")
async def hello():
    return {"hello": "world"}


@app.get("/loop", response_class=PlainTextResponse)
async def loop():
    """The module of the running event loop's class: uvloop or asyncio."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@app.get("/pid", response_class=PlainTextResponse)
async def pid():
    return str(os.getpid())


@app.get("/items/{item_id}")
async def item(item_id: int, request: Request, q: str | None = None):
    return {
        "item_id": item_id,
        "q": q,
        "path": request.url.path,
        "root_path": request.scope["root_path"],
        "resource_open": not request.state.resource.closed,
    }


@app.get("/remote", response_class=PlainTextResponse)
async def remote(request: Request):
    """Who the server says the client is, and the scheme: wsgi_app's `/remote`."""
    return (f"remote_addr={request.client.host}\nurl_scheme={request.url.scheme}\n"
            f"pid={os.getpid()}\n")


@app.post("/upload-sha256", response_class=PlainTextResponse)
@app.post("/sha256", response_class=PlainTextResponse)
async def sha256(request: Request):
    digest = hashlib.sha256()
    length = 0
    async for chunk in request.stream():
        digest.update(chunk)
        length += len(chunk)
    return f"{length} {digest.hexdigest()}"


@app.get("/sleep")
async def sleep(s: float):
    await asyncio.sleep(s)
    return {"pid": os.getpid(), "slept": s}


async def level3(s):
    await asyncio.sleep(s)


async def level2(s):
    await level3(s)


async def level1(s):
    await level2(s)


@app.get("/slow")
async def slow(s: float):
    """Three functions deep in a sleep, for the slowlog."""
    await level1(s)
    return {"slept": s}


@app.get("/hold")
async def hold(id: str, s: float):
    """Says on stderr (drover's log) that it holds request `id`, then sleeps `s`."""
    print(f"holding {id}", file=sys.stderr, flush=True)
    await asyncio.sleep(s)
    return {"pid": os.getpid(), "id": id}


@app.get("/boom")
async def boom():
    return 1 / 0


@app.get("/stream")
async def stream(marker: str):
    """`first` at once, then `last` only once the test created the marker file, which it
    does only after reading `first`."""

    async def chunks():
        yield b"first\n"
        for _ in range(300):
            if os.path.exists(marker):
                yield b"last\n"
                return
            await asyncio.sleep(0.05)
        yield b"the marker never came\n"

    return StreamingResponse(chunks(), media_type="text/plain",
                             headers={"X-Accel-Buffering": "no"})


@app.get("/endless")
async def endless(request: Request, id: str):
    """Chunks until the client goes away; then says so on stderr (drover's log)."""

    async def chunks():
        while True:
            if await request.is_disconnected():
                print(f"disconnected {id}", file=sys.stderr, flush=True)
                return
            yield b"x" * 4096 + b"\n"
            await asyncio.sleep(0.02)

    return StreamingResponse(chunks(), media_type="text/plain",
                             headers={"X-Accel-Buffering": "no"})


async def scope_app(scope, receive, send):
    assert scope["type"] == "http", "no lifespan here"
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    shown = {
        key: scope[key]
        for key in ("type", "asgi", "http_version", "method", "scheme", "path",
                    "root_path", "client", "server")
    }
    shown["raw_path"] = scope["raw_path"].decode("latin-1")
    shown["query_string"] = scope["query_string"].decode("latin-1")
    shown["headers"] = [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]]
    shown["body"] = body.decode("latin-1")
    payload = json.dumps(shown).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"x-one", b"1"),
                            (b"x-one", b"2")]})
    await send({"type": "http.response.body", "body": payload})


async def failing_app(scope, receive, send):
    if scope["type"] == "lifespan":
        message = await receive()
        assert message["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    raise RuntimeError("never served")


async def big_app(scope, receive, send):
    """`size` bytes (`?size=N`) in 64 KiB `send()`s, for clients that stop reading; says on
    stderr (drover's log) how its response ended, and the first time a `send()` waits for
    the client (it gives the loop a turn: a callback scheduled before it runs meanwhile)."""
    if scope["type"] != "http":
        return
    loop = asyncio.get_running_loop()
    size = int(scope["query_string"].decode().partition("size=")[2] or 0)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", str(size).encode())]})
    chunk = b"x" * 65536
    sent = 0
    waited = False

    def waiting(at):
        nonlocal waited
        if not waited:
            waited = True
            print(f"big response waits for the client after {at} bytes", file=sys.stderr, flush=True)

    try:
        while sent < size:
            n = min(len(chunk), size - sent)
            handle = loop.call_soon(waiting, sent)
            await send({"type": "http.response.body", "body": chunk[:n], "more_body": sent + n < size})
            handle.cancel()
            sent += n
    finally:
        print(f"big response ended after {sent} bytes", file=sys.stderr, flush=True)
