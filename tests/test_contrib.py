"""Every file in contrib/ (except contrib/ci, tested in test_contrib_ci.py) is exercised."""

from __future__ import annotations

import configparser
import glob
import json
import shlex
import signal
import socket
import subprocess
import tomllib
from datetime import datetime
from pathlib import Path

import yaml
from liverunner import watchrun_bin, write_config

CONTRIB = Path(__file__).resolve().parents[1] / "contrib"


def test_systemd_unit_runs_as_a_notify_service_and_reloads(tmp_path: Path) -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(CONTRIB / "systemd" / "watchrun.service")
    svc = unit["Service"]
    assert svc["Type"] == "notify" and "HUP" in svc["ExecReload"]
    argv = shlex.split(svc["ExecStart"])
    assert Path(argv[0]).name == "watchrun" and argv[1] == "run"
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "echo ERROR hi; exec sleep 1000", "pattern": "ERROR"}]})
    argv = [watchrun_bin(), *argv[1:]]
    argv[argv.index("-c") + 1] = str(config)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "state")
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(20)
    proc = subprocess.Popen(argv, env={"NOTIFY_SOCKET": str(sock_path), "PATH": "/usr/bin:/bin"},
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert "READY=1" in sock.recv(4096).decode()
        proc.send_signal(signal.SIGHUP)  # what ExecReload does
        msgs = [sock.recv(4096).decode() for _ in range(2)]
        assert "RELOADING=1" in msgs[0] and "READY=1" in msgs[1]
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


def test_kubernetes_sidecar_config_validates_and_mounts_line_up(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((CONTRIB / "kubernetes" / "sidecar.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    watch = yaml.safe_load(cm["data"]["watch.yaml"])
    config = tmp_path / "watch.yaml"
    config.write_text(cm["data"]["watch.yaml"])
    p = subprocess.run([watchrun_bin(), "validate", "-c", str(config)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    pod = deploy["spec"]["template"]["spec"]
    sidecar = next(c for c in pod["containers"] if c["name"] == "watchrun")
    mounts = {m["mountPath"] for m in sidecar["volumeMounts"]}
    assert watch["output"]["dir"] in mounts
    for w in watch["watchers"]:
        assert str(Path(w["path"]).parent) in mounts
    assert "/etc/watchrun/watch.yaml" in sidecar["command"][-1]
    port = sidecar["ports"][0]["containerPort"]
    assert f":{port}" in sidecar["command"][-1]
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/healthz"


def _real_output(tmp_path: Path) -> Path:
    """A real once run (a watcher and the mock agent) so the shippers' globs meet real files."""
    out = tmp_path / "out"
    config = write_config(tmp_path, {
        "output": {"dir": str(out)},
        "watchers": [{"id": "w", "command": "echo ERROR shipped", "pattern": "ERROR",
                      "wake": "a"}],
        "agents": [{"name": "a", "provider": "mock"}]})
    p = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(config)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return out


def _fluent_bit_sections(text: str) -> dict[str, dict[str, str]]:
    """Fluent Bit's classic format: `[SECTION]` then indented `Key value` lines."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition(" ")
            current[key] = value.strip()
    return sections


def _globs_hit(patterns: list[str], out: Path) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        files += glob.glob(pattern.replace("/var/lib/watchrun", str(out)))
    return sorted(files)


def test_shipper_configs_read_the_files_watchrun_writes(tmp_path: Path) -> None:
    out = _real_output(tmp_path)
    expected = sorted(str(p) for p in out.glob("*/*.jsonl"))
    assert len(expected) == 2
    vector = tomllib.loads((CONTRIB / "shippers" / "vector.toml").read_text())
    assert _globs_hit(vector["sources"]["watchrun"]["include"], out) == expected
    assert "parse_json" in vector["transforms"]["records"]["source"]
    fb = _fluent_bit_sections((CONTRIB / "shippers" / "fluent-bit.conf").read_text())
    assert fb["INPUT"]["Parser"] == "json"
    assert _globs_hit(fb["INPUT"]["Path"].split(","), out) == expected
    otel = yaml.safe_load((CONTRIB / "shippers" / "otelcol.yaml").read_text())
    recv = otel["receivers"]["filelog"]
    assert _globs_hit(recv["include"], out) == expected
    # the timestamp layout the collector is told matches what records carry
    layout = recv["operators"][0]["timestamp"]["layout"]
    assert layout == "2006-01-02T15:04:05.000Z"
    for path in expected:
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line)
            datetime.strptime(rec["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")


def test_every_contrib_file_is_covered() -> None:
    covered = {"systemd/watchrun.service", "kubernetes/sidecar.yaml", "shippers/vector.toml",
               "shippers/fluent-bit.conf", "shippers/otelcol.yaml"}
    present = {str(p.relative_to(CONTRIB)) for p in CONTRIB.rglob("*") if p.is_file()
               and p.relative_to(CONTRIB).parts[0] != "ci"}
    assert present == covered, "a contrib file without a test"
