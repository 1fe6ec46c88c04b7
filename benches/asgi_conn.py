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
    python3 benches/asgi_conn.py /run/a.sock:PID --floor          # beside the kernel's floor

With --floor, three more servers take part in the same rounds, with the same client and
the same /proc accounting: benches/conn_floor.c (compiled here with `cc -O2` into a
temporary folder), the least a FastCGI responder can do per request, waiting in epoll as an
event loop does ("epoll"), blocking in accept and read as a pre-fork worker does
("blocking"), and in epoll with its accepts through io_uring on a blocking listener, as
drover's ASGI hub does ("uring"). What a new connection costs them more than a kept one is
the kernel's part, which no server removes; a pool's new − kept less the epoll floor's is
what is left to the server, less the uring floor's what is left to drover's own code.

Prints, per pool, the median worker CPU per request kept, new, and their difference; with
--floor, each pool's difference less each floor's, paired round by round (the median of
the rounds' differences).
"""

import argparse
import os
import socket
import statistics
import struct
import subprocess
import tempfile
from multiprocessing import Process

HERE = os.path.dirname(os.path.abspath(__file__))

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


def floors(folder):
    """The floor servers of conn_floor.c, built and started in `folder`: [(name, socket, Popen)]."""
    binary = f"{folder}/conn_floor"
    subprocess.run(["cc", "-O2", "-o", binary, f"{HERE}/conn_floor.c"], check=True)
    out = []
    for mode in ("epoll", "blocking", "uring"):
        path = f"{folder}/{mode}.sock"
        proc = subprocess.Popen([binary, path, mode], stdout=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"conn_floor {mode} did not start")
        out.append((f"floor ({mode})", path, proc))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pools", nargs="*", help="SOCKET:WORKER_PID")
    parser.add_argument("--requests", type=int, default=3000, help="per round, per client")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--floor", action="store_true",
                        help="measure conn_floor.c's epoll and blocking servers in the same rounds")
    args = parser.parse_args()
    if not args.pools and not args.floor:
        parser.error("name a pool (SOCKET:WORKER_PID), or --floor")
    # (name, socket, pid) of every server measured.
    servers = [(path, path, int(pid)) for path, pid in (pool.rsplit(":", 1) for pool in args.pools)]
    started = []
    with tempfile.TemporaryDirectory(prefix="conn-floor-") as folder:
        try:
            if args.floor:
                started = floors(folder)
                servers += [(name, path, proc.pid) for name, path, proc in started]
            seen = run(servers, args)
        finally:
            for _, _, proc in started:
                proc.terminate()
                proc.wait()
    report(seen, args)


def run(servers, args):
    """Every round, every server, kept then new: {server: {keep: [(on CPU, user, system)]}}."""
    for _, path, _ in servers:
        client(path, 500, True)
        client(path, 500, False)
    seen = {server: {True: [], False: []} for server in servers}
    for round_ in range(args.rounds):
        # The order turns each round, so that no server always follows the same one.
        shift = round_ % len(servers)
        for server in servers[shift:] + servers[:shift]:
            _, path, pid = server
            for keep in (True, False):
                seen[server][keep].append(measure(path, pid, args.requests, keep, args.clients))
    return seen


def report(seen, args):
    print(f"worker CPU per request, µs: median of {args.rounds} rounds of {args.requests} requests, "
          f"{args.clients} client(s)\n")
    print("| server | kept | new | new − kept | kept user, system | new user, system |")
    print("|---|---|---|---|---|---|")
    split = lambda ms: "%.1f, %.1f" % (statistics.median(m[1] for m in ms), statistics.median(m[2] for m in ms))
    # Each round's new − kept, per server, for the pairing below.
    extra = {}
    for (name, path, pid), by in seen.items():
        kept = statistics.median(m[0] for m in by[True])
        new = statistics.median(m[0] for m in by[False])
        extra[name] = [n[0] - k[0] for k, n in zip(by[True], by[False])]
        label = name if name.startswith("floor") else f"{path} (worker {pid})"
        print(f"| {label} | {kept:.1f} | {new:.1f} | {new - kept:.1f} | {split(by[True])} | {split(by[False])} |")
    floors = [name for name in extra if name.startswith("floor")]
    pools = [name for name in extra if not name.startswith("floor")]
    if floors and pools:
        print()
        for pool in pools:
            for floor in floors:
                paired = [p - f for p, f in zip(extra[pool], extra[floor])]
                print(f"- {pool}: new − kept exceeds {floor}'s by {statistics.median(paired):.1f} µs "
                      f"(rounds {min(paired):.1f} to {max(paired):.1f})")
    with open("/proc/loadavg") as f:
        print("\nload average", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
