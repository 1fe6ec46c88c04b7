"""drover's ASGI worker on an HTTP pool (protocol = "http"): WebSockets.

HTTP/1.1 itself is the hub's (`hub/http.rs`: heads, bodies, keep-alive, pipelining, the
refusals and the clocks, in Rust), and its requests reach server.py's `Exchange` as
FastCGI's do. A GET with `Upgrade: websocket` ends the hub's part: it hands the socket over
(`Worker.upgrade` below), and from then on the connection is asyncio's transport and the
`websockets` package's sans-I/O protocol (handshake checks, frames, ping/pong, the closing
handshake); `WebSocket` below is the ASGI side of it.
"""

import asyncio
import codecs
import socket

import drover_asgi as _server
from drover_asgi import log

import _drover_asgi as _rs

try:
    # The WebSocket codec (sans-I/O): only an app that takes WebSockets needs it.
    from websockets.frames import Opcode
    from websockets.server import ServerProtocol
except ImportError:
    Opcode = ServerProtocol = None

# Set by the worker: the pool's ws_max_size, the largest WebSocket message taken (1009 above).
WS_MAX_SIZE = 16 << 20
# Messages received and not yet taken by the app: at this many, reading pauses (uvicorn's
# ws_max_queue).
WS_MAX_QUEUE = 32
# Bytes a client sends before the app accepts its WebSocket: past this, reading pauses.
WS_PENDING_HIGH = 1 << 16
# A WebSocket that held a message this large gives the heap's free memory back at its close.
WS_BIG = 1 << 20
UTF8 = codecs.getincrementaldecoder("utf-8")
NO_WEBSOCKETS = (b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: 46\r\nConnection: close\r\n\r\n"
                 b"WebSockets need the websockets package (pip).\n")


class WsConn(asyncio.Protocol):
    """A WebSocket's connection, on asyncio's transport once the hub handed it over."""

    def __init__(self, worker, scope, head, rest, unsent):
        self.worker = worker
        self.loop = worker.loop
        self.transport = None
        self.cycle = None
        self.scope, self.head, self.rest, self.unsent = scope, head, rest, unsent
        self.read_paused = False
        self.write_paused = False
        self.drain_waiter = None
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport
        self.worker.conns.add(self)
        if self.unsent:
            transport.write(self.unsent)
        if ServerProtocol is None:
            log("refused a WebSocket: the websockets package is not installed "
                "(pip install websockets)")
            transport.write(NO_WEBSOCKETS)
            transport.close()
            return
        self.cycle = cycle = WebSocket(self, self.scope, self.head)
        cycle.task = task = self.loop.create_task(cycle.run(self.worker))
        self.worker.tasks[task] = None
        if self.rest:
            cycle.feed(self.rest)
        self.scope = self.head = self.rest = self.unsent = None

    def data_received(self, data):
        if self.cycle is not None:
            self.cycle.feed(data)

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        self.worker.conns.discard(self)
        self.worker.hub.release()
        cycle = self.cycle
        if cycle is not None:
            cycle.gone = True
            cycle.wake()
        self.resume_writing()
        self.worker.check_done()

    def pause_reading(self):
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self):
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def pause_writing(self):
        self.write_paused = True

    def resume_writing(self):
        self.write_paused = False
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drained(self):
        if self.drain_waiter is None:
            self.drain_waiter = self.loop.create_future()
        await self.drain_waiter


