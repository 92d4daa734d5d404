"""Test helper: real runs that write most kinds of record and most of their fields — `run --once`
over a file rotated, truncated and lost between runs, with actions and agents (the mock, an
oversized event); a once run of a command whose actions suppress, fail, drop and leave processes
running and whose agents run a plan; a live runner with a restarting command, a line with no
end, `agent send` and `agent stop`, then `agent run` — and the records every provider fixture
gives through its adapter."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapter_replay import FIXTURES, replay_lines
from liverunner import LiveRunner, cli, read_records, wait_for, write_config
from recordcheck import validate_records
from webhook_server import receiver

from watchrun.agents.clean import clean_record, unreserved
from watchrun.agents.providers import make_adapter

Written = list[tuple[str, dict[str, Any]]]
"""(where it was written, the record) of every record."""

SECRET = "password=hunter2hunter2"
MOCK_TOOL = "{matches} [mock:tool] [mock:stderr] [mock:color]"


def streams(out: Path) -> Written:
    """Every record of every stream under `out` (each stream checked by `validate_records`)."""
    found: Written = []
    for path in sorted(out.glob("*/*.jsonl")):
        found += [(str(path.relative_to(out)), r) for r in validate_records(path)]
    return found


def file_runs(folder: Path) -> Written:
    """Five `run --once` of one config, the file watched rotated, truncated and worse between."""
    log, out = folder / "app.log", folder / ".watchrun"
    with receiver(200) as hook:
        write_config(folder, {
            "limits": {"maxEventBytes": "4KiB"},
            "watchers": [
                {"id": "app", "path": "app.log", "fromStart": True, "pattern": "ERROR",
                 "wake": "ag", "actions": [
                     {"type": "exec", "name": "page", "command": [
                         "sh", "-c", "cat >/dev/null; echo paged; sleep 30 >/dev/null 2>&1 &"]},
                     {"type": "webhook", "name": "hook", "url": hook.url}]},
                {"id": "long", "path": "long.log", "fromStart": True, "pattern": "x",
                 "wake": "big"},
                {"id": "gone", "command": ["/nonexistent/prog"], "pattern": "x"},
                {"id": "absent", "path": "absent.log", "pattern": "x"},
            ],
            "agents": [{"name": "ag", "provider": "mock", "prompt": MOCK_TOOL},
                       {"name": "big", "provider": "mock",
                        "prompt": "[mock:oversized=9000] {matches}"}]})
        log.write_text(f"ERROR one {SECRET}\nINFO fine\n")
        (folder / "long.log").write_text(("x" * 70_000 + "\n") * 2)  # (a prompt cut to fit)

        def once() -> None:
            done = cli("run", "--once", "-c", folder / "watch.yaml", cwd=folder, timeout=60)
            assert done.returncode == 3, done.stderr  # (`gone` cannot start)

        once()
        log.rename(folder / "app.log.1")  # rotated: `rotate{rename}`
        log.write_text("ERROR two\n")
        once()
        log.write_text("ERROR 3\n")  # truncated and written again: `rotate{truncate}`
        once()
        with log.open("a") as f:  # written, never read, then gone: `gap{missing}`
            f.write("ERROR unread\n")
        log.unlink()
        (folder / "app.log.1").unlink()
        log.write_text("ERROR four\n")
        once()
        before = streams(out)
        for path in out.glob("watchers/long.jsonl*"):  # the stream lost: `gap{lost}`
            path.unlink()
        with (out / "watchers" / "gone.jsonl").open("ab") as f:  # torn: `sink-repaired`
            f.write(b'{"schema":1,"seq":')
        (out / "state" / "app.checkpoint.json").write_text("{")  # `checkpoint-corrupt`
        (out / "state" / "watchers-absent.unwritten").write_bytes(b"\xff" * 8192)  # `note-corrupt`
        once()
    return before + streams(out)


def action_run(folder: Path) -> Written:
    """A `run --once` of a command whose second line comes once the actions of its first ran:
    a throttled action suppresses it, a busy one with no queue drops it (running until the
    drop is recorded), and a plan of agents runs twice, the second time failing."""
    wait = ("i=0; until [ -e fired ] && [ -e busy ] || [ $i -gt 600 ]; do i=$((i+1)); "
            "sleep 0.05; done")
    dropped = ("touch busy; i=0; until grep -q action-dropped .watchrun/watchers/job.jsonl "
               "|| [ $i -gt 150 ]; do i=$((i+1)); sleep 0.05; done")
    write_config(folder, {
        "watchers": [{
            "id": "job", "pattern": "ERROR", "wake": ["review", "fix"],
            "command": ["sh", "-c", f"printf 'ERROR \\033[31mred\\033[0m {SECRET}\\n'; {wait}; "
                        "echo 'ERROR again [mock:fail]'; sleep 30 >/dev/null 2>&1 & exit 3"],
            "actions": [{"type": "exec", "name": "fail", "throttle": "1h",
                         "command": ["sh", "-c", "touch fired; echo no; exit 1"]},
                        {"type": "exec", "name": "busy", "queue": 0,
                         "command": ["sh", "-c", dropped]}]}],
        "agents": [{"name": "review", "provider": "mock", "prompt": "{matches}"},
                   {"name": "fix", "provider": "mock", "dependsOn": ["review"],
                    "prompt": "Fix it: {deps.review.answer}"}]})
    done = cli("run", "--once", "-c", folder / "watch.yaml", cwd=folder, timeout=60)
    assert done.returncode == 0, done.stderr
    return streams(folder / ".watchrun")


def live_run(folder: Path) -> Written:
    """A live runner: a command restarting, a line with no end, `agent send` (a turn stopped by
    `agent stop`), an agent whose command does not exist; then an `agent run`."""
    config = write_config(folder, {
        "limits": {"maxLineBytes": "256B"},  # (strings clipped: `truncated`, `omittedBytes`)
        "output": {"redact": True},
        "watchers": [
            {"id": "flaky", "command": ["sh", "-c", "exit 1"], "pattern": "x",
             "restart": "on-failure", "restartDelay": "100ms"},
            {"id": "partial", "command": [
                "sh", "-c", "head -c 70000 /dev/zero | tr '\\0' a; exec sleep 30"],
             "pattern": "x"},
        ],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"},
                   {"name": "nope", "provider": "generic", "prompt": "{matches}",
                    "command": ["/nonexistent/" + "agent/" * 50 + "x"]},
                   {"name": "gen", "provider": "generic", "prompt": "{matches}", "command": [
                       "sh", "-c", "printf '\\033[1m%s\\033[0m\\n' \"$0\"; echo \"$0\" >&2",
                       "{prompt}"]}]})
    out = folder / ".watchrun"

    def seen(stream: str, kind: str, **fields: Any) -> bool:
        return any(r["kind"] == kind and fields.items() <= r.items()
                   for r in read_records(out / f"{stream}.jsonl"))

    runner = LiveRunner(config)
    try:
        runner.wait_running()
        wait_for(lambda: seen("watchers/flaky", "start", attempt=1), "a restart")
        wait_for(lambda: seen("watchers/partial", "error", code="line-too-long"), "line-too-long")
        sent = cli("agent", "send", "-c", config, "ag", f"hang on [mock:hang] {SECRET}")
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: seen("agents/ag", "session"), "the sent turn to start")
        stopped = cli("agent", "stop", "-c", config, "ag")
        assert stopped.returncode == 0, stopped.stderr
        wait_for(lambda: seen("agents/ag", "dispatch-finished", status="cancelled"), "the stop")
        sent = cli("agent", "send", "-c", config, "nope", "hi")
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: seen("agents/nope", "dispatch-finished"), "the turn that cannot start")
        assert runner.stop(signal.SIGTERM) == 0, runner.stderr()
    finally:
        runner.close()
    ran = cli("agent", "run", "-c", config, "ag", "--prompt", "[mock:fail] please")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    ran = cli("agent", "run", "-c", config, "gen", "--prompt", "bold " * 60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return streams(out)


def replayed() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every record of every provider fixture, as the recorder writes an adapter's
    observations (named, then cleaned; no envelope: its fields are the schema's own)."""
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for fixture in sorted(folder.iterdir()):
            lines = fixture.read_text(encoding="utf-8").splitlines()
            stderr = fixture.name.endswith(".stderr.txt")
            got = replay_lines(make_adapter(folder.name), [] if stderr else lines,
                               41 if stderr else 0, stderr=lines if stderr else ())
            for obs in got.obs:
                fields = unreserved(obs.fields) | {"turnId": "turn-1"}
                yield (f"{folder.name}/{fixture.name}",
                       {"kind": obs.kind, **clean_record(obs.kind, fields, None)})


def everything(tmp: Path) -> Written:
    """The records of all of them, each run in its own folder under `tmp`."""
    for name in ("files", "actions", "live"):
        (tmp / name).mkdir()
    return [*file_runs(tmp / "files"), *action_run(tmp / "actions"), *live_run(tmp / "live"),
            *replayed()]

