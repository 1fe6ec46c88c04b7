"""A bare ASGI app for the WebSocket tests (protocol = "http"): `/echo` echoes each
message; the text `close-4001` makes it close with code 4001, `scheme` gets the scope's
scheme back; `/reject` closes before accepting (the client gets 403). Each disconnect is
logged with its code. No lifespan."""

import sys


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"no such page\n"})
        return
    if scope["type"] != "websocket":
        raise RuntimeError("no lifespan here")
    assert (await receive())["type"] == "websocket.connect"
    if scope["path"] == "/reject":
        await send({"type": "websocket.close"})
        return
    offered = scope["subprotocols"]
    await send({"type": "websocket.accept", "subprotocol": offered[0] if offered else None})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            print(f"ws disconnect {message['code']}", file=sys.stderr, flush=True)
            return
        text = message.get("text")
        if text == "scheme":
            await send({"type": "websocket.send", "text": scope["scheme"]})
            continue
        if text == "close-4001":
            await send({"type": "websocket.close", "code": 4001, "reason": "asked"})
            return
        if text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