class WebSocket:
    """A WebSocket's ASGI cycle, on websockets' sans-I/O protocol (the handshake's checks,
    the frames, ping/pong, the closing handshake). Not booked as a request: it may stay open
    for hours, which request_terminate_timeout and the slowlog must not take for a stuck
    request."""

    def __init__(self, conn, scope, head):
        self.conn = conn
        self.scope = scope
        scope["subprotocols"] = [
            p.strip() for n, v in scope["headers"] if n == b"sec-websocket-protocol"
            for p in v.decode("latin-1").split(",") if p.strip()
        ]
        # websockets checks the limit on each frame's declared length, before reading its
        # payload, and on a fragmented message's running total: 1009 past it.
        self.proto = ServerProtocol(max_size=WS_MAX_SIZE)
        self.proto.receive_data(head)
        events = self.proto.events_received()
        self.request = events[0] if events else None
        self.response = None
        self.messages = [{"type": "websocket.connect"}]
        # The message being received: its fragments (str when text, decoded as they come, so
        # that invalid UTF-8 fails at the fragment that has it), its size in bytes.
        self.parts = []
        self.decoder = None
        self.size = 0
        self.peak = 0
        self.waiter = None
        self.accepted = False
        self.closed = False
        self.gone = False
        self.body_done = True
        self.task = None
        self.pending = []
        self.pending_size = 0
        self.queue_paused = False

    def wake(self):
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def flush(self):
        transport = self.conn.transport
        for data in self.proto.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()
        if self.proto.close_expected() or self.proto.state.name == "CLOSED":
            self.conn.loop.call_later(2.0, transport.abort)

    def feed(self, data):
        if not self.accepted:
            self.pending.append(data)
            self.pending_size += len(data)
            if self.pending_size > WS_PENDING_HIGH:
                self.conn.pause_reading()
            return
        proto = self.proto
        proto.receive_data(data)
        for frame in proto.events_received():
            if not self.take(frame):
                break
        exc = proto.parser_exc
        if exc is not None and proto.close_sent is not None and not self.closed:
            # websockets failed the connection (1009 past WS_MAX_SIZE, 1002 for a
            # protocol error) and sent its close frame.
            code = proto.close_sent.code
            log(f"closed a WebSocket with {code}: {exc}"
                + (" (ws_max_size)" if code == 1009 else ""))
            self.drop_message()
            self.disconnect(code, proto.close_sent.reason)
        if proto.close_rcvd is not None or proto.state.name == "CLOSED":
            self.disconnect()
        if len(self.messages) >= WS_MAX_QUEUE and not self.queue_paused:
            self.queue_paused = True
            self.conn.pause_reading()
        self.flush()
        self.wake()

    def take(self, frame):
        """One data frame into the message it belongs to; False when the message is not
        UTF-8 text it said it was (the WebSocket is failed with 1007)."""
        op = frame.opcode
        if op is Opcode.TEXT or op is Opcode.BINARY:
            self.parts = []
            self.size = 0
            self.decoder = UTF8() if op is Opcode.TEXT else None
        elif op is not Opcode.CONT:
            return True
        data = frame.data
        if self.decoder is not None:
            try:
                data = self.decoder.decode(data, frame.fin)
            except UnicodeDecodeError as exc:
                reason = f"invalid UTF-8 in a text message at byte {self.size + exc.start}"
                log(f"closed a WebSocket with 1007: {reason}")
                self.proto.fail(1007, reason)
                self.drop_message()
                self.disconnect(1007, reason)
                return False
        self.parts.append(data)
        self.size += len(frame.data)
        self.peak = max(self.peak, self.size)
        if frame.fin:
            if self.decoder is not None:
                self.messages.append({"type": "websocket.receive", "text": "".join(self.parts)})
            else:
                self.messages.append({"type": "websocket.receive", "bytes": b"".join(self.parts)})
            self.drop_message()
        return True

    def drop_message(self):
        self.parts = []
        self.decoder = None
        self.size = 0

    def disconnect(self, code=None, reason=""):
        if self.closed:
            return
        self.closed = True
        rcvd = self.proto.close_rcvd
        if code is None:
            code = rcvd.code if rcvd is not None else 1006
            reason = rcvd.reason if rcvd is not None else ""
        self.messages.append({"type": "websocket.disconnect", "code": code, "reason": reason})

    def going_away(self):
        """The worker retires: close with 1001 (as uvicorn does), so that the app ends and
        the worker can exit."""
        if self.gone or self.closed:
            return
        if not self.accepted:
            self.reject()
        else:
            self.proto.send_close(1001)
            self.flush()
        self.disconnect(1001)
        self.wake()

    async def receive(self):
        while not self.messages:
            if self.gone:
                self.disconnect()
                continue
            self.waiter = self.conn.loop.create_future()
            await self.waiter
        message = self.messages.pop(0)
        if self.queue_paused and len(self.messages) < WS_MAX_QUEUE // 2:
            self.queue_paused = False
            self.conn.resume_reading()
        return message

    async def send(self, message):
        kind = message["type"]
        if self.gone or self.closed and kind != "websocket.close":
            raise _server.ClientDisconnected("the client went away")
        if kind == "websocket.accept":
            if self.accepted:
                raise RuntimeError("websocket.accept sent twice")
            response = self.proto.accept(self.request)
            if response.status_code == 101:
                subprotocol = message.get("subprotocol")
                if subprotocol:
                    response.headers["Sec-WebSocket-Protocol"] = subprotocol
                for name, value in message.get("headers") or ():
                    response.headers[name.decode("latin-1")] = value.decode("latin-1")
            self.proto.send_response(response)
            self.accepted = True
            self.flush()
            if response.status_code != 101:
                self.closed = True
                raise _server.ClientDisconnected(f"bad handshake: {response.status_code}")
            pending, self.pending = self.pending, []
            self.pending_size = 0
            self.conn.resume_reading()
            for data in pending:
                self.feed(data)
        elif kind == "websocket.send":
            if not self.accepted:
                raise RuntimeError("websocket.send before websocket.accept")
            if message.get("bytes") is not None:
                self.proto.send_binary(message["bytes"])
            else:
                self.proto.send_text(message["text"].encode())
            self.flush()
            if self.conn.write_paused:
                await self.conn.drained()
        elif kind == "websocket.close":
            if not self.accepted:
                self.reject()
            elif not self.closed:
                self.proto.send_close(message.get("code", 1000), message.get("reason") or "")
                self.flush()
            self.closed = True
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} for a WebSocket")

    def reject(self):
        """Closed (or failed) before the handshake was accepted: 403, as ASGI says."""
        if self.accepted or self.gone:
            return
        self.accepted = True
        self.closed = True
        self.proto.send_response(self.proto.reject(403, "Forbidden\n"))
        self.flush()

    async def run(self, worker):
        scope = self.scope
        if worker.state:
            scope["state"] = worker.state.copy()
        try:
            if self.request is None:
                raise RuntimeError("the WebSocket handshake did not parse")
            await worker.app(scope, self.receive, self.send)
        except BaseException as exc:
            if not self.gone and not isinstance(exc, _server.ClientDisconnected):
                log(f"Exception in ASGI app (WebSocket {scope['path']}):\n"
                    + "".join(_server.traceback.format_exception(exc)).rstrip())
            if not self.accepted:
                self.reject()
            elif not self.closed and not self.gone:
                self.proto.send_close(1011)
                self.flush()
                self.closed = True
        else:
            if not self.accepted:
                self.reject()
            elif not self.closed and not self.gone:
                self.proto.send_close(1000)
                self.flush()
                self.closed = True
        finally:
            worker.task_done(self.task)
            if not self.gone:
                self.conn.transport.close()
            self.drop_message()
            self.messages = []
            if self.peak > WS_BIG or self.proto.parser_exc is not None:
                _rs.give_back_memory()


def upgrade(worker, fd, scope, head, rest, unsent):
    """The hub hands over a WebSocket handshake's socket (`hub/http.rs`)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as err:
        log(f"cannot serve a WebSocket: {err}")
        _server.os.close(fd)
        worker.hub.release()
        return
    worker.connecting += 1
    task = worker.loop.create_task(worker.loop.connect_accepted_socket(
        lambda: WsConn(worker, scope, head, rest, unsent), sock))
    task.add_done_callback(lambda task: connected(worker, task))


def connected(worker, task):
    worker.connecting -= 1
    if task.cancelled() or task.exception() is not None:
        if not task.cancelled():
            log(f"cannot serve a WebSocket: {task.exception()}")
        worker.hub.release()
    worker.check_done()


_retire = _server.Worker.retire


def retire(worker):
    """server.py's retire, which closes idle connections; open WebSockets never go idle."""
    _retire(worker)
    for conn in list(worker.conns):
        if isinstance(conn.cycle, WebSocket):
            conn.cycle.going_away()


_server.Worker.retire = retire
_server.Worker.upgrade = upgrade
