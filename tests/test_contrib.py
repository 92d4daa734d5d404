"""Every file in contrib/ (except contrib/ci and contrib/webhooks, tested in test_contrib_ci.py
and test_contrib_webhooks.py) is exercised: the systemd unit runs and passes the hardening bar,
the Kubernetes manifests validate against the API schemas and their configs run, the shipper
configs read what watchrun writes."""

from __future__ import annotations

import configparser
import fnmatch
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import tomllib
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from liverunner import read_records, wait_for, watchrun_bin, write_config

from watchrun.config.clamp import LIMIT_RULES
from watchrun.config.model import Limits
from watchrun.offload import stop_bound_s

ROOT = Path(__file__).resolve().parents[1]
CONTRIB = ROOT / "contrib"
SYSTEMD = CONTRIB / "systemd"
KUBERNETES_VERSION = "1.30.0"
EXPOSURE_BAR = 4.0


# -- systemd ------------------------------------------------------------------------------------
def unit_service() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(SYSTEMD / "watchrun.service")
    return unit["Service"]


def test_systemd_unit_runs_as_a_notify_service_and_reloads(tmp_path: Path) -> None:
    svc = unit_service()
    assert svc["Type"] == "notify" and "HUP" in svc["ExecReload"] and svc["WatchdogSec"]
    argv = shlex.split(svc["ExecStart"])
    assert Path(argv[0]).name == "watchrun" and argv[1] == "run"
    assert "--output-dir" not in argv  # the config names it (the header says how)
    config = write_config(tmp_path, {"output": {"dir": str(tmp_path / "state")}, "watchers": [
        {"id": "c", "command": "echo ERROR hi; exec sleep 1000", "pattern": "ERROR"}]})
    argv = [watchrun_bin(), *argv[1:]]
    argv[argv.index("-c") + 1] = str(config)
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(20)
    env = {"NOTIFY_SOCKET": str(sock_path), "PATH": "/usr/bin:/bin", "WATCHDOG_USEC": "2000000"}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, start_new_session=True)
    try:
        seen: list[str] = []
        while not any("READY=1" in m for m in seen):
            seen.append(sock.recv(4096).decode())
        proc.send_signal(signal.SIGHUP)  # what ExecReload does
        while not any("RELOADING=1" in m for m in seen[-2:]):
            seen.append(sock.recv(4096).decode())
        while "READY=1" not in seen[-1]:
            seen.append(sock.recv(4096).decode())
        while "WATCHDOG=1" not in seen[-1]:  # WatchdogSec: pings go on after the reload
            seen.append(sock.recv(4096).decode())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        sock.close()
    assert (tmp_path / "state" / "watchers" / "c.jsonl").exists()


def unit_header() -> str:
    """The unit file's comment lines before its first section, without their `#`."""
    text = (SYSTEMD / "watchrun.service").read_text().split("\n[", 1)[0]
    return "\n".join(line[1:] for line in text.splitlines())


