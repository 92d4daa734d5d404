"""cron.next_cron: the next tick of a schedule (local time, as cron runs it)."""

from __future__ import annotations

import subprocess
import sys

from watchrun.cron import next_cron


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
