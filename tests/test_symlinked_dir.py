"""A directory symlink on the way switched while the runner was not running (a Capistrano
`current` pointed at the next release between two `run --once` runs, or across a restart):
the old release's file is a generation of the path, read on from where it was."""

from __future__ import annotations

from pathlib import Path

from liverunner import LiveRunner, read_records, wait_for, write_config
from test_once import once, table_row


def releases(folder: Path) -> tuple[Path, Path]:
    """releases/1/log/app.log (one line) behind `current -> releases/1`; releases/2/log/."""
    one, two = folder / "releases" / "1" / "log", folder / "releases" / "2" / "log"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    (one / "app.log").write_text("ok r1\n")
    (folder / "current").symlink_to("releases/1")
    return one / "app.log", two / "app.log"


def deploy(folder: Path, old: Path, new: Path, line: str) -> None:
    """The old release logs `line`, then `current` is switched to the next one (`ln -sfn`)."""
    with old.open("a") as f:
        f.write(f"{line}\n")
    new.write_text("ok r2\n")
    tmp = folder / "current.tmp"
    tmp.symlink_to("releases/2")
    tmp.replace(folder / "current")


def lines(folder: Path) -> list[str]:
    return [r["line"] for r in read_records(folder / ".watchrun" / "watchers" / "app.jsonl")
            if r["kind"] in ("match", "gap")]


def test_the_old_release_is_read_on_after_current_was_switched_between_once_runs(
        tmp_path: Path) -> None:
    """It was called gone (`gap{missing, unreadBytes: 0}`: the checkpoint kept
    `current/log/app.log`, not the release's file) and the gate passed over its ERROR line."""
    old, new = releases(tmp_path)
    config = {"watchers": [{"id": "app", "path": "current/log/app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    assert once(tmp_path, config).rc == 0
    deploy(tmp_path, old, new, "ERROR r1 after the last run")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (1, ["1", "0", "-", "FAIL"]), r.out + r.err
    assert lines(tmp_path) == ["ERROR r1 after the last run"]
    assert once(tmp_path, config).rc == 0


def test_a_runner_restarted_after_current_was_switched_reads_the_old_release_on(
        tmp_path: Path) -> None:
    old, new = releases(tmp_path)
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(tmp_path / "current" / "log" / "app.log"), "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert r.stop() == 0, r.stderr()
        deploy(tmp_path, old, new, "ERROR r1 while stopped")
        with new.open("a") as f:
            f.write("ERROR r2\n")
        r = LiveRunner(config)
        wait_for(lambda: "ERROR r2" in lines(tmp_path), "the new release read")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert lines(tmp_path) == ["ERROR r1 while stopped", "ERROR r2"]
