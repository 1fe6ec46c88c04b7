"""Checks deploy/kubernetes/ without a cluster (run by tests/scenarios/k8s/manifests.rs).

1. Schema: every document is read into the official Kubernetes Python client's model of
   its kind (`pip install kubernetes`): a wrong type or a missing required field raises,
   and a field the model drops on the way back (a typo, a field of another version) is
   reported as unknown.
2. What the manifests name exists: each command of a drover container is a path drover's
   packaging installs (scripts/package.sh when the tree has it, else the binaries the build
   makes), and each command of another image a program of this Debian machine (the nginx
   image is Debian's); every volume mount names a volume, every ConfigMap volume a
   ConfigMap of the manifests; probes name a container port; selectors, Services,
   PodDisruptionBudgets and autoscalers name what exists.
3. drover's side: the configuration in each ConfigMap passes `drover -t`; a `drover serve`
   command line passes `drover serve --print`; the probes' port is health_listen's, the
   metrics port status_listen's, nginx's fastcgi_pass the pool's socket, in a folder both
   containers mount; terminationGracePeriodSeconds is above shutdown_delay plus
   process_control_timeout; nginx's preStop sleep lasts shutdown_delay; the adapter's
   series are metrics drover exports (docs/status.md).

Usage: check_manifests.py REPO_ROOT (DROVER_BIN names the built drover).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import yaml
from kubernetes import client

ROOT = Path(sys.argv[1])
DROVER = os.environ["DROVER_BIN"]
MANIFESTS = ROOT / "deploy/kubernetes"

# kind, apiVersion -> the client's model.
MODELS = {
    ("ConfigMap", "v1"): "V1ConfigMap",
    ("Service", "v1"): "V1Service",
    ("Deployment", "apps/v1"): "V1Deployment",
    ("PodDisruptionBudget", "policy/v1"): "V1PodDisruptionBudget",
    ("HorizontalPodAutoscaler", "autoscaling/v2"): "V2HorizontalPodAutoscaler",
}

# Where drover's packages put what a manifest may run (scripts/package.sh), and the file
# of this build or repository each stands for.
PACKAGED = {
    "/usr/sbin/drover": DROVER,
    "/usr/lib/drover/drover": DROVER,
    "/etc/drover/drover.toml": str(ROOT / "drover.toml"),
    "/etc/drover/pools.d": str(ROOT / "pools.d"),
}

errors = []


def fail(where, message):
    errors.append(f"{where}: {message}")


def normalise(value):
    """The document as the client serialises it: ints for int-or-string fields stay."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def dropped(original, back, path=""):
    """Keys of `original` missing from `back`: fields the model does not know."""
    found = []
    if isinstance(original, dict) and isinstance(back, dict):
        for key, value in original.items():
            if key not in back:
                found.append(f"{path}.{key}".lstrip("."))
            else:
                found += dropped(value, back[key], f"{path}.{key}")
    elif isinstance(original, list) and isinstance(back, list):
        for i, (a, b) in enumerate(zip(original, back)):
            found += dropped(a, b, f"{path}[{i}]")
    return found


def schema(doc, where):
    model = MODELS.get((doc.get("kind"), doc.get("apiVersion")))
    if model is None:
        fail(where, f"no model for {doc.get('kind')} {doc.get('apiVersion')}")
        return
    api = client.ApiClient()
    try:
        # The client's own deserialiser, as it reads an API server's answer.
        obj = api._ApiClient__deserialize(doc, model)
    except (ValueError, TypeError) as err:
        fail(where, f"not a valid {model}: {err}")
        return
    back = api.sanitize_for_serialization(obj)
    for field in dropped(normalise(doc), back):
        fail(where, f"unknown field {field} for {model}")


def as_pod_user(folder, uid):
    """drover's command line as the pod runs it: as its runAsUser (drover -t refuses a
    pool without `user` when run as root, as the pod does not). The binaries are copied
    into `folder`, which that user can reach."""
    if os.getuid() != 0 or uid in (None, 0):
        return [DROVER]
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name in ("drover", "drover-admin", "drover-php", "drover-python"):
        built = Path(DROVER).with_name(name)
        if built.exists():
            shutil.copy(built, bin_dir / name)
    os.chmod(folder, 0o755)
    for path in folder.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() or path.parent == bin_dir else 0o644)
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", str(bin_dir / "drover")]


