"""A rotated generation the runner may not look at (a file it cannot open, a directory it cannot
list) is no generation gone: `run --once` says what it could not read and how many bytes are
known unread (an ERROR, exit 3), and reads it once it can. The runner runs as root without
CAP_DAC_OVERRIDE, as a CI user without it would."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from liverunner import watchrun_bin, write_config
from recordcheck import validate_records
from test_once import TIMEOUT_S, Run, base_env, table_row

CONFIG = {"watchers": [{"id": "app", "path": "logs/app.log", "pattern": "ERROR",
                        "gate": {"maxMatches": 0}}]}


def no_dac_override() -> list[str]:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def once(folder: Path) -> Run:
    cfg = write_config(folder, CONFIG)
    proc = subprocess.run([*no_dac_override(), watchrun_bin(), "run", "--once", "-c", str(cfg)],
                          cwd=folder, env=base_env(), capture_output=True, timeout=TIMEOUT_S,
                          check=False)
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), 0.0)


def errors(folder: Path) -> list[dict[str, Any]]:
    return [r for r in validate_records(folder / ".watchrun" / "watchers" / "app.jsonl")
            if r["kind"] in ("error", "gap")]


def read_then_rotated(folder: Path) -> Path:
    """logs/app.log read by a once run, then `ERROR unread` appended and it rotated (`create`)."""
    logs = folder / "logs"
    logs.mkdir()
    log = logs / "app.log"
    log.write_text("ok\n")
    r = once(folder)
    assert r.rc == 0, r.out + r.err
    with log.open("a") as f:
        f.write("ERROR unread\n")
    log.rename(logs / "app.log.1")
    log.write_text("ok new\n")
    return logs


def test_a_rotated_generation_it_cannot_open_fails_closed_and_is_read_once_it_can(
        tmp_path: Path) -> None:
    """app.log.1 (mode 000) was called gone (`gap{missing, unreadBytes: 0}`) and the gate
    passed over its unread ERROR line."""
    logs = read_then_rotated(tmp_path)
    (logs / "app.log.1").chmod(0)
    for _ in range(2):  # (said at every run until it can be read)
        r = once(tmp_path)
        assert (r.rc, table_row(r.out, "app")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
        assert f"cannot read {logs}/app.log.1 (a generation of {logs}/app.log" in r.out, r.out
        assert "Permission denied; its lines from line 2 (offset 3) on were not read (13 " \
               "bytes known)" in r.out, r.out
    assert [(x["kind"], x.get("code"), x.get("unreadBytes")) for x in errors(tmp_path)] == \
           [("error", "EACCES", 13)] * 2
    (logs / "app.log.1").chmod(0o644)
    r = once(tmp_path)
    assert (r.rc, table_row(r.out, "app")[1:]) == (1, ["1", "0", "-", "FAIL"]), r.out + r.err
    assert "ERROR unread" in r.out


def test_a_log_directory_it_cannot_list_fails_closed(tmp_path: Path) -> None:
    """logs/ of mode 0311: the file at the path opens, the rotated one cannot be looked for
    (the listing's EACCES was taken for "no sibling"): the gate passed."""
    logs = read_then_rotated(tmp_path)
    logs.chmod(0o311)
    try:
        r = once(tmp_path)
    finally:
        logs.chmod(0o755)
    assert (r.rc, table_row(r.out, "app")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    assert f"cannot list the directory {logs} (a generation of {logs}/app.log" in r.out, r.out
    r = once(tmp_path)  # listable again: read on from where it was
    assert (r.rc, table_row(r.out, "app")[1:]) == (1, ["1", "0", "-", "FAIL"]), r.out + r.err
