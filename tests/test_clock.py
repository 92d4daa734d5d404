"""The clock module: iso_ts (the record timestamp format, equal to datetime's for any epoch)
and parse_ts (its inverse, None for anything else)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.clock import iso_ts, parse_ts


def reference(epoch: float) -> str:
    dt = datetime.fromtimestamp(epoch, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@pytest.mark.parametrize(("epoch", "text"), [
    (0.0, "1970-01-01T00:00:00.000Z"),
    (1778932800.0, "2026-05-16T12:00:00.000Z"),
    (1778932800.9999, "2026-05-16T12:00:00.999Z"),
    (1778932800.9999996, "2026-05-16T12:00:01.000Z"),  # rounds into the next second
    (1778932800.0015, "2026-05-16T12:00:00.001Z"),
])
def test_table(epoch: float, text: str) -> None:
    assert iso_ts(epoch) == text


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_same_as_datetime(epoch: float) -> None:
    assert iso_ts(epoch) == reference(epoch)


@pytest.mark.parametrize(("text", "epoch"), [
    ("2026-05-16T12:00:00.000Z", 1778932800.0),
    ("2026-05-16T12:00:00.250Z", 1778932800.25),
    ("2026-05-16T14:00:00+02:00", 1778932800.0),
    ("2026-05-16T12:00:00", 1778932800.0),  # no offset: UTC
    ("", None), ("yesterday", None), (None, None), (17, None), ("2026-13-01T00:00:00Z", None),
])
def test_parse_ts_table(text: object, epoch: float | None) -> None:
    assert parse_ts(text) == epoch


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_parse_ts_reads_back_iso_ts(epoch: float) -> None:
    seconds = parse_ts(iso_ts(epoch))
    assert seconds is not None and abs(seconds - epoch) < 0.001


def test_the_per_millisecond_cache_never_returns_a_stale_millisecond() -> None:
    """Records come many per millisecond: the last one formatted is cached. Epochs stepping
    across millisecond and second edges (by less than a microsecond too) give datetime's text."""
    epoch = 1778932800.9985
    for _ in range(4000):
        epoch += 0.00000037
        assert iso_ts(epoch) == reference(epoch)
    for epoch in (1778932801.0, 1778932800.9999996, 1778932800.999, 1778932800.0009999):
        assert iso_ts(epoch) == reference(epoch)
