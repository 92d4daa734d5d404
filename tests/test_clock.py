"""The clock module: iso_ts (the record timestamp format, equal to datetime's for any epoch),
parse_ts (its inverse, None for anything else) and next_cron."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.clock import iso_ts, next_cron, parse_ts


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


def test_next_cron_is_the_next_tick_after() -> None:
    base = 1778932800.0  # a whole minute
    tick = next_cron("* * * * *", base)
    assert tick == base + 60
    assert next_cron("*/5 * * * *", tick) - tick in (60.0 * n for n in range(1, 6))


def test_the_per_millisecond_cache_never_returns_a_stale_millisecond() -> None:
    """Records come many per millisecond: the last one formatted is cached. Epochs stepping
    across millisecond and second edges (by less than a microsecond too) give datetime's text."""
    epoch = 1778932800.9985
    for _ in range(4000):
        epoch += 0.00000037
        assert iso_ts(epoch) == reference(epoch)
    for epoch in (1778932801.0, 1778932800.9999996, 1778932800.999, 1778932800.0009999):
        assert iso_ts(epoch) == reference(epoch)


CET = "CET-1CEST,M3.5.0,M10.5.0/3"  # (a POSIX rule: no tz database needed)
DST_TABLE = [  # (after, UTC, local) of `0 9 * * *`'s next tick under CET: 09:00 every day
    ("2026-03-28T12:00:00+00:00", "2026-03-29T07:00:00+00:00", "09:00 CEST"),  # springs
    ("2026-10-24T12:00:00+00:00", "2026-10-25T08:00:00+00:00", "09:00 CET"),  # falls back
    ("2026-06-01T12:00:00+00:00", "2026-06-02T07:00:00+00:00", "09:00 CEST"),
]


def test_next_cron_keeps_local_time_across_a_dst_change() -> None:
    """A tick was computed with the UTC offset of the day it was asked on: a daily 09:00 ran
    at 10:00 the day DST began and at 08:00 the day it ended. (In a child process: the zone is
    the process's own.)"""
    script = ("import os, sys, time; os.environ['TZ'] = sys.argv[1]; time.tzset()\n"
              "from datetime import datetime, timezone\n"
              "from watchrun.clock import next_cron\n"
              "for after in sys.argv[2:]:\n"
              "    t = next_cron('0 9 * * *', datetime.fromisoformat(after).timestamp())\n"
              "    print(datetime.fromtimestamp(t, timezone.utc).isoformat(),\n"
              "          time.strftime('%H:%M %Z', time.localtime(t)), sep='|')\n")
    out = subprocess.run([sys.executable, "-c", script, CET, *(a for a, _, _ in DST_TABLE)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert [tuple(x.split("|")) for x in out.splitlines()] == [(u, lo) for _, u, lo in DST_TABLE]
