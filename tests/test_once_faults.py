"""`run --once` is never a pass it did not earn: a SIGHUP mid-run, a signal before the loop
owns the signals, a run that did not finish (JUnit, footer), a stale config cache entry, a gate
written with a whole float, a stop record that could not be written."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from insupervisor import FaultySink, Running, Sinks
from liverunner import cli, wait_for, watchrun_bin, write_config
from test_once import TIMEOUT_S, base_env, gated, once, table_row

from watchrun.cli.once_report import report_once
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.process.spawn import Proc, Spawner, SpawnError


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


def test_a_relative_output_dir_is_where_the_run_is_not_where_it_was_cached(
        tmp_path: Path) -> None:
    """`--output-dir out` is relative to the working directory, but the config cache's key held
    it as typed: a run from another directory got the cached config of the first, and wrote its
    records (and read its checkpoints) under the first directory's `out`."""
    cfg = write_config(tmp_path, {"watchers": [gated("c", "echo hi", "ERROR", maxMatches=0)]})
    env = base_env(WATCHRUN_CACHE_DIR=str(tmp_path / "cache"))
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        proc = cli("run", "--once", "-c", cfg, "--output-dir", "out", cwd=tmp_path / name,
                   env=env, timeout=TIMEOUT_S)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"writing JSONL under {tmp_path / name / 'out'}\n" in proc.stderr
        assert (tmp_path / name / "out" / "watchers" / "c.jsonl").exists()


def test_a_run_interrupted_after_its_gates_held_is_no_pass_in_junit_or_the_footer(
        tmp_path: Path) -> None:
    """SIGTERM while an action still ran, every gate held: exit 3, but the JUnit report had no
    failure and no error (GitLab showed it green) and the table's footer said "passed". Now the
    JUnit report has a `watchrun` testcase in error and the footer says FAILED."""
    started = tmp_path / "started"
    cfg = write_config(tmp_path, {"watchers": [{
        **gated("build", "echo ERROR x", "ERROR", maxMatches=5),
        "actions": [{"type": "exec", "timeout": "5m",
                     "command": ["sh", "-c", f"touch {started}; exec sleep 60"]}]}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg), "--junit",
                             "report.xml"], cwd=tmp_path, env=base_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: proc.poll() is not None or started.exists(), "the action to start")
    proc.terminate()
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3, out.decode() + err.decode()
    text = out.decode()
    assert "passed" not in text, text
    assert "watchrun: FAILED: the 1 gate holds, but it was interrupted by SIGTERM before it " \
        "ended by itself\n" in text
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "1")
    error = root.find("testcase[@name='watchrun']/error")
    assert error is not None
    assert error.get("message") == "it was interrupted by SIGTERM before it ended by itself"


class StopRecordFails(Sinks):
    """Watchers' sinks on which every write of a `stop` record fails (EIO): the disk dies
    between the last match and the stop record."""

    def __call__(self, path: Path, stream_id: str, **kw: Any) -> JsonlSink:
        sink = super().__call__(path, stream_id, **kw)
        if isinstance(sink, FaultySink):
            write = sink.write_lines

            def no_stop(lines: Any) -> None:
                if any(b'"kind":"stop"' in ln for ln in lines):
                    raise SinkWriteError("EIO", f"cannot write {path}: Input/output error")
                write(lines)

            sink.write_lines = no_stop  # type: ignore[method-assign]
        return sink


def test_a_once_run_whose_stop_record_could_not_be_written_is_not_a_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The `stop` record, given up after FINAL_WRITE_S, was a problem in the log only: the
    verdict passed and the run exited 0 with its JSONL short of its last record (README: exit
    3 when a watcher's records could not be written). It is headed "could not finish": the
    watcher ran and read its file ("could not run" was false)."""
    (tmp_path / "app.log").write_text("ERROR one\n")
    log = RunLog(quiet=True)

    async def main() -> int:
        async with Running(tmp_path, {"watchers": [
                {"id": "app", "path": "app.log", "pattern": "ERROR",
                 "gate": {"maxMatches": 5}}]}, sinks=StopRecordFails(), once=True) as r:
            assert r.task is not None
            await asyncio.wait_for(asyncio.shield(r.task), 30)
            args = argparse.Namespace(junit=None, format="text")
            return report_once(r.sup, r.config, args, 0.0, log)

    assert asyncio.run(main()) == 3
    out = capsys.readouterr().out
    assert "passed" not in out, out
    assert "\napp: could not finish\n  - its records could not be written: the stop record: " \
        in out, out
    assert "watchrun: FAILED: 1 watcher could not finish" in out


def test_a_junit_report_that_could_not_be_written_is_no_pass_in_the_table(tmp_path: Path) -> None:
    """Exit 3 when the JUnit file cannot be written, but the table printed before it said
    "passed: all 1 gates hold". The report is written first now, and the footer says FAILED."""
    (tmp_path / "reports").write_text("a file where the report's folder should be\n")
    r = once(tmp_path, {"watchers": [gated("build", "echo fine", "warning:", maxMatches=0)]},
             "--junit", "reports/junit.xml")
    assert r.rc == 3, r.out + r.err
    assert table_row(r.out, "build")[-1] == "pass" and "passed" not in r.out, r.out
    assert "watchrun: FAILED: the 1 gate holds, but the JUnit report reports/junit.xml could " \
        "not be written: Not a directory\n" in r.out


def test_a_run_level_failure_is_a_github_annotation_too(tmp_path: Path) -> None:
    """In GitHub Actions, exit 3 from a cause no gate's verdict names (here the JUnit report
    could not be written) printed no `::error`: the job's annotations showed nothing wrong."""
    (tmp_path / "reports").write_text("a file where the report's folder should be\n")
    r = once(tmp_path, {"watchers": [gated("build", "echo fine", "warning:", maxMatches=0)]},
             "--junit", "reports/junit.xml", GITHUB_ACTIONS="true")
    assert r.rc == 3, r.out + r.err
    errors = [ln for ln in r.out.splitlines() if ln.startswith("::error ")]
    assert errors == ["::error title=watchrun::the JUnit report reports/junit.xml could not be "
                      "written: Not a directory"], r.out


