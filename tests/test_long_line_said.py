"""A line that grows past `limits.maxLineBytes` with no end yet is said at once (a warning in the
log, an `error{line-too-long}` record, `longLine` in `status`), once per such line, for a file
watcher and a command watcher alike; once it ends it is recorded and counted as before."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config
from recordcheck import validate_records
from test_metrics import free_port, scrape

LIMIT = 256
"""`limits.maxLineBytes` of these tests (the least it may be)."""


def said(r: LiveRunner) -> list[dict[str, Any]]:
    """The watcher's `error{line-too-long}` records."""
    return [x for x in r.records("app") if x["kind"] == "error" and x["code"] == "line-too-long"]


def warnings(r: LiveRunner) -> list[str]:
    """The runner's warning lines about a line too long."""
    return [x for x in r.stderr().splitlines() if "[app] warning: line-too-long:" in x]


def long_line(r: LiveRunner) -> Any:
    """`longLine` of the watcher as the live runner lists it (the control socket's `list`)."""
    (app,) = r.control({"cmd": "list"})["watchers"]
    return app["longLine"]


def status(tmp_path: Path) -> dict[str, Any]:
    """`watchrun status app --json`."""
    done = cli("status", "app", "--json", "-c", "watch.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A FIFO the command reads its cues from, held open for writing (and reading, so neither
    open blocks) by the test: a line written to it lets the command go on."""
    path = tmp_path / "cues"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)
    yield path, fd
    os.close(fd)


def test_a_file_line_growing_past_the_limit_is_said_at_once_and_once(tmp_path: Path) -> None:
    """A program hung mid-line: what it appended past `maxLineBytes` said nothing until the
    line ended (no record, no status field, no metric, no log line). Now the first look that
    finds it with no end says it: a warning naming the watcher, the file, where the line began
    and the limit, the same as an `error` record (counted in `watchrun_errors_total`), and
    `status` shows it growing; more bytes of it say nothing again; its end is recorded and
    counted as before; the next such line is said too."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": LIMIT}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        with log.open("a") as f:
            f.write("ok\nERROR " + "x" * 994)
        wait_for(lambda: warnings(r), "the warning")
        (warning,) = warnings(r)
        assert (f"a line over limits.maxLineBytes ({LIMIT}) with no end yet: {log} from "
                "offset 3 (line 2), 1000 bytes so far") in warning
        (record,) = said(r)
        assert {k: record[k] for k in ("path", "offset", "lineNo", "bytes")} == {
            "path": str(log), "offset": 3, "lineNo": 2, "bytes": 1000}
        assert record["inode"] == log.stat().st_ino
        shown = status(tmp_path)
        assert shown["longLine"] == {"path": str(log), "offset": 3, "lineNo": 2, "bytes": 1000}
        assert (shown["linesCut"], shown["matchCount"]) == (0, 0)  # (it has not ended)
        assert shown["lastError"].startswith("a line over limits.maxLineBytes")
        metrics = scrape(port)
        assert metrics['watchrun_errors_total{watcher="app"}'] == 1
        assert metrics['watchrun_lines_cut_total{watcher="app"}'] == 0

        with log.open("a") as f:
            f.write("x" * 1000)
        wait_for(lambda: (long_line(r) or {}).get("bytes") == 2000, "the line grown")
        with log.open("a") as f:
            f.write("\n")
        wait_for(lambda: r.matches("app"), "the line's match, once it ended")
        (match,) = r.matches("app")
        assert (match["lineNo"], match["truncated"], match["omittedBytes"]) == (
            2, True, 2000 - LIMIT)
        assert len(said(r)) == len(warnings(r)) == 1  # (not again as it grew)
        shown = status(tmp_path)
        assert shown["longLine"] is None
        assert (shown["linesCut"], shown["bytesCut"]) == (1, 2000 - LIMIT)
        assert scrape(port)['watchrun_lines_cut_total{watcher="app"}'] == 1

        with log.open("a") as f:
            f.write("y" * 600)
        wait_for(lambda: len(said(r)) == 2, "the next long line said")
        assert said(r)[1]["offset"] == 3 + 2001 and said(r)[1]["lineNo"] == 3
        assert len(warnings(r)) == 2
    finally:
        assert r.stop() == 0
    validate_records(r.out / "watchers" / "app.jsonl")


def test_a_command_line_growing_past_the_limit_is_said_at_once_and_once(
        tmp_path: Path, fifo: tuple[Path, int]) -> None:
    """A command hung mid-line (a progress bar with no newline): said only at its end, or at
    the run's. Now said once it is read with no end, named by its run, where it began and the
    limit; not again as it grows; its end recorded as before; the next one said too."""
    cues, cue = fifo
    script = (
        "import sys\n"
        f"cues = open({str(cues)!r})\n"
        "out = sys.stdout\n"
        "out.write('ERROR ' + 'x' * 994); out.flush(); cues.readline()\n"
        "out.write('x' * 1000); out.flush(); cues.readline()\n"
        "out.write('\\n' + 'y' * 600); out.flush(); cues.readline()\n")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": LIMIT}, "watchers": [
        {"id": "app", "command": [sys.executable, "-c", script], "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: warnings(r), "the warning")
        (warning,) = warnings(r)
        assert (f"a line over limits.maxLineBytes ({LIMIT}) with no end yet: run 1's output "
                "from offset 0 (line 1), 1000 bytes so far") in warning
        (record,) = said(r)
        assert {k: record[k] for k in ("run", "offset", "lineNo", "bytes")} == {
            "run": 1, "offset": 0, "lineNo": 1, "bytes": 1000}
        shown = status(tmp_path)
        assert shown["longLine"] == {"run": 1, "offset": 0, "lineNo": 1, "bytes": 1000}
        assert (shown["linesCut"], shown["matchCount"]) == (0, 0)

        os.write(cue, b"go\n")
        wait_for(lambda: (long_line(r) or {}).get("bytes") == 2000, "the line grown")
        os.write(cue, b"go\n")
        wait_for(lambda: len(said(r)) == 2, "the next long line said")
        (match,) = r.matches("app")
        assert (match["lineNo"], match["truncated"], match["omittedBytes"]) == (
            1, True, 2000 - LIMIT)
        first, second = said(r)
        assert first["offset"] == 0 and (second["offset"], second["lineNo"]) == (2001, 2)
        assert len(warnings(r)) == 2  # (one per line, not one per read of it)
        shown = status(tmp_path)
        assert shown["longLine"] == {"run": 1, "offset": 2001, "lineNo": 2, "bytes": 600}
        assert (shown["linesCut"], shown["bytesCut"]) == (1, 2000 - LIMIT)
    finally:
        assert r.stop() == 0
    validate_records(r.out / "watchers" / "app.jsonl")
