"""More than `limits.maxGenerations` rotated files open at once: the oldest is released before
`rotateWait`, while its writer may still add to it. What it adds after that is not read, and the
user is told: a `gap{reason: max-generations}` with the bytes it grew by, once the runner sees
the file again (at the next rotation, or at the next start). When it did not grow, no gap. The
real runner, real files, real renames; the writers keep their files open across the renames."""

from __future__ import annotations

import collections
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from recordcheck import validate_records


class Rotating:
    """app.log and its writers: each rotation renames the file to app.log.<n> (its writer keeps
    writing to it) and starts a new app.log with a writer of its own."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "app.log"
        self.writers: list[IO[str]] = []
        self.names: list[Path] = []  # where each generation is now, oldest first
        self.n = 0
        self.new()

    def new(self) -> None:
        self.writers.append(self.log.open("a", buffering=1))
        self.names.append(self.log)

    def write(self, generation: int, *lines: str) -> int:
        """Append to a generation (-1: the newest); the bytes written."""
        text = "".join(f"{x}\n" for x in lines)
        self.writers[generation].write(text)
        return len(text.encode())

    def rotate(self) -> None:
        self.n += 1
        rotated = self.log.with_name(f"app.log.{self.n}")
        self.log.rename(rotated)
        self.names[-1] = rotated
        self.new()

    def close(self) -> None:
        for w in self.writers:
            w.close()


@pytest.fixture
def files(tmp_path: Path) -> Iterator[Rotating]:
    r = Rotating(tmp_path)
    yield r
    r.close()


def holds_open(r: LiveRunner, path: Path) -> bool:
    """The runner has a descriptor on `path`."""
    for fd in Path(f"/proc/{r.pid}/fd").iterdir():
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:
            continue
    return False


def lines(jsonl: Path) -> list[str]:
    return [x["line"] for x in read_records(jsonl) if x["kind"] == "match"]


@pytest.mark.parametrize("seen", ["at-the-next-rotation", "at-the-next-start", "not-grown"])
def test_a_generation_released_early_and_written_to_after_is_a_gap(
        tmp_path: Path, files: Rotating, seen: str) -> None:
    """maxGenerations 1, rotateWait far away: after two quick rotations two rotated files are
    open, and the oldest (app.log.1) is released at once. Its writer adds two lines after that:
    they are not read, and a `gap` names app.log.1, its inode, the offset it was read to and
    exactly the bytes it grew by (there was no record at all). Not grown: no gap, no claim."""
    config = write_config(tmp_path, {
        "limits": {"maxGenerations": 1, "rotateWait": "10m"},
        "watchers": [{"id": "app", "path": str(files.log), "pattern": "^L", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    runners: list[LiveRunner] = []

    def start() -> LiveRunner:
        runners.append(LiveRunner(config))
        runners[-1].wait_running()
        return runners[-1]

    def recorded(line: str) -> None:
        wait_for(lambda: line in lines(jsonl), f"{line!r} recorded")

    try:
        r = start()
        files.write(-1, "L1 first generation")
        recorded("L1 first generation")
        files.rotate()
        files.write(-1, "L2 second generation")
        recorded("L2 second generation")
        files.rotate()  # two rotated files open: one more than maxGenerations
        files.write(-1, "L3 third generation")
        recorded("L3 third generation")
        oldest = files.names[0]
        read_to = oldest.stat().st_size
        wait_for(lambda: not holds_open(r, oldest), f"{oldest.name} released")
        late = 0
        if seen != "not-grown":
            late = files.write(0, "L4 late in the first generation", "L5 and its last")
        if seen == "at-the-next-start":
            assert r.stop(signal.SIGTERM) == 0, r.stderr()
            r = start()
            assert r.stop(signal.SIGTERM) == 0, r.stderr()  # (counted once, not again)
            r = start()
        files.rotate()  # the runner lists the rotated files again
        files.write(-1, "L6 fourth generation")
        recorded("L6 fourth generation")
        assert r.stop(signal.SIGTERM) == 0, r.stderr()
    finally:
        for runner in runners:
            runner.close()
    recs = validate_records(jsonl, contiguous=True)
    gaps = [x for x in recs if x["kind"] == "gap"]
    counts = collections.Counter(lines(jsonl))
    assert all(n == 1 for n in counts.values()), counts
    assert "L4 late in the first generation" not in counts
    assert sorted(counts) == ["L1 first generation", "L2 second generation",
                              "L3 third generation", "L6 fourth generation"]
    if seen == "not-grown":
        assert gaps == [] and not [x for x in recs if x.get("unreadBytes")]
        return
    assert [x["reason"] for x in gaps] == ["max-generations"], \
        f"the {late} bytes written to {oldest.name} after its release are named by no gap: {gaps}"
    gap = gaps[0]
    want: dict[str, Any] = {"reason": "max-generations", "path": str(oldest),
                            "inode": oldest.stat().st_ino, "offset": read_to,
                            "unreadBytes": late}
    assert {k: gap[k] for k in want} == want, gap
    assert "limits.maxGenerations=1" in gap["message"]
    assert recs.index(gap) < recs.index(
        next(x for x in recs if x.get("line") == "L6 fourth generation"))


@pytest.mark.parametrize("seen", ["at-the-next-rotation", "at-the-next-start"])
def test_a_generation_released_after_rotate_wait_and_written_to_after_is_a_gap(
        tmp_path: Path, files: Rotating, seen: str) -> None:
    """A writer that reopens later than rotateWait: app.log.1 had not grown for rotateWait and
    was released, then its writer added a line. That line was lost with no record, although
    the runner listed the rotated files again (the next rotation, a restart). Now a
    `gap{reason: late-write}` names app.log.1 (where it is then), its inode, the offset it was
    read to and exactly the bytes it grew by, once."""
    config = write_config(tmp_path, {
        "limits": {"rotateWait": "300ms"},
        "watchers": [{"id": "app", "path": str(files.log), "pattern": "^L", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    runners = [LiveRunner(config)]
    try:
        runners[-1].wait_running()
        files.write(-1, "L1 first generation")
        wait_for(lambda: "L1 first generation" in lines(jsonl), "L1 recorded")
        files.rotate()
        files.write(-1, "L2 second generation")
        wait_for(lambda: "L2 second generation" in lines(jsonl), "L2 recorded")
        oldest = files.names[0]
        read_to = oldest.stat().st_size
        wait_for(lambda: not holds_open(runners[-1], oldest), f"{oldest.name} released")
        late = files.write(0, "L3 late in the first generation")
        if seen == "at-the-next-start":
            for _ in range(2):  # (counted once, not again at the second start)
                assert runners[-1].stop(signal.SIGTERM) == 0, runners[-1].stderr()
                runners.append(LiveRunner(config))
                runners[-1].wait_running()
        else:
            files.rotate()  # the runner lists the rotated files again
            oldest = files.names[0]
        files.write(-1, "L4 last")
        wait_for(lambda: "L4 last" in lines(jsonl), "L4 recorded")
        assert runners[-1].stop(signal.SIGTERM) == 0, runners[-1].stderr()
    finally:
        for runner in runners:
            runner.close()
    gaps = [x for x in validate_records(jsonl, contiguous=True) if x["kind"] == "gap"]
    want = [{"reason": "late-write", "path": str(oldest), "inode": oldest.stat().st_ino,
             "offset": read_to, "unreadBytes": late}]
    assert [{k: g.get(k) for k in want[0]} for g in gaps] == want, gaps
    assert "after it had not grown for limits.rotateWait" in gaps[0]["message"]


def test_a_released_generation_written_to_again_later_is_never_read_again(
        tmp_path: Path, files: Rotating) -> None:
    """maxGenerations 1: app.log.1 is released early and written to (a gap); two rotations
    later, after another generation was released, it is written to again. The runner kept only
    maxGenerations finished generations in mind, so by then it had forgotten app.log.1, took it
    for a new generation and read it again from its first line (`L1` twice, and the late lines
    as if never released; a loaded suite once showed it at the next rotation already). Each
    growth is a gap; no line is read twice."""
    config = write_config(tmp_path, {
        "limits": {"maxGenerations": 1, "rotateWait": "10m"},
        "watchers": [{"id": "app", "path": str(files.log), "pattern": "^L", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    r = LiveRunner(config)

    def recorded(line: str) -> None:
        wait_for(lambda: line in lines(jsonl), f"{line!r} recorded")

    try:
        r.wait_running()
        for n, line in enumerate(["L1 first", "L2 second", "L3 third"]):
            if n:
                files.rotate()
            files.write(-1, line)
            recorded(line)
        first = files.names[0]
        wait_for(lambda: not holds_open(r, first), f"{first.name} released")
        late = [files.write(0, "L4 late")]
        files.rotate()
        files.write(-1, "L5 fourth")
        recorded("L5 fourth")
        wait_for(lambda: not holds_open(r, files.names[1]), "app.log.2 released too")
        late.append(files.write(0, "L6 later still"))  # app.log.1 again: newer than app.log
        files.rotate()
        files.write(-1, "L7 fifth")
        recorded("L7 fifth")
        assert r.stop(signal.SIGTERM) == 0, r.stderr()
    finally:
        r.close()
    recs = validate_records(jsonl, contiguous=True)
    assert collections.Counter(lines(jsonl)) == collections.Counter(
        ["L1 first", "L2 second", "L3 third", "L5 fourth", "L7 fifth"])
    gaps = [(g["reason"], g["path"], g["offset"], g["unreadBytes"]) for g in recs
            if g["kind"] == "gap"]
    assert gaps == [("max-generations", str(first), 9, late[0]),
                    ("max-generations", str(first), 9 + late[0], late[1])], gaps
