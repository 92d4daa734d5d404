"""A once run matches a log's last line that has no newline yet (the writer was mid-line: a CI
log still being flushed, a crash). When the writer ends that line later, the runs after it
(`run --once` again, or a live runner that takes over) pass over the rest of that line: it was
recorded and judged once, at its line number, and the lines after it keep their numbers. A line
left unterminated that did not match is read whole again once it ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liverunner import LiveRunner, read_records, wait_for, write_config
from test_once import once, table_row

CONFIG: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "FATAL",
                                        "gate": {"maxMatches": 0}}]}


def _matches(folder: Path) -> list[tuple[int, int, str]]:
    """Every match record of `app`: its line number, offset and line."""
    return [(r["lineNo"], r["offset"], r["line"])
            for r in read_records(folder / ".watchrun" / "watchers" / "app.jsonl")
            if r["kind"] == "match"]


def _append(log: Path, data: bytes) -> None:
    with log.open("ab") as fh:
        fh.write(data)


def _verdict(folder: Path) -> tuple[int, list[str], str]:
    """A once run: its exit status, its table row (MATCHES and VERDICT) and all it said."""
    r = once(folder, CONFIG)
    row = table_row(r.out, "app")
    return r.rc, [row[1], row[-1]], r.out + r.err


def test_a_last_line_matched_unterminated_is_not_judged_again_once_it_ends(
        tmp_path: Path) -> None:
    """The explorer's repro: `FATAL: disk` matched by a once run, then written on to
    `FATAL: disk full` and a newline; the retry passes, and the stream holds line 2 once."""
    log = tmp_path / "app.log"
    log.write_bytes(b"INFO a\nFATAL: disk")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:2: FATAL: disk" in said, said
    _append(log, b" full\nINFO b\n")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (0, ["0", "pass"]), said
    assert _matches(tmp_path) == [(2, 7, "FATAL: disk")]
    _append(log, b"FATAL: next\n")  # the lines after it keep their numbers
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:4: FATAL: next" in said, said
    assert _matches(tmp_path) == [(2, 7, "FATAL: disk"), (4, 31, "FATAL: next")]
    _append(log, b"INFO c\nstep 6:")  # unterminated and no match: nothing was recorded of
    rc, row, said = _verdict(tmp_path)  # it, so it is read whole once it ends
    assert (rc, row) == (0, ["0", "pass"]), said
    _append(log, b" FATAL\n")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:6: step 6: FATAL" in said, said
    assert _matches(tmp_path)[2:] == [(6, 50, "step 6: FATAL")]


def test_a_last_line_cut_inside_a_character_is_judged_once_with_the_half_character_shown(
        tmp_path: Path) -> None:
    """The writer stopped inside a UTF-8 sequence (`é` is C3 A9; only C3 was written): the
    record holds U+FFFD for the half character, as the file held then; once the character
    and the line end, the line is not recorded again."""
    log = tmp_path / "app.log"
    log.write_bytes(b"INFO a\nFATAL caf\xc3")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:2: FATAL caf\ufffd" in said, said
    _append(log, b"\xa9 au lait\nINFO b\nFATAL next\n")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:4: FATAL next" in said, said
    assert "café" not in said
    assert _matches(tmp_path) == [(2, 7, "FATAL caf\ufffd"), (4, 34, "FATAL next")]


def test_a_last_line_still_growing_unterminated_is_not_judged_again(tmp_path: Path) -> None:
    """Written on but still with no newline at the next run: no new match either."""
    log = tmp_path / "app.log"
    log.write_bytes(b"FATAL: disk")
    assert _verdict(tmp_path)[:2] == (1, ["1", "FAIL"])
    _append(log, b" fu")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (0, ["0", "pass"]), said
    _append(log, b"ll\nFATAL: next\n")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["1", "FAIL"]) and "app.log:2: FATAL: next" in said, said
    assert _matches(tmp_path) == [(1, 0, "FATAL: disk"), (2, 17, "FATAL: next")]


def test_a_live_runner_after_a_once_run_passes_over_the_rest_of_its_last_line(
        tmp_path: Path) -> None:
    """A live runner that takes over (it goes on from the once run's checkpoint): the rest of
    the line the once run matched unterminated, written before and after the live runner
    started, is neither recorded again nor taken for a line of its own."""
    log = tmp_path / "app.log"
    log.write_bytes(b"INFO a\nFATAL: disk")
    assert _verdict(tmp_path)[:2] == (1, ["1", "FAIL"])
    _append(log, b" full")  # (before the live runner starts)
    runner = LiveRunner(write_config(tmp_path, CONFIG))
    try:
        runner.wait_log("1 watcher, 0 agents running")
        _append(log, b" (FATAL again)\nFATAL: next\n")
        wait_for(lambda: any(m["line"] == "FATAL: next" for m in runner.matches("app")),
                 "the live runner's match of the next line")
    finally:
        assert runner.stop() == 0
    assert _matches(tmp_path) == [(2, 7, "FATAL: disk"), (3, 38, "FATAL: next")]


def test_a_line_a_live_runner_left_unterminated_is_judged_once_by_the_once_runs(
        tmp_path: Path) -> None:
    """The mirror: a live runner stopped while the last line has no newline records nothing
    of it (a line is never recorded in pieces); the once run after it (which sets a live
    runner's checkpoint aside and reads the file whole) matches it; the run after that, once
    the line ended, does not."""
    log = tmp_path / "app.log"
    log.write_bytes(b"INFO a\n")
    runner = LiveRunner(write_config(tmp_path, CONFIG))
    try:
        runner.wait_log("1 watcher, 0 agents running")
        _append(log, b"FATAL: first\nFATAL: disk")  # (one write: read at once)
        wait_for(lambda: runner.matches("app"), "the live runner's match")
    finally:
        assert runner.stop() == 0
    assert _matches(tmp_path) == [(2, 7, "FATAL: first")]
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (1, ["2", "FAIL"]) and "app.log:3: FATAL: disk" in said, said
    _append(log, b" full\nINFO b\n")
    rc, row, said = _verdict(tmp_path)
    assert (rc, row) == (0, ["0", "pass"]), said
    assert _matches(tmp_path) == [(2, 7, "FATAL: first"), (2, 7, "FATAL: first"),
                                  (3, 20, "FATAL: disk")]
