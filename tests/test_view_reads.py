"""`matches` and `logs` (once and `--follow`) read only what the output dir holds for a watcher
id, and say so when they cannot read it: the real CLI against real files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from liverunner import watchrun_bin

from watchrun.output import tailfile


def wr(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([watchrun_bin(), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, check=False)


def outside(tmp_path: Path) -> Path:
    """An empty output dir `od`, and a JSONL and a `.tail` beside it in `t2` (outside it)."""
    (tmp_path / "t2").mkdir()
    (tmp_path / "t2" / "evil.jsonl").write_text(json.dumps(
        {"schema": 1, "seq": 1, "kind": "match", "line": "read outside the output dir"}) + "\n")
    (tmp_path / "t2" / "evil.tail").write_bytes(tailfile.render("r", 1, ["TAIL outside"]))
    for sub in ("watchers", "state"):
        (tmp_path / "od" / sub).mkdir(parents=True)
    return tmp_path / "od"


@pytest.mark.parametrize("op", ["matches", "logs"])
@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("wid", ["ABS", "../../t2/evil", "", "."])
def test_an_id_that_is_a_path_is_refused_and_nothing_outside_is_read(
        tmp_path: Path, op: str, follow: bool, wid: str) -> None:
    """`matches /abs/evil` and `logs ../../t2/evil` printed the files outside the output dir
    (`-f` went on following them); an id is what the MCP tool takes as one, nothing else."""
    od = outside(tmp_path)
    wid = str(tmp_path / "t2" / "evil") if wid == "ABS" else wid
    flags = ["-f"] if follow else []
    p = wr(tmp_path, op, wid, *flags, "--output-dir", str(od), timeout=20)
    assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    assert f"{wid!r} is not a watcher id (1 to 64 letters, digits" in p.stderr
    j = wr(tmp_path, op, wid, *flags, "--json", "--output-dir", str(od), timeout=20)
    assert j.returncode == 2
    assert json.loads(j.stdout)["error"]["code"] == "invalid_argument"
    assert "outside" not in j.stdout
