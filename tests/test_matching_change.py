"""A file watcher whose matching changed (pattern, exclude, caseSensitive, gate,
limits.maxLineBytes) while its id and path stayed: a once run sets the checkpoint aside and
judges the file from its first line, as the lines before the checkpoint were judged by another
watcher; a live runner keeps its position and matches what comes with the new pattern."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from test_once import once, table_row

from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.identity import Checkpoint


def watcher(pattern: str, **extra: Any) -> dict[str, Any]:
    return {"watchers": [{"id": "server-log", "path": "server.log", "pattern": pattern,
                          **extra}]}


def aside_said(stderr: str, *keys: str) -> bool:
    said = [x for x in stderr.splitlines() if "set aside" in x]
    return len(said) == 1 and f"saved with another {', '.join(keys)}: set aside" in said[0]


def test_a_second_gate_step_with_another_pattern_judges_the_whole_log(tmp_path: Path) -> None:
    """Two gate steps in one CI job, the same watcher id on the same log (a WARNING budget,
    then no ERROR): the second step read on from the first one's checkpoint, never looked at
    `ERROR db down` with its ERROR pattern, and passed (exit 0). Now it reads the log from its
    first line, fails on that line, and its log says why the checkpoint was not used."""
    (tmp_path / "server.log").write_text("INFO up\nWARNING: slow query\nERROR db down\n")
    warn = once(tmp_path, watcher("WARNING", gate={"maxMatches": 5}))
    assert warn.rc == 0, warn.out + warn.err
    err = once(tmp_path, watcher("ERROR|FATAL", gate={"maxMatches": 0}))
    assert (err.rc, table_row(err.out, "server-log")[1:]) == (1, ["1", "0", "-", "FAIL"]), \
        err.out + err.err
    assert "ERROR db down" in err.out
    assert aside_said(err.err, "pattern", "gate.maxMatches"), err.err
    again = once(tmp_path, watcher("ERROR|FATAL", gate={"maxMatches": 0}))  # the same watcher:
    assert (again.rc, table_row(again.out, "server-log")[1]) == (0, "0")  # read on, nothing new
    assert "set aside" not in again.err


@pytest.mark.parametrize("first, second, keys", [
    ({"gate": {"maxMatches": 100}}, {"gate": {"maxMatches": 0}}, ("gate.maxMatches",)),
    ({}, {"gate": {"maxMatches": 0}}, ("gate.maxMatches",)),
    ({"exclude": ["^ERROR"], "gate": {"maxMatches": 0}}, {"gate": {"maxMatches": 0}},
     ("exclude",)),
    ({"caseSensitive": True, "gate": {"maxMatches": 0}}, {"gate": {"maxMatches": 0}},
     ("caseSensitive",)),
])
def test_a_gate_tightened_between_two_once_runs_judges_the_lines_read_before(
        tmp_path: Path, first: dict[str, Any], second: dict[str, Any],
        keys: tuple[str, ...]) -> None:
    """A gate first absent (or `maxMatches: 100`, or the line excluded, or matched by case) and
    then `maxMatches: 0`, re-run on the same checkout: the second run passed over the `error x`
    line the first run had read. Now it is judged by the gate as it is now."""
    (tmp_path / "server.log").write_text("ok\nerror x\n")
    assert once(tmp_path, watcher("ERROR", **first)).rc in (0, 1)
    r = once(tmp_path, watcher("ERROR", **second))
    assert (r.rc, table_row(r.out, "server-log")[1:]) == (1, ["1", "0", "-", "FAIL"]), \
        r.out + r.err
    assert aside_said(r.err, *keys), r.err


def test_maxlinebytes_raised_as_a_cut_lines_verdict_advises_judges_that_line_whole(
        tmp_path: Path) -> None:
    """A line longer than maxLineBytes whose ERROR lies past the cut: the run is an ERROR (exit
    3) that advises raising limits.maxLineBytes. Raised, the next run on the same checkout read
    on from the checkpoint past that line and passed (exit 0) without ever matching it. Now
    the checkpoint of another maxLineBytes is set aside: the line is read whole, and FAILs."""
    (tmp_path / "server.log").write_text("INFO " + "x" * 70_000 + " ERROR hidden at the end\n")
    gated = watcher("ERROR", gate={"maxMatches": 0})
    cut = once(tmp_path, gated)
    assert cut.rc == 3 and "raise limits.maxLineBytes" in cut.out, cut.out + cut.err
    r = once(tmp_path, {**gated, "limits": {"maxLineBytes": "1MiB"}})
    assert (r.rc, table_row(r.out, "server-log")[1:]) == (1, ["1", "0", "-", "FAIL"]), \
        r.out + r.err
    assert aside_said(r.err, "limits.maxLineBytes"), r.err


def test_a_retry_on_the_same_checkout_judges_only_what_came_since_an_error(
        tmp_path: Path) -> None:
    """README: what an ERROR was about (here a line cut at maxLineBytes) is said by that run
    only; a retry on the same checkout, nothing changed, judges the lines that came since, and
    the checkpoint's removal judges it all again."""
    log = tmp_path / "server.log"
    log.write_text("INFO " + "x" * 70_000 + " ERROR past the cut\n")
    gated = watcher("ERROR", gate={"maxMatches": 0})
    assert once(tmp_path, gated).rc == 3
    retry = once(tmp_path, gated)
    assert (retry.rc, table_row(retry.out, "server-log")[1:]) == (0, ["0", "0", "-", "pass"]), \
        retry.out + retry.err
    for f in (tmp_path / ".watchrun" / "state").iterdir():
        f.unlink()
    assert once(tmp_path, gated).rc == 3


