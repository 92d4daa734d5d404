"""Cheap records, same bytes: the record encoder escapes what the record contract needs (orjson
plus DEL, C1 and U+2028/U+2029 as escapes, done by the encoder), the match fast paths build
exactly the records the general path builds, and the flood path (every line of a chunk
matching) exactly those of the per-match path."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordcheck import validate_records

from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk, Cut
from watchrun.match.matcher import Matcher
from watchrun.match.plain import plain_chunk, plain_text, plain_texts
from watchrun.match.sanitize import clean_line, decode, raw_text, sanitize
from watchrun.output.jsonl import dumps, json_str, plain_bodies, safe_str
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime import matches as pipeline_module
from watchrun.runtime.pipeline import WatcherPipeline

UNSAFE = re.compile(b"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")
"""DEL, C1 and U+2028/U+2029 in UTF-8: never raw in a record."""
ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=40)
"""Every code point, lone surrogates and controls included."""


class Clock:
    def monotonic(self) -> float:
        return 0.0

    def now(self) -> float:
        return 1778932800.123456


def check_line(line: bytes, value: Any) -> None:
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert UNSAFE.search(line) is None, line
    assert len(line.decode("utf-8").splitlines()) == 1  # also for Unicode line breaks
    assert json.loads(line) == valid(value)  # no lone surrogate: strict parsers (serde_json)


def valid(value: Any) -> Any:
    """What a record of `value` reads back as: each lone surrogate (keys too) is U+FFFD."""
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, dict):
        return {valid(k): valid(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid(v) for v in value]
    return value


@given(st.recursive(ANY_TEXT | st.integers() | st.booleans() | st.none(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(ANY_TEXT, inner, max_size=4), max_leaves=12))
def test_any_value_is_one_safe_line_that_reads_back_the_same_but_lone_surrogates(
        value: Any) -> None:
    record = {"kind": "output", "value": value}
    check_line(dumps(record), record)


def test_what_json_cannot_hold_is_refused_as_the_stdlib_refuses_it() -> None:
    with pytest.raises(ValueError):
        dumps({"x": math.nan})
    with pytest.raises(ValueError):
        dumps({"x": [math.inf]})
    with pytest.raises(TypeError):
        dumps({"x": object()})
    check_line(dumps({"big": 2**70, "neg": -(2**70)}), {"big": 2**70, "neg": -(2**70)})


@given(ANY_TEXT)
def test_a_json_string_carries_the_escapes(text: str) -> None:
    encoded = json_str(text)
    assert UNSAFE.search(encoded) is None
    assert json.loads(encoded) == valid(text)


LINES = st.lists(st.sampled_from([
    b"plain ascii ERROR", b"caf\xc3\xa9 ERROR", b"\xe6\x9d\xb1\xe4\xba\xac ERROR", b"tab\tERROR",
    b"esc \x1b[31mERROR", b"c1 \xc2\x9b31m", b"del \x7f", b"nul \x00", b"ls \xe2\x80\xa8",
    b"ps \xe2\x80\xa9", b"bad \xff\xfe", b"cr\rERROR", b'quote " and \\ ERROR', b"", b"x" * 300,
    b"nbsp\xc2\xa0ERROR", b"\xed\xa0\x80 surrogate bytes",
]), min_size=1, max_size=6)


@given(LINES, st.sampled_from([16, 64, 65536]))
def test_plain_text_is_what_sanitizing_leaves_unchanged(lines: list[bytes], limit: int) -> None:
    line = b" ".join(lines)
    text = plain_text(line, limit)
    if text is not None:
        assert (text, False) == sanitize(decode(line), limit)
        assert text == raw_text(line)  # so a record of it has no `raw`
        assert safe_str(text) == json_str(text)


@settings(max_examples=300)
@given(st.lists(LINES.map(b" ".join) | st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
                min_size=1, max_size=8), st.sampled_from([-1, 4, 16, 64, 65536]))
def test_plain_texts_is_plain_text_of_each_line(lines: list[bytes], limit: int) -> None:
    """The batch check of the match records finds exactly the lines `plain_text` refuses, and
    the JSON bodies it builds for the others are orjson's."""
    utf8, text, odd = plain_texts(iter(lines), list(map(len, lines)), limit)
    texts = text.split("\n")
    one_by_one = [plain_text(line, limit) for line in lines]
    assert odd == [k for k, t in enumerate(one_by_one) if t is None]
    if limit >= 0:
        assert text == utf8.decode()
    bodies = plain_bodies(utf8)
    assert len(texts) == len(bodies) == len(lines)
    for k, plain in enumerate(one_by_one):
        if plain is not None:
            assert texts[k] == plain
            assert b'"' + bodies[k] + b'"' == safe_str(plain) == json_str(plain)


