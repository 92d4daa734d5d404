"""iso_ts: the record timestamp format, equal to datetime's for any epoch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.clock import iso_ts


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
