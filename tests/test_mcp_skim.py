"""The MCP subscriptions' skimmer (`views/skim.py`) on real files: a whole match record since the
last look is news, nothing else is (other kinds, a marker quoted in a line, a record half
written), across rotation (one, or several between two looks), long lines and a backlog over
one look's budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from watchrun.views.skim import SLICE, MatchSkimmer


class Stream:
    """A watcher's JSONL written as the runner writes it (compact records, seq by seq)."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "w1.jsonl"
        self.seq = 0

    def line(self, kind: str, **fields: Any) -> bytes:
        self.seq += 1
        rec = {"schema": 1, "seq": self.seq, "kind": kind, **fields}
        return json.dumps(rec, separators=(",", ":")).encode() + b"\n"

    def write(self, *kinds: str, **fields: Any) -> None:
        self.raw(b"".join(self.line(k, **fields) for k in kinds))

    def raw(self, data: bytes) -> None:
        with self.path.open("ab") as f:
            f.write(data)

    def rotate(self) -> None:
        """As `livefile.rotate` with keep=2."""
        if Path(f"{self.path}.1").exists():
            os.replace(f"{self.path}.1", f"{self.path}.2")
        os.replace(self.path, f"{self.path}.1")
        self.path.touch()


def test_only_a_whole_new_match_record_is_news(tmp_path: Path) -> None:
    s = Stream(tmp_path)
    s.write("start", "match")
    skim = MatchSkimmer(s.path)
    skim.start()
    assert skim.look() == (False, False)  # what was there before is passed over
    s.write("stop", "start")
    s.write("error", line='"kind":"match" quoted in a line')
    assert skim.look() == (False, False)
    line = s.line("match", line="ERROR")
    s.raw(line[:30])  # half written: not yet
    assert skim.look() == (False, False)
    s.raw(line[30:])
    assert skim.look() == (True, False)
    assert skim.look() == (False, False)
    s.write("match", "match", "match")  # many: one look, then nothing left
    assert skim.look() == (True, False)
    assert skim.look() == (False, False)
    skim.close()


def test_a_line_longer_than_a_slice_counts_once_whole(tmp_path: Path) -> None:
    s = Stream(tmp_path)
    s.path.touch()
    skim = MatchSkimmer(s.path)
    skim.start()
    long = s.line("match", line="E" * (3 * SLICE))
    s.raw(long[:-1])
    assert skim.look() == (False, False)
    s.raw(b"\n")
    assert skim.look() == (True, False)
    s.write("stop", line="x" * (3 * SLICE))
    assert skim.look() == (False, False)
    skim.close()


def test_rotation_is_followed_and_unseen_generations_may_hold_matches(tmp_path: Path) -> None:
    s = Stream(tmp_path)
    s.write("start")
    skim = MatchSkimmer(s.path)
    skim.start()
    s.write("match")  # in the file rotated away: read to its end first
    s.rotate()
    assert skim.look() == (True, False)
    s.write("stop")
    s.rotate()  # one rotation, nothing new: no update
    s.write("start")
    assert skim.look() == (False, False)
    s.write("match")
    assert skim.look() == (True, False)
    s.rotate()
    s.write("stop")
    s.rotate()  # two rotations between looks: the file between was never looked at
    s.write("start")
    assert skim.look() == (True, False)
    assert skim.look() == (False, False)
    skim.close()


def test_a_backlog_over_the_budget_is_looked_at_over_several_looks(tmp_path: Path) -> None:
    s = Stream(tmp_path)
    s.path.touch()
    skim = MatchSkimmer(s.path)
    skim.start()
    s.write(*["stop"] * 40_000, line="x" * 100)  # ~5 MiB of records that are not matches
    s.write("match")
    looks = [skim.look(budget=SLICE) for _ in range(8)]
    assert looks[0] == (False, True)  # a MiB a look: the rest left for the next
    assert (True, False) in looks and looks[-1] == (False, False)
    skim.close()
