"""Private-key blocks in a stream read chunk by chunk (`match/keyblocks.py`, pure, table and
Hypothesis), and end to end: with `output.redact`, no line of a key reaches a record, the `logs`
tail or the runner's log, however the stream is cut into chunks."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from liverunner import cli, write_config
from recordcheck import validate_records

from watchrun.match.keyblocks import MAX_BLOCK_BYTES, KeyBlocks, inside

KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
       "QyNTUxOQAAACBFakeFakeFakeFake", "-----END OPENSSH PRIVATE KEY-----"]


def marked(lines: list[str], cuts: list[int]) -> list[int]:
    """The block of each line (0: none) when the stream is fed in chunks cut before the line
    indexes `cuts`."""
    keys, out, start = KeyBlocks(), [], 0
    for end in [*sorted(set(cuts)), len(lines)]:
        part = lines[start:end]
        data = "".join(x + "\n" for x in part).encode()
        regions = keys.regions(data)
        pos = 0
        for x in part:
            out.append(inside(regions, pos))
            pos += len(x.encode()) + 1
        start = end
    return out


TABLE = [
    (["a", *KEY, "b"], [0, 1, 1, 1, 1, 0]),
    (["a", "x " + KEY[0], KEY[1], KEY[3] + " y", "b"], [0, 1, 1, 1, 0]),
    ([*KEY, "b", *KEY], [1, 1, 1, 1, 0, 2, 2, 2, 2]),
    ([KEY[0] + "AAAA" + KEY[3], "b"], [1, 0]),  # one line
    (["-----BEGIN CERTIFICATE-----", "MIIB", "-----END CERTIFICATE-----"], [0, 0, 0]),
    (["END first", KEY[3], "b"], [0, 0, 0]),  # an END with no BEGIN
]


def test_the_lines_of_a_block() -> None:
    for lines, want in TABLE:
        assert marked(lines, []) == want, lines


@given(st.lists(st.integers(0, 12), max_size=6))
def test_chunking_does_not_change_which_lines_are_inside(cuts: list[int]) -> None:
    lines = ["start", *KEY, "between", *KEY[:2], "x", *KEY[2:], "end"]
    assert marked(lines, cuts) == marked(lines, [])


def test_a_block_without_its_end_stops_after_max_block_bytes() -> None:
    body = ["A" * 1000] * (MAX_BLOCK_BYTES // 1000 + 5)
    got = marked([KEY[0], *body, "later"], [3, 30])
    assert got[0] == 1 and got[-1] == 0 and got.count(1) <= MAX_BLOCK_BYTES // 1000 + 2


def test_output_redact_records_no_line_of_a_private_key(tmp_path: Path) -> None:
    """Each record is redacted alone, so only the BEGIN line was: the key's base64 lines were
    recorded as they were, and shippers send the JSONL off the machine."""
    lines = ["ERROR dumping the config:", *KEY, "after"]
    (tmp_path / "app.log").write_text("\n".join(lines) + "\n")
    cfg = write_config(tmp_path, {"output": {"dir": "out", "redact": True}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": ".", "fromStart": True}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 0, res.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"b3BlbnNz" not in path.read_bytes() and b"QyNTUx" not in path.read_bytes()
    assert "b3BlbnNz" not in res.stderr
    lines = [r["line"] for r in validate_records(tmp_path / "out" / "watchers" / "app.jsonl")
             if r["kind"] == "match"]
    assert lines == ["ERROR dumping the config:", *["[REDACTED:private-key]"] * 4, "after"]
    status = json.loads((tmp_path / "out" / "state" / "app.status.json").read_text())
    assert status["redacted"] == {"private-key": 1}
    logs = cli("logs", "app", "-c", cfg, timeout=60)
    assert "b3BlbnNz" not in logs.stdout and "[REDACTED:private-key]" in logs.stdout


def test_a_logs_tail_that_starts_inside_a_key_block_shows_none_of_it(tmp_path: Path) -> None:
    """With `output.redact`, the tail was redacted as one text: a block whose BEGIN line had
    left the last `maxLogLines` lines was not found, and its body was in `state/<id>.tail` and
    `watchrun logs`. Each tail line inside a block is now its marker, as its record is."""
    body = [f"b3BlbnNzaC1rZXktdjEAAAAABG5vbmU{i:02d}" for i in range(20)]
    lines = ["ERROR dumping the config:", KEY[0], *body, KEY[3], "after 1", "after 2"]
    (tmp_path / "app.log").write_text("\n".join(lines) + "\n")
    cfg = write_config(tmp_path, {"limits": {"maxLogLines": 10},
                                  "output": {"dir": "out", "redact": True},
                                  "watchers": [{"id": "app", "path": "app.log", "pattern": "after",
                                                "fromStart": True}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 0, res.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"b3BlbnNz" not in path.read_bytes(), path
    logs = cli("logs", "app", "-c", cfg, timeout=60)
    shown = logs.stdout.splitlines()[-10:]
    assert shown == ["[REDACTED:private-key]"] * 8 + ["after 1", "after 2"], logs.stdout
