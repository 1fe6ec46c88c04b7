"""compare.py's PHP pools in every pm mode, and the two measurements that are about PHP pools
rather than throughput (issue 12):

- php-pss: the memory of a pool once OPcache holds many scripts: `PAGES` distinct pages,
  each with its own namespace, classes and functions, loaded by a counted wrk run that
  cycles over them; the PSS summed over every process of the backend afterwards.
- php-ondemand: the latency of an ondemand pool's first request, from nothing running and
  again once process_idle_timeout has retired the worker that served it.

The backends are the same pool three times: drover on its own SAPI ("drover-php",
`runtime = "embed"`), drover on php-cgi ("drover-cgi") and php-fpm, with the same pm keys.
A measurement returns a dict of figures, or a string saying why it has none.
"""

import os
import re
import shutil
import subprocess
import sys
import time

from harness import Backend, behind_nginx, descendants, drover_backend, gone, pss_kib, timed_get, wait_answer

PAGES = 20  # php-pss: distinct scripts
PSS_CAP_S = 120  # php-pss: the longest its load may last
IDLE_TIMEOUT = "1s"  # php-ondemand: process_idle_timeout
WAIT_S = 15  # php-ondemand: the longest wait for "ready", or for the idle worker to go

# One php-pss page; @I@ and the other @...@ marks are filled in per page, so that no two
# pages compile to the same code.
PAGE = """<?php
declare(strict_types=1);

namespace Bench\\Page@I@;

interface Renderable
{
    public function render(): string;
}

trait Slugs
{
    public static function slug(string $text): string
    {
        return trim((string) preg_replace('/[^a-z0-9]+/', '-', strtolower($text)), '-');
    }
}

final class Item implements Renderable
{
    use Slugs;

    public function __construct(public readonly int $id, public readonly string $name, public readonly array $tags)
    {
    }

    public function price(): float
    {
        return round($this->id * @FACTOR@ + @OFFSET@, 2);
    }

    public function render(): string
    {
        return sprintf(
            '<li id="%s" data-price="%.2f">%s <small>%s</small></li>',
            self::slug($this->name),
            $this->price(),
            htmlspecialchars($this->name, ENT_QUOTES),
            htmlspecialchars(implode(', ', $this->tags), ENT_QUOTES),
        );
    }
}

final class Page implements Renderable
{
    public function __construct(private string $title, private array $items)
    {
    }

    public function total(): float
    {
        return array_sum(array_map(fn (Item $item): float => $item->price(), $this->items));
    }

    public function render(): string
    {
        $rows = implode("\\n", array_map(fn (Item $item): string => $item->render(), $this->items));
        return "<!doctype html>\\n<title>" . htmlspecialchars($this->title) . "</title>\\n"
            . '<h1>' . htmlspecialchars($this->title) . "</h1>\\n<ul>\\n" . $rows . "\\n</ul>\\n"
            . sprintf("<p>%d items, %.2f in all, checksum %08x</p>\\n", count($this->items), $this->total(),
                      checksum($this->items));
    }
}

function checksum(array $items): int
{
    return array_reduce($items, fn (int $carry, Item $item): int => crc32($carry . $item->name), 0);
}
@MIXERS@
function build(int $count): array
{
    $tags = [@TAGS@];
    $items = [];
    for ($i = 1; $i <= $count; $i++) {
        $n = @MIX@;
        $items[] = new Item($i, sprintf('@NOUN@ %d-%d', $i, $n), array_slice($tags, $i % count($tags), 2));
    }
    return $items;
}

$page = new Page('@NOUN@ catalogue @I@', build(@COUNT@));
echo $page->render();
echo "<!-- page @I@ ok -->\\n";
"""

NOUNS = ["Anchor", "Beacon", "Cinder", "Delta", "Ember", "Fjord", "Garnet", "Harbor", "Iris", "Juniper",
         "Kestrel", "Lantern", "Meadow", "Nimbus", "Orchid", "Pebble", "Quartz", "Raven", "Summit", "Tundra"]

# php-ondemand: which worker answered.
PID_PAGE = "<?php echo 'pid ', getmypid(), \"\\n\";\n"


