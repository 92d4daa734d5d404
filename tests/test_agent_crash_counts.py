"""The count of a delivery that grows while it waits (docs/records.md, `delivery`): matches that
join it after its `queued` record are recorded within a second, at most once a second, so a
runner that dies (SIGKILL) leaves every match accounted for (the next runner records the
delivery `dropped`, runner-restarted, with all of them) and a burst gives few records."""

from __future__ import annotations

import functools
import itertools
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, deliveries, lag_limit, wait_for, waking_mock

BURST_S = 1.3
"""How long the burst goes on: past one second, so a count is due mid-burst as well as after."""


def ts(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()


def matched(r: LiveRunner, n: int) -> bool:
    return len([x for x in r.records("app") if x["kind"] == "match"]) == n


def test_a_killed_runner_leaves_the_count_of_a_grown_delivery(tmp_path: Path) -> None:
    log, config = waking_mock(tmp_path)
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR a1 [mock:hang]\n")  # the first turn takes it and hangs
        wait_for(lambda: any(d["deliveryState"] == "delivered" for d in deliveries(tmp_path)),
                 "the first turn")
        for i in (2, 3, 4, 5):  # one waiting delivery, grown after its `queued` record
            with log.open("a") as fh:
                fh.write(f"ERROR a{i}\n")
            wait_for(functools.partial(matched, r, i), f"match {i}")
        wait_for(lambda: [d["count"] for d in deliveries(tmp_path)
                          if d["deliveryState"] == "queued"][-1:] == [4],
                 "the waiting delivery recorded with its 4 matches (no more need come)")
        r.send(signal.SIGKILL)
        r.proc.wait(timeout=20)
    finally:
        r.close()
    again = LiveRunner(config)
    try:
        again.wait_running()
    finally:
        assert again.stop() == 0
    final = {d["deliveryId"]: d for d in deliveries(tmp_path)}
    dropped = [d for d in final.values() if d["deliveryState"] == "dropped"]
    assert [(d["count"], d["reason"]) for d in dropped] == [(4, "runner-restarted")]
    assert sum(d["count"] for d in final.values()) == 5  # every match, in one delivery or other


def test_a_growing_queued_delivery_is_recorded_once_a_second_and_its_last_count(
        tmp_path: Path) -> None:
    """docs/records.md `delivery`: a queued delivery that grows is recorded `queued` again with
    its new `count` at most once a second, the last within a second (so a burst of matches
    gives few records, and the final count is always recorded), then `delivered` with it."""
    log, config = waking_mock(tmp_path)
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR first [mock:hang]\n")  # the first turn takes it and hangs
        first = wait_for(lambda: [d["deliveryId"] for d in deliveries(tmp_path)
                                  if d["deliveryState"] == "delivered"], "the first turn")[0]

        # The burst: one match at a time (each seen by the runner before the next is written),
        # all joining one delivery that waits while the first turn hangs.
        began = time.monotonic()
        n = 0
        while n < 20 or time.monotonic() - began < BURST_S:
            n += 1
            with log.open("a") as fh:
                fh.write(f"ERROR burst {n}\n")
            wait_for(functools.partial(matched, r, n + 1), f"burst match {n}")
        last_match = r.matches("app")[-1]
        assert last_match["line"] == f"ERROR burst {n}"

        def burst_queued() -> list[dict[str, Any]]:
            return [d for d in deliveries(tmp_path)
                    if d["deliveryId"] != first and d["deliveryState"] == "queued"]
        wait_for(lambda: [d["count"] for d in burst_queued()][-1:] == [n],
                 f"the waiting delivery recorded with all {n} matches before any turn takes it",
                 timeout=10)
        elapsed = time.monotonic() - began  # spans every `queued` record of that delivery
        lag = float(r.control({"cmd": "status"})["loopLagMaxS"])

        assert r.control({"cmd": "agent-stop", "name": "ag"})["ok"]  # the next turn takes it
        wait_for(lambda: any(d["deliveryState"] == "delivered" and d["deliveryId"] != first
                             for d in deliveries(tmp_path)), "the burst delivered")
    finally:
        assert r.stop() == 0

    ours = [d for d in deliveries(tmp_path) if d["deliveryId"] != first]
    assert {d["deliveryId"] for d in ours} == {ours[0]["deliveryId"]}, "one delivery, not more"
    states = [d["deliveryState"] for d in ours]
    assert states[-1] == "delivered" and set(states[:-1]) == {"queued"}, states
    queued, delivered = ours[:-1], ours[-1]
    counts = [d["count"] for d in queued]
    # at most once a second: k records need k-1 seconds between the first and the last
    assert len(queued) <= int(elapsed) + 1, (f"{len(queued)} `queued` records in "
                                             f"{elapsed:.2f} s: {counts}")
    assert len(queued) >= 2, counts  # recorded again as it grew (the first had 1 match)
    gaps = [ts(b) - ts(a) for a, b in itertools.pairwise(queued)]
    assert all(g >= 0.99 for g in gaps), gaps  # (ts in ms: 1 s apart, less its rounding)
    assert counts == sorted(set(counts)), f"the counts only grow: {counts}"
    assert counts[0] == 1 and counts[-1] == n  # the last `queued` record: every match
    # the last within a second of the last match (its timer late by at most the loop's worst
    # stall, and the scheduling a 100 ms lag probe may miss)
    late = ts(queued[-1]) - ts(last_match)
    assert late <= 1.0 + lag + lag_limit(), f"the last count came {late:.3f} s after its match"
    assert delivered["count"] == n and delivered["overflow"] == queued[-1]["overflow"]
    assert delivered.get("turnId")
