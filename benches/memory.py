#!/usr/bin/env python3
"""Pools in a 512 MiB memory cgroup under overload: drover with max_children = "auto",
drover with a fixed max_children that is too high, and php-fpm with the same fixed
pm.max_children, for a PHP pool and a Python pool (docs/memory.md, issue 23).

Each request builds a 40 MiB string (PHP: str_repeat; Python: a bytearray) and holds it
0.7 s. For each case: a cgroup v1 (or v2) memory cgroup below this process's own, with a
512 MiB hard limit, the backend started inside it, nginx outside it; 2 warm-up requests,
then CLIENTS concurrent clients sending EACH requests. Reported: the max_children drover
computed (its last sizing line) against hand sizing (512 MiB / measured peak per worker),
answers by status, the cgroup's OOM kills and peak, and whether the backend's master is
still up.

Needs root, nginx, php8.2-fpm and a drover build (`--drover`, default target/fast/drover).
Every process is started here and stopped by its PID; the cgroups are removed after.

    python3 benches/memory.py [--drover target/fast/drover] [--clients 32] [--each 3]
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from harness import Backend, behind_nginx, descendants, timed_get

MIB = 1024 * 1024
LIMIT = 512 * MIB
HELD_MIB = 40
TOO_HIGH = 40

PHP = f"<?php $s = str_repeat('x', {HELD_MIB} * 1024 * 1024); usleep(700000); echo getmypid(), ' ', strlen($s);"
PY = f"""import os, time