@given(st.lists(LINES.map(b" ".join), max_size=6), st.sampled_from([None, 16, 65536]))
def test_clean_line_is_sanitize_of_the_decoded_bytes(lines: list[bytes], limit: int | None
                                                     ) -> None:
    """A command's echoed output (whole lines) takes the plain path when it can: same text."""
    data = b"".join(x + b"\n" for x in lines)
    assert clean_line(data, limit) == sanitize(decode(data), limit)


def test_ordinary_lines_are_plain() -> None:
    for line in (b"2025-11-29T00:00:00.618Z ERROR [worker-4] auth.jwt: reset",
                 b"caf\xc3\xa9 Z\xc3\xbc", b'203.0.113.9 - - "GET /x HTTP/1.1" 500 0',
                 b"bad \xff byte", b"nbsp\xc2\xa0here"):
        assert plain_text(line, 65536) is not None, line
    assert plain_chunk(b"a\tb\nc d\n") and not plain_chunk(b"a\x1bb\n")
    assert not plain_chunk("é\n".encode())


def sink_at(tmp_path: Path, name: str = "w") -> JsonlSink:
    return JsonlSink(tmp_path / f"{name}.jsonl", name, max_bytes=1 << 30, keep=1, clock=Clock())


@pytest.mark.parametrize("fields", [
    {"line": "ERROR plain", "lineNo": 1, "offset": 0, "path": "/var/log/a.log", "inode": 7},
    {"line": 'q"u\\o\tte\u2028', "lineNo": 12, "offset": 9, "path": "/x/100%/é.log", "inode": None},
    {"line": "x", "lineNo": 3, "offset": 5, "run": 2, "truncated": True, "omittedBytes": 9,
     "raw": "x\x1b\x85"},
])  # fmt: skip
def test_match_records_from_columns_are_the_bytes_of_a_record(tmp_path: Path,
                                                             fields: dict[str, Any]) -> None:
    a, b = sink_at(tmp_path, "a"), sink_at(tmp_path, "b")
    rest = b"".join(b",%b:%b" % (json_str(k), dumps({"v": v})[5:-2])
                    for k, v in fields.items() if k not in ("line", "lineNo", "offset"))
    built = b.match_records([json_str(fields["line"])[1:-1]], [fields["lineNo"]],
                            [fields["offset"]], [rest])
    assert built == [a.record("match", fields).replace(b'"cursor":"a:', b'"cursor":"b:')]
    if "\\" not in fields["line"] and '"' not in fields["line"] and fields["line"].isascii():
        plain = b.match_records([fields["line"].encode()], [fields["lineNo"]],
                                [fields["offset"]], [rest])
        assert plain[0].replace(b'"seq":2', b'"seq":1').replace(b"0002", b"0001") == built[0]
    a.close()
    b.close()


@pytest.mark.parametrize(("first", "count"), [(1, 14), (10, 300), (0xfff0, 20), (4000, 70000)])
def test_match_records_pad_every_seq_to_sixteen_hex_digits(tmp_path: Path, first: int,
                                                           count: int) -> None:
    """The template holds the cursor's padding zeros per run of seqs with as many hex digits:
    a batch whose seqs pass 0xf, 0xff, 0xfff or 0xffff gives the general path's records."""
    a, b = sink_at(tmp_path, "a"), sink_at(tmp_path, "b")
    a.next_seq = b.next_seq = first
    built = b.match_records([b"x"] * count, range(count), range(count), [b',"run":1'] * count)
    want = [a.record("match", {"line": "x", "lineNo": k, "offset": k, "run": 1})
            for k in range(count)]
    strip = re.compile(rb'"ts":"[^"]*"')  # (the two clocks' readings may differ)
    assert [strip.sub(b"", x) for x in built] == [
        strip.sub(b"", x.replace(b'"cursor":"a:', b'"cursor":"b:')) for x in want]
    assert b.next_seq == a.next_seq == first + count
    a.close()
    b.close()


def pipeline(tmp_path: Path, pattern: str, limits: Limits, exclude: tuple[str, ...] = ()
             ) -> WatcherPipeline:
    spec = WatcherSpec(id="w", label="w", pattern=pattern, exclude=exclude,
                       path=tmp_path / "app.log")
    sink = sink_at(tmp_path)
    return WatcherPipeline(spec, limits, sink, AsyncWriter(sink),
                           Matcher(pattern, exclude), RunLog(quiet=True))


