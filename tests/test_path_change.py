"""A file watcher whose `path` changes while its id stays (a reload, a restart with an edited
config, a runtime watcher cleared and added again): the checkpoint of the old path is set aside
and the new file is followed as a new watcher would follow it, not replayed from its first line.
What the checkpoint must still do at the same path is checked beside it: a file rotated while
the runner was down is read from its start, and a renamed watcher (`previousId`) keeps its
position, whether the path is spelled the same or not."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, read_records, wait_for, write_config

from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.identity import Checkpoint

OLD_LINES = 2000
"""Lines matching `L` in the file the watcher is moved to, there before the move."""


def logs(tmp_path: Path) -> tuple[Path, Path]:
    """logs/app.log (empty) and logs/zz.log (OLD_LINES matching lines) under `tmp_path`."""
    folder = tmp_path / "logs"
    folder.mkdir()
    app, zz = folder / "app.log", folder / "zz.log"
    app.write_text("")
    zz.write_text("".join(f"L old {i}\n" for i in range(OLD_LINES)))
    return app, zz


def append(path: Path, *lines: str) -> None:
    with path.open("a") as fh:
        fh.writelines(f"{line}\n" for line in lines)


def lines_of(r: LiveRunner, wid: str) -> list[str]:
    return [m["line"] for m in r.matches(wid)]


def starts(r: LiveRunner, wid: str) -> list[dict[str, Any]]:
    return [x for x in r.records(wid) if x["kind"] == "start"]


def wr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` from `cwd` (its ./watch.yaml is the config), in this process
    (tests/inproc.py: `add`, `stop` and `clear` ask the runner; the `run --once` here follows
    files only, no command)."""
    return inproc(cwd, *args)


def checkpoint(tmp_path: Path, wid: str) -> Path:
    return tmp_path / ".watchrun" / "state" / f"{wid}.checkpoint.json"


def set_aside_said(stderr: str, old: Path, new: Path) -> bool:
    """The runner's log says once that the checkpoint of `old` was set aside for `new`."""
    said = [x for x in stderr.splitlines() if "set aside" in x and str(old) in x]
    return len(said) == 1 and str(new) in said[0]


def matched_once(config: Path, log: Path, line: str, wid: str = "app") -> LiveRunner:
    """A runner of `config` that matches `line` appended to `log`, then stopped (exit 0)."""
    r = LiveRunner(config)
    try:
        r.wait_running()
        append(log, line)
        wait_for(lambda: line in lines_of(r, wid), f"the match of {line!r}")
    finally:
        assert r.stop() == 0
    return r


def test_a_path_changed_by_a_reload_is_followed_from_the_end_of_the_new_file(
        tmp_path: Path) -> None:
    app, zz = logs(tmp_path)
    conf = {"watchers": [{"id": "app", "path": "logs/app.log", "pattern": "L"}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_running()
        append(app, "L on app")
        wait_for(lambda: lines_of(r, "app") == ["L on app"], "the match on app.log")
        conf["watchers"][0]["path"] = "logs/zz.log"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: len(starts(r, "app")) == 2, "the start on zz.log")
        assert starts(r, "app")[1]["offset"] == zz.stat().st_size  # at its end, as a new one
        append(zz, "L after the reload")
        wait_for(lambda: "L after the reload" in lines_of(r, "app"), "the line appended")
        r.wait_log("set aside")
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L on app", "L after the reload"]  # none replayed, once each
    assert not any(x["kind"] in ("rotate", "gap") for x in r.records("app"))
    assert set_aside_said(r.stderr(), app, zz), r.stderr()
    assert json.loads(checkpoint(tmp_path, "app").read_text())["path"] == str(zz)


def test_a_path_changed_while_the_runner_was_stopped_is_followed_from_its_end(
        tmp_path: Path) -> None:
    app, zz = logs(tmp_path)
    conf = {"watchers": [{"id": "app", "path": "logs/app.log", "pattern": "L"}]}
    config = write_config(tmp_path, conf)
    r = matched_once(config, app, "L on app")
    append(app, "L on app while stopped: app.log is no longer followed")
    conf["watchers"][0]["path"] = "logs/zz.log"
    write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert starts(r, "app")[-1]["offset"] == zz.stat().st_size
        append(zz, "L after the restart")
        wait_for(lambda: "L after the restart" in lines_of(r, "app"), "the line appended")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L on app", "L after the restart"]
    assert not any(x["kind"] in ("rotate", "gap") for x in r.records("app"))
    assert set_aside_said(r.stderr(), app, zz), r.stderr()
    # The checkpoint is of zz.log now: the next start resumes there, with no word of it.
    append(zz, "L while stopped again")
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: "L while stopped again" in lines_of(r, "app"), "the line written")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L on app", "L after the restart", "L while stopped again"]
    assert "set aside" not in r.stderr()