def test_the_unit_s_runner_is_reached_by_the_commands_its_header_gives(tmp_path: Path) -> None:
    """The unit gave its output dir on its command line only: `watchrun status|stop -c
    /etc/watchrun/watch.yaml` looked in /etc/watchrun/.watchrun, and `stop` said `already
    stopped`, exit 0, while the service ran on. The config names the state directory as the
    header says; then the unit's ExecStart and the commands the header gives, the paths moved
    under tmp_path (the state directory a link into a private/ of mode 0700, as DynamicUser
    makes it), reach the same runner."""
    svc = unit_service()
    header = unit_header()
    state = f"/var/lib/{svc['StateDirectory']}"
    (output,) = re.findall(r"^ +(output: \{dir: \S+\})$", header, re.MULTILINE)
    assert yaml.safe_load(output) == {"output": {"dir": state}}
    status, stop = re.findall(r"^ +sudo (/opt/watchrun/bin/watchrun .+)$", header, re.MULTILINE)
    private = tmp_path / "var" / "lib" / "private"
    (private / svc["StateDirectory"]).mkdir(parents=True)
    private.chmod(0o700)
    (tmp_path / state.lstrip("/")).symlink_to(Path("private") / svc["StateDirectory"])
    etc = tmp_path / "etc" / "watchrun"
    etc.mkdir(parents=True)
    log = tmp_path / "app.log"
    log.write_text("")

    def moved(text: str) -> str:
        return text.replace("/opt/watchrun/bin/watchrun", watchrun_bin()).replace(
            "/etc/watchrun", str(etc)).replace(state, str(tmp_path / state.lstrip("/")))

    (etc / "watch.yaml").write_text(moved(output) + "\n" + yaml.safe_dump(
        {"watchers": [{"id": "sys", "path": str(log), "pattern": "ERROR"}]}))

    def operator(command: str) -> str:
        p = subprocess.run(shlex.split(moved(command).replace("<id>", "sys")),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(20)
    proc = subprocess.Popen([moved(a) for a in shlex.split(svc["ExecStart"])],
                            env={**os.environ, "NOTIFY_SOCKET": str(sock_path)},
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while "READY=1" not in sock.recv(4096).decode():
            pass
        assert "runner running: 1 watcher" in operator(status)
        assert operator(stop).splitlines() == ["stopped sys"]  # (not "already stopped")
        assert "runner running: 0 watchers" in operator(status) and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        sock.close()


def exposure(root: Path) -> tuple[float, str]:
    """`systemd-analyze security --offline` of watchrun.service under `root`: the overall
    exposure and the report. The unit file is parsed by systemd itself."""
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", f"--root={root}",
                        "--no-pager", "watchrun.service"], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for watchrun\.service: (\d+\.\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    assert not re.search(r"Unknown|ignoring|Failed", p.stderr), p.stderr  # every line understood
    return float(m.group(1)), p.stdout


@pytest.fixture
def analyze() -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")


def install(root: Path, *dropins: str) -> None:
    system = root / "etc" / "systemd" / "system"
    system.mkdir(parents=True)
    shutil.copy(SYSTEMD / "watchrun.service", system)
    for name in dropins:
        (system / "watchrun.service.d").mkdir(exist_ok=True)
        shutil.copy(SYSTEMD / "watchrun.service.d" / name, system / "watchrun.service.d")


@pytest.mark.usefixtures("analyze")
def test_the_unit_passes_the_hardening_bar(tmp_path: Path) -> None:
    install(tmp_path)
    level, report = exposure(tmp_path)
    assert level <= EXPOSURE_BAR, report
    svc = unit_service()
    assert svc["DynamicUser"] == "yes" and set(svc["SupplementaryGroups"].split()) == {
        "adm", "systemd-journal"}
    for key, value in (("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                       ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes")):
        assert svc[key] == value
    assert int(svc["LimitNOFILE"]) >= 65536
    assert re.search(r"✓ User=/DynamicUser=", report)


@pytest.mark.usefixtures("analyze")
def test_the_root_only_logs_dropin_adds_only_read_access(tmp_path: Path) -> None:
    install(tmp_path, "read-all-logs.conf")
    level, report = exposure(tmp_path)
    assert level <= EXPOSURE_BAR, report
    assert re.search(r"✗ AmbientCapabilities=", report)  # the drop-in is applied
    assert re.search(r"✓ CapabilityBoundingSet=~CAP_SYS_ADMIN", report)
    dropin = configparser.ConfigParser(strict=False, interpolation=None)
    dropin.optionxform = str  # type: ignore[assignment,method-assign]
    dropin.read(SYSTEMD / "watchrun.service.d" / "read-all-logs.conf")
    assert dict(dropin["Service"]) == {"AmbientCapabilities": "CAP_DAC_READ_SEARCH",
                                       "CapabilityBoundingSet": "CAP_DAC_READ_SEARCH",
                                       "ProtectHome": "read-only",
                                       # (a user namespace keeps the capability from the files
                                       # of users not mapped into it: systemd.exec(5))
                                       "PrivateUsers": "no"}
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "watchrun.service.d/read-all-logs.conf" in readme
    # the figures README and the drop-in state are the ones systemd gives (README said 1.6)
    assert f"the exposure is then {level:.1f}." in readme, level
    assert f"exposure {level:.1f} with it" in dropin_text(), level
    decisions = " ".join((ROOT / "docs" / "decisions.md").read_text().split())
    assert f"state directory. Exposure {level:.1f}." in decisions, level  # (it said 1.6)


def dropin_text() -> str:
    return (SYSTEMD / "watchrun.service.d" / "read-all-logs.conf").read_text()


# -- Kubernetes ---------------------------------------------------------------------------------
def manifests(name: str) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((CONTRIB / "kubernetes" / name).read_text()))
    return [d for d in docs if d]


@pytest.mark.parametrize("name", ["sidecar.yaml", "daemonset.yaml"])
def test_kubernetes_manifests_validate_against_the_api_schemas(name: str, tmp_path: Path) -> None:
    """Offline, like `kubectl apply --dry-run=client` with validation: every object against the
    Kubernetes OpenAPI schemas, unknown fields rejected; and kubectl itself parses the file."""
    for doc in manifests(name):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    if shutil.which("kubectl"):
        (tmp_path / name).write_text((CONTRIB / "kubernetes" / name).read_text())
        (tmp_path / "kustomization.yaml").write_text(f"resources: [{name}]\n")
        p = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert sorted(d["kind"] for d in yaml.safe_load_all(p.stdout)) == sorted(
            d["kind"] for d in manifests(name))


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (workload,) = [d for d in docs if d["kind"] in ("Deployment", "DaemonSet")]
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in spec["containers"] if c["name"] == name]
    return found


@pytest.mark.parametrize("name", ["sidecar.yaml", "daemonset.yaml"])
def test_kubernetes_pods_are_wired_and_locked_down(name: str) -> None:
    docs = manifests(name)
    spec = pod_spec(docs)
    volumes = {v["name"]: v for v in spec["volumes"]}
    config_maps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    for c in spec["containers"]:
        assert {m["name"] for m in c.get("volumeMounts", [])} <= set(volumes)
    for v in volumes.values():
        if "configMap" in v:
            assert v["configMap"]["name"] in config_maps
    w = container(spec, "watchrun")
    assert w["image"] == "ghcr.io/OWNER/watchrun:0.1.0"  # the Dockerfile's image (README)
    sc = w["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"].get("add", [])) <= {"DAC_READ_SEARCH"}
    port = w["ports"][0]["containerPort"]
    argv = " ".join(w.get("command", []) + w.get("args", []))
    assert f"--metrics 0.0.0.0:{port}" in argv
    assert w["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert w["livenessProbe"]["httpGet"]["path"] == "/livez"  # (a long reload is no death)
    assert "pip install" not in argv


def test_systemd_and_kubernetes_wait_longer_than_the_runner_s_stop() -> None:
    """A runner's stop ends within twice limits.stopTimeout plus 10 s, also held by an output
    dir that stopped answering (README "Running it"): a service manager that SIGKILLs sooner
    cuts short a stop that would still end on its own, and what it says."""
    bound = stop_bound_s(Limits().stop_timeout_ms / 1000)
    assert float(unit_service()["TimeoutStopSec"]) > bound
    for name in ("sidecar.yaml", "daemonset.yaml"):
        docs = manifests(name)
        for cm in [d for d in docs if "watch.yaml" in d.get("data", {})]:
            limits = yaml.safe_load(cm["data"]["watch.yaml"]).get("limits", {})
            assert "stopTimeout" not in limits, name  # (the default, as `bound` has it)
        assert pod_spec(docs)["terminationGracePeriodSeconds"] > bound, name


def test_every_sidecar_container_is_non_root_with_a_read_only_root() -> None:
    """README: "each container non-root with a read-only root file system"; the app container
    had no securityContext (busybox: root, a writable root, privilege escalation allowed)."""
    spec = pod_spec(manifests("sidecar.yaml"))
    for c in spec["containers"]:
        sc = c.get("securityContext", {})
        assert sc.get("runAsNonRoot") is True and sc.get("runAsUser", 0) != 0, c["name"]
        assert sc.get("readOnlyRootFilesystem") is True, c["name"]
        assert sc.get("allowPrivilegeEscalation") is False, c["name"]
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], c["name"]