def expected(lines: list[bytes], pattern: str, limit: int, first: int = 1,
             offset: int = 0, omitted: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """The match records of the general path, line by line: sanitized text, `truncated` when
    clipped or cut, `raw` when sanitizing changed it."""
    ref = Matcher(pattern, engine="re")
    out, pos = [], offset
    for i, line in enumerate(lines):
        cut = (omitted or {}).get(i, 0)
        if ref.match_line(line):
            text, clipped = sanitize(decode(line), limit)
            rec: dict[str, Any] = {"kind": "match", "line": text, "lineNo": first + i,
                                   "offset": pos, "path": "/p", "inode": 3}
            if clipped or cut:
                rec.update(truncated=True, omittedBytes=cut)
            if text != raw_text(line):
                rec["raw"] = raw_text(line)
            out.append(rec)
        pos += len(line) + 1 + cut
    return out


def run_chunks(pipe: WatcherPipeline, chunks: list[Chunk]) -> list[dict[str, Any]]:
    async def feed() -> None:
        for chunk in chunks:
            await pipe.chunk(chunk)

    asyncio.run(feed())
    pipe.sink.close()
    records = validate_records(pipe.sink.path)
    keep = ("kind", "line", "lineNo", "offset", "path", "inode", "truncated", "omittedBytes",
            "raw")
    return [{k: r[k] for k in keep if k in r} for r in records]


@settings(max_examples=60, deadline=None)
@given(LINES, st.sampled_from([16, 65536]))
def test_every_match_record_is_the_general_paths_record(tmp_path_factory: pytest.TempPathFactory,
                                                        lines: list[bytes], limit: int) -> None:
    tmp = tmp_path_factory.mktemp("p")
    data = b"".join(x + b"\n" for x in lines)
    got = run_chunks(pipeline(tmp, "ERROR|x|e", Limits(max_line_bytes=max(limit, 256))),
                     [Chunk(data, 100, 7, 100 + len(data), inode=3, path="/p")])
    assert got == expected(lines, "ERROR|x|e", max(limit, 256), first=7, offset=100)


@settings(max_examples=40, deadline=None)
@given(st.lists(LINES.map(b" ".join), min_size=5, max_size=40), st.sampled_from([16, 65536]))
def test_many_matches_in_a_chunk_give_the_general_paths_records(
        tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], limit: int) -> None:
    """Many matches in a chunk are checked and escaped in one batch: the same records."""
    tmp = tmp_path_factory.mktemp("p")
    data = b"".join(x + b"\n" for x in lines)
    got = run_chunks(pipeline(tmp, "ERROR|x|e", Limits(max_line_bytes=max(limit, 256))),
                     [Chunk(data, 100, 7, 100 + len(data), inode=3, path="/p")])
    assert got == expected(lines, "ERROR|x|e", max(limit, 256), first=7, offset=100)


def test_a_cut_line_is_marked_in_the_fast_path_too(tmp_path: Path) -> None:
    data = b"ERROR a\nERROR bbbb\nERROR c\n"
    chunk = Chunk(data, 0, 1, len(data) + 50, (Cut(8, 50),), inode=3, path="/p")
    got = run_chunks(pipeline(tmp_path, "ERROR", Limits()), [chunk])
    assert got == expected([b"ERROR a", b"ERROR bbbb", b"ERROR c"], "ERROR", 65536,
                           omitted={1: 50})


@pytest.mark.parametrize("pattern", ["ERROR", "error|fatal"])
def test_a_flood_gives_the_records_of_the_per_match_path(tmp_path: Path, pattern: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks where every line matches go down the flood path (after a dense chunk): same
    records, in order, also when the flood stops, when a line needs sanitizing, when a line
    has a quote or a tab (escaped: JSON holds no raw control), and with an exclude that hits
    inside the flood."""
    def block(start: int, n: int, odd: bytes | None = None) -> list[bytes]:
        out = [b"ERROR line %d" % i for i in range(start, start + n)]
        if odd is not None:
            out[n // 2] = odd
        return out

    blocks = [block(0, 400), block(400, 400), block(800, 400, b'ERROR "quoted" \\'),
              block(1200, 400, b"ERROR esc \x1b[1m"), block(1600, 400, b"INFO not a match"),
              block(2000, 400, b"ERROR healthcheck"), block(2400, 400),
              block(2800, 400, b"ERROR\ta tab, no quote")]
    chunks, pos, no = [], 0, 1
    for lines in blocks:
        data = b"".join(x + b"\n" for x in lines)
        chunks.append(Chunk(data, pos, no, pos + len(data), inode=3, path="/p"))
        pos, no = pos + len(data), no + len(lines)
    pipe = pipeline(tmp_path, pattern, Limits(), exclude=("healthcheck",))
    floods: list[int] = []

    def spy(chunk: Chunk, where: bytes) -> object:
        rows = pipeline_module.every_line(chunk, where)
        floods.append(chunk.line_no if rows is not None else -chunk.line_no)
        return rows

    monkeypatch.setattr("watchrun.runtime.pipeline.every_line", spy)
    got = run_chunks(pipe, chunks)
    assert floods == [401, 801, -1201, 2401, 2801], \
        "the flood path ran where it could, not elsewhere"
    want = [r for r in expected([x for b in blocks for x in b], pattern, 65536)
            if "healthcheck" not in r["line"]]
    assert got == want
    assert pipe.counters.matches == len(want)
    assert [m.line_no for m in pipe.counters.recent] == [r["lineNo"] for r in want[-200:]]
    assert [(m.line, m.where) for m in pipe.counters.first] == \
        [(r["line"], f"/p:{r['lineNo']}") for r in want[:5]]  # fmt: skip