def test_a_live_runner_started_with_another_pattern_keeps_its_position(tmp_path: Path) -> None:
    """A live runner is no gate: started again with another pattern it reads on from where the
    last one stopped, matching what comes (and what came while it was down) with the new
    pattern; the lines before are not read again, and nothing is set aside."""
    log = tmp_path / "server.log"
    log.write_text("ERROR old\n")
    assert once(tmp_path, watcher("WARN")).rc == 0  # the checkpoint: after `ERROR old`
    with log.open("a") as fh:
        fh.write("ERROR while it was down\n")
    r = LiveRunner(write_config(tmp_path, watcher("ERROR")))
    try:
        wait_for(lambda: [m["line"] for m in r.matches("server-log")]
                 == ["ERROR while it was down"], "the line written while it was down")
        with log.open("a") as fh:
            fh.write("ERROR new\n")
        wait_for(lambda: "ERROR new" in [m["line"] for m in r.matches("server-log")],
                 "the line appended")
    finally:
        assert r.stop() == 0
    assert [m["line"] for m in r.matches("server-log")] == ["ERROR while it was down",
                                                              "ERROR new"]
    assert "set aside" not in r.stderr()


def state_of(matching: tuple[tuple[str, str], ...]) -> FileState:
    return FileState((Checkpoint(1, 2, "ab" * 32, 10, 2, "/logs/app.log", 10, seq=5),), 5,
                     "/logs/app.log", (), matching)


def test_the_matching_round_trips_and_an_older_checkpoint_has_none(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    store.save("w", state_of((("pattern", "0123456789abcdef"),)))
    assert json.loads(store.path("w").read_text())["matching"] == {
        "pattern": "0123456789abcdef"}
    assert store.load("w") == state_of((("pattern", "0123456789abcdef"),))
    store.save("w", state_of(()))  # as an older runner saved it: no key, applied as then
    assert "matching" not in json.loads(store.path("w").read_text())
    assert store.load("w") == state_of(())


@pytest.mark.parametrize("bad", [3, ["pattern"], {"pattern": 1}])
def test_a_matching_that_is_not_an_object_of_strings_is_a_corrupt_checkpoint(
        tmp_path: Path, bad: Any) -> None:
    store = CheckpointStore(tmp_path / "state")
    store.save("w", state_of(()))
    doc = json.loads(store.path("w").read_text())
    store.path("w").write_text(json.dumps({**doc, "matching": bad}))
    assert store.load("w") is None
    assert "field 'matching' is not an object of strings" in store.taken("w")[0].message