def test_a_once_run_after_a_path_change_reads_the_new_file_as_a_first_run_does(
        tmp_path: Path) -> None:
    app, zz = logs(tmp_path)
    append(app, "L on app")
    conf = {"watchers": [{"id": "app", "path": "logs/app.log", "pattern": "L"}]}
    config = write_config(tmp_path, conf)
    first = wr(tmp_path, "run", "--once", "--quiet", "-c", str(config))
    assert first.returncode == 0, first.stderr
    conf["watchers"][0]["path"] = "logs/zz.log"
    write_config(tmp_path, conf)
    second = wr(tmp_path, "run", "--once", "--quiet", "-c", str(config))
    assert second.returncode == 0, second.stderr
    records = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    lines = [x["line"] for x in records if x["kind"] == "match"]
    assert lines == ["L on app", *(f"L old {i}" for i in range(OLD_LINES))]  # whole, once
    assert not any(x["kind"] in ("rotate", "gap") for x in records)
    assert set_aside_said(second.stderr, app, zz), second.stderr


def test_a_runtime_watcher_cleared_and_added_again_is_a_new_watcher(tmp_path: Path) -> None:
    app, zz = logs(tmp_path)
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "command": "exec sleep 600", "pattern": "x"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()

        def add(path: Path) -> None:
            p = wr(tmp_path, "add", "cz", "--path", str(path), "--pattern", "L")
            assert p.returncode == 0, p.stderr

        def stop_and_clear() -> None:
            assert wr(tmp_path, "stop", "cz").returncode == 0
            assert wr(tmp_path, "clear").returncode == 0
            assert not checkpoint(tmp_path, "cz").exists()  # forgotten for good

        add(app)
        append(app, "L 1")
        wait_for(lambda: lines_of(r, "cz") == ["L 1"], "the first match")
        stop_and_clear()
        add(zz)  # another file under the same id: from its end
        assert starts(r, "cz")[-1]["offset"] == zz.stat().st_size
        append(zz, "L 2")
        wait_for(lambda: "L 2" in lines_of(r, "cz"), "the line appended to zz.log")
        stop_and_clear()
        append(app, "L written while cz was cleared")
        add(app)  # the same file again under the same id: a new watcher too, from its end
        append(app, "L 3")
        wait_for(lambda: "L 3" in lines_of(r, "cz"), "the line appended to app.log")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "cz") == ["L 1", "L 2", "L 3"]
    assert not any(x["kind"] in ("rotate", "gap") for x in r.records("cz"))


def test_rotation_while_stopped_is_read_from_the_start_however_the_path_is_spelled(
        tmp_path: Path) -> None:
    app, _ = logs(tmp_path)
    conf = {"watchers": [{"id": "app", "path": "logs/app.log", "pattern": "L"}]}
    config = write_config(tmp_path, conf)
    r = matched_once(config, app, "L 1")
    append(app, "L 2 before the rotation")
    app.rename(app.with_name("app.log.1"))
    append(app, "L 3 in the new file")
    conf["watchers"][0]["path"] = "./logs/../logs/app.log"  # the same file, spelled otherwise
    write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        wait_for(lambda: "L 3 in the new file" in lines_of(r, "app"), "the new file's line")
        append(app, "L 4")
        wait_for(lambda: "L 4" in lines_of(r, "app"), "the line appended")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L 1", "L 2 before the rotation", "L 3 in the new file", "L 4"]
    assert [x["reason"] for x in r.records("app") if x["kind"] == "rotate"] == ["rename"]
    assert "set aside" not in r.stderr()


def test_a_renamed_watcher_keeps_its_position_at_the_same_path(tmp_path: Path) -> None:
    app, zz = logs(tmp_path)
    config = write_config(tmp_path, {"watchers": [
        {"id": "api", "path": "logs/app.log", "pattern": "L"}]})
    r = matched_once(config, app, "L 1", wid="api")
    append(app, "L 2 while it was down")
    config = write_config(tmp_path, {"watchers": [  # renamed, the same file by absolute path
        {"id": "api2", "previousId": "api", "path": str(app), "pattern": "L"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: lines_of(r, "api2") == ["L 2 while it was down"], "the line since")
    finally:
        assert r.stop() == 0
    assert "set aside" not in r.stderr()
    # Renamed again and moved to another file: the old path's checkpoint is set aside.
    append(app, "L 3 on app.log, no longer followed")
    config = write_config(tmp_path, {"watchers": [
        {"id": "api3", "previousId": "api2", "path": "logs/zz.log", "pattern": "L"}]})
    r = matched_once(config, zz, "L 4", wid="api3")
    assert lines_of(r, "api3") == ["L 4"]
    assert set_aside_said(r.stderr(), app, zz), r.stderr()


def test_a_checkpoint_saved_without_its_path_is_applied_as_before(tmp_path: Path) -> None:
    app, _ = logs(tmp_path)
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "logs/app.log", "pattern": "L"}]})
    r = matched_once(config, app, "L 1")
    cp = checkpoint(tmp_path, "app")
    doc = json.loads(cp.read_text())
    doc.pop("path", None)  # as a runner before this field saved it
    cp.write_text(json.dumps(doc))
    append(app, "L 2 while it was down")
    r = LiveRunner(config)
    try:
        wait_for(lambda: "L 2 while it was down" in lines_of(r, "app"), "the line since")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L 1", "L 2 while it was down"]
    assert "set aside" not in r.stderr()
    assert json.loads(cp.read_text())["path"] == str(app)  # saved with it from now on


