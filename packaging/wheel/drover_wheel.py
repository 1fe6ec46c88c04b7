"""drover's PEP 517 build backend: `pip install .` and `pip wheel .` build a wheel holding
`drover`, `drover-admin` and `drover-python`, which pip installs into the environment's
`bin/` (the wheel's `.data/scripts/`): the master finds the two others beside itself there.

Why a backend of its own rather than maturin: maturin's `bindings = "bin"` packs the
binaries of one Cargo package, and drover's three come from three (`drover`, the master;
`crates/admin`, `drover-admin`; `crates/python`, `drover-python`, the only one on pyo3, so
that the master never links libpython). What decides the wheel's tags is `drover-python`'s
link to libpython, which maturin would not see from the root package (it would tag the
wheel `py3-none`), and its repair pass would copy libpython into the wheel. Here the
backend runs cargo three times and zips three files, with the standard library only: nothing to
download before the build, and it runs on every Python that drover embeds.

The wheel:
- `drover-python` is built against the interpreter that runs this backend (pip's, so a
  virtualenv's pip builds for that virtualenv's Python): `PYO3_PYTHON` names its real
  executable. It links that Python's `libpython3.X.so` (found at run time by the rpath
  to its folder that crates/python/build.rs writes), so it needs that CPython, with those
  ABI flags: the tags are `cp3X-cp3X<flags>`, never `abi3` (one libpython is embedded)
  nor `py3-none`.
- The platform tag is `manylinux_<this glibc>_<arch>`: the binaries need at most the
  glibc they were linked on, and so does the libpython they load, built for this machine.
- Binaries on pyo3 rebuild whenever `PYO3_PYTHON` changes, so `drover-python` is built in
  a target folder of its own per interpreter (`<target>/wheel/<tag>-<hash of its path>`),
  as scripts/package.sh does for Debian's Python: each stays warm, and the scenario
  tests' build in `<target>/release` is not thrown away by a wheel's. `drover` and
  `drover-admin` do not link libpython and are the workspace's own
  (`<target>/release`, or `$CARGO_TARGET_DIR`), reused as built.
"""

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

NAME = "drover"
SUMMARY = (
    "A process manager for FastCGI and WSGI/ASGI apps: php-fpm's and gunicorn's job, "
    "with CPython embedded"
)
# (binary, cargo package): pip installs the wheel's .data/scripts/ files into bin/.
BINARIES = [
    ("drover", "drover"),
    ("drover-admin", "drover-admin"),
    ("drover-python", "drover-python"),
]
# The repository: this file is packaging/wheel/drover_wheel.py.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BuildError(Exception):
    """A reason the wheel cannot be built here, said as the user can act on it."""


def _interpreter():
    """The real executable of the Python running the build (a virtualenv's `python` is a
    link to its base interpreter, whose libpython pyo3 links either way): one path per
    installed Python, so that every virtualenv of it shares one warm build."""
    if sys.implementation.name != "cpython":
        raise BuildError(
            f"drover embeds CPython; this is {sys.implementation.name}: build the wheel "
            "with a CPython (python3 -m pip wheel .)"
        )
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def _python_tag():
    version = f"{sys.version_info[0]}{sys.version_info[1]}"
    return f"cp{version}", f"cp{version}{sys.abiflags}"


def _platform_tag():
    libc, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    if libc != "glibc":
        raise BuildError("drover's wheel is built on a glibc Linux (musl is not supported yet)")
    major, minor = version.split(".")[:2]
    arch = sysconfig.get_platform().split("-", 1)[1].replace("-", "_").replace(".", "_")
    return f"manylinux_{major}_{minor}_{arch}"


def _cargo():
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        raise BuildError(
            "cargo not found: drover's wheel is built from source, with Rust "
            "(https://rustup.rs), a C toolchain and this Python's libpython"
        )
    return cargo


def _metadata(cargo):
    """The version (Cargo.toml's, the one source) and the workspace's target folder."""
    out = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps", "--manifest-path",
         os.path.join(ROOT, "Cargo.toml")],
        check=True, stdout=subprocess.PIPE,
    ).stdout
    meta = json.loads(out)
    version = next(p["version"] for p in meta["packages"] if p["name"] == NAME)
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise BuildError(
            f"Cargo.toml's version {version!r} is not a plain release number; "
            "give the wheel a PEP 440 one"
        )
    return version, meta["target_directory"]


