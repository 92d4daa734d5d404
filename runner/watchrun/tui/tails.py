"""The panes' reads, bounded: read back from a JSONL's end, not the whole stream (in a thread)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from watchrun.output.backward import last_records, newest_first
from watchrun.tui.text import inert, inert_block
from watchrun.views.agent_window import writer_gone
from watchrun.views.render import render_transcript
from watchrun.views.transcript import build_transcript

__all__ = ["READ_BACK", "TRANSCRIPT_CHARS", "TRANSCRIPT_RECORDS", "TRANSCRIPT_TURNS", "Matches",
           "new_matches", "transcript"]

READ_BACK = 5000
"""Records a refresh of the matches pane reads back at most: what a flooding watcher wrote
before those since the last refresh is skipped, and the pane says so."""
TRANSCRIPT_TURNS = 20
"""An agent's pane shows its newest turns only (`agent transcript` has them all)…"""
TRANSCRIPT_RECORDS = 20_000
"""… read back from at most this many records…"""
TRANSCRIPT_CHARS = 200_000
"""… and at most this much of their text (the newest lines)."""


class Matches(Struct):
    """What a refresh of the matches pane adds."""

    records: list[dict[str, Any]]
    """Match records, oldest first."""
    skipped: tuple[int, int] | None = None
    """The seqs (first, last) written since the last refresh and not read: a flood."""
    restarted: bool = False
    """The stream started over (removed and begun again at seq 1): `records` are its newest."""
    lines: list[str] = field(default_factory=list)
    """The records as the pane shows them (`model.format_match`), made in the thread too."""


def new_matches(path: Path, last: dict[str, Any] | None, limit: int) -> Matches:
    """The match records after `last` (the newest one shown; None: the newest `limit`), at most
    `limit`, read back from the end: at most READ_BACK records. A stream whose record at
    `last`'s seq is another one, or whose newest is older, started over."""
    if last is None:
        return Matches(last_records(path, limit, {"match"}))
    found: list[dict[str, Any]] = []
    with contextlib.closing(newest_first(path)) as recs:
        for read, rec in enumerate(recs):
            if rec["seq"] <= last["seq"]:
                if rec == last or (read and rec["seq"] < last["seq"]):
                    return Matches(found[::-1])
                break  # started over
            if rec.get("kind") == "match":
                found.append(rec)
            if len(found) == limit or read + 1 == READ_BACK:
                gap = (last["seq"] + 1, rec["seq"] - 1) if rec["seq"] - 1 > last["seq"] else None
                return Matches(found[::-1], gap)
        else:
            return Matches(found[::-1])  # (the records up to `last` rotated away)
    return Matches(last_records(path, limit, {"match"}), restarted=True)


def transcript(path: Path, name: str, provider: str, turns: int) -> tuple[int, str]:
    """(the stream's newest seq, the agent's newest turns as inert text, as `agent transcript
    --format text` shows them), from at most TRANSCRIPT_RECORDS records read back; `turns`:
    how many the stream has, for the note on those left out."""
    records: list[dict[str, Any]] = []
    started: set[str] = set()
    more = False
    with contextlib.closing(newest_first(path)) as recs:
        for rec in recs:
            if len(started) == TRANSCRIPT_TURNS or len(records) == TRANSCRIPT_RECORDS:
                more = True
                break
            records.append(rec)
            if rec.get("kind") == "dispatch-start" and isinstance(rec.get("turnId"), str):
                started.add(rec["turnId"])
    seq = records[0]["seq"] if records else 0
    records.reverse()
    if more and started:  # a turn whose start was not read back is left out whole
        records = [r for r in records if r.get("turnId") in started]
    doc = build_transcript(records, name, provider, gone=writer_gone(path))
    text = render_transcript(doc)
    if len(text) > TRANSCRIPT_CHARS:
        text = text[text.find("\n", len(text) - TRANSCRIPT_CHARS) + 1:]
        more = True
    if more:
        of = f" of {turns}" if turns > len(doc["turns"]) else ""
        text = (f"(the newest {len(doc['turns'])}{of} turn(s), earlier text left out: "
                f"`watchrun agent transcript {inert(name, 64)}` has it all)\n\n{text}")
    return seq, inert_block(text)
