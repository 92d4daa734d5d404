"""`gate.require` on a file watcher re-run on the same checkout: the required line, seen by the
last run in the file this run goes on in, is remembered in the checkpoint; where it is not (a log
written anew, one the last run did not see it in), the verdict says what was looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec.structs import replace
from test_matching_change import state_of
from test_once import once, table_row

from watchrun.sources.checkpoints import CheckpointStore

CONFIG: dict[str, Any] = {"watchers": [{"id": "t", "path": "test.log", "pattern": "ERROR",
                                        "gate": {"maxMatches": 0, "require": "tests passed"}}]}


def reasons(out: str) -> list[str]:
    return [ln[4:] for ln in out.splitlines() if ln.startswith("  - ")]


def test_a_required_line_seen_by_the_last_run_holds_on_a_rerun(tmp_path: Path) -> None:
    """The same file, unchanged, then appended to: the second run read nothing and FAILed with
    "required pattern /tests passed/ never appeared", though the line is in the file. Now the
    checkpoint remembers it was seen, and the reruns pass as the first run did."""
    log = tmp_path / "test.log"
    log.write_text("running\nall tests passed\n")
    assert once(tmp_path, CONFIG).rc == 0
    again = once(tmp_path, CONFIG)
    assert (again.rc, table_row(again.out, "t")[-1]) == (0, "pass"), again.out + again.err
    with log.open("a") as fh:
        fh.write("teardown\n")
    third = once(tmp_path, CONFIG)
    assert (third.rc, table_row(third.out, "t")[-1]) == (0, "pass"), third.out + third.err


def test_a_log_written_anew_must_show_the_required_line_again(tmp_path: Path) -> None:
    """A log deleted and written anew by the next build without the line: the remembered one
    does not count. (The generation gone since the last run is itself no pass: what it got
    after that run was never read, so the verdict is an ERROR that says so, not a pass on the
    old build's "tests passed".)"""
    log = tmp_path / "test.log"
    log.write_text("running\nall tests passed\n")
    assert once(tmp_path, CONFIG).rc == 0
    log.unlink()
    log.write_text("running\ncrashed\n")
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "t")[-1]) == (3, "ERROR"), r.out + r.err
    (why,) = reasons(r.out)
    assert why.startswith(f"lines of {log} may never have been read: the generation being read")


def test_a_required_line_unseen_since_the_checkpoint_says_what_was_read(tmp_path: Path) -> None:
    """The last run did not see it either (it FAILed): the rerun read on from that run's end
    and said "never appeared" of a file it read no line of. Now it names what it read."""
    log = tmp_path / "test.log"
    log.write_text("running\n1 test failed\n")
    assert once(tmp_path, CONFIG).rc == 1
    with log.open("a") as fh:
        fh.write("retrying\n")
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "t")[-1]) == (1, "FAIL"), r.out + r.err
    assert reasons(r.out) == [
        f"required pattern /tests passed/ was not seen in the 1 line read since the last run, "
        f"from line 3 of {log}"]


def test_a_log_rotated_since_is_not_taken_to_hold_the_required_line(tmp_path: Path) -> None:
    """Rotated (renamed, a new file) since the run that saw it: the new file must show it; the
    verdict names the lines read since, from where the last run ended in the rotated file."""
    log = tmp_path / "test.log"
    log.write_text("all tests passed\n")
    assert once(tmp_path, CONFIG).rc == 0
    log.rename(tmp_path / "test.log.1")
    log.write_text("running\n")
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "t")[-1]) == (1, "FAIL"), r.out + r.err
    assert reasons(r.out) == [
        "required pattern /tests passed/ was not seen in the 1 line read since the last run, "
        f"from line 2 of {tmp_path / 'test.log.1'}"]


def test_require_seen_round_trips_and_an_older_checkpoint_has_it_unseen(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    seen = replace(state_of(()), require_seen=True)
    store.save("w", seen)
    assert '"requireSeen":true' in store.path("w").read_text()
    assert store.load("w") == seen
    store.save("w", state_of(()))  # unseen, or saved by an older runner: no key
    assert "requireSeen" not in store.path("w").read_text()
    assert store.load("w") == state_of(())
