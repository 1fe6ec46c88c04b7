#!/usr/bin/env python3
"""The same PHP code in libphp (the shared library drover-php links) and in Debian's PHP
executable, with no server around either: how much of drover-php's gap to php-fpm on real
apps is PHP's own code as a shared library (issue 24, item 16; BENCHMARKS.md, 2026-12-02).

A 15-line embed program (PHP's own embed SAPI, `php_embed_init`, linked to libphpX.Y.so as
drover-php is) and `phpX.Y`, the CLI (a PIE executable built from the same sources and
flags as php-fpmX.Y), run one CPU-bound script (objects, method calls, closures, arrays,
strings, sorting: the kind of work a framework's request is made of) --runs times each,
alternately. Both read the same php.ini and conf.d, with OPcache off (the CLI would not
cache; the embed SAPI might), and the script checks that `ini_get_all()` is the same in
both. Printed: the CPU time (user + system) of each run, the medians and their ratio; with
--callgrind, the instructions of one run of each (valgrind), less those of an empty
script, and their ratio; and how many calls in `execute_ex` (PHP's VM) go through the
PLT in each binary (objdump).

    python3 benches/libphp.py                 # 9 runs each, about 20 s
    python3 benches/libphp.py --callgrind     # and instructions (a minute more)

Needs php-config (php8.2-dev), libphp (libphp8.2-embed), a C compiler; valgrind and
objdump for their figures. Runs nothing as root that needs it; leaves nothing behind.
"""

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

EMBED = r"""
#include <sapi/embed/php_embed.h>

int main(int argc, char **argv)
{
	PHP_EMBED_START_BLOCK(argc, argv)
	zend_file_handle file;
	zend_stream_init_filename(&file, argv[1]);
	php_execute_script(&file);
	zend_destroy_file_handle(&file);
	PHP_EMBED_END_BLOCK()
	return 0;
}
"""

# The work: @ROUNDS@ rounds of building 2,000 objects behind an interface, calling their
# methods, filtering with a closure, joining and splitting strings, grouping by class name
# and sorting with a callback. Prints a checksum and a digest of the ini settings.
SCRIPT = r"""<?php
interface Shape { public function area(): float; }
final class Rect implements Shape {
    public function __construct(private float $w, private float $h) {}
    public function area(): float { return $this->w * $this->h; }
}
final class Circle implements Shape {
    public function __construct(private float $r) {}
    public function area(): float { return M_PI * $this->r ** 2; }
}
function build(int $n): array {
    $out = [];
    for ($i = 0; $i < $n; $i++) {
        $out["k$i"] = $i % 2 ? new Rect($i, $i + 1) : new Circle($i);
    }
    return $out;
}
$t = 0.0;
for ($round = 0; $round < @ROUNDS@; $round++) {
    $shapes = build(2000);
    foreach ($shapes as $s) {
        $t += $s->area();
    }
    $t += count(array_filter($shapes, fn ($s) => $s instanceof Rect));
    $str = implode(',', array_keys($shapes));
    $t += strlen(str_replace('k1', 'x', $str)) + count(explode(',', $str));
    $m = [];
    foreach ($shapes as $k => $s) {
        $m[strtolower(get_class($s))][] = $k;
    }
    $t += count($m['rect'] ?? []);
    usort($m['rect'], fn ($a, $b) => strcmp($a, $b));
}
$ini = ini_get_all(null, false);
// What differs between two SAPIs by design, not by configuration.
unset($ini['html_errors'], $ini['implicit_flush'], $ini['max_execution_time'], $ini['display_errors']);
ksort($ini);
echo sprintf("%.1f", $t), ' ', md5(json_encode($ini)), "\n";
"""


def php_config(tool, arg):
    return subprocess.run([tool, arg], capture_output=True, text=True, check=True).stdout.strip()


def build_embed(work, tool):
    """The embed program, linked to libphpX.Y.so as crates/php/build.rs links drover-php."""
    version = php_config(tool, "--version")
    minor = ".".join(version.split(".")[:2])
    lib_dir = os.path.join(php_config(tool, "--prefix"), "lib")
    name = next((n for n in (f"php{minor}", "php") if os.path.exists(f"{lib_dir}/lib{n}.so")), None)
    if not name:
        sys.exit(f"no libphp{minor}.so in {lib_dir} (install libphp{minor}-embed)")
    with open(f"{work}/embed.c", "w") as f:
        f.write(EMBED)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", *php_config(tool, "--includes").split(), f"{work}/embed.c", "-o", f"{work}/embed",
                    f"-L{lib_dir}", f"-l{name}", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{lib_dir}"],
                   check=True)
    return f"{work}/embed", f"{lib_dir}/lib{name}.so"


