#!/usr/bin/env python3
"""The master's own PSS, after it is ready and after a reload, for one or more `drover`
binaries, each with and without its code paged out (`resident::release_code`; issue 32:
is it still worth its place once the admin tools are in their own crate?).

"Without" runs the same binary with an LD_PRELOAD shim, compiled here, whose `madvise`
ignores MADV_PAGEOUT and passes every other advice on: the binary is the same, only the
page-out does not happen.

Each run: drover with one php-cgi pool (`runtime = "cgi"`, static, 2 children), in a folder
of its own; once its log says `ready: N pools` the master's PSS (/proc/PID/smaps_rollup,
the master alone, not its children) is read after SETTLE seconds; then SIGHUP, and again
after `reload done`. Runs alternate between the binaries and the two modes, ROUNDS times,
and the medians are printed. Every process is started here and stopped by its PID.

    python3 benches/master_pss.py NAME=PATH [NAME=PATH ...] [--rounds 5] [--settle 1.0]

For example `main=/tmp/base/release/drover branch=target/release/drover`.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from harness import pss_kib

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/mman.h>
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
int madvise(void *addr, size_t len, int advice) {
    static int (*real)(void *, size_t, int);
    if (advice == MADV_PAGEOUT) return 0;
    if (!real) real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    return real(addr, len, advice);
}
"""

POOL = """listen = "{sock}"
{user}[pm]
mode = "static"
max_children = 2
[php]
runtime = "cgi"
binary = "php-cgi"
"""


def build_shim(work):
    src, lib = f"{work}/nopageout.c", f"{work}/nopageout.so"
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl"], check=True)
    return lib


def wait_line(path, pattern, start, deadline):
    """Waits until the log at `path` has a line matching `pattern` after byte `start`."""
    while time.monotonic() < deadline:
        with open(path, "rb") as f:
            f.seek(start)
            if re.search(pattern, f.read()):
                return
        time.sleep(0.05)
    raise TimeoutError(f"no {pattern!r} in {path}")


def one_run(work, name, drover, shim, settle):
    """(PSS after ready, PSS after a reload) in KiB for one start of `drover`."""
    folder = tempfile.mkdtemp(dir=work, prefix=f"{name}-")
    os.makedirs(f"{folder}/pools.d")
    open(f"{folder}/drover.toml", "w").close()
    with open(f"{folder}/pools.d/www.toml", "w") as f:
        # As root, a pool says so (`user = "root"`); as anyone else it runs as them.
        user = 'user = "root"\n' if os.geteuid() == 0 else ""
        f.write(POOL.format(sock=f"{folder}/www.sock", user=user))
    log = f"{folder}/log"
    env = dict(os.environ)
    if shim:
        env["LD_PRELOAD"] = shim
    with open(log, "wb") as out:
        proc = subprocess.Popen([drover, "-c", f"{folder}/drover.toml"], stdout=out, stderr=out, env=env)
    try:
        wait_line(log, rb"\bready: \d+ pools", 0, time.monotonic() + 60)
        time.sleep(settle)
        ready = pss_kib(proc.pid, tree=False)
        mark = os.path.getsize(log)
        proc.send_signal(signal.SIGHUP)
        wait_line(log, rb"reload done", mark, time.monotonic() + 60)
        time.sleep(settle)
        reloaded = pss_kib(proc.pid, tree=False)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return ready, reloaded


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binaries", nargs="+", help="NAME=PATH of a drover binary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=1.0)
    args = parser.parse_args()
    binaries = [b.split("=", 1) for b in args.binaries]
    with tempfile.TemporaryDirectory(prefix="master-pss-") as work:
        os.chmod(work, 0o755)
        shim = build_shim(work)
        seen = {}
        for _ in range(args.rounds):
            for name, path in binaries:
                for mode, lib in (("paged out", None), ("kept", shim)):
                    seen.setdefault((name, mode), []).append(one_run(work, name, os.path.abspath(path), lib, args.settle))
        print(f"{'binary':<12} {'code':<10} {'ready MiB':>10} {'reload MiB':>11}  runs")
        for (name, mode), runs in seen.items():
            ready = statistics.median(r for r, _ in runs) / 1024
            reloaded = statistics.median(r for _, r in runs) / 1024
            print(f"{name:<12} {mode:<10} {ready:>10.2f} {reloaded:>11.2f}  {len(runs)}")
        print(f"binary sizes: " + ", ".join(f"{n} {os.path.getsize(p)} B" for n, p in binaries))
        print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
