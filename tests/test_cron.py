"""cron.next_cron: the next tick of a schedule in local time, a DST change taken as cron(8)
(Vixie cron, cronie) takes it: a wildcard schedule runs through the repeated hour as its wall
times pass and skips the hour that does not exist; a fixed-time one runs once, at the first of a
repeated time, at the gap's end for a time that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from watchrun.cron import next_cron, wildcard


def test_next_cron_is_the_next_tick_after() -> None:
    base = 1778932800.0  # a whole minute
    tick = next_cron("* * * * *", base)
    assert tick == base + 60
    assert next_cron("*/5 * * * *", tick) - tick in (60.0 * n for n in range(1, 6))



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
              "from watchrun.cron import next_cron\n"
              "for after in sys.argv[2:]:\n"
              "    t = next_cron('0 9 * * *', datetime.fromisoformat(after).timestamp())\n"
              "    print(datetime.fromtimestamp(t, timezone.utc).isoformat(),\n"
              "          time.strftime('%H:%M %Z', time.localtime(t)), sep='|')\n")
    out = subprocess.run([sys.executable, "-c", script, CET, *(a for a, _, _ in DST_TABLE)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert [tuple(x.split("|")) for x in out.splitlines()] == [(u, lo) for _, u, lo in DST_TABLE]



@pytest.fixture
def zone(request: pytest.FixtureRequest) -> Iterator[str]:
    """The process's local zone set to the test's (`TZ`, the tz database's rules), then back."""
    name, saved = request.param, os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        assert time.tzname == ZONES[name], f"no tz database entry for {name}"
        yield name
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


NY, BERLIN = "America/New_York", "Europe/Berlin"
ZONES = {NY: ("EST", "EDT"), BERLIN: ("CET", "CEST")}
DST_TICKS = [  # zone, schedule, asked after (UTC offset given: no ambiguity), the ticks that follow
    # DST ends in New York, 2026-11-01 02:00 EDT -> 01:00 EST: the 01:xx hour comes twice
    (NY, "*/15 * * * *", "2026-11-01T00:40-04:00", [
        "11-01 00:45 EDT", "11-01 01:00 EDT", "11-01 01:15 EDT", "11-01 01:30 EDT",
        "11-01 01:45 EDT", "11-01 01:00 EST", "11-01 01:15 EST", "11-01 01:30 EST",
        "11-01 01:45 EST", "11-01 02:00 EST"]),  # (it went from 01:45 EDT to 02:00 EST: 75 min)
    (NY, "0 * * * *", "2026-11-01T00:10-04:00", [
        "11-01 01:00 EDT", "11-01 01:00 EST", "11-01 02:00 EST", "11-01 03:00 EST"]),
    (NY, "@hourly", "2026-11-01T00:10-04:00", [
        "11-01 01:00 EDT", "11-01 01:00 EST", "11-01 02:00 EST"]),
    (NY, "*/20 1 * * *", "2026-11-01T00:30-04:00", [  # minute a wildcard: through both 01:xx
        "11-01 01:00 EDT", "11-01 01:20 EDT", "11-01 01:40 EDT", "11-01 01:00 EST",
        "11-01 01:20 EST", "11-01 01:40 EST", "11-02 01:00 EST"]),
    (NY, "*/7 * * * *", "2026-11-01T01:29:50-05:00", [  # asked in the repeated hour
        "11-01 01:35 EST", "11-01 01:42 EST"]),
    (NY, "30 1 * * *", "2026-10-31T12:00-04:00", [  # fixed-time: once, the first 01:30
        "11-01 01:30 EDT", "11-02 01:30 EST"]),
    (NY, "30 1 * * *", "2026-11-01T01:10-05:00", [  # asked after the first 01:30: not again
        "11-02 01:30 EST"]),
    (NY, "@daily", "2026-10-31T12:00-04:00", ["11-01 00:00 EDT", "11-02 00:00 EST"]),
    # DST begins in New York, 2026-03-08 02:00 EST -> 03:00 EDT: no 02:xx that day
    (NY, "30 2 * * *", "2026-03-07T12:00-05:00", [  # fixed-time in the gap: at its end, once
        "03-08 03:00 EDT", "03-09 02:30 EDT"]),
    (NY, "0,30 2 * * *", "2026-03-07T12:00-05:00", [  # two times in the gap: one tick
        "03-08 03:00 EDT", "03-09 02:00 EDT"]),
    (NY, "30 2 * * *", "2026-03-08T03:10-04:00", ["03-09 02:30 EDT"]),  # the gap's end passed
    (NY, "*/15 * * * *", "2026-03-08T01:40-05:00", [
        "03-08 01:45 EST", "03-08 03:00 EDT", "03-08 03:15 EDT"]),
    (NY, "0 * * * *", "2026-03-08T00:10-05:00", [
        "03-08 01:00 EST", "03-08 03:00 EDT", "03-08 04:00 EDT"]),
    (NY, "*/10 2 * * *", "2026-03-07T12:00-05:00", [  # wildcard in the gap: none that day
        "03-09 02:00 EDT", "03-09 02:10 EDT"]),
    (NY, "0 9 * * *", "2026-03-07T12:00-05:00", ["03-08 09:00 EDT", "03-09 09:00 EDT"]),
    # Berlin: DST ends 2026-10-25 03:00 CEST -> 02:00 CET, begins 2026-03-29 02:00 -> 03:00
    (BERLIN, "*/10 * * * *", "2026-10-25T02:40+02:00", [
        "10-25 02:50 CEST", "10-25 02:00 CET", "10-25 02:10 CET", "10-25 02:20 CET",
        "10-25 02:30 CET", "10-25 02:40 CET", "10-25 02:50 CET", "10-25 03:00 CET"]),
    (BERLIN, "30 2 * * *", "2026-10-24T12:00+02:00", ["10-25 02:30 CEST", "10-26 02:30 CET"]),
    (BERLIN, "30 2 * * *", "2026-03-28T12:00+01:00", ["03-29 03:00 CEST", "03-30 02:30 CEST"]),
    (BERLIN, "0 * * * *", "2026-03-29T00:30+01:00", [
        "03-29 01:00 CET", "03-29 03:00 CEST", "03-29 04:00 CEST"]),
]


@pytest.mark.parametrize(("zone", "expr", "after", "ticks"), DST_TICKS, indirect=["zone"])
def test_a_dst_change_is_taken_as_cron_takes_it(zone: str, expr: str, after: str,
                                                ticks: list[str]) -> None:
    """`*/15 * * * *` was silent for the hour repeated when DST ends (75 minutes without a
    tick; `0 * * * *` two hours): the ticks were counted in naive local time, whose 01:00 after
    01:45 EDT is 02:00 EST. A time the spring gap skips ran at 03:30, not at the gap's end."""
    at, seen = datetime.fromisoformat(after).timestamp(), []
    for _ in ticks:
        at = next_cron(expr, at)
        seen.append(time.strftime("%m-%d %H:%M %Z", time.localtime(at)))
    assert seen == ticks


@pytest.mark.parametrize(("expr", "wild"), [
    ("*/15 * * * *", True), ("0 * * * *", True), ("*/5 1 * * *", True), ("@hourly", True),
    ("* 1 * * *", True), ("30 1 * * *", False), ("0,30 2 * * *", False), ("0 9 * * 1-5", False),
    ("@daily", False), ("@weekly", False), ("0-59 1 * * *", False),
])
def test_wildcard_is_a_star_leading_the_minute_or_the_hour(expr: str, wild: bool) -> None:
    """cronie's MIN_STAR/HR_STAR: a field that begins with `*` (`@hourly` sets HR_STAR)."""
    assert wildcard(expr) is wild
