"""Started with stdin, stdout or stderr closed (`2>&-`, a daemonizer), watchrun runs as usual:
the null device takes their place, so no file it opens becomes stderr."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, read_records, watchrun_bin, write_config


@pytest.mark.parametrize("closed", [(2,), (1, 2), (0, 1, 2)])
def test_a_run_with_closed_standard_descriptors_works(tmp_path: Path,
                                                       closed: tuple[int, ...]) -> None:
    (tmp_path / "app.log").write_text("INFO up\nERROR disk full\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True},
        # a command that writes to its stderr: captured with its output, never a file of ours
        {"id": "noisy", "command": "echo ERROR on stderr >&2", "pattern": "ERROR"}]})

    def close() -> None:
        for fd in closed:
            os.close(fd)

    done = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(config)],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, preexec_fn=close, timeout=DEADLINE_S,
                          cwd=tmp_path, check=False)
    assert done.returncode == 0
    out = tmp_path / ".watchrun" / "watchers"
    for wid, line in (("app", "ERROR disk full"), ("noisy", "ERROR on stderr")):
        records = read_records(out / f"{wid}.jsonl")  # each line parses: nothing stray in it
        assert [r["line"] for r in records if r["kind"] == "match"] == [line]
        assert records[-1]["kind"] == "stop"
