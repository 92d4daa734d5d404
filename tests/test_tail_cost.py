"""A watcher's `.tail` snapshot costs what was read: a line appended to a watched file adds about
a line to the runner's disk writes, not the whole `maxLogLines` tail rewritten (500 watchers of a
line a second each wrote 12 to 21 MB/s); and the file, appended to while it is read, still says
exactly which lines it holds."""

from __future__ import annotations

import os
from pathlib import Path

from liverunner import LiveRunner, cli, wait_for, write_config

from watchrun.output import tailfile

WATCHERS = 10
FILL = 520  # (more than maxLogLines: the tail is full, as in a long-running watcher)
ROUNDS = 5
LINE = "2026-12-07T00:00:00.000000000Z stdout F INFO " + "x" * 150


def _written(pid: int) -> int:
    """Bytes the process has written so far (`wchar`: every write, to disk or not)."""
    io = dict(x.split(": ") for x in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["wchar"])


def _all_at(state: Path, end: int) -> bool:
    tails = [tailfile.load(state / f"w{i}.tail") for i in range(WATCHERS)]
    return all(t is not None and t.end == end for t in tails)


def test_a_line_read_costs_about_a_line_of_snapshot_writes(tmp_path: Path) -> None:
    logs = [tmp_path / f"app{i}.log" for i in range(WATCHERS)]
    for log in logs:
        log.touch()
    config = write_config(tmp_path, {"watchers": [
        {"id": f"w{i}", "path": log.name, "pattern": "ERROR"} for i, log in enumerate(logs)]})
    state = tmp_path / ".watchrun" / "state"
    r = LiveRunner(config)
    try:
        r.wait_running()
        for i, log in enumerate(logs):
            log.write_text("".join(f"{LINE} fill {k} of {i}\n" for k in range(FILL)))
        wait_for(lambda: _all_at(state, FILL), "the first snapshots")
        before = _written(r.pid)
        for k in range(1, ROUNDS + 1):  # a line a second to every file, as a quiet service logs
            for i, log in enumerate(logs):
                with log.open("a") as f:
                    f.write(f"{LINE} tick {k} of {i}\n")
            wait_for(lambda k=k: _all_at(state, FILL + k), f"round {k}'s snapshots")
        per_line = (_written(r.pid) - before) / (ROUNDS * WATCHERS)
        # each round rewrote every watcher's whole tail (500 lines, ~100 KB); now the line
        # (~200 bytes), its status snapshot (~1 KB) and its checkpoint
        assert per_line < 8192, f"{per_line:.0f} bytes written per line read"
        shown = cli("logs", "w3", "--lines", "2", "-c", config).stdout.splitlines()
        assert shown == [f"{LINE} tick {ROUNDS - 1} of 3", f"{LINE} tick {ROUNDS} of 3"]
    finally:
        assert r.stop() == 0
    shown = cli("logs", "w3", "--lines", "2000", "-c", config).stdout.splitlines()
    assert len(shown) == 500 and shown[-1] == f"{LINE} tick {ROUNDS} of 3"  # maxLogLines, no more
    assert shown[0] == f"{LINE} fill {FILL + ROUNDS - 500} of 3"


def test_an_append_under_way_is_not_read_as_lines(tmp_path: Path) -> None:
    """The header counts the lines before the first one kept; a last line with no newline yet
    (an append under way, or one a crash cut short) is not a line, so `end` is the count the
    last whole line has, and a reader shows the last `keep` only."""
    path = tmp_path / "app.tail"
    path.write_bytes(tailfile.render("r1", 12, ["a", "b", "c"], keep=2) + tailfile.more(["d"])
                     + b"e-half")
    tail = tailfile.load(path)
    assert tail is not None and (tail.run, tail.end, tail.lines) == ("r1", 13, ["c", "d"])
    with path.open("ab") as f:
        f.write(b"\n")
    tail = tailfile.load(path)
    assert tail is not None and (tail.end, tail.lines) == (14, ["d", "e-half"])


def test_a_tail_larger_than_what_is_read_still_says_its_last_lines_count(tmp_path: Path) -> None:
    """Only the last READ_BYTES of a huge `.tail` are read: the lines left out are counted, so
    `logs --follow` still knows the number of its last line."""
    path = tmp_path / "app.tail"
    lines = [f"line {k:04d}" for k in range(1000)]
    path.write_bytes(tailfile.render("r1", 5000, lines[:600]) + tailfile.more(lines[600:]))
    tail = tailfile.load(path, limit=100 * len("line 0000\n") + 5)
    assert tail is not None and tail.end == 5000 + 400 and tail.lines == lines[-100:]
    assert os.path.getsize(path) > 100 * len("line 0000\n")
