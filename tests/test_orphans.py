"""A watcher renamed in the config: its old checkpoint is reported (validate, runner start)
and adopted with `previousId`, so what was written while it was down is not skipped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, write_config

from watchrun.config import load_config


def run_validate(config: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """`watchrun validate -c CONFIG`, in this process (tests/inproc.py)."""
    return inproc(config.parent, "validate", "-c", str(config), *more)


def test_renamed_watcher_is_reported_then_adopted(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    old = {"id": "api", "path": "app.log", "pattern": "ERROR"}
    config = write_config(tmp_path, {"watchers": [old]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.records("api"), "the start record")  # the file's end is taken
        with open(log, "a") as fh:
            fh.write("ERROR one\n")
        wait_for(lambda: len(r.matches("api")) == 1, "the first match")
    finally:
        assert r.stop() == 0
    with open(log, "a") as fh:
        fh.write("ERROR written while it was down\n")
    config = write_config(tmp_path, {"watchers": [{**old, "id": "api2"}]})
    res = run_validate(config)
    assert res.returncode == 0, res.stdout
    assert "api.checkpoint.json is the checkpoint of watcher `api`" in res.stdout
    assert "set `previousId: api`" in res.stdout
    strict = run_validate(config, "--strict")  # (docs/config.md: a warning `--strict` keeps)
    assert strict.returncode == 0 and "checkpoint of watcher `api`" in strict.stdout, strict
    config = write_config(tmp_path, {"watchers": [{**old, "id": "api2", "previousId": "api"}]})
    res = run_validate(config)
    assert res.returncode == 0 and "checkpoint of watcher" not in res.stdout, res.stdout
    r = LiveRunner(config)
    try:
        wait_for(lambda: len(r.matches("api2")) == 1, "the line written while it was down")
    finally:
        assert r.stop() == 0
    assert [m["line"] for m in r.matches("api2")] == ["ERROR written while it was down"]
    assert not (tmp_path / ".watchrun" / "state" / "api.checkpoint.json").exists()
    assert "checkpoint of watcher" not in r.stderr()


def test_the_runner_reports_an_orphaned_checkpoint_at_start(tmp_path: Path) -> None:
    (tmp_path / ".watchrun" / "state").mkdir(parents=True)
    (tmp_path / ".watchrun" / "state" / "gone.checkpoint.json").write_text("{}")
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "sleep 1000", "pattern": "x"}]})
    r = LiveRunner(config)
    try:
        r.wait_log("checkpoint of watcher `gone`")
    finally:
        assert r.stop() == 0
    assert "set `previousId: gone`" in r.stderr()


@pytest.mark.parametrize(("watchers", "message"), [
    ([{"id": "a", "path": "x.log", "pattern": "x", "previousId": "a"}], "is its own id"),
    ([{"id": "a", "path": "x.log", "pattern": "x", "previousId": "b"},
      {"id": "b", "path": "y.log", "pattern": "x"}], "the id of watchers[1]"),
    ([{"id": "a", "path": "x.log", "pattern": "x", "previousId": "old"},
      {"id": "b", "path": "y.log", "pattern": "x", "previousId": "old"}],
     "also the previousId of watchers[0]"),
    ([{"id": "a", "command": "true", "pattern": "x", "previousId": "old"}],
     "applies only to file watchers"),
])
def test_previous_id_mistakes_are_errors(tmp_path: Path, watchers: list[dict[str, object]],
                                         message: str) -> None:
    result = load_config([write_config(tmp_path, {"watchers": watchers})])
    assert result.config is None
    assert any(message in d.message for d in result.errors), result.diagnostics


def add_extra(config: Path) -> None:
    """`watchrun add extra --path extra.log` on the live runner of `config`."""
    p = inproc(config.parent, "add", "extra", "--path", "extra.log", "--pattern", "ERROR",
               "-c", str(config))
    assert p.returncode == 0, p.stderr


def test_a_live_runners_added_watcher_is_no_orphan_and_an_ended_ones_is_named(
        tmp_path: Path) -> None:
    """`validate` (and a second `run`) told the operator to delete the checkpoint of every
    watcher a live runner had added at runtime: not in the config, so "orphaned" — deleting it
    would harm the live runner. It is that runner's; once the runner has ended, the warning
    says the watcher was added at runtime and how to continue from it."""
    (tmp_path / "app.log").write_text("")
    (tmp_path / "extra.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        add_extra(config)
        checkpoint = tmp_path / ".watchrun" / "state" / "extra.checkpoint.json"
        snapshot = tmp_path / ".watchrun" / "state" / "extra.status.json"
        wait_for(lambda: checkpoint.exists() and snapshot.exists(), "its checkpoint and status")
        live = run_validate(config)
        assert live.returncode == 0 and "checkpoint of watcher" not in live.stdout, live.stdout
    finally:
        assert r.stop() == 0
    ended = run_validate(config)
    assert ("is the checkpoint of watcher `extra`, which was added at runtime (`watchrun add`) "
            "to a runner that has ended") in ended.stdout, ended.stdout
    with open(tmp_path / "extra.log", "a") as fh:
        fh.write("ERROR written while no runner ran\n")
    r = LiveRunner(config)  # as the warning says: added again, it continues from its checkpoint
    try:
        r.wait_running()
        add_extra(config)
        wait_for(lambda: r.matches("extra"), "the line written while no runner ran")
    finally:
        assert r.stop() == 0
    assert [m["line"] for m in r.matches("extra")] == ["ERROR written while no runner ran"]
