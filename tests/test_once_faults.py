"""`run --once` fails closed where it could not look at everything: a SIGHUP mid-run, lines in
a generation it could not read, a file cut short while it was read."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from liverunner import wait_for, watchrun_bin, write_config
from test_once import TIMEOUT_S, base_env, gated, table_row


def test_a_sighup_during_a_once_run_keeps_the_evidence_of_the_crossed_gate(
        tmp_path: Path) -> None:
    """A SIGHUP with a changed config restarted the gated command mid-run: the matches of its
    first run were dropped with it and the second run's clean exit passed the gate (exit 0).
    A once run judges one config and one run of each command: a SIGHUP is ignored, said so."""
    marker, go = tmp_path / "marker", tmp_path / "go"
    build = gated("build", ["sh", "-c", f"if [ ! -e {marker} ]; then touch {marker}; echo ERROR "
                            f"first; fi; until [ -e {go} ]; do sleep 0.02; done; echo done"],
                  "ERROR", maxMatches=0)
    other = {"id": "other", "command": ["sh", "-c", f"until [ -e {go} ]; do sleep 0.02; done"],
             "pattern": "zzz"}
    cfg = write_config(tmp_path, {"watchers": [build, other]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg)], cwd=tmp_path,
                            env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.extend(iter(proc.stderr.readline, b"")))
    reader.start()
    try:
        assert proc.stdout.readline() == b"ERROR first\n"
        cfg.write_text(cfg.read_text().replace("echo done", "echo changed"))
        proc.send_signal(1)  # SIGHUP
        wait_for(lambda: any(b"reload" in ln or b"SIGHUP" in ln for ln in err), "the SIGHUP")
        go.touch()
        out = proc.stdout.read().decode()
        assert proc.wait(timeout=TIMEOUT_S) == 1, out + b"".join(err).decode()
    finally:
        proc.kill()
        reader.join(TIMEOUT_S)
    assert table_row(out, "build")[1:] == ["1", "0", "0", "FAIL"], out
    text = b"".join(err).decode()
    assert "SIGHUP ignored: a `run --once` runner judges the config it started with" in text
    assert "done\n" in out and "changed" not in out