def _build(cargo, target, interpreter, tag):
    """Runs cargo; returns the path of each binary."""
    built = {}
    for package in ("drover", "drover-admin", "drover-python"):
        env = dict(os.environ)
        target_dir = target
        if package == "drover-python":
            env["PYO3_PYTHON"] = interpreter
            digest = hashlib.sha256(interpreter.encode()).hexdigest()[:12]
            target_dir = os.path.join(target, "wheel", f"{tag}-{digest}")
        command = [cargo, "build", "--release", "--package", package,
                   "--manifest-path", os.path.join(ROOT, "Cargo.toml"),
                   "--target-dir", target_dir]
        print("drover_wheel:", " ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True, env=env, stdin=subprocess.DEVNULL)
        for binary, owner in BINARIES:
            if owner == package:
                built[binary] = os.path.join(target_dir, "release", binary)
    return built


def _core_metadata(version, python=None):
    """METADATA (PKG-INFO in an sdist, which builds for any Python: `python` None)."""
    text = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
    )
    if python:
        # The embedded interpreter's version, which the tag says too.
        text += f"Requires-Python: =={python}.*\n"
    text += (
        "Platform: Linux\n"
        "\n"
        "`drover`, `drover-admin` and `drover-python` (CPython embedded). `drover serve\n"
        "--asgi main:app` (or `--python` for WSGI) serves an app that imports from this\n"
        "virtualenv. See the repository's README and docs/install.md.\n"
    )
    return text.encode()


def _dist_info(version, tag):
    """The files of the .dist-info folder but RECORD: {name: bytes}."""
    metadata = _core_metadata(version, f"{sys.version_info[0]}.{sys.version_info[1]}")
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: drover_wheel (packaging/wheel/drover_wheel.py)\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )
    return {"METADATA": metadata, "WHEEL": wheel.encode()}


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def _zip_time():
    """SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    return time.gmtime(max(epoch, 315532800))[:6]  # zip's dates start in 1980


def _write_wheel(path, version, tag, binaries):
    info = f"{NAME}-{version}.dist-info"
    data = f"{NAME}-{version}.data/scripts"
    files = [(f"{data}/{binary}", open(source, "rb").read(), 0o755)
             for binary, source in sorted(binaries.items())]
    files += [(f"{info}/{name}", content, 0o644)
              for name, content in _dist_info(version, tag).items()]
    record = "".join(_record_line(name, content) for name, content, _ in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))
    stamp = _zip_time()
    partial = path + ".part"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, content, mode in files:
            entry = zipfile.ZipInfo(name, stamp)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, content)
    os.replace(partial, path)


def _tags():
    python, abi = _python_tag()
    return f"{python}-{abi}-{_platform_tag()}"


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version, _ = _metadata(_cargo())
    info = f"{NAME}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, content in _dist_info(version, _tags()).items():
        with open(os.path.join(metadata_directory, info, name), "wb") as f:
            f.write(content)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tag = _tags()
    interpreter = _interpreter()
    cargo = _cargo()
    version, target = _metadata(cargo)
    binaries = _build(cargo, target, interpreter, tag)
    name = f"{NAME}-{version}-{tag}.whl"
    _write_wheel(os.path.join(wheel_directory, name), version, tag, binaries)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks, under drover-VERSION/, with a PKG-INFO."""
    version, _ = _metadata(_cargo())
    try:
        listed = subprocess.run(
            ["git", "-C", ROOT, "ls-files", "-z"], check=True, stdout=subprocess.PIPE
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"an sdist is made from a git checkout of drover: {e}") from e
    base = f"{NAME}-{version}"
    name = f"{base}.tar.gz"
    pkg_info = _core_metadata(version)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in listed.decode().split("\0") if p):
            if os.path.lexists(os.path.join(ROOT, path)):
                tar.add(os.path.join(ROOT, path), arcname=f"{base}/{path}", recursive=False)
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(pkg_info)
        entry.mode = 0o644
        entry.mtime = int(time.time())
        tar.addfile(entry, io.BytesIO(pkg_info))
    return name
