"""The real runner against a real writer at about 20k lines/s that rotates its log (rename,
symlink swap, copytruncate, delete-and-recreate) while the runner runs, is frozen (SIGSTOP),
SIGKILLed or stopped. Every line number is recorded exactly once. Where a generation was deleted
before it was read to its end (recreate while the runner is down), the lines lost are exactly
those a `gap` record names: from its `lineNo` in that generation on, at least `unreadBytes`."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from recordcheck import record_errors

WRITER = Path(__file__).parent / "progs" / "rotating_writer.py"
LINE = 50
"""Bytes per line the writer writes."""


def generations(genlog: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in genlog.read_text().splitlines()]


def rotate(writer: subprocess.Popen[str], genlog: Path) -> None:
    before = len(generations(genlog))
    writer.send_signal(signal.SIGUSR1)
    wait_for(lambda: len(generations(genlog)) > before, "the writer to rotate")


def recorded(jsonl: Path, n: int) -> bool:
    """Line number `n` has a match record (a cheap look at the bytes, no parsing)."""
    return b'"line":"%09d ' % n in jsonl.read_bytes()


def losses(gens: list[dict[str, Any]], last: int, got: set[int]) -> dict[int, list[int]]:
    """Generation index → its missing line numbers."""
    out: dict[int, list[int]] = {}
    for i, g in enumerate(gens):
        end = gens[i + 1]["first"] - 1 if i + 1 < len(gens) else last
        gone = [n for n in range(g["first"], end + 1) if n not in got]
        if gone:
            out[i] = gone
    return out


@pytest.mark.parametrize("mode", ["rename", "symlink", "copytruncate", "recreate"])
def test_every_line_once_or_a_record_of_its_loss(tmp_path: Path, mode: str) -> None:
    log, genlog = tmp_path / "app.log", tmp_path / "generations.jsonl"
    # (One JSONL however long the run: ~30 MB in 8 s alone, past the default 64 MiB rotation of
    # output.maxBytes in a loaded run, where the records of the first generations were in
    # app.jsonl.1 and the test took them for lost.)
    config = write_config(tmp_path, {"limits": {"rotateWait": "300ms"},
                                     "output": {"maxBytes": "1GiB"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "^[0-9]", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(log), mode, str(genlog)],
                              stdout=subprocess.PIPE, text=True)
    deletes = mode == "recreate"
    # rename, symlink and copytruncate keep every generation on disk: rotate three times in a
    # row. recreate deletes one: a generation created and deleted before the runner ever looked
    # at the path leaves no trace to report, so there the runner sees each generation (it has
    # recorded its first line) before the next rotation or disruption, and the rotations while
    # it is frozen or down are one each (the deleted generation is the one it was reading)
    many = 1 if deletes else 3

    def caught_up() -> None:
        if deletes:
            first = generations(genlog)[-1]["first"]
            wait_for(lambda: recorded(jsonl, first), f"line {first}, the newest generation's first")

    def rotations(n: int, *, watched: bool = False) -> None:
        for _ in range(n):
            rotate(writer, genlog)
            if watched:
                caught_up()

    def a_second_of_lines() -> None:
        """The runner stays frozen or down while the writer writes a second of lines more."""
        wait_for(lambda: log.stat().st_size >= 20_000 * LINE, "a second of lines")

    runners: list[LiveRunner] = []
    try:
        wait_for(lambda: log.exists(), "the writer's log")
        r = LiveRunner(config)
        runners.append(r)
        wait_for(lambda: jsonl.exists() and jsonl.stat().st_size > 0, "the start record")
        rotations(2, watched=True)  # while it runs
        r.send(signal.SIGSTOP)  # frozen for a while, the writer rotating meanwhile
        rotations(many)
        a_second_of_lines()
        r.send(signal.SIGCONT)
        wait_for(lambda: jsonl.stat().st_size > 100_000, "records")
        caught_up()
        r.send(signal.SIGKILL)  # a crash, rotations while it is down, a restart
        r.proc.wait(timeout=10)
        rotations(many)
        a_second_of_lines()
        r = LiveRunner(config)
        runners.append(r)
        r.wait_log("running")
        assert r.stop() == 0, r.stderr()  # a clean stop, rotations, a restart
        rotations(many)
        a_second_of_lines()
        r = LiveRunner(config)
        runners.append(r)
        r.wait_log("running")
        writer.send_signal(signal.SIGTERM)
        last = int(writer.communicate(timeout=30)[0])
        wait_for(lambda: recorded(jsonl, last), f"line {last}, the last written", timeout=30)
        assert r.stop() == 0, r.stderr()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        for runner in runners:
            runner.close()
    recs = read_records(jsonl)
    for x in [*recs[:100], *(x for x in recs if x["kind"] != "match")]:
        assert record_errors(x) == [], x  # (every record would take long: a sample)
    got = [int(x["line"][:9]) for x in recs if x["kind"] == "match"]
    twice = [n for n, k in collections.Counter(got).items() if k > 1]
    assert twice == [], f"{len(twice)} lines recorded twice: {twice[:5]}"
    gens = generations(genlog)
    lost = losses(gens, last, set(got))
    claims = [x for x in recs if x["kind"] == "gap" or x.get("unreadBytes")]
    if not deletes:  # every generation stays on disk: nothing is lost, no loss is claimed
        assert lost == {}, {gens[i]["first"]: (v[0], v[-1], len(v)) for i, v in lost.items()}
        assert claims == [], claims
        return
    gaps = [x for x in recs if x["kind"] == "gap"]
    assert all(x["reason"] == "missing" for x in gaps), [
        (x["reason"], x["message"]) for x in gaps]
    for i, gone in lost.items():
        g = gens[i]
        end = gens[i + 1]["first"] - 1 if i + 1 < len(gens) else last
        assert gone == list(range(gone[0], end + 1)), f"generation {g}: not only its end lost"
        line_no = gone[0] - g["first"] + 1  # in that generation
        named = [x for x in gaps if x["inode"] == g["inode"] and x["lineNo"] == line_no]
        assert named, f"generation {g} lost lines {gone[0]}..{end} (from its line {line_no}) " \
                      f"without a gap record saying so: {gaps}"
        gap = named[0]
        gaps.remove(gap)
        assert gap["offset"] == (line_no - 1) * LINE
        assert gap["unreadBytes"] <= len(gone) * LINE  # what it saw of them, at most
