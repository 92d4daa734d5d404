"""`run --once`'s own output files and signals while it reports: a `--junit` path that is a FIFO,
a device or a symlink is refused at once (never waited on, never written through), and a
SIGTERM while the verdict is being reported is exit 3 with its message, not a silent 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from liverunner import wait_for, watchrun_bin, write_config
from test_once import PY, TIMEOUT_S, base_env, gated, once, table_row
from tmpfs import fill, mount_tmpfs, umount


@pytest.mark.parametrize("planted", ["fifo", "fifo-read", "symlink", "device"])
def test_a_junit_path_that_is_no_regular_file_is_refused_at_once(tmp_path: Path,
                                                                 planted: str) -> None:
    """A FIFO at `--junit` hung the run after its verdict was known (open(2) waits for a
    reader); a symlink was written through. Both are refused now, as a directory is: exit 3,
    the reason in the table's last line, nothing waited on and nothing written elsewhere."""
    report, target = tmp_path / "jf", tmp_path / "elsewhere.txt"
    reader = None
    if planted.startswith("fifo"):
        os.mkfifo(report)
        if planted == "fifo-read":  # someone holds it open for reading: open(2) would not wait
            reader = os.open(report, os.O_RDONLY | os.O_NONBLOCK)
    elif planted == "symlink":
        target.write_text("keep me\n")
        report.symlink_to(target.name)
    else:
        report = Path("/dev/null")
    try:
        r = once(tmp_path, {"watchers": [gated("build", "echo fine", "warning:", maxMatches=0)]},
                 "--junit", str(report))
    finally:
        if reader is not None:
            os.close(reader)
    why = ("a symlink (to elsewhere.txt), never written through" if planted == "symlink"
           else "not a regular file")
    assert r.rc == 3, r.out + r.err
    assert table_row(r.out, "build")[-1] == "pass"
    assert r.out.endswith(f"watchrun: FAILED: the 1 gate holds, but the JUnit report {report} "
                          f"could not be written: {why}\n"), r.out
    assert f"cannot write the JUnit report {report}: {why}\n" in r.err
    if planted == "symlink":
        assert target.read_text() == "keep me\n"


def test_a_junit_report_a_full_disk_cut_is_removed_not_left_malformed(tmp_path: Path) -> None:
    """The JUnit file on a disk that fills as it is written: exit 3 and the reason, but a cut,
    unparseable report was left (a CI's test-report step then fails to parse it instead of
    saying it is missing), and the last run's report was already gone. No file is left."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "64k")
    try:
        report = mnt / "report.xml"
        report.write_text("<testsuites/>\n")  # (the last run's)
        fill(mnt, leave=1024)
        line = "warning: " + "x" * 30_000
        r = once(tmp_path, {"watchers": [gated("build", f"echo {line}", "warning:",
                                                maxMatches=0)]}, "--junit", str(report))
        assert r.rc == 3, r.out + r.err
        assert r.out.endswith(f"the JUnit report {report} could not be written: No space left "
                              "on device\n"), r.out
        assert not report.exists()
    finally:
        umount(mnt)


def test_a_step_summary_that_is_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    """`$GITHUB_STEP_SUMMARY` was opened as plainly as the JUnit file: a FIFO there hung the run
    too. It is a warning (as any summary that cannot be appended to), and the verdict stands."""
    os.mkfifo(tmp_path / "summary")
    r = once(tmp_path, {"watchers": [gated("build", "echo fine", "warning:", maxMatches=0)]},
             GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))
    assert r.rc == 0, r.out + r.err
    assert f"cannot append to GITHUB_STEP_SUMMARY {tmp_path}/summary: not a regular file\n" \
        in r.err


def test_a_sigterm_while_the_verdict_is_reported_is_exit_3_with_its_message(
        tmp_path: Path) -> None:
    """The report waits (at most 2 s at a time) for a stdout reader that keeps reading. A
    SIGTERM then (after the loop gave the signals back) killed the run: exit 143, nothing said.
    Now it ends the wait at once and the run says it was interrupted: exit 3."""
    build = gated("build", [PY, "-c", "for _ in range(1000): print('x' * 199)"], "warning:",
                  maxMatches=0)  # 200 KB of echo: more than a pipe holds
    cfg = write_config(tmp_path, {"watchers": [build]})
    proc = subprocess.Popen(
        [watchrun_bin(), "run", "--once", "-c", str(cfg), "--junit", "report.xml"],
        cwd=tmp_path, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:  # stdout is not read: the report (its JUnit file written first) waits on it
        wait_for(lambda: proc.poll() is not None or (tmp_path / "report.xml").exists(),
                 "the JUnit report")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    text = err.decode()
    assert proc.returncode == 3, text[-2000:]
    assert "stdout took nothing" not in text  # (the signal came while it waited)
    assert "interrupted by SIGTERM while its verdict was reported: exit 3" in text, text[-2000:]
    assert out.decode().endswith(
        "watchrun: INTERRUPTED by SIGTERM while the verdict was reported: exit 3\n")


PATIENT = """
import sys
import watchrun.output.logstream
watchrun.output.logstream.EXIT_WAIT_S = 30.0  # (2 s: how long a reader may take nothing)
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose exit waits 30 s for a stdout reader that takes nothing."""


def test_a_sigterm_while_the_verdict_waits_for_a_reader_that_never_reads_ends_it(
        tmp_path: Path) -> None:
    """That signal ended the wait, but the line saying so was queued behind what waited, and
    the exit then waited for it as long again (EXIT_WAIT_S, found by a tester: 2 s after the
    signal, every time). What waited is left out now, and the line waits 0.5 s at most."""
    build = gated("build", [PY, "-c", "for _ in range(1000): print('x' * 199)"], "warning:",
                  maxMatches=0)
    cfg = write_config(tmp_path, {"watchers": [build]})
    proc = subprocess.Popen(
        [sys.executable, "-c", PATIENT, "run", "--once", "-c", str(cfg), "--junit", "report.xml"],
        cwd=tmp_path, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:  # stdout is never read
        wait_for(lambda: proc.poll() is not None or (tmp_path / "report.xml").exists(),
                 "the JUnit report")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 3  # (not 30 s)
    finally:
        proc.kill()
        proc.communicate()
