"""A watcher added at runtime to a runner that has ended, seen from the next runner on the same
output dir: `start` of its id says what it was and how to add it again, `add` says that it
reads on from its checkpoint, and `clear` forgets it for good, its checkpoint too (README
"Watchers added at runtime").

The `watchrun` commands run in this process (tests/inproc.py); the runners are processes."""

from __future__ import annotations

import json
from pathlib import Path

from liverunner import LiveRunner, wait_for, write_config
from test_forget_state import state_files
from test_runtime_watchers import lines_of, wr


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def ended_runner_with(tmp_path: Path, *wids: str, quiet: str | None = None) -> Path:
    """A config with the file watcher `c1`; a runner of it to which each of `wids` was added at
    runtime (a file watcher of `WID.log`, each matched `ERROR first`), and `quiet` (of an empty
    file that got no line), then stopped."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "c1", "path": "c1.log", "pattern": "ERROR"}]})
    (tmp_path / "c1.log").write_text("")
    r = LiveRunner(config)
    try:
        r.wait_running()
        if quiet is not None:
            (tmp_path / f"{quiet}.log").write_text("")
            assert wr(tmp_path, "add", quiet, "--path", f"{quiet}.log", "--pattern", "ERROR"
                      ).returncode == 0
        for wid in wids:
            (tmp_path / f"{wid}.log").write_text("old 0\n")
            p = wr(tmp_path, "add", wid, "--path", f"{wid}.log", "--pattern", "ERROR")
            assert (p.returncode, p.stdout) == (0, f"started {wid}\n"), p.stderr
            append(tmp_path / f"{wid}.log", "ERROR first\n")
        for wid in wids:
            wait_for(lambda w=wid: lines_of(r, w) == ["ERROR first"], f"{wid}'s first match")
    finally:
        assert r.stop() == 0
    return config


def test_start_of_an_earlier_runners_watcher_says_to_add_it_and_add_reads_on(
        tmp_path: Path) -> None:
    config = ended_runner_with(tmp_path, "x", quiet="e")
    log = tmp_path / "x.log"
    append(log, "ERROR while no runner ran\n")
    append(tmp_path / "e.log", "ERROR in e while no runner ran\n")
    r = LiveRunner(config)
    try:
        r.wait_running()
        shown = json.loads(wr(tmp_path, "status", "x", "--json").stdout)
        assert (shown["origin"], shown["status"], shown["live"]) == ("runtime", "stopped", False)
        for op in ("start", "restart"):  # not_found, exit 2, as documented; and why
            p = wr(tmp_path, op, "x")
            assert p.returncode == 2, p.stderr
            assert ("watchrun: error: no watcher 'x' (known: c1): x was added at runtime "
                    "(`watchrun add`) to an earlier runner (pid ") in p.stderr, p.stderr
            assert ("and is not in the config, so no later runner starts it; `watchrun add x` "
                    "with its path and pattern (`watchrun status x` shows them) adds it again, "
                    "reading on from its checkpoint (what its file got since is matched; "
                    "`watchrun clear` first forgets the checkpoint)") in p.stderr, p.stderr
        p = wr(tmp_path, "add", "x", "--path", "x.log", "--pattern", "ERROR", "--json")
        assert p.returncode == 0, p.stderr
        reply = json.loads(p.stdout)
        assert reply["resumedFrom"] == {"path": str(log), "line": 3}
        assert reply["message"] == (
            f"started x, resumed from its checkpoint: from line 3 of {log}, where an earlier run "
            "of x left off (what was written since is read; `watchrun stop x` then `watchrun "
            "clear` forget the checkpoint: added again, it starts at the end of its file)")
        wait_for(lambda: lines_of(r, "x") == ["ERROR first", "ERROR while no runner ran"],
                 "the line written while no runner ran")
        # Its checkpoint at the start of a file that was empty then: read on from line 1.
        p = wr(tmp_path, "add", "e", "--path", "e.log", "--pattern", "ERROR")
        assert p.stdout.startswith(
            f"started e, resumed from its checkpoint: from line 1 of {tmp_path / 'e.log'}, "), \
            p.stdout + p.stderr
        wait_for(lambda: lines_of(r, "e") == ["ERROR in e while no runner ran"], "e's line")
    finally:
        assert r.stop() == 0


def test_clear_forgets_an_earlier_runners_watcher_with_its_checkpoint(tmp_path: Path) -> None:
    """`clear` removed the snapshot of an earlier runner's runtime watcher and kept its
    checkpoint: `add` of its id then read every line written since that runner, days of log."""
    config = ended_runner_with(tmp_path, "x", "y")
    out = tmp_path / ".watchrun"
    for name in ("y.status.json", "y.tail"):  # as that `clear` left `y`: its checkpoint alone
        (out / "state" / name).unlink()
    for wid in ("x", "y"):
        append(tmp_path / f"{wid}.log", "ERROR old A\n")
    r = LiveRunner(config)
    try:
        r.wait_running()
        p = wr(tmp_path, "clear", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == {
            "cleared": 0, "leftovers": ["x", "y"],
            "message": "cleared 0 watchers; also forgot what an earlier runner left of x, y"}
        for wid in ("x", "y"):
            assert state_files(out, wid) == set(), wid  # its checkpoint and spent note too
            assert (out / "watchers" / f"{wid}.jsonl").exists()  # the JSONL stays
        assert "c1.checkpoint.json" in state_files(out, "c1")  # the config's watcher keeps it
        for wid in ("x", "y"):
            append(tmp_path / f"{wid}.log", "ERROR old B\n")
            p = wr(tmp_path, "add", wid, "--path", f"{wid}.log", "--pattern", "ERROR")
            assert (p.returncode, p.stdout) == (0, f"started {wid}\n"), p.stderr
            append(tmp_path / f"{wid}.log", "ERROR new\n")
        for wid in ("x", "y"):  # new watchers: from the end of their files
            wait_for(lambda w=wid: "ERROR new" in lines_of(r, w), f"{wid}'s new match")
            assert lines_of(r, wid) == ["ERROR first", "ERROR new"], wid
        p = wr(tmp_path, "clear", "--json")  # nothing left over now: the runner holds x, y
        assert json.loads(p.stdout)["leftovers"] == []
    finally:
        assert r.stop() == 0
