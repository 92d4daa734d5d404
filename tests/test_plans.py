"""Planning what to read when the followed file leaves the path, with the writer rotating again
while the plan is made (real files and a real symlink swap; the planner's directory listing is
the moment the second rotation happens)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from watchrun.sources import plans
from watchrun.sources.identity import position


def write(path: Path, text: str) -> None:
    path.write_text(text)


def swap(link: Path, target: str) -> None:
    tmp = link.with_name(link.name + ".tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)


def test_a_symlink_swapped_while_planning_is_planned_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gen-0000 was followed; the path now points at gen-0001, and just after the planner
    opened it the writer creates gen-0002 and swaps the link again. gen-0002 is newer than the
    file the planner opened: it must not be read before gen-0001 (it was, then read again as
    the file at the path: a whole generation recorded twice)."""
    log = tmp_path / "app.log"
    write(tmp_path / "gen-0000.log", "a1\n")
    st = os.stat(tmp_path / "gen-0000.log")
    ended = position(st.st_dev, st.st_ino, st.st_mtime_ns, b"a1\n", b"a1\n", 3, 2, str(log))
    write(tmp_path / "gen-0001.log", "b1\n")
    swap(log, "gen-0001.log")
    real_scan, calls = plans.scan, []

    def scan(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # the writer rotates between the open and the listing
            write(tmp_path / "gen-0002.log", "c1\n")
            swap(log, "gen-0002.log")
        return real_scan(*args)

    monkeypatch.setattr(plans, "scan", scan)
    plan = plans.plan_switch(log, ended, [], 10, truncated=False)
    try:
        names = [os.path.basename(os.readlink(f"/proc/self/fd/{o.fd}")) for o in plan.steps]
        assert names == ["gen-0001.log", "gen-0002.log"] and plan.at_path
        assert len(calls) == 2  # planned again once the path held still
    finally:
        plan.close()