def validate_config(path: Path) -> None:
    p = subprocess.run([watchrun_bin(), "validate", "-c", str(path)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_sidecar_shares_the_app_log_and_ships_with_the_contrib_vector_config(
        tmp_path: Path) -> None:
    docs = manifests("sidecar.yaml")
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    text = cms["watchrun-config"]["data"]["watch.yaml"]
    (tmp_path / "watch.yaml").write_text(text)
    validate_config(tmp_path / "watch.yaml")
    watch = yaml.safe_load(text)
    spec = pod_spec(docs)
    w, shipper = container(spec, "watchrun"), container(spec, "shipper")
    assert w["securityContext"]["runAsNonRoot"] and w["securityContext"]["runAsUser"] == 10001
    mounts = {m["mountPath"]: m for m in w["volumeMounts"]}
    out_dir = Path(watch["output"]["dir"])
    assert str(out_dir.parent) in mounts  # a new dir inside the volume, not its root (2777)
    for wt in watch["watchers"]:
        assert str(Path(wt["path"]).parent) in mounts
    assert "/etc/watchrun/watch.yaml" in w["args"]
    # the shipper reads watchrun's output dir with the config in contrib/shippers, moved there
    vector = cms["watchrun-vector"]["data"]["vector.toml"]
    shipped = (CONTRIB / "shippers" / "vector.toml").read_text()
    assert vector == shipped.replace('"/var/lib/watchrun/', f'"{out_dir}/')
    out_volume = mounts[str(out_dir.parent)]["name"]
    ship_mounts = {m["name"]: m for m in shipper["volumeMounts"]}
    assert ship_mounts[out_volume]["mountPath"] == str(out_dir.parent)
    assert ship_mounts[out_volume]["readOnly"] is True
    data_dir = tomllib.loads(vector)["data_dir"]
    (ckpt,) = [m for m in shipper["volumeMounts"] if m["mountPath"] == data_dir]
    assert "emptyDir" in {v["name"]: v for v in spec["volumes"]}[ckpt["name"]]  # pod lifetime
    # the shipper can read what watchrun writes (0640 files, 0750 dirs): through the group
    assert shipper["securityContext"]["runAsGroup"] == spec["securityContext"]["fsGroup"] == \
        w["securityContext"]["runAsGroup"]


def empty_dir(path: Path) -> Path:
    """A directory as the kubelet mounts an emptyDir with fsGroup: mode 2777, owned by another
    uid than the runner's (in the pod: root's, the runner being 10001; here the runner may be
    root, so it is 10001's)."""
    path.mkdir()
    if os.geteuid() == 0:
        os.chown(path, 10001, 10001)
    path.chmod(0o2777)
    return path


def test_the_sidecar_s_watchrun_starts_on_its_volumes_and_writes_what_vector_reads(
        tmp_path: Path) -> None:
    """output.dir was the emptyDir's root (2777, not the runner's): watchrun refused it and
    exited 3 at every start (CrashLoopBackOff). The container's own argv and config, the
    volumes made as the kubelet makes them: the runner becomes ready, records a match, and
    writes it where the sidecar's Vector config reads."""
    docs = manifests("sidecar.yaml")
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    w = container(pod_spec(docs), "watchrun")
    mounts = {m["mountPath"]: tmp_path / m["name"] for m in w["volumeMounts"]}
    for path, volume in mounts.items():
        if path != "/etc/watchrun":
            empty_dir(volume)

    def moved(text: str) -> str:  # each mount path, in one pass (/tmp is a prefix of tmp_path)
        longest_first = sorted(mounts, key=len, reverse=True)
        return re.sub("|".join(map(re.escape, longest_first)),
                      lambda m: str(mounts[m.group()]), text)

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "watch.yaml").write_text(moved(cms["watchrun-config"]["data"][
        "watch.yaml"]))
    app_log = mounts["/var/log/app"] / "server.log"
    app_log.write_text("boot INFO\n")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    argv = [moved(a).replace("0.0.0.0:9464", f"127.0.0.1:{port}") for a in w["args"]]
    err = (tmp_path / "err").open("w")
    proc = subprocess.Popen([watchrun_bin(), *argv], stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True, env={**os.environ, "TMPDIR": str(
                                mounts["/tmp"])})
    vector = tomllib.loads(moved(cms["watchrun-vector"]["data"]["vector.toml"]))
    try:
        wait_for(lambda: proc.poll() is not None or '"event":"start","watcher":"app"' in (
            tmp_path / "err").read_text(), "the runner following the app's log")
        assert proc.poll() is None, (tmp_path / "err").read_text()
        with app_log.open("a") as fh:
            fh.write("request 7 ERROR upstream timeout\n")
        wait_for(lambda: globs_hit(vector["sources"]["watchrun"]["include"], Path("/")),
                 "a JSONL file where Vector reads")
        (jsonl,) = globs_hit(vector["sources"]["watchrun"]["include"], Path("/"))
        wait_for(lambda: [r for r in read_records(Path(jsonl)) if r["kind"] == "match"],
                 "the match record")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "err").read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.close()
    assert [r["line"] for r in read_records(Path(jsonl)) if r["kind"] == "match"] == [
        "request 7 ERROR upstream timeout"]
    assert "EPERM" not in (tmp_path / "err").read_text()


DOWNWARD = {"metadata.namespace": "watchrun", "metadata.name": "watchrun-x7k2p"}
"""What the downward API gives the DaemonSet's pod (`valueFrom.fieldRef`)."""
OWN_LOG = "watchrun_watchrun-x7k2p_3333/watchrun/0.log"
"""That pod's own container log under /var/log/pods, where the kubelet writes its stderr."""


