"""While records cannot be written, the counts say what is in the JSONL: `list`, `status ID`,
`watchrun_matches_total` and a once run's gate table count the match records written (a batch
a full disk takes in part counts its whole records written), never the ones given up."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path
from typing import Any

from inproc import inproc
from liverunner import wait_for, watchrun_bin, write_config
from recordcheck import validate_records
from test_disk_full import cli, explained, listed
from test_metrics import scrape
from test_once import base_env, table_row
from tmpfs import fill, full_disk_runner

QUICK = {"onceWriteTimeout": "1s"}
"""The once runs here give their failing writes up after 1 s, not 5 (test_disk_full.py times
`limits.onceWriteTimeout` itself)."""


def recorded(jsonl: Path) -> int:
    """The match records in the JSONL (whole lines: `validate_records` fails on a torn one)."""
    return len([r for r in validate_records(jsonl, contiguous=False) if r["kind"] == "match"])


def once_in_8k(config: Path) -> subprocess.CompletedProcess[str]:
    """`run --once` whose files cannot grow past 8 KiB (EFBIG): it fails, exit 3. It writes
    no bytecode: a `.pyc` written under that limit is cut short, and breaks every later run."""
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.RLIM_INFINITY))

    run = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(config)],
                         cwd=config.parent, env=base_env(PYTHONDONTWRITEBYTECODE="1"),
                         capture_output=True, text=True, timeout=60, check=False,
                         preexec_fn=small_files)
    assert run.returncode == 3, (run.stdout, run.stderr)
    return run


def test_a_full_disk_counts_the_match_records_written_while_it_lasts(tmp_path: Path) -> None:
    """The disk fills while 400 lines arrive: the records that fit are written, the rest wait.
    `list` said MATCHES 0 (a batch was counted only once all of it was written) while dozens
    of match records were in the JSONL. Now `list`, `status app` and the metrics count the
    records written; once there is room, all 400."""
    with full_disk_runner(tmp_path) as (mnt, log, port, _):
        jsonl = mnt / "out" / "watchers" / "app.jsonl"
        filler = fill(mnt, leave=20_000)  # room for a few dozen records, not for 400
        with open(log, "a") as fh:
            fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(1, 401))
        wait_for(lambda: listed(tmp_path)["app"]["status"] == "paused", "status paused")

        def steady() -> tuple[int, int, int, float] | None:
            """(list, status, metrics, records) while the listed count does not move."""
            before = listed(tmp_path)["app"]["matchCount"]
            status = cli(tmp_path, "status", "app", "--json")["matchCount"]
            metric = scrape(port)['watchrun_matches_total{watcher="app"}']
            on_disk = recorded(jsonl)
            after = listed(tmp_path)["app"]["matchCount"]
            return (on_disk, before, status, metric) if before == after else None

        on_disk, listed_n, status_n, metric = wait_for(steady, "a steady count")
        assert 0 < on_disk < 400, on_disk  # (the disk did fill, after some records)
        assert (listed_n, status_n, metric) == (on_disk, on_disk, on_disk)
        filler.unlink()
        wait_for(lambda: recorded(jsonl) == 400, "every line recorded")
        wait_for(lambda: listed(tmp_path)["app"]["matchCount"] == 400, "MATCHES 400")


def test_a_once_run_that_cannot_write_counts_the_match_records_it_wrote(
        tmp_path: Path) -> None:
    """A once run whose records stop fitting (RLIMIT_FSIZE: EFBIG after 8 KiB) after some were
    written: its gate table said `w 0 … ERROR` and `list` MATCHES 0 with dozens of match
    records in the JSONL. Now both count those records, none of the ones given up (a `gap`
    at the next start explains their seqs); the verdict is still ERROR, exit 3. `errors`
    said 1 for its "could not be written" error, which could not be written either: now it
    counts the error records written."""
    (tmp_path / "app.log").write_text("".join(f"ERROR line {n}\n" for n in range(1, 501)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "limits": QUICK, "watchers": [
        {"id": "w", "path": "app.log", "fromStart": True, "pattern": "ERROR",
         "gate": {"maxMatches": 1000}}]})

    run = once_in_8k(config)
    assert "its records could not be written: EFBIG" in run.stdout
    jsonl = tmp_path / "out" / "watchers" / "w.jsonl"
    on_disk = recorded(jsonl)
    assert 0 < on_disk < 500, on_disk
    assert table_row(run.stdout, "w") == ["w", str(on_disk), "1000", "-", "ERROR"]
    entry: dict[str, Any] = listed(tmp_path)["w"]
    assert entry["matchCount"] == on_disk, entry
    status = cli(tmp_path, "status", "w", "--json")
    assert status["matchCount"] == on_disk
    errors = [r for r in validate_records(jsonl, contiguous=False) if r["kind"] == "error"]
    assert status["errors"] == len(errors) == 0  # (its "could not be written" was not either)
    again = inproc(tmp_path, "run", "--once", "--json", "-c", str(config),  # (files only)
                   env=base_env())
    assert again.returncode == 0, (again.stdout, again.stderr)
    (verdict,) = json.loads(again.stdout)["verdicts"]
    assert verdict["matches"] == 500  # (a fresh look at the whole file)
    (gap,) = explained(validate_records(jsonl, contiguous=False))
    assert gap["kinds"]["match"] == 500 - on_disk, gap  # the ones given up, not counted


def test_truncated_and_redacted_count_only_the_records_written(tmp_path: Path) -> None:
    """Lines cut at maxLineBytes and secrets redacted were counted when a batch was built: a
    once run that could write 10 of its 200 match records said `truncated` 200 and
    `redacted` {password: 200}. Now they count what the records written hold; `linesCut`
    stays the lines read that were cut."""
    (tmp_path / "app.log").write_text("".join(
        f"ERROR line {n} password=hunter{n} {'x' * 400}\n" for n in range(1, 201)))
    config = write_config(tmp_path, {
        "output": {"dir": "out", "redact": True}, "limits": {**QUICK, "maxLineBytes": 256},
        "watchers": [{"id": "w", "path": "app.log", "fromStart": True, "pattern": "ERROR"}]})
    once_in_8k(config)
    recs = validate_records(tmp_path / "out" / "watchers" / "w.jsonl", contiguous=False)
    matches = [r for r in recs if r["kind"] == "match"]
    assert 0 < len(matches) < 200, len(matches)
    status = cli(tmp_path, "status", "w", "--json")
    assert status["matchCount"] == len(matches)
    assert status["truncated"] == len([r for r in matches if r.get("truncated")])
    assert status["redacted"] == {
        "password": sum(r["line"].count("[REDACTED:password]") for r in matches)}
    assert status["linesCut"] == status["linesRead"] >= len(matches)  # (every line read is cut:
    # those read past the last record written too, however many reads came before the give-up)


def test_a_gate_crossed_by_the_records_written_shows_their_lines(tmp_path: Path) -> None:
    """Its records stop fitting after some were written, more than the gate allows: the verdict
    is FAIL+ERROR (crossed by what was recorded, and it could not finish), exit 3. Its
    evidence was kept only for a batch written whole: the report said "… and 32 more" with
    not one line above it. Now it lists the first lines of the records written."""
    (tmp_path / "app.log").write_text("".join(f"ERROR line {n}\n" for n in range(1, 501)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "limits": QUICK, "watchers": [
        {"id": "w", "path": "app.log", "fromStart": True, "pattern": "ERROR",
         "gate": {"maxMatches": 3}}]})
    run = once_in_8k(config)
    on_disk = recorded(tmp_path / "out" / "watchers" / "w.jsonl")
    assert 5 < on_disk < 500, on_disk
    assert table_row(run.stdout, "w") == ["w", str(on_disk), "3", "-", "FAIL+ERROR"]
    shown = [ln.strip() for ln in run.stdout.splitlines() if ln.strip().startswith("app.log:")]
    assert shown == [f"app.log:{n}: ERROR line {n}" for n in range(1, 6)], run.stdout
    assert f"… and {on_disk - 5} more (every match is in watchers/w.jsonl)" in run.stdout
