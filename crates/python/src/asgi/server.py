"""drover's ASGI worker: one event loop serving FastCGI connections from nginx.

The connections live in Rust (`_drover_asgi.Hub`: one epoll set the loop watches, the
sockets read and written, the FastCGI records decoded and encoded, each request's scope
built and its `Exchange` and task made, the worker's books kept, the timeouts), and so do
each request's `send` and `receive` (`_drover_asgi.Exchange`, exchange.rs); this module is
the loop's side: each request's coroutine (`Exchange.run`) and the `receive` that must
wait, lifespan, and the worker's life (retire on SIGTERM, max_requests, max_memory or the
master's flag: stop accepting, finish what is in flight, run lifespan shutdown, exit). On an HTTP pool, a WebSocket's connection is
asyncio's transport once the hub hands its socket over (http.py's `WsConn`).
"""

import asyncio
import faulthandler
import os
import signal
import sys
import threading
import traceback

import _drover_asgi as _rs

EXIT_APP_LOAD = 4

# The ASGI version this server speaks. 2.4: send() raises OSError once the client is gone,
# which spares Starlette a task per streaming response to watch for http.disconnect.
ASGI = {"version": "3.0", "spec_version": "2.4"}
# What the hub's fail() says (as its respond(), which `Exchange.send` calls in Rust).
RETIRED = 3
# How often the loop looks at the master's retire flag in the scoreboard.
TICK = 1.0


def log(line):
    sys.stderr.write(line + "\n")


# send() after the client went away (ASGI 2.4): an OSError, raised by `Exchange.send`.
ClientDisconnected = _rs.ClientDisconnected


class Exchange(_rs.Exchange):
    """One request on the hub, named by `cid`: its ASGI cycle and task. `send`, `receive`
    and the state they share are in Rust (`exchange.rs`): a send or receive that need not
    wait returns an awaitable already done, and costs no coroutine. What stays here is the
    request's coroutine and the receive that must wait for body."""

    __slots__ = ()

    async def waiting(self):
        """`receive()` when nothing is there yet: waits for body, the response's end or
        the client's going."""
        while True:
            await self.wait()
            message = self.take()
            if message is not None:
                return message

    async def run(self, worker, scope):
        try:
            await worker.app(scope, self.receive, self.send)
        except BaseException as exc:
            if not self.gone:
                log(f"Exception in ASGI app ({scope['method']} {scope['path']}):\n"
                    + "".join(traceback.format_exception(exc)).rstrip())
            worker.failed(self)
        else:
            if not self.complete:
                if not self.gone:
                    what = "finishing" if self.started else "starting"
                    log(f"ASGI app returned without {what} its response "
                        f"({scope['method']} {scope['path']})")
                worker.failed(self)
        finally:
            self.finished()


class Lifespan:
    """The lifespan protocol, in this worker, around its serving."""

    def __init__(self, worker):
        self.worker = worker
        self.loop = worker.loop
        self.queue = asyncio.Queue()
        self.started = self.loop.create_future()
        self.stopped = self.loop.create_future()
        self.engaged = False
        self.failure = None
        self.task = None

    async def main(self):
        scope = {"type": "lifespan", "asgi": ASGI, "state": self.worker.state}
        try:
            await self.worker.app(scope, self.receive, self.send)
        except BaseException as exc:
            if not self.started.done():
                # An app that does not speak lifespan raises on its scope (uvicorn's
                # "auto"): it is served without. One that took the startup event and
                # raised failed its startup.
                if self.engaged:
                    self.failure = "".join(traceback.format_exception(exc)).rstrip()
            elif not self.stopped.done():
                log("lifespan shutdown raised:\n"
                    + "".join(traceback.format_exception(exc)).rstrip())
        finally:
            for future in (self.started, self.stopped):
                if not future.done():
                    future.set_result(None)

    async def receive(self):
        self.engaged = True
        return await self.queue.get()

    async def send(self, message):
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self.started.set_result(None)
        elif kind == "lifespan.startup.failed":
            self.failure = message.get("message", "") or "(no message)"
            self.started.set_result(None)
        elif kind == "lifespan.shutdown.complete":
            self.stopped.set_result(None)
        elif kind == "lifespan.shutdown.failed":
            log(f"lifespan shutdown failed: {message.get('message', '')}")
            self.stopped.set_result(None)

    async def startup(self):
        """None when the worker may serve, else why not."""
        self.task = self.loop.create_task(self.main())
        self.queue.put_nowait({"type": "lifespan.startup"})
        await self.started
        return self.failure

    async def shutdown(self):
        if self.task is None or self.task.done():
            return
        self.queue.put_nowait({"type": "lifespan.shutdown"})
        await self.stopped


