"""`state/processes.json` names the process groups a new runner ends, so it is believed only when
it is the runner's own regular file (docs/security.md). Each test plants a file naming a real
victim's group, as a dead runner's file would, and checks that the victim lives."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import cli, write_config

from watchrun.output.outdir import prepare_output_dir
from watchrun.output.safefs import UnsafePathError
from watchrun.process.groups import Group, leftover_groups
from watchrun.process.tree import start_time

NOBODY = 65534


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process group of its own that no runner started."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def dead_runner_doc(victim: subprocess.Popen[bytes]) -> bytes:
    gone = subprocess.Popen(["true"])
    gone.wait()
    start = start_time(victim.pid)
    assert start is not None
    return json.dumps({"runner": {"pid": gone.pid, "start": 1},
                       "groups": [{"pgid": victim.pid, "start": start, "spawnId": "x"}]}).encode()


def plant(kind: str, path: Path, doc: bytes) -> None:
    elsewhere = path.with_name("elsewhere.json")
    if kind == "symlink":
        elsewhere.write_bytes(doc)
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "hard link":
        elsewhere.write_bytes(doc)
        os.link(elsewhere, path)
    elif kind == "another user's file":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        path.write_bytes(doc)
        os.chown(path, NOBODY, NOBODY)
    else:
        path.write_bytes(doc)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hard link", "another user's file"])
def test_a_groups_file_that_is_not_the_runners_own_is_not_believed(
        tmp_path: Path, victim: subprocess.Popen[bytes], kind: str) -> None:
    path = tmp_path / "processes.json"
    doc = dead_runner_doc(victim)
    plant("own", tmp_path / "own.json", doc)
    gone = json.loads(doc)["runner"]["pid"]
    assert leftover_groups(tmp_path / "own.json") == (  # the same content, the runner's own
        gone, [Group(victim.pid, start_time(victim.pid) or 0, "x")])
    plant(kind, path, doc)
    with pytest.raises(UnsafePathError):
        leftover_groups(path)


@pytest.mark.parametrize("name", ["processes.json", "agent-ag.processes.json"])
@pytest.mark.parametrize("kind", ["symlink", "fifo", "another user's file"])
def test_a_run_ends_no_process_a_planted_groups_file_names(
        tmp_path: Path, victim: subprocess.Popen[bytes], kind: str, name: str) -> None:
    """The runner's own groups file, and an `agent run`'s (read by every runner that starts)."""
    out = tmp_path / "out"
    layout = prepare_output_dir(out)
    plant(kind, layout.state / name, dead_runner_doc(victim))
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"output": {"dir": str(out)}, "watchers": [
        {"id": "app", "path": str(tmp_path / "app.log"), "pattern": "ERROR"}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)  # a FIFO must not hang it
    assert res.returncode == 0, res.stderr
    assert victim.poll() is None, "the victim named by a planted file was ended"
    assert f"{layout.state / name}: " in res.stderr
    assert "not trusted, so no process it names is ended" in res.stderr
    assert "Traceback" not in res.stderr