def daemonset(tmp_path: Path, pods: Path, stderr: int,
              **settings: str) -> tuple[subprocess.Popen[bytes], Path]:
    """The DaemonSet's own container command, config and environment (the downward API's values
    from DOWNWARD; `settings` in place of the manifest's, as an edited manifest rolled out
    sets them), its paths moved under tmp_path, started with `stderr`; and its state dir (kept
    from an earlier start, as the node's hostPath is)."""
    docs = manifests("daemonset.yaml")
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    etc, state = tmp_path / "etc", tmp_path / "state"
    for d in (etc, state):
        d.mkdir(exist_ok=True)

    def moved(text: str) -> str:
        return text.replace("/etc/watchrun", str(etc)).replace("/var/lib/watchrun", str(state))

    for key, text in cm["data"].items():
        (etc / key).write_text(moved(text))
    w = container(pod_spec(docs), "watchrun")
    env = {**os.environ, "PODS_DIR": str(pods), "PODS_SCAN_SECONDS": "0.1",
           "PODS_FORGET_SECONDS": "0",
           "PATH": f"{Path(watchrun_bin()).parent}{os.pathsep}{os.environ['PATH']}"}
    env.update({e["name"]: e.get("value") or DOWNWARD[e["valueFrom"]["fieldRef"]["fieldPath"]]
                for e in w["env"] if e["name"] != "PODS_SCAN_SECONDS"})
    assert set(settings) <= {e["name"] for e in w["env"]}
    env.update(settings)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    argv = [*w["command"], moved(w["args"][0]).replace("0.0.0.0:9464", f"127.0.0.1:{port}")]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                            start_new_session=True), state


def test_the_daemonset_follows_pod_logs_as_they_come(tmp_path: Path) -> None:
    """The DaemonSet's own container command and config, with its paths moved under tmp_path:
    pods.py lists the pod logs there, the runner follows them, and a pod that starts later is
    picked up (SIGHUP) and read from its first line."""
    pods = tmp_path / "pods"
    old = pods / "default_web-0_1111" / "nginx" / "0.log"
    old.parent.mkdir(parents=True)
    old.write_text("ERROR before the runner: followed from the end, not matched\n")
    err = (tmp_path / "err").open("w")
    proc, state = daemonset(tmp_path, pods, err.fileno())
    out = state / "watchers"
    try:
        wait_for(lambda: '"event":"start","watcher":"default.web-0.nginx.0"' in (
            tmp_path / "err").read_text(), "the runner following web-0's log")
        with old.open("a") as fh:
            fh.write("ERROR in web-0\n")
        wait_for(lambda: read_records(out / "default.web-0.nginx.0.jsonl"), "web-0's records")
        new = pods / "kube-system_dns-7_2222" / "coredns" / "0.log"
        new.parent.mkdir(parents=True)
        new.write_text("panic: written before the runner saw the file\nfine\n")
        wait_for(lambda: [r for r in read_records(out / "kube-system.dns-7.coredns.0.jsonl")
                          if r["kind"] == "match"], "the new pod's first line")
        shutil.rmtree(pods / "default_web-0_1111")  # web-0 goes away: the node forgets it
        wait_for(lambda: any('"event":"forgotten"' in line and "default.web-0.nginx.0" in line
                             for line in (tmp_path / "err").read_text().splitlines()),
                 "web-0's watcher forgotten")
        assert [p.name for p in (state / "state").iterdir() if "web-0" in p.name] == []
        assert (out / "default.web-0.nginx.0.jsonl").exists()  # for the shipper
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.close()
    matches = [r["line"] for r in read_records(out / "default.web-0.nginx.0.jsonl")
               if r["kind"] == "match"]
    assert matches == ["ERROR in web-0"]
    new_matches = [r["line"] for r in read_records(out / "kube-system.dns-7.coredns.0.jsonl")
                   if r["kind"] == "match"]
    assert new_matches == ["panic: written before the runner saw the file"]
    log = (tmp_path / "err").read_text()
    assert '"event":"reloaded"' in log and "Traceback" not in log


def matched(jsonl: Path) -> list[str]:
    return [r["line"] for r in read_records(jsonl) if r["kind"] == "match"]


def test_the_daemonset_rolled_out_with_another_pattern_matches_it_in_every_pod_log(
        tmp_path: Path) -> None:
    """POD_PATTERN edited and rolled out: pods.py kept each log it had listed on the node with
    the pattern it was first listed with, so the new pattern reached only pods that came later.
    The new pod's runner matches the new pattern in a log listed before, reads on from its
    checkpoint (a line both patterns match is not matched again) and reads what was written
    while no runner was up."""
    pods = tmp_path / "pods"
    web = pods / "default_web-0_1111" / "nginx" / "0.log"
    web.parent.mkdir(parents=True)
    web.write_text("")
    out = tmp_path / "state" / "watchers" / "default.web-0.nginx.0.jsonl"

    def pod(n: int, **settings: str) -> Path:
        """One pod of the DaemonSet on the node, from its start to its SIGTERM."""
        err_path = tmp_path / f"err{n}"
        with err_path.open("w") as err:
            proc, state = daemonset(tmp_path, pods, err.fileno(), **settings)
            try:
                wait_for(lambda: '"event":"start","watcher":"default.web-0.nginx.0"' in
                         err_path.read_text(), "the runner following web-0's log")
                with web.open("a") as fh:
                    fh.write(f"WARN {n} seen\nERROR {n} seen\n")
                wait_for(lambda: f"ERROR {n} seen" in matched(out), "the last line matched")
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=30) == 0
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        return state

    pod(0)
    with web.open("a") as fh:
        fh.write("WARN while the pod was rolled\n")
    state = pod(1, POD_PATTERN="ERROR|WARN")
    assert matched(out) == ["ERROR 0 seen", "WARN while the pod was rolled", "WARN 1 seen",
                            "ERROR 1 seen"]
    assert {w["pattern"] for w in yaml.safe_load((state / "pods.json").read_text())[
        "watchers"]} == {"ERROR|WARN"}


