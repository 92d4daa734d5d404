"""A stdout that refuses writes (`> /dev/full`): every command says so in one line on stderr and
exits 3 (docs/cli.md), never a traceback and never a success whose output was lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")

MESSAGE = "cannot write to stdout: No space left on device"


def to_full(cwd: Path, *args: str, unbuffered: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "watchrun", *args], cwd=cwd, env=env,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "app.log").write_text("ERROR one\nok\n")
    (tmp_path / "watch.yaml").write_text(
        "watchers:\n  - {id: app, path: app.log, pattern: ERROR, gate: {maxMatches: 5}}\n")
    return tmp_path


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", [
    ("schema",), ("--version",), ("--help",), ("completion", "bash"), ("validate",),
    ("validate", "--format", "json"), ("config",), ("list",), ("list", "--json"),
])
def test_a_command_whose_stdout_is_full_exits_3_and_says_so(
        folder: Path, args: tuple[str, ...], unbuffered: bool) -> None:
    p = to_full(folder, *args, unbuffered=unbuffered)
    assert p.returncode == 3, p.stderr
    assert f"watchrun: error: {MESSAGE}\n" in p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_once_run_that_cannot_print_its_verdicts_fails_closed(folder: Path, fmt: str) -> None:
    """The gate held (one match of five allowed), but the verdicts were never shown: exit 3,
    with the reason on the log, and the JSONL still has the match."""
    p = to_full(folder, "run", "--once", *(["--json"] if fmt == "json" else []))
    assert p.returncode == 3, p.stderr
    assert MESSAGE in p.stderr and "Traceback" not in p.stderr
    if fmt == "json":
        event = [json.loads(line) for line in p.stderr.splitlines()
                 if '"stdout-failed"' in line]
        assert event and event[0]["level"] == "error"
        assert event[0]["reason"] == "No space left on device"
    records = [json.loads(line) for line in
               (folder / ".watchrun" / "watchers" / "app.jsonl").read_text().splitlines()]
    assert [r["line"] for r in records if r["kind"] == "match"] == ["ERROR one"]
    ok = subprocess.run([sys.executable, "-m", "watchrun", "run", "--once"], cwd=folder,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr  # the same run, with a stdout: the gate holds
    for view in (("matches", "app"), ("status", "app"), ("matches", "app", "--json")):
        p = to_full(folder, *view)  # the views of what that run wrote
        assert (p.returncode, p.stderr.splitlines()[-1:]) == (3, [f"watchrun: error: {MESSAGE}"])


def test_a_once_run_whose_reader_pauses_for_good_says_its_verdict_on_stderr(
        tmp_path: Path) -> None:
    """`watchrun run --once | pager` with the pager paused: at exit the runner waits for the
    reader while it takes some, and gives up after 2 s of nothing. It gave up silently: most of
    the output and the verdict went unprinted, with nothing on stderr. Now stderr says how many
    lines were not written and gives the verdict's line; the exit status is the verdict's."""
    (tmp_path / "watch.yaml").write_text(
        "watchers:\n  - {id: build, command: 'seq 1 30000; echo ERROR at end', "
        "pattern: ERROR, gate: {maxMatches: 0}}\n")
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "watchrun", "run", "--once", "-c",
                             "watch.yaml"], cwd=tmp_path, stdout=write, stderr=subprocess.PIPE,
                            text=True)
    os.close(write)
    try:  # the pipe is not read until the runner has ended: a pager paused for good
        err = proc.communicate(timeout=60)[1]
    finally:
        os.close(read)
    assert proc.returncode == 1, err
    (said,) = [x for x in err.splitlines() if "stdout took nothing for 2 s" in x]
    assert said.endswith("were not written (the JSONL has every match); FAILED: 1 of 1 gate "
                         "crossed"), said
    left = int(said.split("its last ")[1].split(" lines")[0])
    assert left > 0