def test_a_path_given_through_a_symlink_to_the_same_file_keeps_the_position(
        tmp_path: Path) -> None:
    app, _ = logs(tmp_path)
    (tmp_path / "logs" / "current.log").symlink_to("app.log")
    conf = {"watchers": [{"id": "app", "path": "logs/current.log", "pattern": "L"}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_running()
        append(app, "L 1")
        wait_for(lambda: lines_of(r, "app") == ["L 1"], "the first match")
        append(app, "L 2")  # (read before the reload's stop: its position is checkpointed)
        wait_for(lambda: lines_of(r, "app") == ["L 1", "L 2"], "the second match")
        conf["watchers"][0]["path"] = "logs/app.log"  # the link's target: the same file
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: len(starts(r, "app")) == 2, "the start after the reload")
        append(app, "L 3")
        wait_for(lambda: "L 3" in lines_of(r, "app"), "the line appended")
    finally:
        assert r.stop() == 0
    assert lines_of(r, "app") == ["L 1", "L 2", "L 3"]
    assert "set aside" not in r.stderr()


# The checkpoint file's `path` and `watchrun clear`'s deletion, without a runner.

def state_of(path: str | None) -> FileState:
    return FileState((Checkpoint(1, 2, "ab" * 32, 10, 2, "/logs/app.log", 10, seq=5),), 5,
                     path)


def test_the_watchers_path_round_trips_and_an_older_file_has_none(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    store.save("w", state_of("/logs/app.log"))
    assert json.loads(store.path("w").read_text())["path"] == "/logs/app.log"
    assert store.load("w") == state_of("/logs/app.log")
    store.save("w", state_of(None))  # as saved before the field was kept: no key at all
    assert "path" not in json.loads(store.path("w").read_text())
    assert store.load("w") == state_of(None)


@pytest.mark.parametrize("bad", [3, "", ["/logs/app.log"]])
def test_a_path_that_is_not_a_string_is_a_corrupt_checkpoint(tmp_path: Path, bad: Any) -> None:
    store = CheckpointStore(tmp_path)
    store.save("w", state_of("/logs/app.log"))
    doc = json.loads(store.path("w").read_text())
    store.path("w").write_text(json.dumps({**doc, "path": bad}))
    assert store.load("w") is None
    ((code, problem),) = [(p.code, p.message) for p in store.taken("w")]
    assert code == "checkpoint-corrupt"
    assert "field 'path'" in problem and "set aside" in problem


def test_forget_deletes_the_checkpoint_and_a_save_asked_for_before_stays_undone(
        tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    store.forget("w")  # nothing there (not even the folder): nothing to do
    store.save("w", state_of("/logs/app.log"), store.order.ticket("w"))
    store.order.settled("w")
    late = store.order.ticket("w")  # a save asked for before the clear, landing after it
    store.path("w").with_name("w.checkpoint.json.tmp").write_text("{")
    store.forget("w")
    assert list(store.dir.iterdir()) == []
    assert not store.save("w", state_of("/logs/app.log"), late)
    assert list(store.dir.iterdir()) == []
    assert store.save("w", state_of("/logs/zz.log"), store.order.ticket("w"))  # a new watcher's
    assert store.load("w") == state_of("/logs/zz.log")


def test_a_forgotten_watcher_with_no_save_in_flight_leaves_nothing_in_the_store(
        tmp_path: Path) -> None:
    """The store kept a lock and the last ticket written of every watcher it ever saved, so
    a node agent that forgets gone pods for good grew by each one, for its life."""
    store = CheckpointStore(tmp_path / "state")
    for n in range(50):
        wid = f"pod-{n}"
        assert store.save(wid, state_of(f"/logs/{wid}.log"), store.order.ticket(wid))
        store.order.settled(wid)
        assert store.load(wid) is not None
        store.forget(wid)
    assert list(store.dir.iterdir()) == []
    held = vars(store.order)
    assert (held["_locks"], held["_written"], held["_pending"]) == ({}, {}, {})
    assert store.save("pod-0", state_of("/logs/again.log"), store.order.ticket("pod-0"))
    assert store.load("pod-0") == state_of("/logs/again.log")  # added again: a new watcher