def page(i):
    """The i-th php-pss page: 10 + i items, 2 to 5 mixing functions of its own."""
    mixers = "".join(f"\nfunction mix{k}(int $x): int\n{{\n    return (($x * {31 + i * 7 + k}) ^ {0x5f + k * i}) % {97 + i + k};\n}}\n"
                     for k in range(2 + i % 4))
    fills = {"@I@": f"{i:02d}", "@FACTOR@": f"{1.25 + i / 8:.3f}", "@OFFSET@": str(i * 3 % 17),
             "@MIXERS@": mixers, "@MIX@": " + ".join(f"mix{k}($i)" for k in range(2 + i % 4)),
             "@TAGS@": ", ".join(f"'{t}'" for t in NOUNS[i % 7:i % 7 + 4 + i % 3]), "@NOUN@": NOUNS[i % len(NOUNS)],
             "@COUNT@": str(10 + i)}
    return re.sub("|".join(fills), lambda m: fills[m.group(0)], PAGE)


def page_name(i):
    return f"page{i:02d}.php"


def scripts():
    """Every PHP file these measurements request, by name."""
    return dict({page_name(i): page(i) for i in range(PAGES)}, **{"pid.php": PID_PAGE})


def php_backends(work, drover, baseline, pm):
    """One PHP pool with the pm keys `pm` (drover's names; php-fpm's are "pm." and the same,
    `mode` is its `pm`): drover-php, drover-cgi, the baseline drover if any (the pool without
    `runtime`: the baseline's default) and php-fpm."""
    sock = f"{work}/drover.sock"
    pool = pool_text(sock, pm)
    out = [drover_backend(work, drover, pool + 'runtime = "embed"\n', sock, "drover-php"),
           drover_backend(work, drover, pool + 'runtime = "cgi"\n', sock, "drover-cgi")]
    if baseline:
        out.append(drover_backend(work, baseline, pool, sock, "drover (baseline)"))
    fpm_pm = "\n".join(f"pm = {value}" if key == "mode" else f"pm.{key} = {value}" for key, value in pm.items())
    # Its log on stderr, in the bench log, where php-ondemand looks for `ready`.
    fpm = f"""[global]
error_log = /proc/self/fd/2
daemonize = no
[www]
{'user = www-data' if os.geteuid() == 0 else ''}
listen = {work}/fpm.sock
listen.mode = 0666
{fpm_pm}
"""
    with open(f"{work}/fpm.conf", "w") as f:
        f.write(fpm)
    fpm_bin = shutil.which("php-fpm") or next((shutil.which(f"php-fpm8.{m}") for m in range(9, 0, -1)
                                               if shutil.which(f"php-fpm8.{m}")), "php-fpm")
    out.append(Backend("php-fpm", [fpm_bin, "-y", f"{work}/fpm.conf", "-F"] + (["-R"] if os.geteuid() == 0 else []),
                       f"unix:{work}/fpm.sock", ready=r"ready to handle connections"))
    return out


def worker_backend(work, drover, pm, script, zygote=False):
    """drover in PHP worker mode: a drover-php pool whose workers run `script`, booted in
    each worker, or once in the zygote (`zygote`: `worker_boot = "zygote"`)."""
    sock = f"{work}/drover.sock"
    pool = pool_text(sock, pm) + f'runtime = "embed"\nworker = "{script}"\n'
    if zygote:
        pool += 'worker_boot = "zygote"\n'
    name = "drover worker mode, zygote boot" if zygote else "drover worker mode"
    return drover_backend(work, drover, pool, sock, name)


def pool_text(sock, pm):
    """A drover PHP pool on `sock` with the pm keys `pm`, up to its `[php]` line."""
    pm_lines = "\n".join(f"{key} = {value}" if isinstance(value, int) else f'{key} = "{value}"'
                         for key, value in pm.items())
    return f"""listen = "{sock}"
listen_mode = "0666"
{'user = "www-data"' if os.geteuid() == 0 else ''}
[pm]
{pm_lines}
[php]
"""


def pss_pools(workers):
    """php-pss's pools: (label, pm keys). The dynamic one starts all its workers and keeps
    them (start_servers = max_spare_servers = max_children)."""
    big = 2 * workers
    return [(f"static {workers}", {"mode": "static", "max_children": workers}),
            (f"dynamic {big}", {"mode": "dynamic", "max_children": big, "start_servers": big,
                                "min_spare_servers": 2, "max_spare_servers": big})]


def ondemand_pm(workers):
    return {"mode": "ondemand", "max_children": workers, "process_idle_timeout": IDLE_TIMEOUT}


