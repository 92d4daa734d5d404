"""A batch of match records a full disk takes in part: the matches whose records were written
are handed on to the watcher's actions (and agents), the ones given up are not."""

from __future__ import annotations

import re
from pathlib import Path

from liverunner import LiveRunner, read_records, wait_for, write_config
from test_disk_full import listed
from test_disk_full_counts import QUICK, once_in_8k, recorded
from tmpfs import fill, mount_tmpfs, umount
from webhook_server import receiver


def test_a_once_run_acts_on_the_match_records_it_wrote(tmp_path: Path) -> None:
    """A once run whose records stop fitting (EFBIG after 8 KiB) after dozens were written:
    its webhook was never called, though the JSONL and the gate table held those matches.
    Now the webhook gets them (and only them); the given-up rest is the verdict's ERROR."""
    (tmp_path / "app.log").write_text("".join(f"ERROR line {n}\n" for n in range(1, 501)))
    with receiver(200) as rx:
        config = write_config(tmp_path, {"output": {"dir": "out"}, "limits": QUICK, "watchers": [
            {"id": "w", "path": "app.log", "fromStart": True, "pattern": "ERROR",
             "actions": [{"type": "webhook", "url": rx.url}]}]})
        run = once_in_8k(config)
        on_disk = recorded(tmp_path / "out" / "watchers" / "w.jsonl")
        assert 0 < on_disk < 500, on_disk
        assert "its records could not be written: EFBIG" in run.stdout
        wait_for(rx.count, "the webhook called")
        bodies = rx.bodies()
    assert sum(b["count"] for b in bodies) == on_disk, bodies
    lines = [ln["line"] for b in bodies for ln in b["lines"]]
    assert lines == [f"ERROR line {n}" for n in range(1, on_disk + 1)]


def test_a_once_run_wakes_its_agent_for_the_match_records_it_wrote(tmp_path: Path) -> None:
    """The same once run with a watcher that wakes an agent: the agent was never woken. Now its
    delivery carries the matches whose records were written, and a turn runs for them."""
    (tmp_path / "app.log").write_text("".join(f"ERROR line {n}\n" for n in range(1, 501)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "limits": QUICK, "watchers": [
        {"id": "w", "path": "app.log", "fromStart": True, "pattern": "ERROR", "wake": "ag"}],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"}]})
    once_in_8k(config)
    on_disk = recorded(tmp_path / "out" / "watchers" / "w.jsonl")
    assert 0 < on_disk < 500, on_disk
    agent = read_records(tmp_path / "out" / "agents" / "ag.jsonl")
    (delivered,) = [x for x in agent if x.get("deliveryState") == "delivered"]
    assert delivered["count"] == on_disk
    assert delivered["lines"] == [f"ERROR line {n}" for n in range(1, on_disk + 1)]
    assert [x["kind"] for x in agent].count("dispatch-finished") == 1


def test_a_runner_stopped_on_a_full_disk_says_the_written_matches_it_did_not_act_on(
        tmp_path: Path) -> None:
    """The disk fills while 400 lines arrive; the runner is stopped before there is room, so the
    records that did not fit are given up. The actions stop first (a stop never waits), so the
    records written of that last batch fire nothing; they were not even said: the webhook's
    matches fell short of the JSONL's with no word why. Now the log says how many matches
    came after the actions stopped, and with what the webhook got they make up the JSONL's."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "512k")
    try:
        log = tmp_path / "app.log"
        log.write_text("")
        with receiver(200) as rx:
            config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "watchers": [
                {"id": "app", "path": str(log), "pattern": "ERROR",
                 "actions": [{"type": "webhook", "url": rx.url}]}]})
            r = LiveRunner(config)
            r.out = mnt / "out"
            try:
                r.wait_running()
                fill(mnt, leave=20_000)  # room for a few dozen records, not for 400
                with open(log, "a") as fh:
                    fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(1, 401))
                wait_for(lambda: listed(tmp_path)["app"]["status"] == "paused", "status paused")
            finally:
                r.stop()
            fired = sum(b["count"] for b in rx.bodies())
        on_disk = recorded(mnt / "out" / "watchers" / "app.jsonl")
        assert 0 < on_disk < 400, on_disk
        said = re.search(r"action webhook: (\d+) match(?:es)? came after the actions stopped "
                         r"\(the runner was stopping\): nothing fired for them", r.stderr())
        assert said is not None, r.stderr()
        assert fired + int(said[1]) == on_disk, (fired, said[0], on_disk)
    finally:
        umount(mnt)
