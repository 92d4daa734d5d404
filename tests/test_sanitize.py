"""Tables for the sanitizer: escapes, controls, carriage returns, decoding and clipping."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.match.sanitize import StreamDecoder, clean_line, decode, raw_text, sanitize
from watchrun.output.jsonl import dumps

ESC = "\x1b"

CASES = [
    # (name, input, expected)
    ("plain", "hello world", "hello world"),
    ("tab kept", "a\tb", "a\tb"),
    ("newline kept", "a\nb", "a\nb"),
    ("empty", "", ""),
    ("sgr colours", f"{ESC}[1;31mERROR{ESC}[0m: boom", "ERROR: boom"),
    ("sgr 256 and truecolour", f"{ESC}[38;5;196mred{ESC}[38;2;1;2;3m!{ESC}[m", "red!"),
    ("clear screen and home", f"{ESC}[2J{ESC}[Hready", "ready"),
    ("private mode", f"{ESC}[?25l{ESC}[?1049hscreen{ESC}[?25h", "screen"),
    ("csi with intermediate", f"a{ESC}[2 qb", "ab"),
    ("incomplete csi at end", f"done{ESC}[1;3", "done"),
    ("8-bit csi", "\x9b31mred\x9b0m", "red"),
    ("osc title bel", f"{ESC}]0;evil title\x07text", "text"),
    ("osc title st", f"{ESC}]2;evil title{ESC}\\text", "text"),
    ("osc 8-bit st", "\x9d0;title\x9ctext", "text"),
    ("osc unterminated", f"keep{ESC}]0;never ends", "keep"),
    ("osc unterminated stops at newline", f"a{ESC}]0;title\nnext line", "a\nnext line"),
    (
        "osc-8 hyperlink keeps text",
        f"see {ESC}]8;;https://evil.example/x{ESC}\\the docs{ESC}]8;;{ESC}\\ now",
        "see the docs now",
    ),
    ("osc-8 with bel", f"{ESC}]8;id=1;http://x\x07link{ESC}]8;;\x07", "link"),
    ("dcs string", f"a{ESC}Pq#0;2;0;0;0#0~~@@{ESC}\\b", "ab"),
    ("apc string", f"a{ESC}_Gf=100;AAAA{ESC}\\b", "ab"),
    ("pm and sos strings", f"a{ESC}^secret{ESC}\\b{ESC}Xsos{ESC}\\c", "abc"),
    ("charset designation", f"{ESC}(0lqk{ESC}(B text", "lqk text"),
    ("dec line attribute", f"{ESC}#8big", "big"),
    ("two-byte save restore", f"{ESC}7x{ESC}8", "x"),
    ("reset terminal", f"{ESC}cafter", "after"),
    ("keypad modes", f"{ESC}={ESC}>k", "k"),
    ("lone esc", f"a{ESC}", "a"),
    ("esc esc", f"a{ESC}{ESC}[31mb", "ab"),
    ("bell and nul", "a\x07b\x00c", "abc"),
    ("other c0", "a\x01\x02\x0b\x0c\x1fb", "ab"),
    ("del", "a\x7fb", "ab"),
    ("c1 controls", "a\x80\x85\x91\x9ab", "ab"),
    ("8-bit apc string", "a\x9fhidden\x9cb", "ab"),
    ("crlf", "one\r\ntwo\r\n", "one\ntwo\n"),
    ("lone cr rewrite", "progress 10%\rprogress 100%", "progress 100%"),
    ("several rewrites", "1\r2\r3\nkeep", "3\nkeep"),
    ("trailing cr keeps text", "abc\r", "abc"),
    ("cr then crlf", "50%\r100%\r\n", "100%\n"),
    ("backspace deletes", "a\bb", "b"),
    ("overstrike bold", "E\bER\bRR\bRO\bOR\bR", "ERROR"),
    ("backspace at line start", "\bx\n\by", "x\ny"),
    ("github annotation unchanged", "::error file=a.py::boom", "::error file=a.py::boom"),
    ("unicode kept", "café ☕ 日本", "café ☕ 日本"),
    ("line separators kept", "a\u2028b\u2029c", "a\u2028b\u2029c"),
    ("lone surrogate", "a\ud800b", "a\ufffdb"),
]


@pytest.mark.parametrize(("name", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_sanitize(name: str, text: str, expected: str) -> None:
    assert sanitize(text) == (expected, False)


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ("abcdef", 3, ("abc", True)),
        ("abc", 3, ("abc", False)),
        ("abc", 100, ("abc", False)),
        ("aé", 2, ("a", True)),  # é is 2 bytes: never half of it
        ("aé", 3, ("aé", False)),
        ("日本", 4, ("日", True)),
        ("日本", 5, ("日", True)),
        ("日本", 6, ("日本", False)),
        ("😀x", 3, ("", True)),
        ("😀x", 4, ("😀", True)),
        (f"{ESC}[31m" + "x" * 10, 10, ("x" * 10, False)),  # escapes do not count
    ],
)
def test_clip_on_utf8_boundary(text: str, max_bytes: int, expected: tuple[str, bool]) -> None:
    assert sanitize(text, max_bytes) == expected


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_clip_never_breaks_a_character(text: str, max_bytes: int) -> None:
    clean, clipped = sanitize(text, max_bytes)
    encoded = clean.encode("utf-8")  # would raise on a broken character (surrogate)
    assert len(encoded) <= max_bytes
    full, _ = sanitize(text)
    assert full.startswith(clean)
    assert clipped == (clean != full)


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2030)))
def test_output_has_no_controls(text: str) -> None:
    clean, _ = sanitize(text)
    assert all(ch in "\t\n" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F) for ch in clean)
    assert sanitize(clean) == (clean, False)  # idempotent


def test_decode_invalid_utf8() -> None:
    assert decode(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"
    assert decode(b"trunc \xe6\x97") == "trunc \ufffd"
    assert clean_line(b"\x1b[31mbad \xc3\x28\x1b[0m") == ("bad \ufffd(", False)


def test_raw_text_keeps_every_char_and_json_escapes_it() -> None:
    raw = raw_text(b"a\x00b\x1b[31mc\xff")
    assert raw == "a\x00b\x1b[31mc\ufffd"
    encoded = dumps({"raw": raw}).decode()
    assert encoded == '{"raw":"a\\u0000b\\u001b[31mc\ufffd"}\n'
    assert json.loads(encoded) == {"raw": raw}


def test_records_escape_line_breakers_and_c1() -> None:
    record = {"line": "a\u2028b\u2029c\x85d\x9be\x7f", "n": 1}
    encoded = dumps(record).decode()
    assert "\u2028" not in encoded and "\u2029" not in encoded
    assert all(not (0x7F <= ord(ch) <= 0x9F) for ch in encoded)
    assert len(encoded.splitlines()) == 1
    assert json.loads(encoded) == record


def test_json_dumps_does_not_escape_u2028_itself() -> None:
    # Why the record encoder escapes them: JSON leaves these raw (the stdlib with
    # ensure_ascii=False, and orjson).
    assert "\u2028" in json.dumps("\u2028", ensure_ascii=False)


@pytest.mark.parametrize(
    "line",
    [
        'x"}\n{"kind":"match","line":"forged"}',
        'x\\"}\r\n{"kind":"match"}',
        '"}\u2028{"kind":"match"}',
    ],
)
def test_crafted_line_cannot_forge_a_record(line: str) -> None:
    clean, _ = sanitize(line)
    encoded = dumps({"kind": "match", "line": clean}).decode()
    assert encoded.endswith("\n")  # the one newline: the end of the record
    encoded = encoded[:-1]
    assert "\n" not in encoded and "\r" not in encoded
    assert len(encoded.splitlines()) == 1
    assert json.loads(encoded) == {"kind": "match", "line": clean}


def test_stream_decoder_joins_split_characters() -> None:
    data = "é日😀".encode()
    for split in range(1, len(data)):
        dec = StreamDecoder()
        assert dec.decode(data[:split]) + dec.decode(data[split:]) + dec.flush() == "é日😀"


def test_stream_decoder_byte_by_byte_and_invalid() -> None:
    dec = StreamDecoder()
    out = "".join(dec.decode(bytes([b])) for b in b"a\xe6\x97\xa5\xffb\xe6\x97")
    assert out + dec.flush() == "a日\ufffdb\ufffd"
    dec.reset()
    assert dec.decode(b"\xe6") == ""
    dec.reset()
    assert dec.decode(b"z", final=True) == "z"


def test_escape_split_across_reads_is_stripped_once_joined() -> None:
    reads = [b"\x1b[3", b"1mERR", b"\xc3", b"\xa9\x1b]0;ti", b"tle\x07 done\x1b", b"[0m\n"]
    dec = StreamDecoder()
    text = "".join(dec.decode(r) for r in reads) + dec.flush()
    assert sanitize(text) == ("ERRé done\n", False)


def test_fast_path_returns_same_object() -> None:
    text = "an ordinary log line with ünïcode\tand a tab"
    assert sanitize(text)[0] is text