def test_a_run_without_gates_that_could_not_start_says_so_in_the_footer_and_annotation(
        tmp_path: Path) -> None:
    """Its output dir unusable, a once run without gates exited 3 under "no gated watchers"
    alone; the footer now says its watcher could not run, and the verdict and the annotation
    why."""
    (tmp_path / "out").write_text("a file where the output dir should be\n")
    summary = tmp_path / "summary.md"
    r = once(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "command": "echo hi", "pattern": "ERROR"}]},
        GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    assert r.rc == 3, r.out + r.err
    footer = [ln for ln in r.out.splitlines() if ln.startswith("watchrun: FAILED: ")]
    assert footer == ["watchrun: FAILED: 1 watcher could not run"], r.out
    assert "app: could not run\n  - it never ran: output dir: " in r.out
    assert "no gated watchers" not in r.out, r.out  # (printed above the failure, as a pass)
    errors = [ln for ln in r.out.splitlines() if ln.startswith("::error ")]
    assert len(errors) == 1 and errors[0].startswith(
        "::error title=watchrun gate app (could not run)::it never ran: output dir: "), errors
    assert "FAILED" in summary.read_text() and "No gated watchers." not in summary.read_text()


def test_a_max_matches_written_as_a_whole_float_is_a_gate(tmp_path: Path) -> None:
    """`maxMatches: 0.0` (or `1e3`, a float in YAML 1.2) passed the schema, whose `integer`
    takes a whole float, then was dropped as not an int: a gate that could never be crossed,
    with a warning only, and exit 0 on a forbidden line. It is the whole number it says."""
    cfg = write_config(tmp_path, {"watchers": [gated("c", "echo ERROR", "ERROR")]})
    cfg.write_text(cfg.read_text().replace("gate: {}", "gate: {maxMatches: 0.0}"))
    assert "maxMatches: 0.0" in cfg.read_text()
    proc = cli("run", "--once", "-c", cfg, cwd=tmp_path, env=base_env(), timeout=TIMEOUT_S)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert table_row(proc.stdout, "c")[1:] == ["1", "0", "0", "FAIL"], proc.stdout
    assert "never be crossed" not in proc.stderr


def test_a_sigterm_before_the_loop_takes_the_signals_is_no_pass(tmp_path: Path) -> None:
    """SIGTERM while the config is read (before the loop owns the signals: a slow start, a
    `timeout --preserve-status` that fires early) ended a once run with exit 0, no verdict,
    no JUnit report: nothing was looked at. A once run ends with 3 there."""
    cfg = write_config(tmp_path, {"watchers": [gated("c", "echo ERROR", "ERROR",
                                                     maxMatches=0)]})
    code = ("import os, signal, sys\n"
            "import watchrun.config as c\n"
            "real = c.load_config\n"
            "def reading(*a, **k):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)  # a real signal, while it reads\n"
            "    return real(*a, **k)\n"
            "c.load_config = reading\n"
            "from watchrun.cli.main import main\n"
            f"sys.exit(main(['run', '--once', '-c', {str(cfg)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=base_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "stopped by SIGTERM before it started: exit 3" in proc.stderr
    assert not (tmp_path / ".watchrun" / "watchers" / "c.jsonl").exists()


class OutOfDescriptors(Spawner):
    """A spawner that fails as a runner out of descriptors does (its pipes cannot be made)."""

    async def spawn(self, command: Any, **kw: Any) -> Proc:
        raise SpawnError("EMFILE", f"cannot start {command!r}: Too many open files (EMFILE)")


def test_a_command_that_could_not_start_for_want_of_descriptors_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """EMFILE (as ENFILE and EAGAIN: out of descriptors or processes) at a gated command's spawn
    was not among the codes that mean "could not start": the verdict said "the command did not
    run to its exit (the run was interrupted)" of a run nothing interrupted (seen with `ulimit
    -n 14`). Now it says why the command could not start."""

    async def main() -> int:
        async with Running(tmp_path, {"watchers": [gated("c", "echo hi", "ERROR", maxMatches=0)]},
                           spawner=OutOfDescriptors(), once=True) as r:
            assert r.task is not None
            await asyncio.wait_for(asyncio.shield(r.task), 30)
            args = argparse.Namespace(junit=None, format="text")
            return report_once(r.sup, r.config, args, 0.0, RunLog(quiet=True))

    assert asyncio.run(main()) == 3
    out = capsys.readouterr().out
    assert "  - the command could not be started: cannot start 'echo hi': Too many open files " \
        "(EMFILE)\n" in out, out
    assert "interrupted" not in out