def application(environ, start_response):
    held = bytearray({HELD_MIB} * 1024 * 1024)
    time.sleep(0.7)
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'%d %d' % (os.getpid(), len(held))]
"""


class Cgroup:
    """A memory cgroup below ours with a hard limit; `wrap` prefixes a command so that it
    starts inside."""

    def __init__(self, name, limit):
        own = open("/proc/self/cgroup").read().splitlines()
        v1 = [l.split(":", 2)[2] for l in own if "memory" in l.split(":", 2)[1].split(",")]
        if v1:
            self.v2, self.dir = False, f"/sys/fs/cgroup/memory{v1[0].rstrip('/')}/{name}"
            limit_file = "memory.limit_in_bytes"
        else:
            parent = [l[3:] for l in own if l.startswith("0::")][0].rstrip("/")
            self.v2, self.dir = True, f"/sys/fs/cgroup{parent}/{name}"
            limit_file = "memory.max"
        os.mkdir(self.dir)
        with open(f"{self.dir}/{limit_file}", "w") as f:
            f.write(str(limit))

    def wrap(self, argv):
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', f"{self.dir}/cgroup.procs", *argv]

    def read(self, name):
        try:
            return open(f"{self.dir}/{name}").read()
        except OSError:
            return ""

    def oom_kills(self):
        text = self.read("memory.events" if self.v2 else "memory.oom_control")
        return int((re.search(r"^oom_kill (\d+)", text, re.M) or [0, 0])[1])

    def peak(self):
        text = self.read("memory.peak" if self.v2 else "memory.max_usage_in_bytes").strip()
        return int(text) if text.isdigit() else 0

    def remove(self):
        for _ in range(100):
            pids = [int(p) for p in self.read("cgroup.procs").split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        os.rmdir(self.dir)


def drover_case(work, drover, runtime, pm, name):
    folder = f"{work}/{name}"
    os.makedirs(f"{folder}/pools.d", exist_ok=True)
    sock = f"{folder}/bench.sock"
    if runtime == "php":
        table = '[php]\nruntime = "embed"\n'
    else:
        table = f'[python]\napp = "hold_app:application"\npython_path = ["{work}"]\n'
    user = 'user = "root"\n' if os.geteuid() == 0 else ""
    with open(f"{folder}/drover.toml", "w") as f:
        f.write('error_log = "stderr"\nlog_level = "info"\n')
    with open(f"{folder}/pools.d/bench.toml", "w") as f:
        f.write(f'listen = "{sock}"\nlisten_mode = "0666"\n{user}\n[pm]\n{pm}\n{table}')
    return [drover, "-c", f"{folder}/drover.toml"], sock


def fpm_case(work):
    sock = f"{work}/fpm.sock"
    user = "user = www-data\ngroup = www-data\n" if os.geteuid() == 0 else ""
    conf = f"{work}/php-fpm.conf"
    with open(conf, "w") as f:
        f.write(f"[global]\npid = {work}/php-fpm.pid\nerror_log = {work}/php-fpm.log\n\n"
                f"[www]\n{user}listen = {sock}\nlisten.mode = 0666\npm = static\n"
                f"pm.max_children = {TOO_HIGH}\n")
    return ["/usr/sbin/php-fpm8.2", "--nodaemonize", "--fpm-config", conf], sock


def run(work, name, argv, sock, path, args):
    cgroup = Cgroup(f"drover-bench-{os.getpid()}-{re.sub('[^a-z0-9]', '-', name)}", LIMIT)
    log_path = f"{work}/{re.sub('[^a-z0-9]', '-', name)}.log"
    result = {"case": name}
    try:
        with open(log_path, "w") as log:
            backend = Backend(name, cgroup.wrap(argv), f"unix:{sock}")
            backend.start(log)
            deadline = time.time() + 20
            while not os.path.exists(sock) and time.time() < deadline:
                time.sleep(0.02)
            with behind_nginx(work, backend, log) as port:
                for _ in range(2):
                    timed_get(port, path, timeout=30)
                time.sleep(1.5)
                with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
                    answers = list(pool.map(lambda _: timed_get(port, path, timeout=60),
                                            range(args.clients * args.each)))
                result["alive"] = backend.proc.poll() is None
                result["processes"] = len(descendants(backend.proc.pid)) - 1
        statuses = {}
        for _, status, _ in answers:
            statuses[status] = statuses.get(status, 0) + 1
        result["answers"] = statuses
        result["oom_kills"] = cgroup.oom_kills()
        result["peak_mib"] = round(cgroup.peak() / MIB, 1)
        text = open(log_path).read()
        sizing = re.findall(r"max_children = (\d+) from .*", text)
        result["sized"] = [int(n) for n in sizing]
        last = re.findall(r"max_children = \d+ from .*", text)
        result["last_sizing"] = last[-1] if last else None
        peak = re.findall(r"([\d.]+) MiB per worker \(highest PSS", text)
        result["worker_mib"] = float(peak[-1]) if peak else None
        # Includes the bench's own SIGKILL of what outlives SIGTERM at the stop.
        result["sigkill_lines"] = len(re.findall(r"exited on SIGKILL", text))
    finally:
        cgroup.remove()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drover", default="target/fast/drover")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--each", type=int, default=3)
    args = parser.parse_args()
    drover = os.path.abspath(args.drover)
    work = tempfile.mkdtemp(prefix="drover-memory-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/www")
    with open(f"{work}/www/hold.php", "w") as f:
        f.write(PHP)
    with open(f"{work}/hold_app.py", "w") as f:
        f.write(PY)
    auto = 'mode = "dynamic"\nmax_children = "auto"\nmin_spare_servers = 1\nmax_spare_servers = 4\nstart_servers = 2\n'
    fixed = f'mode = "static"\nmax_children = {TOO_HIGH}\n'
    cases = [
        ("drover php auto", *drover_case(work, drover, "php", auto, "php-auto"), "/hold.php"),
        (f"drover php fixed {TOO_HIGH}", *drover_case(work, drover, "php", fixed, "php-fixed"), "/hold.php"),
        (f"php-fpm fixed {TOO_HIGH}", *fpm_case(work), "/hold.php"),
        ("drover python auto", *drover_case(work, drover, "python", auto, "py-auto"), "/hold"),
        (f"drover python fixed {TOO_HIGH}", *drover_case(work, drover, "python", fixed, "py-fixed"), "/hold"),
    ]
    results = []
    try:
        for name, argv, sock, path in cases:
            if os.path.exists(sock):
                os.unlink(sock)
            result = run(work, name, argv, sock, path, args)
            results.append(result)
            print(result, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"| case | computed max_children | hand sizing (512 MiB / peak per worker) | answers | "
          f"OOM kills | cgroup peak MiB | master up |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        hand = f"{int(512 // r['worker_mib'])} ({r['worker_mib']} MiB)" if r.get("worker_mib") else "-"
        sized = r["sized"][-1] if r["sized"] else "-"
        print(f"| {r['case']} | {sized} | {hand} | {r['answers']} | {r['oom_kills']} | "
              f"{r['peak_mib']} | {'yes' if r.get('alive') else 'no'} |")


if __name__ == "__main__":
    main()