def drover_config(config_map, uid, where):
    """drover.toml and the pool files of a ConfigMap: written out, checked by drover -t
    as the pod's user."""
    data = config_map["data"]
    folder = Path(tempfile.mkdtemp(prefix="drover-k8s-"))
    try:
        (folder / "pools.d").mkdir()
        (folder / "drover.toml").write_text(data["drover.toml"])
        pools = {}
        for key, text in data.items():
            if key != "drover.toml" and key.endswith(".toml"):
                (folder / "pools.d" / key).write_text(text)
                pools[key[:-5]] = tomllib.loads(text)
        run = subprocess.run(
            as_pod_user(folder, uid) + ["-t", "-c", str(folder / "drover.toml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if run.returncode != 0:
            fail(where, f"drover -t refuses it:\n{run.stderr}")
    finally:
        shutil.rmtree(folder)
    return tomllib.loads(data["drover.toml"]), pools


def serve_config(command, working_dir, uid, where):
    """A `drover serve` command line, run as the pod's user: `--print` must accept it;
    returns the two files."""
    folder = Path(tempfile.mkdtemp(prefix="drover-k8s-serve-"))
    try:
        # The app's folder as the image has it (the example app).
        shutil.copy(ROOT / "examples/app/hello.py", folder / "hello.py")
        program = as_pod_user(folder, uid)
        run_dir = folder / "run"
        run_dir.mkdir(mode=0o1777)
        os.chmod(run_dir, 0o1777)
        run = subprocess.run(
            program + command[1:] + ["--print"],
            capture_output=True,
            text=True,
            cwd=folder,
            timeout=60,
            env={**os.environ, "XDG_RUNTIME_DIR": str(run_dir), "HOME": str(folder)},
        )
        if run.returncode != 0:
            fail(where, f"drover serve refuses it:\n{run.stderr}")
            return {}, {}
        text = run.stdout.replace(str(folder), working_dir)
        global_text, _, pool_text = text.partition("# pools.d/")
        pool_text = pool_text.split("\n", 1)[1] if pool_text else global_text
        return tomllib.loads(global_text.split("# pools.d/")[0]), {"app": tomllib.loads(pool_text)}
    finally:
        shutil.rmtree(folder)


def port_of(addr):
    """The port of a listen address: "8081", "0.0.0.0:8081", "[::]:8081"."""
    text = str(addr)
    return int(text.rsplit(":", 1)[-1]) if text.rsplit(":", 1)[-1].isdigit() else None


def seconds(duration):
    match = re.fullmatch(r"(\d+)(ms|s|m)", duration)
    if not match:
        return None
    n, unit = int(match[1]), match[2]
    return {"ms": n / 1000, "s": n, "m": n * 60}[unit]


def check_command(container, drover_image, where):
    command = container.get("command") or []
    if not command:
        # Another image's own entrypoint (nginx's) is its business; drover's is said.
        if drover_image:
            fail(where, "no command: say what runs")
        return
    program = command[0]
    if drover_image:
        if program not in PACKAGED:
            fail(where, f"{program} is not a path drover's packages install")
        elif not os.path.exists(PACKAGED[program]):
            fail(where, f"{program}: {PACKAGED[program]} does not exist in this build")
        package = ROOT / "scripts/package.sh"
        if package.exists() and program.lstrip("/") not in package.read_text():
            fail(where, f"scripts/package.sh does not install {program}")
    elif not os.path.exists(program):
        fail(where, f"{program} is not a program of this Debian machine")


def check_deployment(deployment, config_maps, where):
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    for key, value in spec["selector"]["matchLabels"].items():
        if labels.get(key) != value:
            fail(where, f"the selector {key}={value} does not match the pod's labels")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts_by_container = {}
    drover_global, pools, nginx_conf, prestop = None, {}, None, None
    health_ports = []
    for container in pod["containers"]:
        cwhere = f"{where} container {container['name']}"
        image = container["image"]
        drover_image = image.startswith("drover-")
        check_command(container, drover_image, cwhere)
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(probe_name)
            if not probe:
                if drover_image:
                    fail(cwhere, f"no {probe_name}")
                continue
            action = probe.get("httpGet") or probe.get("tcpSocket")
            port = action["port"]
            if isinstance(port, str) and port not in ports:
                fail(cwhere, f"{probe_name} names port {port!r}, which the container lacks")
            number = ports.get(port, port)
            if drover_image:
                want = "/livez" if probe_name == "livenessProbe" else "/readyz"
                if action.get("path") != want:
                    fail(cwhere, f"{probe_name} asks {action.get('path')}, not {want}")
                health_ports.append((cwhere, number))
        mounts = {}
        for mount in container.get("volumeMounts", []):
            volume = volumes.get(mount["name"])
            if volume is None:
                fail(cwhere, f"mounts volume {mount['name']!r}, which the pod lacks")
                continue
            mounts[mount["mountPath"]] = volume
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                if name not in config_maps:
                    fail(cwhere, f"volume {mount['name']} names ConfigMap {name}, not in the manifests")
                elif "subPath" in mount and mount["subPath"] not in config_maps[name]["data"]:
                    fail(cwhere, f"subPath {mount['subPath']} is not a key of ConfigMap {name}")
        mounts_by_container[container["name"]] = mounts
        if drover_image:
            if command_is_serve(container):
                uid = pod.get("securityContext", {}).get("runAsUser")
                workdir = container.get("workingDir", "/")
                drover_global, pools = serve_config(container["command"], workdir, uid, cwhere)
            else:
                for path, volume in mounts.items():
                    if path == "/etc/drover/drover.toml" and "configMap" in volume:
                        cm = config_maps.get(volume["configMap"]["name"])
                        if cm:
                            uid = pod.get("securityContext", {}).get("runAsUser")
                            drover_global, pools = drover_config(cm, uid, cwhere)
                if drover_global is None:
                    fail(cwhere, "no drover.toml mounted at /etc/drover/drover.toml")
            if not container.get("securityContext", {}).get("readOnlyRootFilesystem"):
                fail(cwhere, "the root filesystem should be read-only")
            if "/tmp" not in mounts:
                fail(cwhere, "/tmp must be a writable volume with a read-only root")
            drover_ports = ports
        else:
            for path, volume in mounts.items():
                if "configMap" in volume and volume["configMap"]["name"] in config_maps:
                    data = config_maps[volume["configMap"]["name"]]["data"]
                    nginx_conf = "\n".join(data.values())
            hook = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
            if hook:
                check_command({"command": hook}, False, f"{cwhere} preStop")
                if hook[0].endswith("sleep"):
                    prestop = float(hook[1])
    if drover_global is None:
        return
    # The probes ask health_listen, the metrics annotation status_listen.
    health = drover_global.get("health_listen")
    for cwhere, number in health_ports:
        if health is None or port_of(health) != number:
            fail(cwhere, f"probes on port {number}, health_listen is {health!r}")
    annotations = spec["template"]["metadata"].get("annotations", {})
    metrics_port = annotations.get("prometheus.io/port")
    for name, pool in pools.items():
        status = pool.get("status_listen")
        if metrics_port and (status is None or str(port_of(status)) != metrics_port):
            fail(where, f"pool {name}: status_listen {status!r}, scraped on {metrics_port}")
    # Stopping fits in the grace period.
    delay = seconds(drover_global.get("shutdown_delay", "0s"))
    timeout = seconds(drover_global.get("process_control_timeout", "10s"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if delay is None or timeout is None or grace <= delay + timeout:
        fail(where, f"terminationGracePeriodSeconds {grace} is not above shutdown_delay + process_control_timeout")
    if delay == 0:
        fail(where, "shutdown_delay is 0s: the pod would stop before the endpoints update")
    if nginx_conf is not None:
        passed = re.findall(r"fastcgi_pass\s+unix:([^;]+);", nginx_conf)
        sockets = [p["listen"] for p in pools.values()]
        for path in passed:
            if path not in sockets:
                fail(where, f"nginx passes to {path}, no pool listens there ({sockets})")
            shared = [
                c
                for c, mounts in mounts_by_container.items()
                if any(path.startswith(m.rstrip("/") + "/") and "emptyDir" in v for m, v in mounts.items())
            ]
            if len(shared) < 2:
                fail(where, f"{path} is not in an emptyDir both containers mount ({shared})")
        if "include fastcgi_params" in nginx_conf and not os.path.exists("/etc/nginx/fastcgi_params"):
            fail(where, "nginx includes fastcgi_params, which nginx does not ship here")
        if prestop is None or prestop < delay:
            fail(where, f"nginx's preStop sleep {prestop} is shorter than shutdown_delay {delay}")
    return labels


def command_is_serve(container):
    command = container.get("command") or []
    return len(command) > 1 and command[1] == "serve"


def main():
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                docs.append((f"{path.name}#{i + 1} {doc.get('kind')} {doc['metadata']['name']}", doc))
    for where, doc in docs:
        schema(doc, where)
    config_maps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    deployments = {}
    for where, doc in docs:
        if doc["kind"] == "Deployment":
            deployments[doc["metadata"]["name"]] = check_deployment(doc, config_maps, where) or {}
    kinds = {d["kind"] for _, d in docs}
    for needed in ("Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"):
        if needed not in kinds:
            fail("deploy/kubernetes", f"no {needed}")
    matches = lambda selector: any(
        all(labels.get(k) == v for k, v in selector.items()) for labels in deployments.values()
    )
    for where, doc in docs:
        if doc["kind"] == "Service" and not matches(doc["spec"]["selector"]):
            fail(where, "selects no Deployment's pods")
        if doc["kind"] == "PodDisruptionBudget" and not matches(doc["spec"]["selector"]["matchLabels"]):
            fail(where, "selects no Deployment's pods")
        if doc["kind"] == "HorizontalPodAutoscaler":
            target = doc["spec"]["scaleTargetRef"]
            if target["kind"] != "Deployment" or target["name"] not in deployments:
                fail(where, f"scales {target['name']}, not a Deployment here")
            for metric in doc["spec"]["metrics"]:
                name = metric["pods"]["metric"]["name"]
                rules = [
                    r
                    for cm in config_maps.values()
                    for text in cm["data"].values()
                    if "rules:" in text
                    for r in yaml.safe_load(text)["rules"]
                ]
                if not any(r["name"]["as"] == name for r in rules):
                    fail(where, f"metric {name} is served by no prometheus-adapter rule")
    status_doc = (ROOT / "docs/status.md").read_text()
    for cm in config_maps.values():
        for text in cm["data"].values():
            if "metricsQuery" in text:
                for series in set(re.findall(r"drover_[a-z_]+", text)) - {"drover_busy_ratio"}:
                    if f"`{series}`" not in status_doc:
                        fail(cm["metadata"]["name"], f"{series} is not a metric drover exports")
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"checked {len(docs)} manifests: schema, commands, paths, ports, timings")


main()