def kubelet(read: int, log: Path) -> None:
    """What the kubelet does with a container's stderr: each line appended to the container's
    log under /var/log/pods, in the CRI format (`<time> stderr F <line>`), until it ends."""
    with os.fdopen(read, "rb") as pipe, log.open("ab", buffering=0) as out:
        for line in pipe:
            out.write(b"2026-01-01T00:00:00.000000000Z stderr F " + line)


def test_the_daemonset_leaves_its_own_pod_log_out(tmp_path: Path) -> None:
    """The kubelet writes the runner's stderr, its JSON log with every match echoed, to the
    runner's own pod log under /var/log/pods: pods.py listed it, so its watcher matched each
    echo again, JSON-escaped once more, without end (one ERROR elsewhere: ~1.5 MB of log in a
    second). pods.py leaves out the logs of its own pod (POD_NAMESPACE, POD_NAME)."""
    pods = tmp_path / "pods"
    own, web = pods / OWN_LOG, pods / "default_web-0_1111" / "nginx" / "0.log"
    for log in (own, web):
        log.parent.mkdir(parents=True)
        log.write_text("")
    read, write = os.pipe()
    proc, state = daemonset(tmp_path, pods, write)
    os.close(write)
    writer = threading.Thread(target=kubelet, args=(read, own))
    writer.start()
    try:
        wait_for(lambda: '"event":"start","watcher":"default.web-0.nginx.0"' in own.read_text(),
                 "the runner following web-0's log")
        listed = [w["path"] for w in yaml.safe_load((state / "pods.json").read_text())["watchers"]]
        assert listed == [str(web)]  # before: its own log too
        with web.open("a") as fh:
            fh.write("ERROR in web-0\n")
        wait_for(lambda: '"event":"match","watcher":"default.web-0.nginx.0"' in own.read_text(),
                 "the match echoed into the runner's own pod log")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        writer.join(timeout=30)
    echoes = [line for line in own.read_text().splitlines() if '"event":"match"' in line]
    assert len(echoes) == 1 and "self-echo" not in own.read_text(), echoes
    assert sorted(p.name for p in (state / "watchers").glob("*.jsonl")) == [
        "default.web-0.nginx.0.jsonl", "pod-discovery.jsonl"]


LINE_BYTES = 1024
"""The pod log lines the DaemonSet's memory limit is sized for (README "Kubernetes")."""


def mebibytes(quantity: str) -> int:
    """A Kubernetes memory quantity (`256Mi`, `1Gi`) in MiB."""
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


def session_peak_kib(sid: int) -> int:
    """The peak resident memory (VmHWM) of every live process of session `sid`, summed: what
    counts against a container's memory limit (the runner and the pods.py it runs)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                status = (stat.parent / "status").read_text()
                total += int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        except (OSError, IndexError, AttributeError):
            continue  # (gone meanwhile, or a kernel thread)
    return total


def all_read(out: Path, left: set[str], mark: str) -> bool:
    """Whether every watcher of `left` recorded `mark` (those that did leave it)."""
    left.difference_update([wid for wid in sorted(left)
                            if mark in (out / f"{wid}.jsonl").read_text()])
    return not left


def test_the_daemonset_fits_its_memory_limit_at_its_watcher_cap(tmp_path: Path) -> None:
    """The manifest's memory limit covers its own cap of pod logs (PODS_MAX_WATCHERS) with its
    ConfigMap's limits once every watcher's tail and matches are full: 450 watchers under the
    default maxLogLines 500 and maxMatches 200 took 275 MiB against a limit of 256Mi, and the
    kernel kills a pod over it. Measured on the DaemonSet's own command and config."""
    docs = manifests("daemonset.yaml")
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    set_limits = yaml.safe_load(cm["data"]["watch.yaml"])["limits"]
    limits = {"maxLogLines": set_limits.get("maxLogLines", Limits().max_log_lines),
              "maxMatches": set_limits.get("maxMatches", Limits().max_matches)}
    w = container(pod_spec(docs), "watchrun")
    cap = int(re.search(r'"PODS_MAX_WATCHERS", "(\d+)"', cm["data"]["pods.py"]).group(1))  # type: ignore[union-attr]
    assert "PODS_MAX_WATCHERS" not in {e["name"] for e in w["env"]}  # (pods.py's default)
    limit_mib = mebibytes(w["resources"]["limits"]["memory"])
    pods = tmp_path / "pods"
    logs = [pods / f"default_app-{i:03d}_{i}" / "c" / "0.log" for i in range(cap)]
    for log in logs:
        log.parent.mkdir(parents=True)
        log.write_text("")
    err = (tmp_path / "err").open("w")
    proc, state = daemonset(tmp_path, pods, err.fileno())
    out = state / "watchers"
    try:
        wait_for(lambda: (tmp_path / "err").read_text().count('"event":"start"') > cap,
                 f"the runner following {cap} pod logs", timeout=120)
        per_round = max(limits["maxLogLines"], 2 * limits["maxMatches"])
        for round_no in range(2):  # every tail and every ring of matches full, twice over
            for i, log in enumerate(logs):
                lines = [f"2026-01-01T00:00:00.000000000Z stdout F {'ERROR' if k % 2 else 'INFO'}"
                         f" app-{i} round {round_no} line {k} " for k in range(per_round)]
                lines[-1] = f"2026-01-01T00:00:00.000000000Z stdout F ERROR round {round_no} done "
                with log.open("a") as fh:
                    fh.write("".join(x.ljust(LINE_BYTES - 1, "x") + "\n" for x in lines))
            wait_for(partial(all_read, out, {f"default.app-{i:03d}.c.0" for i in range(cap)},
                             f"round {round_no} done"),
                     f"round {round_no} read by every watcher", timeout=120)
        peak_mib = session_peak_kib(proc.pid) / 1024
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.close()
    assert peak_mib < limit_mib, (
        f"{cap} watchers with maxLogLines {limits['maxLogLines']}, maxMatches "
        f"{limits['maxMatches']} and {LINE_BYTES}-byte lines peaked at {peak_mib:.0f} MiB; "
        f"the limit is {limit_mib} MiB")


