"""drover's ASGI worker on an HTTP pool (protocol = "http"): the connection is an HTTP/1.1
client's, not nginx's FastCGI one.

`HttpConn` is server.py's `Conn` with `_drover_asgi.Http` in place of `FastCgi` (the same
methods: heads parsed by the WSGI HTTP path's Rust code, the response framed by it), so the
request cycle, flow control, lingering close and the worker's life are server.py's. What
differs is here: a refused head is answered before the close, a pipelined request waits in
the Rust buffer until the one in hand is answered, and an idle kept connection closes after
keepalive_timeout (a slow head or body after request_read_timeout, or 60 s without one).
"""

from drover_asgi import REQUEST, BODY, REPLY, ASGI, Conn, log

import _drover_asgi as _rs

REFUSE = 4
# Set by the worker: the pool's keepalive_timeout, in seconds.
KEEPALIVE = 5.0
# A head that trickles in without request_read_timeout is bounded all the same.
HEAD_TIMEOUT = 60.0
# Pipelined requests buffered behind the one in hand: past this, reading pauses.
PIPELINE_HIGH = 1 << 16


class HttpConn(Conn):
    """One HTTP/1.1 client connection; requests answered one at a time, in order."""

    def __init__(self, worker):
        self.worker = worker
        self.loop = worker.loop
        self.fcgi = None
        self.transport = None
        self.cycle = None
        self.read_paused = False
        self.write_paused = False
        self.drain_waiter = None
        self.lingering = False
        self.closed = False
        self.timer = None
        self.idle = False
        self.piped = False

    def connection_made(self, transport):
        self.transport = transport
        self.fcgi = _rs.Http(self.worker.mount, ASGI, transport.get_extra_info("socket").fileno())
        self.worker.conns.add(self)
        self.schedule()

    def schedule(self):
        """One clock at a time: idle (keepalive_timeout), a request arriving
        (request_read_timeout), or none while the app has the request."""
        cycle = self.cycle
        if cycle is not None and cycle.body_done:
            self.disarm()
            return
        idle = cycle is None and self.fcgi.buffered() == 0
        if self.timer is not None and self.idle == idle:
            return
        self.disarm()
        self.idle = idle
        if idle:
            self.timer = self.loop.call_later(KEEPALIVE, self.idle_timed_out)
        else:
            timeout = self.worker.read_timeout or HEAD_TIMEOUT
            self.timer = self.loop.call_later(timeout, self.read_timed_out)

    def idle_timed_out(self):
        self.timer = None
        if self.cycle is None and not self.closed:
            self.transport.close()

    def read_timed_out(self):
        self.timer = None
        if self.closed or self.lingering:
            return
        if self.read_paused:
            self.schedule()
            return
        what, received = self.fcgi.waiting()
        log(f"dropped a connection: {what} did not arrive within "
            f"{self.worker.read_timeout or HEAD_TIMEOUT:g}s; {received} bytes received")
        cycle = self.cycle
        if cycle is not None:
            cycle.gone = True
            cycle.wake()
        self.transport.abort()

    def data_received(self, data):
        if self.lingering:
            return
        try:
            events = self.fcgi.feed(data)
        except ValueError as err:
            log(f"closing an HTTP connection: {err}")
            cycle = self.cycle
            if cycle is not None:
                cycle.gone = True
                cycle.wake()
            self.fcgi.gone()
            self.transport.abort()
            return
        for event in events:
            kind = event[0]
            if kind == REQUEST:
                self.start(event[1], event[2], event[3])
            elif kind == BODY:
                if self.cycle is not None:
                    self.cycle.feed(event[1], event[2])
            elif kind == REPLY:
                self.transport.write(event[1])
            elif kind == REFUSE:
                log(f"refused an HTTP request: {event[2]}")
                self.transport.write(event[1])
                self.close()
                return
        if self.cycle is not None and self.cycle.body_done and self.fcgi.buffered() > PIPELINE_HIGH:
            self.piped = True
            self.pause_reading()
        self.schedule()

    def next_request(self):
        """The request in hand is answered: take a pipelined one already buffered."""
        if self.piped:
            self.piped = False
            self.resume_reading()
        if not self.closed and not self.transport.is_closing():
            self.data_received(b"")

    def finished(self, cycle):
        super().finished(cycle)
        if self.cycle is None:
            self.next_request()

    def failed(self, cycle):
        super().failed(cycle)
        if self.cycle is None:
            self.next_request()

