#!/usr/bin/env python3
"""scripts/imports.py: the import graph of each crate's modules, checked.

Run by scripts/check.sh. For each crate of CRATES (the master, `drover`, in src/; the
configuration loader, `drover-config`, in crates/config/src/; the admin tools,
`drover-admin`, in crates/admin/src/) it fails (exit 1) on:

1. an import circle: two or more modules of the crate that reach each other through their
   `use` items and paths (`crate::a::b`, `super::x`, `self::x`, or a child module's name);
2. an arrow up: a module of a lower layer (see the crate's layers) that names a module of a
   higher one;

and, across crates, on a crate that names one it must never depend on (FORBIDDEN): the
master never names `drover_admin` (the admin tools are not linked into the daemon), and
`drover-config` names neither the master nor the admin tools (both load with it).

A module is a file: src/control/server.rs is `control::server`, src/control/mod.rs (or
src/control.rs) is `control`. A path names the longest module it starts with, so
`crate::control::server::X` names `control::server`. A path into another crate
(`crate::config::load` in the master names drover-config, re-exported as `config`) is not an
arrow inside this one.
What tests use does not count: files included under `#[cfg(test)]` and inline
`#[cfg(test)] mod NAME { ... }` blocks are left out. Nor does a module naming its own
ancestor (`super::Thing` from a child): a parent and the children it declares are one unit,
and the parent re-exporting a child (`pub use child::Thing`) is not a dependency of it.

`--graph` prints every arrow (crate: module -> module), for reading.
"""

import os
import re
import sys

# Exceptions, each with its reason and what would remove it. Empty: every circle and every
# arrow up fails the check. Add an entry only with an issue that removes it.
ALLOWED_CIRCLES: list = []
ALLOWED_UP: list = []

# Layers of the top-level modules of each crate, lowest first: a module may name its own
# layer or a lower one, never a higher one. In the master: `logging` is how drover writes;
# `pm` decides purely from facts, `listener` holds sockets and `meminfo` reads the machine's
# memory; `runtime` starts processes and `control` speaks the control protocol; `master`
# runs them all. Modules not named (`resident`, `slowlog`, `systemd`) may be named by anyone
# and may name only the lowest layer. `None`: the crate's modules have no layers (only
# circles are checked).
MASTER_LAYERS = [
    {"logging", "slowlog", "systemd", "resident"},
    {"pm", "listener", "meminfo"},
    {"runtime", "control"},
    {"master"},
]
# In the admin tools: `ctl` talks to a running drover; `serve` and `import` write files.
ADMIN_LAYERS = [
    {"ctl"},
    {"serve", "import"},
]

# (package, its source folder, its layers).
CRATES = [
    ("drover", "src", MASTER_LAYERS),
    ("drover-config", "crates/config/src", None),
    ("drover-admin", "crates/admin/src", ADMIN_LAYERS),
]

# (package, source folder, crate names it must never name, why). Binaries included.
FORBIDDEN = [
    ("drover", "src", ("drover_admin",), "the master never links the admin tools"),
    ("drover-config", "crates/config/src", ("drover", "drover_admin"), "configuration loading is below both binaries"),
]

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_literals(text):
    """The code without comments, string and char literals (kept as empty quotes)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif re.match(r'b?r#*"', text[i : i + 8]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not text[i - 1].isalnum())):
            i += 2 if c == "b" else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'), or a lifetime ('a) left as it is.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(code, start):
    """The index just past the `}` that closes the `{` at `start`."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


TEST_ATTR = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r")\s*;")


