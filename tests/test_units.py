"""Durations and sizes: parsing, formatting, and agreement with the published JSON Schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from watchrun.config.units import (
    DURATION_PATTERN,
    SIZE_PATTERN,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
)

SCHEMA = json.loads((Path(__file__).parents[1] / "runner" / "watchrun" / "schemas" /
                    "watch.schema.json").read_text())


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        (0, 0),
        (250, 250),
        (1500.0, 1500),
        ("250ms", 250),
        ("10s", 10_000),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("1.5s", 1500),
        ("1h30m", 5_400_000),
        ("1m 30s", 90_000),
        ("500", 500),
        (" 10 s ", 10_000),
        ("0s", 0),
    ],
)
def test_parse_duration(text: object, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "bad", ["", "10x", "s", "-5s", "1.5.5s", "10 sec", "1e3ms", True, None, [1], 2.5]
)
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (0, 0),
        (65536, 65536),
        ("64KiB", 65536),
        ("16MiB", 16 * 1024**2),
        ("1GiB", 1024**3),
        ("1TiB", 1024**4),
        ("64KB", 64_000),
        ("16MB", 16_000_000),
        ("1GB", 1_000_000_000),
        ("512B", 512),
        ("512", 512),
        ("1.5KiB", 1536),
        ("64 KiB", 65536),
    ],
)
def test_parse_size(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "64k", "64kib", "16M", "1 GiBs", "KiB", "-1B", False, None])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(bad)


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0ms"), (250, "250ms"), (1000, "1s"), (90_000, "90s"), (60_000, "1m"),
     (7_200_000, "2h"), (86_400_000, "1d"), (1001, "1001ms")],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    ("size", "text"),
    [(100, "100B"), (1024, "1KiB"), (65536, "64KiB"), (16 * 1024**2, "16MiB"),
     (1024**3, "1GiB"), (1000, "1000B")],
)
def test_format_size(size: int, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


def test_schema_uses_the_same_patterns() -> None:
    defs = SCHEMA["$defs"]
    assert defs["duration"]["anyOf"][1]["pattern"] == DURATION_PATTERN
    assert defs["size"]["anyOf"][1]["pattern"] == SIZE_PATTERN


@pytest.mark.parametrize(
    "text", ["250ms", "10s", "1h30m", "500", "1.5s", "10x", "", "10 sec", "-1s", "5mm"]
)
def test_duration_schema_pattern_agrees_with_parser(text: str) -> None:
    try:
        parse_duration(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(re.search(DURATION_PATTERN, text)) == parsed


@pytest.mark.parametrize("text", ["64KiB", "1GB", "512", "1.5MiB", "64k", "", "1 GiBs", "KiB"])
def test_size_schema_pattern_agrees_with_parser(text: str) -> None:
    try:
        parse_size(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(re.search(SIZE_PATTERN, text)) == parsed
