"""StringZilla's scans once a big span is seen: the same newline counts, finds and lowering as
the `bytes` methods, a runner that only tails never loads the library, and one that cannot
load it scans without it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from liverunner import LiveRunner, cli, fresh_python, wait_for, write_config

from watchrun.match.simd import (
    BIG,
    count_newlines,
    finder,
    has_any,
    lower_ascii,
    newline_counter,
)

DATA = st.lists(st.sampled_from([b"\n", b"a", b"\xe2\x80\xa8", b"\r\n", b"\x00", b"xyz" * 50,
                                  b"ERROR", b"\xc3\x89rr"]),
                max_size=200).map(b"".join)


@settings(max_examples=200)
@given(DATA, st.data(), st.integers(0, 3))
def test_counts_are_bytes_count(data: bytes, draw: st.DataObject, repeat: int) -> None:
    data = data * (1 + repeat * BIG // max(1, len(data)))  # spans on both sides of BIG
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    want = data.count(b"\n", start, end)
    assert count_newlines(data, start, end) == want
    assert newline_counter(data)(start, end) == want
    assert count_newlines(data) == data.count(b"\n")
    assert lower_ascii(data) == data.lower()
    needle = draw.draw(st.sampled_from([b"\n", b"a\n", b"xyz", b"\xe2\x80", b"zz", b"\r\na"]))
    assert finder(data)(needle, start) == data.find(needle, start)
    byteset = draw.draw(st.sampled_from([b"\x00", b"\x7f\x00\x1f", b"\xe2\r", b"qz",
                                         bytes(range(9))]))
    assert has_any(data, byteset) == any(c in byteset for c in data)


def test_small_spans_do_not_load_the_library_and_a_big_one_does() -> None:
    script = (
        "import sys\n"
        "from watchrun.match.simd import BIG, count_newlines, newline_counter\n"
        "assert count_newlines(b'a\\nb\\n' * 100) == 200\n"
        "assert newline_counter(b'x\\n' * 1000)(0, 2000) == 1000\n"
        "print('stringzilla' in sys.modules)\n"
        "assert count_newlines(b'ab\\n' * BIG) == BIG\n"  # (it starts the load, in a thread)
        "import time\n"
        "end = time.monotonic() + 30\n"
        "while 'stringzilla' not in sys.modules and time.monotonic() < end:\n"
        "    time.sleep(0.01)\n"
        "print('stringzilla' in sys.modules)\n"
        "assert newline_counter(b'a\\n')(0, 2) == 1\n"
    )
    assert fresh_python(script) == ["False", "True"]


def test_a_runner_that_cannot_load_the_library_records_a_big_append_without_it(
        tmp_path: Path) -> None:
    """An explorer's P3: StringZilla was imported on the loop at the first span of 64 KiB,
    unhandled, so a runner that could not load it (a broken install) killed the watcher
    mid-run as "internal". Now the scans use the `bytes` methods, said once in the log."""
    broken = tmp_path / "site"
    broken.mkdir()
    (broken / "stringzilla.py").write_text('raise ImportError("stringzilla is broken here")\n')
    path = os.pathsep.join([str(broken), *filter(None, [os.environ.get("PYTHONPATH")])])
    log = tmp_path / "small.log"
    log.write_text("first ERROR\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "s", "path": "small.log", "fromStart": True, "pattern": "ERROR"}]})
    r = LiveRunner(config, env={"PYTHONPATH": path}, validated=False, forked=False)
    try:
        r.wait_log("[s] match")
        lines = [f"line {i:07d} {'ERROR' if i % 1000 == 0 else 'INFO '} {'x' * 30}\n"
                 for i in range(1, 20_001)]
        with log.open("a") as f:  # 1 MB in one write: read in spans of 64 KiB and more
            f.write("".join(lines))
        wait_for(lambda: len(r.matches("s")) == 21 or "watcher failed" in r.stderr(),
                 "the append's 20 matches recorded (or the watcher failed)")
        assert "watcher failed" not in r.stderr() and "internal" not in r.stderr(), r.stderr()
        said = "StringZilla cannot be loaded (ImportError: stringzilla is broken here)"
        wait_for(lambda: said in r.stderr(), "the warning")
        assert [m["lineNo"] for m in r.matches("s")] == [1, *range(1001, 20_002, 1000)]
        listed = json.loads(cli("list", "-c", config, "--json").stdout)["watchers"]
        assert [(w["id"], w["status"]) for w in listed] == [("s", "running")]
        assert r.stderr().count("StringZilla cannot be loaded") == 1, r.stderr()
        assert r.stop() == 0
    finally:
        r.close()