def module_of(rel):
    """`control::client` for src/control/client.rs; `control` for src/control/mod.rs."""
    parts = rel[: -len(".rs")].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def expand_use(tree):
    """The paths of one `use` tree (`a::{b, c::{d as e}}` -> a::b, a::c::d)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+" + IDENT, "", tree))
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree.rstrip(":")]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    paths = []
    for part in parts:
        if part:
            paths += [prefix + p if p != "self" else prefix.rstrip(":") for p in expand_use(part)]
    return paths


def check_crate(repo, package, folder, layers):
    """Checks one crate's modules; True when it failed."""
    src = os.path.join(repo, folder)
    files, raw = {}, {}
    for root, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, name), src)
                if rel == "main.rs" or rel.startswith("bin/"):
                    continue  # binaries: they name the library as `drover::`, from outside
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    raw[rel] = f.read()
                files[rel] = strip_literals(raw[rel])

    # Which files only tests compile: declared under #[cfg(test)] by their parent.
    test_files = set()
    for rel, code in files.items():
        here = os.path.dirname(rel)
        base = os.path.basename(rel)[: -len(".rs")]
        child_dir = here if base in ("mod", "lib") else os.path.join(here, base)
        paths = {m.group(2): m.group(1) for m in PATH_ATTR.finditer(raw[rel])}
        for m in TEST_ATTR.finditer(code):
            if m.group(2) == ";":
                name = m.group(1)
                if name in paths:
                    # A path attribute is relative to the declaring file's folder.
                    test_files.add(os.path.normpath(os.path.join(here, paths[name])))
                else:
                    test_files.add(os.path.join(child_dir, name + ".rs"))
                    test_files.add(os.path.join(child_dir, name, "mod.rs"))
    # And what lies below them.
    for rel in list(files):
        mod = module_of(rel)
        for t in list(test_files):
            tm = module_of(t)
            if mod[: len(tm)] == tm and rel not in test_files:
                test_files.add(rel)

    modules = {module_of(rel) for rel in files if rel not in test_files}

    def longest(path):
        for k in range(len(path), 0, -1):
            if tuple(path[:k]) in modules:
                return tuple(path[:k])
        return None

    def absolute(here, children, path):
        """The path from the crate's root, or None when it leaves the crate."""
        segs = [s for s in path.split("::") if s]
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("super", "self"):
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs.pop(0) == "super":
                    base = base[:-1]
            return base + segs
        if segs[0] in children:
            return list(here) + segs
        return None  # another crate, std, or a name in scope

    # First pass: what each module uses, and what it re-exports (`pub use a::B` in
    # config/mod.rs makes `crate::config::B` name `config::a`, not `config`).
    used, reexports = {}, {}
    for rel, code in sorted(files.items()):
        if rel in test_files:
            continue
        # Inline test modules: cut them out.
        while True:
            m = TEST_ATTR.search(code)
            if not m or m.group(2) != "{":
                break
            code = code[: m.start()] + code[block_end(code, m.end() - 1) :]
        here = module_of(rel)
        children = {m[len(here)] for m in modules if len(m) == len(here) + 1 and m[: len(here)] == here}
        paths = []
        for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
            for path in expand_use(m.group(2)):
                target = absolute(here, children, path)
                if target is None:
                    continue
                if m.group(1):
                    # Re-exported under its last name (an `as` name is not followed).
                    reexports.setdefault(here, {})[target[-1]] = target
                else:
                    paths.append(target)
        code_no_use = re.sub(r"\buse\s+[^;]+;", "", code)
        found = re.findall(r"\b((?:crate|super|self)(?:::(?:super|" + IDENT + r"))+)", code_no_use)
        if children:
            found += re.findall(r"(?<![:\w])((?:" + "|".join(sorted(children)) + r")::" + IDENT + r")", code_no_use)
        paths += [t for t in (absolute(here, children, p) for p in found) if t is not None]
        used[here] = paths

    def resolve(target, depth=0):
        """The module a path names, following re-exports."""
        for k in range(len(target), 0, -1):
            mod = tuple(target[:k])
            if mod in modules:
                rest = target[k:]
                if rest and depth < 16 and rest[0] in reexports.get(mod, {}):
                    return resolve(reexports[mod][rest[0]] + rest[1:], depth + 1)
                return mod
        return None

    edges = {}
    for here, paths in used.items():
        for target in paths:
            to = resolve(target)
            if to is None or to == here or here[: len(to)] == to:
                continue  # the crate root, itself, or its own ancestor
            edges.setdefault(here, set()).add(to)

    if "--graph" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{package}:", "::".join(a), "->", "::".join(b))

    failed = False
    # Circles: the strongly connected components of more than one module (Tarjan).
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    allowed_circles = [{tuple(m.split("::")) for m in c} for c in ALLOWED_CIRCLES]
    for scc in sccs:
        names = sorted("::".join(m) for m in scc)
        if set(scc) in allowed_circles:
            print("imports: allowed circle (ALLOWED_CIRCLES):", " <-> ".join(names))
            continue
        failed = True
        print(f"imports: {package}: circle among", ", ".join(names), file=sys.stderr)
        for a in sorted(scc):
            for b in sorted(edges.get(a, ())):
                if b in scc:
                    print("    ", "::".join(a), "->", "::".join(b), file=sys.stderr)

    layer = {}
    for i, names in enumerate(layers or []):
        for name in names:
            layer[name] = i
    allowed_up = {(tuple(a.split("::")), tuple(b.split("::"))) for a, b in ALLOWED_UP}
    for a in sorted(edges if layers is not None else ()):
        for b in sorted(edges[a]):
            la, lb = layer.get(a[0]), layer.get(b[0])
            if la is None or lb is None:
                print(f"imports: {package}: {a[0] if la is None else b[0]} has no layer in scripts/imports.py", file=sys.stderr)
                failed = True
                continue
            if lb > la:
                if (a, b) in allowed_up:
                    print("imports: allowed arrow up (ALLOWED_UP):", "::".join(a), "->", "::".join(b))
                    continue
                failed = True
                print(
                    f"imports: {package}: arrow up: {'::'.join(a)} (layer {la}) -> {'::'.join(b)} (layer {lb})",
                    file=sys.stderr,
                )
    # An allowance that nothing uses any more: say so, so that the list gets emptied.
    found_circles = [set(scc) for scc in sccs]
    for circle in allowed_circles:
        if circle not in found_circles:
            print("imports: ALLOWED_CIRCLES lists a circle that is gone:", ", ".join(sorted("::".join(m) for m in circle)))
    for a, b in sorted(allowed_up):
        if b not in edges.get(a, ()):
            print("imports: ALLOWED_UP lists an arrow that is gone:", "::".join(a), "->", "::".join(b))
    count = sum(len(v) for v in edges.values())
    print(f"imports: {package}: {len(modules)} modules, {count} arrows, {len(sccs)} circles")
    return failed