def test_the_daemonset_names_long_and_reused_pod_logs_apart(tmp_path: Path) -> None:
    (cm,) = [d for d in manifests("daemonset.yaml") if d["kind"] == "ConfigMap"]
    script = tmp_path / "pods.py"
    script.write_text(cm["data"]["pods.py"])
    pods, config = tmp_path / "pods", tmp_path / "pods.json"
    long_pod = "p" * 120
    for rel in (f"ns_{long_pod}_1/c/0.log", "ns_web-0_1/c/0.log", "ns_web-0_2/c/0.log"):
        (pods / rel).parent.mkdir(parents=True)
        (pods / rel).write_text("")
    env = {**os.environ, "PODS_DIR": str(pods), "PODS_CONFIG": str(config)}
    subprocess.run(["python3", str(script), "--once"], env=env, check=True, timeout=30,
                   capture_output=True)
    ids = [w["id"] for w in yaml.safe_load(config.read_text())["watchers"]]
    assert len(set(ids)) == 3 and all(len(i) <= 64 for i in ids)
    assert "ns.web-0.c.0" in ids
    shutil.copy(tmp_path / "pods.json", tmp_path / "watch.json")
    validate_config(tmp_path / "watch.json")


def test_the_daemonset_s_pods_py_puts_a_changed_pattern_on_every_listed_log(
        tmp_path: Path) -> None:
    """pods.py kept a listed log's entry as first written, and sent a reload only when the list
    of paths changed: a new POD_PATTERN never reached the logs listed already. Every listed log
    takes the pattern set now, keeping its id and fromStart; the file is rewritten and the
    runner (here a shell that stands in for it) is told to reload."""
    (cm,) = [d for d in manifests("daemonset.yaml") if d["kind"] == "ConfigMap"]
    script = tmp_path / "pods.py"
    script.write_text(cm["data"]["pods.py"])
    pods, config = tmp_path / "pods", tmp_path / "pods.json"
    for rel in ("ns_web-0_1/c/0.log", "ns_api-0_2/c/0.log"):
        (pods / rel).parent.mkdir(parents=True)
        (pods / rel).write_text("")
    env = {**os.environ, "PODS_DIR": str(pods), "PODS_CONFIG": str(config),
           "POD_PATTERN": "ERROR|FATAL"}
    subprocess.run(["python3", str(script), "--once"], env=env, check=True, timeout=30,
                   capture_output=True)
    before = config.read_text()
    # the loop, as the runner's pod-discovery watcher runs it (its parent gets the SIGHUP)
    runner = subprocess.Popen(
        ["sh", "-c", 'trap \'kill "$c"; echo reload; exit\' HUP; python3 "$0" & c=$!; wait',
         str(script)], env={**env, "POD_PATTERN": "ERROR|WARN"}, stdout=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        said, _ = runner.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        said = "no reload within 30 s"
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
    assert said.splitlines() == ["watching 2 pod logs", "reload"], said
    was, now = (yaml.safe_load(text)["watchers"] for text in (before, config.read_text()))
    assert [w["pattern"] for w in now] == ["ERROR|WARN", "ERROR|WARN"]
    assert [{**w, "pattern": "ERROR|WARN"} for w in was] == now  # ids, fromStart kept


def test_the_daemonset_keeps_a_briefly_missing_pod_log_listed(tmp_path: Path) -> None:
    """kubelet rotates a log by renaming it, then the runtime reopens it: a scan in between
    keeps the log listed (its watcher is not removed, so not forgotten) until it has been
    missing PODS_FORGET_SECONDS; then it leaves the list and the runner forgets it."""
    (cm,) = [d for d in manifests("daemonset.yaml") if d["kind"] == "ConfigMap"]
    script = tmp_path / "pods.py"
    script.write_text(cm["data"]["pods.py"])
    pods, config = tmp_path / "pods", tmp_path / "pods.json"
    log = pods / "ns_web-0_1" / "c" / "0.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    env = {**os.environ, "PODS_DIR": str(pods), "PODS_CONFIG": str(config)}

    def listed(grace: str | None = None) -> list[str]:
        subprocess.run(["python3", str(script), "--once"], check=True, timeout=30,
                       capture_output=True,
                       env={**env, **({"PODS_FORGET_SECONDS": grace} if grace else {})})
        return [w["path"] for w in yaml.safe_load(config.read_text())["watchers"]]

    assert listed() == [str(log)]
    log.rename(log.with_name("0.log.20260101-000000"))  # mid-rotation
    assert listed() == [str(log)]  # (default grace: 60 s)
    assert listed("0") == []


def test_the_daemonset_past_its_cap_keeps_the_watched_logs_and_names_those_left_out(
        tmp_path: Path) -> None:
    """Past PODS_MAX_WATCHERS, pods.py kept the first logs in path order: a new pod whose path
    sorted earlier took the slot of a watched log (the reload stopped its watcher), and the
    warning named neither. A watched log keeps its slot; a newcomer waits, named."""
    (cm,) = [d for d in manifests("daemonset.yaml") if d["kind"] == "ConfigMap"]
    script = tmp_path / "pods.py"
    script.write_text(cm["data"]["pods.py"])
    pods, config = tmp_path / "pods", tmp_path / "pods.json"
    env = {**os.environ, "PODS_DIR": str(pods), "PODS_CONFIG": str(config),
           "PODS_MAX_WATCHERS": "2"}

    def pod(name: str) -> str:
        log = pods / f"ns_{name}_1" / "c" / "0.log"
        log.parent.mkdir(parents=True)
        log.write_text("x\n")
        return str(log)

    def once() -> tuple[list[str], str]:
        p = subprocess.run(["python3", str(script), "--once"], env=env, check=True, timeout=30,
                           capture_output=True, text=True)
        return [w["path"] for w in yaml.safe_load(config.read_text())["watchers"]], p.stdout

    b, c = pod("b-pod"), pod("c-pod")
    assert once()[0] == [b, c]
    a, z = pod("a-new"), pod("z-new")  # a-new sorts before both
    listed, said = once()
    assert listed == [b, c], said
    warning = [line for line in said.splitlines() if line.startswith("WARNING")]
    assert len(warning) == 1 and "2 pod logs not watched" in warning[0] and \
        "cap is 2 (PODS_MAX_WATCHERS)" in warning[0], said
    assert a in warning[0] and z in warning[0] and b not in warning[0], said
    shutil.rmtree(pods / "ns_c-pod_1")  # c-pod goes: the first one waiting takes its slot
    env["PODS_FORGET_SECONDS"] = "0"
    listed, said = once()
    assert listed == [a, b] and z in said, said
    (watcher,) = [w for w in yaml.safe_load(config.read_text())["watchers"] if w["path"] == a]
    assert watcher["fromStart"] is True  # (what it logged while it waited is read)




# -- shippers -----------------------------------------------------------------------------------
TS_FORMATS = {  # each shipper's spelling of watchrun's `ts` format, in Python's strptime
    "vector": ("%Y-%m-%dT%H:%M:%S%.fZ", "%.f", ".%f"),  # chrono
    "fluent-bit": ("%Y-%m-%dT%H:%M:%S.%LZ", "%L", "%f"),  # strptime + %L fractional seconds
}


def real_output(tmp_path: Path) -> Path:
    """A real once run (a watcher whose JSONL rotates, and the mock agent) so the shippers'
    globs meet real files, rotated ones included."""
    out = tmp_path / "out"
    config = write_config(tmp_path, {
        "output": {"dir": str(out), "maxBytes": "64KiB"},
        "watchers": [{"id": "w", "command": "seq 1 800 | sed 's/^/ERROR shipped /'",
                      "pattern": "ERROR", "wake": "a"}],
        "agents": [{"name": "a", "provider": "mock"}]})
    p = subprocess.run([watchrun_bin(), "run", "--once", "--quiet", "-c", str(config)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (out / "watchers" / "w.jsonl.1").exists()
    return out


def fluent_bit_sections(text: str) -> list[tuple[str, dict[str, str]]]:
    """Fluent Bit's classic format: `[SECTION]` then indented `Key value` lines."""
    sections: list[tuple[str, dict[str, str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            sections.append((line.strip("[]"), {}))
        else:
            key, _, value = line.partition(" ")
            sections[-1][1][key] = value.strip()
    return sections


def globs_hit(patterns: list[str], out: Path) -> list[str]:
    files: set[str] = set()
    for pattern in patterns:
        files.update(str(p) for p in Path("/").glob(
            pattern.replace("/var/lib/watchrun", str(out)).lstrip("/")))
    return sorted(files)


def check_ts(out: Path, strptime: str) -> int:
    n = 0
    for path in out.glob("*/*.jsonl*"):
        for rec in read_records(path):
            parsed = datetime.strptime(rec["ts"], strptime)
            assert parsed.isoformat(timespec="milliseconds")[:23] == rec["ts"][:23]
            n += 1
    return n


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    out = real_output(tmp_path_factory.mktemp("ship"))
    return out, sorted(str(p) for p in out.glob("*/*.jsonl*"))


def test_vector_keeps_the_file_uses_ts_and_checkpoints(shipped: tuple[Path, list[str]]) -> None:
    out, written = shipped
    cfg = tomllib.loads((CONTRIB / "shippers" / "vector.toml").read_text())
    src = cfg["sources"]["watchrun"]
    assert globs_hit(src["include"], out) == written
    assert cfg["data_dir"] and src["read_from"] == "beginning"  # checkpoints in data_dir
    remap = cfg["transforms"]["records"]
    assert remap["inputs"] == ["watchrun"] and cfg["sinks"]["out"]["inputs"] == ["records"]
    vrl = [ln.strip() for ln in remap["source"].strip().splitlines()]
    fmt, chrono, py = TS_FORMATS["vector"]
    assert vrl == [f"{src['file_key']} = .{src['file_key']}",
                   ". = parse_json!(string!(.message))",
                   f".{src['file_key']} = {src['file_key']}",
                   f'.timestamp = parse_timestamp!(.ts, format: "{fmt}")']
    assert check_ts(out, fmt.replace(chrono, py)) > 800
    if shutil.which("vector"):
        p = subprocess.run(["vector", "validate", "--no-environment",
                            str(CONTRIB / "shippers" / "vector.toml")], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr


def test_fluent_bit_has_its_parser_keeps_the_file_and_checkpoints(
        shipped: tuple[Path, list[str]]) -> None:
    out, written = shipped
    conf = CONTRIB / "shippers" / "fluent-bit.conf"
    sections = dict(fluent_bit_sections(conf.read_text()))
    parsers_file = conf.parent / sections["SERVICE"]["Parsers_File"]  # relative to the config
    parsers = {p["Name"]: p for kind, p in fluent_bit_sections(parsers_file.read_text())
               if kind == "PARSER"}
    tail = sections["INPUT"]
    live = [p for p in written if p.endswith(".jsonl")]
    assert tail["Name"] == "tail" and globs_hit(tail["Path"].split(","), out) == live
    # A Path that matches a rotated file (it did) reads it again from its head once Fluent Bit
    # drops it, Rotate_Wait after the rename: every record sent twice (its tail docs). It reads
    # a renamed file to its end within Rotate_Wait instead, as README says.
    assert str(out / "watchers" / "w.jsonl.1") in written
    for pattern in tail["Path"].split(","):
        for rotated in ("watchers/w.jsonl.1", "agents/a.jsonl.5"):
            assert not fnmatch.fnmatchcase(f"/var/lib/watchrun/{rotated}", pattern), pattern
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"to its end within `Rotate_Wait` ({int(tail['Rotate_Wait'])} s)" in readme
    parser = parsers[tail["Parser"]]
    fmt, c_fmt, py = TS_FORMATS["fluent-bit"]
    assert (parser["Format"], parser["Time_Key"], parser["Time_Format"]) == ("json", "ts", fmt)
    assert parser["Time_Keep"] == "On"
    assert check_ts(out, fmt.replace(c_fmt, py)) > 800
    assert tail["Path_Key"] == "file" and tail["DB"]  # the file name kept; positions in the DB
    if shutil.which("fluent-bit"):
        p = subprocess.run(["fluent-bit", "--dry-run", "-c", str(conf)], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr


def test_otel_collector_keeps_the_file_uses_ts_and_stores_offsets(
        shipped: tuple[Path, list[str]]) -> None:
    out, written = shipped
    otel = yaml.safe_load((CONTRIB / "shippers" / "otelcol.yaml").read_text())
    recv = otel["receivers"]["filelog"]
    assert globs_hit(recv["include"], out) == written
    assert recv["storage"] in otel["extensions"] and recv["storage"] in otel["service"][
        "extensions"]  # offsets survive a collector restart
    assert otel["extensions"][recv["storage"]]["directory"]
    assert recv["include_file_path"] is True
    (parser,) = recv["operators"]
    assert parser["type"] == "json_parser"
    ts = parser["timestamp"]
    assert (ts["parse_from"], ts["layout_type"]) == ("attributes.ts", "gotime")
    go_to_python = {"2006": "%Y", "01": "%m", "02": "%d", "15": "%H", "04": "%M", "05": "%S",
                    ".000": ".%f"}
    layout = re.sub(r"2006|01|02|15|04|05|\.000", lambda m: go_to_python[m.group()],
                    ts["layout"])
    assert layout == "%Y-%m-%dT%H:%M:%S.%fZ"
    assert check_ts(out, layout) > 800
    pipeline = otel["service"]["pipelines"]["logs"]
    assert pipeline["receivers"] == ["filelog"] and set(pipeline["exporters"]) <= set(
        otel["exporters"])
    for binary in ("otelcol-contrib", "otelcol"):
        if shutil.which(binary):
            p = subprocess.run([binary, "validate", "--config",
                                str(CONTRIB / "shippers" / "otelcol.yaml")],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr


ENVELOPE = 64 * 1024
"""What a match record holds besides `line` and `raw` (README "Shipping the JSONL")."""


def record_bound(max_line_bytes: int) -> int:
    """The largest record watchrun writes for a watcher: `line` and `raw` hold at most
    `max_line_bytes` each, every byte JSON-escaped to at most 6 (`\\u0001`)."""
    return 2 * 6 * max_line_bytes + ENVELOPE


def test_a_record_stays_within_the_bound_the_shippers_are_sized_for(tmp_path: Path) -> None:
    """The worst lines for escaping (control bytes, invalid UTF-8 with a U+2028 that makes the
    sanitized `line` escape every character too, two-byte characters), cut at maxLineBytes."""
    limit = 4096
    worst = (b"ERROR " + b"\x01" * 5000, b"ERROR \xe2\x80\xa8\x01" + b"\xff" * 5000,
             b"ERROR \x01\xe2\x80\xa8" + "\u00e9".encode() * 3000)
    (tmp_path / "lines").write_bytes(b"\n".join(worst) + b"\n")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": limit},
                                     "output": {"dir": str(tmp_path / "out")},
                                     "watchers": [{"id": "w", "path": str(tmp_path / "lines"),
                                                   "pattern": "ERROR"}]})
    p = subprocess.run([watchrun_bin(), "run", "--once", "--quiet", "-c", str(config)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    sizes = [len(ln) for ln in (tmp_path / "out" / "watchers" / "w.jsonl").read_bytes()
             .splitlines() if b'"kind":"match"' in ln]
    assert len(sizes) == 3 and max(sizes) > 6 * limit  # the escaping did grow them
    assert max(sizes) <= record_bound(limit)


def shipper_limits() -> dict[str, int]:
    """Each shipper config's longest record, in bytes."""
    vector = tomllib.loads((CONTRIB / "shippers" / "vector.toml").read_text())
    fluent = dict(fluent_bit_sections((CONTRIB / "shippers" / "fluent-bit.conf").read_text()))
    otel = yaml.safe_load((CONTRIB / "shippers" / "otelcol.yaml").read_text())
    assert fluent["INPUT"]["Skip_Long_Lines"] == "On"  # a longer one skipped, not the file
    return {"vector": vector["sources"]["watchrun"]["max_line_bytes"],
            "fluent-bit": int(fluent["INPUT"]["Buffer_Max_Size"]),
            "otelcol": otel["receivers"]["filelog"]["max_log_size"]}


def test_the_shippers_take_the_largest_record_watchrun_can_write() -> None:
    """Vector's default (100 KiB) discarded a record of a 60 KB matched line of control bytes
    (360 KB); Fluent Bit's (32k) stopped tailing the file at the first record over it. Each
    config holds the largest record at maxLineBytes' ceiling (raising it fails this test)."""
    ceiling = LIMIT_RULES["maxLineBytes"][1]
    assert ceiling is not None
    for name, limit in shipper_limits().items():
        assert limit >= record_bound(ceiling.hi), name


# -- every file ---------------------------------------------------------------------------------
def test_every_contrib_file_is_covered() -> None:
    covered = {"systemd/watchrun.service", "systemd/watchrun.service.d/read-all-logs.conf",
               "kubernetes/sidecar.yaml", "kubernetes/daemonset.yaml", "shippers/vector.toml",
               "shippers/fluent-bit.conf", "shippers/parsers.conf", "shippers/otelcol.yaml"}
    present = {str(p.relative_to(CONTRIB)) for p in CONTRIB.rglob("*") if p.is_file()
               and p.relative_to(CONTRIB).parts[0] not in ("ci", "webhooks")}
    assert present == covered, "a contrib file without a test"