# wrk ends a run at its duration only; this script ends it after `limit` answers (os.exit
# from its one thread, -t1), once it printed how many there were and how many were not 200.
COUNTED = """local paths = {%s}
local limit = %d
local reqs, sent, answered, bad = {}, 0, 0, 0
init = function(args)
  for i, p in ipairs(paths) do reqs[i] = wrk.format("GET", p) end
end
request = function()
  sent = sent + 1
  return reqs[(sent - 1) %% #reqs + 1]
end
response = function(status, headers, body)
  answered = answered + 1
  if status ~= 200 then bad = bad + 1 end
  if answered == limit then
    io.write(string.format("answered %%d, not 200: %%d\\n", answered, bad))
    io.flush()
    os.exit(0)
  end
end
"""


def wrk_count(work, port, paths, requests, connections):
    """`requests` requests through nginx, cycling over `paths`: (answered, not 200), or None
    when they did not all finish within PSS_CAP_S."""
    with open(f"{work}/counted.lua", "w") as f:
        f.write(COUNTED % (", ".join(f'"{p}"' for p in paths), requests))
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{PSS_CAP_S}s", "-s", f"{work}/counted.lua",
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True, timeout=PSS_CAP_S + 30).stdout
    m = re.search(r"answered (\d+), not 200: (\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def run_pss(work, backend, requests, connections, log):
    """php-pss: the backend's summed PSS once it answered its first request; then every page
    answers once (and is the page it should be), `requests` requests cycle over them, and
    the summed PSS again, with its top process's own (drover's master, php-fpm's)."""
    with behind_nginx(work, backend, log) as port:
        backend.start(log)
        if not wait_answer(f"http://127.0.0.1:{port}/{page_name(0)}", time.time() + 30):
            return "no answer within 30 s"
        pid = backend.proc.pid
        at_start = pss_kib(pid)
        for i in range(PAGES):
            _, status, body = timed_get(port, f"/{page_name(i)}")
            if status != 200 or f"page {i:02d} ok" not in body:
                print(f"# {backend.name}: /{page_name(i)} answered {status}: {body[:300]!r}", file=sys.stderr)
                return f"/{page_name(i)} answered {status}"
        started = time.time()
        counted = wrk_count(work, port, [f"/{page_name(i)}" for i in range(PAGES)], requests, connections)
        if counted is None:
            return f"{requests} requests did not finish in {PSS_CAP_S} s"
        seconds = time.time() - started
        return dict(requests=counted[0], errors=counted[1], seconds=seconds, processes=len(descendants(pid)),
                    pss_start=at_start / 1024, pss=pss_kib(pid) / 1024, pss_master=pss_kib(pid, tree=False) / 1024)


def wait_log(path, pattern, deadline):
    """Polls the log at `path` until a line matches `pattern`: True, or False at deadline."""
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            if re.search(pattern, f.read()):
                return True
        time.sleep(0.001)
    return False


def answering_pid(port):
    """/pid.php once: (milliseconds, the pid of the worker that answered), or (ms, why not)."""
    ms, status, body = timed_get(port, "/pid.php")
    m = re.search(r"pid (\d+)", body)
    if status != 200 or not m:
        return ms, f"answered {status}: {body[:200]!r}" if status else f"no answer: {body}"
    return ms, int(m.group(1))


def run_ondemand(work, backend, log, delay_ms):
    """php-ondemand: exec → ready line, the first request `delay_ms` after it, the wait until
    process_idle_timeout retired its worker, the first request after that (a new worker),
    and the next one (the same, warm)."""
    own_log = f"{work}/{re.sub(r'[^a-z0-9-]', '', backend.name)}-ondemand.log"
    with behind_nginx(work, backend, log) as port, open(own_log, "w") as out:
        started = time.perf_counter()
        backend.start(out)
        if not wait_log(own_log, backend.ready, time.time() + WAIT_S):
            return f"no ready line within {WAIT_S} s (see {own_log})"
        ready_ms = (time.perf_counter() - started) * 1000
        time.sleep(delay_ms / 1000)
        first_ms, first = answering_pid(port)
        if isinstance(first, str):
            print(f"# {backend.name}: the first request {first}; its log: {own_log}", file=sys.stderr)
            return f"first request {first.split(':')[0]} (see {os.path.basename(own_log)})"
        answered = time.perf_counter()
        deadline = time.time() + WAIT_S
        while not gone(first) and time.time() < deadline:
            time.sleep(0.01)
        result = dict(ready_ms=ready_ms, first_ms=first_ms, emptied_s=None, idle_ms=None, new_worker=None,
                      warm_ms=None, pss_empty=None)
        if not gone(first):
            return result
        result["emptied_s"] = time.perf_counter() - answered
        result["pss_empty"] = pss_kib(backend.proc.pid) / 1024
        idle_ms, second = answering_pid(port)
        if isinstance(second, str):
            print(f"# {backend.name}: the request after idle {second}; its log: {own_log}", file=sys.stderr)
            return result
        result["idle_ms"], result["new_worker"] = idle_ms, second != first
        result["warm_ms"], _ = answering_pid(port)
        return result


def failed(cells, why, width):
    """A table row of `width` columns for a backend without figures: its `cells`, then why."""
    return "| " + " | ".join(cells + [f"failed: {why or 'no run'}"]) + " |" + " |" * (width - len(cells) - 1)


def pss_table(rows, args):
    rounds = f", median of {args.rounds} rounds (by PSS after)" if args.rounds > 1 else ""
    connections = args.connections.split(",")[0]
    lines = [f"php-pss: {args.pss_requests} requests over {PAGES} distinct pages (wrk -t1 -c{connections}), "
             f"through nginx{rounds}. PSS summed over every process of the backend at start (its first answer) "
             "and after the load; \"master\": the top process's own PSS after the load (drover's master, "
             "php-fpm's). Ratio: drover-php's PSS after over the row's.",
             "",
             "| pool | backend | processes | requests | errors | load s | PSS MiB at start | PSS MiB after | master MiB | drover-php PSS ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, pool, results in rows:
        ours = results.get("drover-php")
        ours = ours if isinstance(ours, dict) else None
        for name, r in results.items():
            if not isinstance(r, dict):
                lines.append(failed([pool, name], r, 10))
                continue
            ratio = f"{ours['pss'] / r['pss']:.2f}" if ours and name != "drover-php" else ""
            lines.append(f"| {pool} | {name} | {r['processes']} | {r['requests']} | {r['errors']} | {r['seconds']:.1f} | "
                         f"{r['pss_start']:.1f} | {r['pss']:.1f} | {r['pss_master']:.1f} | {ratio} |")
    return "\n".join(lines)


def ondemand_table(rows, args):
    rounds = f", median of {args.rounds} rounds (by first request)" if args.rounds > 1 else ""
    delay = f" {args.ondemand_delay} ms after it" if args.ondemand_delay else " at once"
    lines = [f"php-ondemand: pm ondemand, max_children {args.workers}, process_idle_timeout {IDLE_TIMEOUT}; one "
             f"request at a time, each on a new connection through nginx{rounds}. \"ready\": from exec to the "
             f"ready log line; \"first\": the first request, sent{delay}; \"after idle\": the first request once "
             "process_idle_timeout retired that worker (\"emptied\" s after its answer); \"new worker\": it was "
             "answered by another pid; \"warm\": the request after it. PSS of the emptied pool. Ratios: "
             "drover-php's over the row's.",
             "",
             "| backend | ready ms | first ms | emptied s | after idle ms | new worker | warm ms | PSS MiB empty | drover-php first ratio | drover-php after-idle ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, spec: format(v, spec) if v is not None else "–"
    for _, _, results in rows:
        ours = results.get("drover-php")
        ours = ours if isinstance(ours, dict) else None
        for name, r in results.items():
            if not isinstance(r, dict):
                lines.append(failed([name], r, 10))
                continue
            first_ratio = idle_ratio = ""
            if ours and name != "drover-php":
                first_ratio = f"{ours['first_ms'] / r['first_ms']:.2f}"
                if ours["idle_ms"] and r["idle_ms"]:
                    idle_ratio = f"{ours['idle_ms'] / r['idle_ms']:.2f}"
            new = {True: "yes", False: "**no**", None: "–"}[r["new_worker"]]
            lines.append(f"| {name} | {r['ready_ms']:.1f} | {r['first_ms']:.1f} | {fmt(r['emptied_s'], '.1f')} | "
                         f"{fmt(r['idle_ms'], '.1f')} | {new} | {fmt(r['warm_ms'], '.1f')} | {fmt(r['pss_empty'], '.1f')} | "
                         f"{first_ratio} | {idle_ratio} |")
    return "\n".join(lines)
