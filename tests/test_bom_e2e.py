"""A UTF-8 byte order mark that begins a file or a command's output is not part of line 1, end to
end (README, "Matching is done on bytes"): in a live runner, for a new file, a file rotated by
rename, a truncated file and a command's output written in pieces; a BOM anywhere else is data.
(tests/test_framing.py checks the framer alone.)"""

from __future__ import annotations

from pathlib import Path

from liverunner import LiveRunner, wait_for, write_config
from test_once import rotated_by_rename

BOM = b"\xef\xbb\xbf"
PIECES = r"printf '\357'; sleep 0.1; printf '\273\277ERROR c1\n'; sleep 0.1; echo ERROR c2"
"""A command whose BOM and first line reach the runner in separate writes."""


def lines(r: LiveRunner, wid: str) -> list[tuple[str, int, int]]:
    return [(m["line"], m["lineNo"], m["offset"]) for m in r.matches(wid)]


def test_a_bom_that_begins_a_file_or_an_output_is_not_part_of_line_1(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(BOM + b"ERROR first\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "^ERROR", "fromStart": True},
        {"id": "cmd", "command": PIECES, "pattern": "^ERROR"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: len(r.matches("cmd")) == 2, "the command's two lines")
        assert lines(r, "cmd") == [("ERROR c1", 1, 3), ("ERROR c2", 2, 12)]
        wait_for(lambda: r.matches("app"), "line 1 of the new file")
        mid = BOM + b"ERROR not at the start\n"  # a BOM that does not begin the file is data
        with log.open("ab") as fh:
            fh.write(mid + b"ERROR second\n")
        wait_for(lambda: len(r.matches("app")) == 2, "the file's line 3")
        second = 15 + len(mid)
        assert lines(r, "app") == [("ERROR first", 1, 3), ("ERROR second", 3, second)]

        rotated_by_rename(log, "ERROR last before rotation")
        log.write_bytes(BOM + b"ERROR after rename\n" + b"x" * 100 + b"\n")
        wait_for(lambda: len(r.matches("app")) == 4, "line 1 of the file made at rotation")
        assert lines(r, "app")[2:] == [("ERROR last before rotation", 4, second + 13),
                                       ("ERROR after rename", 1, 3)]

        log.write_bytes(BOM + b"ERROR after truncation\n")  # shorter than what was read
        wait_for(lambda: len(r.matches("app")) == 5, "line 1 of the truncated file")
        assert lines(r, "app")[4] == ("ERROR after truncation", 1, 3)
    finally:
        assert r.stop() == 0
    assert r.left == []