def timed(argv, env):
    """One run: (CPU seconds, user + system, of the child; its stdout)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read().decode()
    proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, out.strip()


def instructions(argv, env, work):
    out = f"{work}/callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    text = open(out).read()
    os.unlink(out)
    return int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))


def plt_calls(path, symbol="execute_ex"):
    """(calls through the PLT, all calls) in `symbol` of the ELF file at `path`."""
    if not shutil.which("objdump"):
        return None
    table = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    m = re.search(rf"^\s*\d+: ([0-9a-f]+)\s+(\d+) FUNC\s+GLOBAL\s+\S+\s+\d+ {symbol}$", table, re.M)
    if not m:
        return None
    start, size = int(m.group(1), 16), int(m.group(2))
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
                           f"--stop-address={start + size}", path], capture_output=True, text=True).stdout
    calls = [line for line in code.splitlines() if "\tcall " in line or " call " in line]
    return sum("@plt" in line for line in calls), len(calls)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9, help="runs of each binary, alternately")
    ap.add_argument("--rounds", type=int, default=600, help="rounds of the script's work per run")
    ap.add_argument("--php-config", default=shutil.which("php-config8.2") or "php-config")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions (valgrind)")
    ap.add_argument("--libphp", action="append", default=[], metavar="LABEL=DIR",
                    help="also run the embed program on DIR's libphp (LD_LIBRARY_PATH; the program's "
                         "RUNPATH gives way to it) and DIR/conf.d if there is one (PHP_INI_SCAN_DIR), e.g. "
                         "a libphp built with -Wl,-Bsymbolic; repeatable")
    args = ap.parse_args()
    tool = args.php_config
    php = php_config(tool, "--php-binary")
    work = tempfile.mkdtemp(prefix="drover-libphp-")
    try:
        embed, library = build_embed(work, tool)
        # One php.ini and conf.d for both: the embed SAPI's (Debian: /etc/php/8.2/embed), with
        # OPcache off in both.
        minor = ".".join(php_config(tool, "--version").split(".")[:2])
        etc = f"/etc/php/{minor}/embed"
        ini = f"{work}/php.ini"
        with open(ini, "w") as f:
            if os.path.exists(f"{etc}/php.ini"):
                f.write(open(f"{etc}/php.ini").read())
            f.write("\n[drover-bench]\nopcache.enable = 0\nopcache.enable_cli = 0\n")
        env = dict(os.environ, PHPRC=ini)
        if os.path.isdir(f"{etc}/conf.d"):
            env["PHP_INI_SCAN_DIR"] = f"{etc}/conf.d"
        for name, rounds in (("work.php", args.rounds), ("small.php", max(args.rounds // 10, 1)),
                             ("empty.php", 0)):
            with open(f"{work}/{name}", "w") as f:
                f.write(SCRIPT.replace("@ROUNDS@", str(rounds)) if rounds else "<?php\n")
        binaries = {"libphp (embed)": [embed], "php executable (CLI)": [php, "-c", ini]}
        envs = {name: env for name in binaries}
        libraries = {"libphp (embed)": library}
        for spec in args.libphp:
            label, _, folder = spec.partition("=")
            folder = os.path.abspath(folder)
            name = f"libphp ({label})"
            binaries[name] = [embed]
            envs[name] = dict(env, LD_LIBRARY_PATH=folder)
            if os.path.isdir(f"{folder}/conf.d"):
                envs[name]["PHP_INI_SCAN_DIR"] = f"{folder}/conf.d"
            libraries[name] = os.path.join(folder, os.path.basename(library))
            loaded = subprocess.run(["ldd", embed], env=envs[name], capture_output=True, text=True).stdout
            if folder not in loaded:
                sys.exit(f"{name}: ldd does not show {folder}:\n{loaded}")
        times = {name: [] for name in binaries}
        outputs = {}
        for _ in range(args.runs):
            for name, argv in binaries.items():
                seconds, out = timed(argv + [f"{work}/work.php"], envs[name])
                times[name].append(seconds)
                outputs[name] = out
        if len(set(outputs.values())) != 1:
            print(f"# the two runs differ (checksum, ini digest): {outputs}", file=sys.stderr)
        print(f"The same PHP script ({args.rounds} rounds) in {os.path.basename(library)} and in {php}, "
              f"{args.runs} runs each, alternately; CPU seconds (user + system) per run.\n")
        print("| binary | median s | min s | max s | runs | ratio to the executable |")
        print("|---|---|---|---|---|---|")
        base = statistics.median(times["php executable (CLI)"])
        for name, values in times.items():
            median = statistics.median(values)
            print(f"| {name} | {median:.3f} | {min(values):.3f} | {max(values):.3f} | "
                  f"{' '.join(f'{v:.2f}' for v in values)} | {median / base:.3f} |")
        if args.callgrind:
            counted = {}
            for name, argv in binaries.items():
                counted[name] = (instructions(argv + [f"{work}/small.php"], envs[name], work)
                                 - instructions(argv + [f"{work}/empty.php"], envs[name], work))
            theirs = counted["php executable (CLI)"]
            print(f"\nInstructions of the script's work ({max(args.rounds // 10, 1)} rounds; callgrind, "
                  "less an empty script's):\n")
            print("| binary | instructions | ratio to the executable |")
            print("|---|---|---|")
            for name, count in counted.items():
                print(f"| {name} | {count:,} | {count / theirs:.4f} |")
        plt = {name: plt_calls(path) for name, path in (*libraries.items(), ("php executable (CLI)", php))}
        if all(plt.values()):
            print("\nCalls in `execute_ex` (PHP's VM), through the PLT of all: "
                  + "; ".join(f"{name} {p} of {n}" for name, (p, n) in plt.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
