#!/usr/bin/env python3
"""What a new FastCGI connection per request costs an ASGI worker more than a kept one
(issue 31): a client speaks FastCGI straight to running pools' unix sockets, no nginx, one
request at a time, on one kept connection (FCGI_KEEP_CONN) or on a new connection per
request closed after END_REQUEST (nginx's default wiring), and reads each worker's CPU
from /proc/PID/schedstat (ns on CPU) and /proc/PID/stat (user and system ticks).

Run it against pools of one worker each (`max_children = 1`), started beforehand; with
two (a build before and after a change), the rounds alternate between them, so that both
see the same load:

    python3 benches/asgi_conn.py /run/a.sock:PID [/run/b.sock:PID] --requests 3000 --rounds 6
    python3 benches/asgi_conn.py /run/a.sock:PID --clients 4     # 4 client processes at once

Prints, per pool, the median worker CPU per request kept, new, and their difference.
"""

import argparse
import os
import socket
import statistics
import struct
from multiprocessing import Process

PARAMS = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/", "REQUEST_URI": "/",
          "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_NAME": "localhost",
          "SERVER_PORT": "80", "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "5555", "HTTP_HOST": "localhost"}


def record(kind, content):
    return struct.pack(">BBHHBx", 1, kind, 1, len(content), 0) + content


def request(keep):
    """BEGIN_REQUEST (responder, FCGI_KEEP_CONN when `keep`), the params, empty STDIN."""
    params = b"".join(bytes([len(k), len(v)]) + k.encode() + v.encode() for k, v in PARAMS.items())
    return (record(1, struct.pack(">HB5x", 1, 1 if keep else 0)) + record(4, params) + record(4, b"")
            + record(5, b""))


def answered(sock):
    """Reads records until END_REQUEST."""
    data = b""
    while True:
        got = sock.recv(65536)
        if not got:
            raise SystemExit("the worker closed the connection before END_REQUEST")
        data += got
        at = 0
        while at + 8 <= len(data):
            _, kind, _, length, padding = struct.unpack(">BBHHB", data[at:at + 7])
            if at + 8 + length + padding > len(data):
                break
            if kind == 3:
                return
            at += 8 + length + padding


def client(path, requests, keep):
    ask = request(keep)
    sock = None
    for _ in range(requests):
        if sock is None:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
        sock.sendall(ask)
        answered(sock)
        if not keep:
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def cpu(pid):
    """(user ticks, system ticks, ns on CPU) of process `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/schedstat") as f:
        ns = int(f.read().split()[0])
    return int(fields[11]), int(fields[12]), ns


def measure(path, pid, requests, keep, clients):
    """Worker CPU per request in µs: (on CPU, user, system)."""
    before = cpu(pid)
    if clients == 1:
        client(path, requests, keep)
    else:
        procs = [Process(target=client, args=(path, requests, keep)) for _ in range(clients)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
    after = cpu(pid)
    total, tick = requests * clients, os.sysconf("SC_CLK_TCK")
    return ((after[2] - before[2]) / total / 1000, (after[0] - before[0]) / tick / total * 1e6,
            (after[1] - before[1]) / tick / total * 1e6)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pools", nargs="+", help="SOCKET:WORKER_PID")
    parser.add_argument("--requests", type=int, default=3000, help="per round, per client")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=1)
    args = parser.parse_args()
    pools = [(path, int(pid)) for path, pid in (pool.rsplit(":", 1) for pool in args.pools)]
    for path, pid in pools:
        client(path, 500, True)
        client(path, 500, False)
    seen = {pool: {True: [], False: []} for pool in pools}
    for round_ in range(args.rounds):
        order = pools if round_ % 2 == 0 else pools[::-1]
        for path, pid in order:
            for keep in (True, False):
                seen[(path, pid)][keep].append(measure(path, pid, args.requests, keep, args.clients))
    for (path, pid), by in seen.items():
        kept = statistics.median(m[0] for m in by[True])
        new = statistics.median(m[0] for m in by[False])
        split = lambda ms: "user %.1f, system %.1f" % (statistics.median(m[1] for m in ms),
                                                       statistics.median(m[2] for m in ms))
        print(f"{path} (worker {pid}, {args.clients} client(s)): kept {kept:.1f} µs ({split(by[True])}), "
              f"new {new:.1f} µs ({split(by[False])}), new − kept {new - kept:.1f} µs")
    with open("/proc/loadavg") as f:
        print("load average", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