class Worker:
    def __init__(self, app, mount, read_timeout, loop):
        self.app = app
        self.mount = mount
        self.read_timeout = read_timeout
        self.loop = loop
        self.state = {}
        # The WebSockets' connections, on asyncio's transport (http.py's `WsConn`), and how
        # many are being made.
        self.conns = set()
        # The requests' tasks, oldest first (a dict keeps insertion order), to their end.
        self.tasks = {}
        self.connecting = 0
        # The connections and the requests in hand, in Rust; the loop timer behind the
        # hub's deadlines.
        self.hub = None
        self.timer = None
        self.retiring = False
        # The master shut the listener down: the pool stops, no other worker takes what
        # nginx would send on a kept connection.
        self.stopping = False
        self.done = loop.create_future()

    def task_done(self, task):
        self.tasks.pop(task, None)
        if self.retiring and not self.tasks:
            self.check_done()

    def arm(self, delay):
        """The hub's earliest deadline moved (`Hub.settle`): the loop's timer follows."""
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(delay, self.on_timer)

    def on_timer(self):
        self.timer = None
        self.hub.on_timer()

    def failed(self, exchange):
        """The app raised or returned without finishing its response."""
        if exchange.complete:
            return
        exchange.complete = True
        said = self.hub.fail(exchange.cid, exchange.gone)
        exchange.wake()
        if said == RETIRED:
            self.retire()
        self.hub.settle()

    def tick(self):
        if self.retiring:
            return
        if _rs.must_retire() or _rs.retiring():
            self.retire()
        else:
            self.loop.call_later(TICK, self.tick)

    def retire(self):
        """Stop accepting; finish what is in flight, and close the kept connections as
        nginx can bear (the hub's `retire`); then exit."""
        if self.retiring:
            return
        self.retiring = True
        if self.hub is not None:
            # The accepts stop; what is still in the set (requests in hand, kept
            # connections idling out) is served.
            self.stopping = self.hub.retire(self.stopping)
            self.hub.settle()
            return
        self.check_done()

    def check_done(self):
        if self.hub is not None and self.hub.open():
            return
        if self.retiring and not self.tasks and not self.conns and not self.connecting:
            if not self.done.done():
                self.done.set_result(None)

    def dump_stack(self, signum, frame):
        """SIGUSR2, the master's slowlog: the stack of the request that is slow, in
        faulthandler's format, which the master reads. A task running now holds the loop
        (the signal interrupted its code): its frames. Otherwise the oldest request's task
        (the one the scoreboard shows) waits somewhere: its chain of awaits."""
        lines = [f"Current thread 0x{threading.get_ident():016x} (most recent call first):"]
        running = asyncio.current_task(self.loop) if self.loop.is_running() else None
        if running is not None and frame is not None:
            frames = []
            while frame is not None:
                frames.append(frame)
                frame = frame.f_back
        else:
            oldest = next(iter(self.tasks), None)
            frames = awaited_frames(oldest.get_coro()) if oldest is not None else []
        for f in frames:
            lines.append(f'  File "{f.f_code.co_filename}", line {f.f_lineno} in {f.f_code.co_name}')
        sys.stderr.write("\n".join(lines) + "\n\n")
        sys.stderr.flush()

    async def main(self):
        self.loop.add_signal_handler(signal.SIGTERM, self.retire)
        # A Python-level handler, run on the loop's thread at once (uvloop and asyncio both
        # wake for signals), so that it can tell which task is slow; faulthandler's would
        # show the loop waiting in epoll.
        faulthandler.unregister(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, self.dump_stack)
        lifespan = Lifespan(self)
        failure = await lifespan.startup()
        if failure is not None:
            log(f"lifespan startup failed: {failure}")
            return EXIT_APP_LOAD
        if not self.retiring:
            self.hub = _rs.Hub(self.mount, ASGI, self.read_timeout, self, Exchange)
            self.hub.serve()
            self.tick()
        await self.done
        await lifespan.shutdown()
        return 0


def awaited_frames(coro):
    """The frames of a suspended coroutine and of what it awaits, innermost first."""
    frames = []
    while coro is not None:
        frame = (getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
                 or getattr(coro, "ag_frame", None))
        if frame is None:
            break
        frames.append(frame)
        coro = (getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
                or getattr(coro, "ag_await", None))
    frames.reverse()
    return frames


def new_loop():
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(app, mount, read_timeout):
    loop = new_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(Worker(app, mount, read_timeout, loop).main())
    finally:
        sys.stderr.flush()