def forbidden_names(repo, folder, names):
    """(file, crate name) for each path into a crate of `names` in the folder's code."""
    found = []
    pattern = re.compile(r"(?<![\w:])(" + "|".join(names) + r")::|\bextern\s+crate\s+(" + "|".join(names) + r")\b")
    for root, _, files in os.walk(os.path.join(repo, folder)):
        for name in sorted(files):
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    code = strip_literals(f.read())
                for m in pattern.finditer(code):
                    found.append((os.path.relpath(path, repo), m.group(1) or m.group(2)))
    return found


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failed = False
    for package, folder, layers in CRATES:
        failed |= check_crate(repo, package, folder, layers)
    for package, folder, names, why in FORBIDDEN:
        for path, name in forbidden_names(repo, folder, names):
            failed = True
            print(f"imports: {package}: {path} names {name} ({why})", file=sys.stderr)
        # And its manifest does not depend on them.
        manifest = os.path.join(repo, os.path.dirname(folder), "Cargo.toml")
        with open(manifest, encoding="utf-8") as f:
            text = f.read()
        section = None
        for line in text.splitlines():
            head = re.match(r"^\s*\[([^\]]+)\]", line)
            if head:
                section = head.group(1)
                continue
            dep = re.match(r"^\s*([A-Za-z0-9_-]+)\s*=", line)
            if dep and section and "dependencies" in section and not section.startswith("workspace"):
                if dep.group(1).replace("-", "_") in names:
                    failed = True
                    print(f"imports: {package}: {os.path.relpath(manifest, repo)} [{section}] depends on {dep.group(1)} ({why})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
