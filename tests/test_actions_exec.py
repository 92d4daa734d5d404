"""Exec actions with real programs: the matched lines on stdin (JSONL) and in WATCHRUN_*
variables, argv exactly as configured whatever the log says, redaction, the concurrency cap,
and the stop discipline of command watchers (TERM, grace, KILL) on timeout and at shutdown."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import msgspec
import pytest
from actionrig import Rig, program, until, watcher, webhook
from liverunner import alive
from tmpfs import fill
from webhook_server import receiver

from watchrun.actions.reactor import ActionRuntime
from watchrun.actions.results import Result
from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.match.redact import Redactor
from watchrun.output.runlog import RunLog

PY = sys.executable
DUMP = ("import sys, os, json; data = sys.stdin.read(); "
        "env = {k: v for k, v in os.environ.items() if k.startswith(('WATCHRUN_', 'TEAM'))}; "
        "open(sys.argv[1], 'w').write(json.dumps({'stdin': data, 'env': env, 'argv': sys.argv}))")


def test_lines_arrive_on_stdin_as_jsonl_and_in_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"

    async def body() -> None:
        spec = watcher(program(tmp_path, PY, "-c", DUMP, str(out), env={"TEAM": "ops"}))
        async with Rig(tmp_path, spec) as rig:
            rig.deliver("ERROR first", "ERROR second")
            (result,) = await rig.wait("action-result")
            assert (result["status"], result["exitCode"], result["attempts"]) == ("ok", 0, 1)
            (fired,) = rig.records("action-fired")
            assert fired["target"] == PY
    asyncio.run(body())
    seen = json.loads(out.read_text())
    lines = [json.loads(x) for x in seen["stdin"].splitlines()]
    assert [x["line"] for x in lines] == ["ERROR first", "ERROR second"]
    assert lines[0] == {"line": "ERROR first", "lineNo": 1, "offset": 10, "where": "/x.log:1",
                        "cursor": "app:0000000000000001"}
    env = seen["env"]
    assert env["WATCHRUN_LINE"] == "ERROR first"
    assert env["WATCHRUN_LINES"] == "ERROR first\nERROR second"
    assert (env["WATCHRUN_WATCHER"], env["WATCHRUN_LABEL"], env["WATCHRUN_ACTION"]) == (
        "app", "the app", "run")
    assert (env["WATCHRUN_COUNT"], env["WATCHRUN_FIRING"], env["WATCHRUN_REASON"]) == (
        "2", "1", "match")
    assert env["WATCHRUN_LAST_CURSOR"] == "app:0000000000000002"
    assert env["TEAM"] == "ops"
    assert seen["argv"][1:] == [str(out)]


def test_hostile_log_text_never_becomes_an_argument_or_shell_code(tmp_path: Path) -> None:
    line = ("ERROR $(touch pwned1) `touch pwned2`; touch pwned3 && echo \"'; touch pwned4; '\" "
            "--rm -rf / $HOME ${PATH} \\ \n")
    script = 'printf "%s" "$WATCHRUN_LINE" > line.txt; cat > stdin.txt; printf "%s\\n" "$@" > args'

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", script, "sh", "fixed", "--flag"))
        async with Rig(tmp_path, spec) as rig:
            rig.deliver(line)
            (result,) = await rig.wait("action-result")
            assert result["status"] == "ok"
    asyncio.run(body())
    assert not list(tmp_path.glob("pwned*"))
    assert (tmp_path / "args").read_text() == "fixed\n--flag\n"
    assert (tmp_path / "line.txt").read_text() == line
    assert json.loads((tmp_path / "stdin.txt").read_text())["line"] == line


def test_the_watchrun_variables_win_over_the_actions_env(tmp_path: Path) -> None:
    """docs/config.md: `env` is added to the environment, and the `WATCHRUN_*` variables win:
    a config cannot make the program misread which watcher fired."""
    out = tmp_path / "seen.json"
    spec = watcher(program(tmp_path, PY, "-c", DUMP, str(out),
                           env={"WATCHRUN_WATCHER": "evil", "TEAM": "ops"}))

    async def body() -> None:
        async with Rig(tmp_path, spec) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert result["status"] == "ok"
    asyncio.run(body())
    env = json.loads(out.read_text())["env"]
    assert (env["WATCHRUN_WATCHER"], env["TEAM"]) == ("app", "ops")


def test_the_program_runs_in_a_session_of_its_own(tmp_path: Path) -> None:
    """docs/security.md 3b: its own session (and so its own process group), apart from the
    runner's: a signal to the runner's group does not reach it, and it is stopped as a tree."""
    ids = tmp_path / "ids.json"
    probe = "import json, os, sys; json.dump([os.getpid(), os.getpgid(0), os.getsid(0)], " \
            "open(sys.argv[1], 'w'))"

    async def body() -> None:
        async with Rig(tmp_path, watcher(program(tmp_path, PY, "-c", probe, str(ids)))) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert result["status"] == "ok"
    asyncio.run(body())
    pid, pgid, sid = json.loads(ids.read_text())
    assert pid == pgid == sid
    assert sid != os.getsid(0)


def test_secrets_are_redacted_on_stdin_in_the_environment_and_in_the_output(
        tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    line = "ERROR db password=hunter2hunter2 token ghp_" + "a" * 36
    echo = DUMP + "; print('echo:', data, os.environ['WATCHRUN_LINE'], 'api_key=zzz-top-secret')"

    async def body() -> None:
        async with Rig(tmp_path, watcher(program(tmp_path, PY, "-c", echo, str(out)))) as rig:
            rig.deliver(line)
            (result,) = await rig.wait("action-result")
            assert result["status"] == "ok"
            assert "[REDACTED:secret]" in result["output"]
            text = rig.path.read_text()
            assert "hunter2" not in text and "ghp_aaaa" not in text and "zzz-top" not in text
            (fired,) = rig.records("action-fired")
            assert fired["redacted"] == {"password": 1, "github-token": 1}
    asyncio.run(body())
    seen = out.read_text()
    assert "hunter2" not in seen and "ghp_aaaa" not in seen
    assert "[REDACTED:password]" in json.loads(seen)["env"]["WATCHRUN_LINES"]


def test_the_values_of_its_env_are_hidden_in_what_it_printed(tmp_path: Path) -> None:
    """An exec's `env` is where a secret for it goes (`API_TOKEN: ${TOKEN}`); a program that
    printed it (a failing client echoing its request, `set -x`) put it in the `action-result`
    record unless a redaction rule happened to know its shape. Its values are hidden now, whole
    and by words of 8 characters or more, as a webhook's URL and headers are."""
    token, header = "qZ7mW2xK9pL4vR8n", "Bearer Hx82kfPq0LmZ"
    script = 'echo "sent $API_TOKEN to vault; bad: ${AUTH#Bearer }"; exit 1'
    env = {"API_TOKEN": token, "AUTH": header, "MODE": "on"}

    async def body() -> None:
        async with Rig(tmp_path, watcher(program(tmp_path, "sh", "-c", script, env=env))) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert result["status"] == "failed"
            assert result["output"] == ("sent [REDACTED:exec-secret] to vault; bad: "
                                        "[REDACTED:exec-secret]")
            assert token not in rig.path.read_text() and "Hx82kf" not in rig.path.read_text()
    asyncio.run(body())


def test_a_failing_or_missing_program_is_a_failed_result(tmp_path: Path) -> None:
    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", "echo bad things >&2; exit 3", name="bad"),
                       program(tmp_path, "/no/such/program", name="gone"))
        async with Rig(tmp_path, spec) as rig:
            rig.deliver("ERROR x")
            await rig.wait("action-result", 2)
            by = {r["action"]: r for r in rig.records("action-result")}
            assert (by["bad"]["status"], by["bad"]["exitCode"]) == ("failed", 3)
            assert by["bad"]["error"]["code"] == "exit"
            assert by["bad"]["output"] == "bad things"
            assert (by["gone"]["status"], by["gone"]["error"]["code"]) == ("failed", "ENOENT")
            assert "warning" in rig.log.getvalue()
    asyncio.run(body())


def test_a_program_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"trap '' TERM; echo $$ > {pidfile}; while :; do sleep 0.05; done"

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", script, timeout_ms=300))
        async with Rig(tmp_path, spec, limits=Limits(stop_timeout_ms=400)) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert (result["status"], result["signal"], result["exitCode"]) == (
                "timeout", "SIGKILL", None)
            assert result["durationMs"] >= 700  # timeout, then the whole grace, then KILL
            assert not alive(int(pidfile.read_text()))
    asyncio.run(body())


def sleeper(folder: Path, pidfile: Path) -> WatcherSpec:
    """A watcher whose exec action writes its pid to `pidfile` and sleeps a minute."""
    return watcher(program(folder, "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
                           timeout_ms=60_000))


def test_shutdown_stops_a_running_program_and_records_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    async def body() -> None:
        rig = Rig(tmp_path, sleeper(tmp_path, pidfile))
        async with rig:
            rig.deliver("ERROR x")
            await until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the pid")
        (result,) = rig.records("action-result")
        assert result["status"] == "cancelled"
        assert not alive(int(pidfile.read_text()))
    asyncio.run(body())


def test_concurrency_caps_the_programs_running_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    script = (f"touch started.$WATCHRUN_FIRING; while [ ! -e {gate} ]; do sleep 0.02; done")

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", script, concurrency=2, queue=10))
        async with Rig(tmp_path, spec) as rig:
            for i in range(4):
                rig.deliver(f"ERROR {i}")
            await until(lambda: len(list(tmp_path.glob("started.*"))) == 2, "two running")
            await asyncio.sleep(0.2)  # a third would have started by now if nothing capped it
            assert len(list(tmp_path.glob("started.*"))) == 2
            gate.touch()
            results = await rig.wait("action-result", 4)
            assert {r["status"] for r in results} == {"ok"}
    asyncio.run(body())
    assert os.path.exists(tmp_path / "started.4")


def test_a_secret_at_the_cut_of_the_output_is_redacted_whole(tmp_path: Path) -> None:
    """Only the output's last 1 KiB was kept and then redacted: `password=` fell before the
    cut, so its value was written to the record."""
    tail = "hunter2-Sup3rSecretValue".ljust(1023, ".")
    leak = f"import sys; sys.stdout.write('x' * 3000 + '\\ndb password=' + {tail!r} + '\\n')"

    async def body() -> None:
        async with Rig(tmp_path, watcher(program(tmp_path, PY, "-c", leak))) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert result["status"] == "ok"
            assert len(result["output"].encode()) <= 1024
            assert result["output"].endswith("\ndb password=[REDACTED:password]")
            assert "Sup3rSecret" not in rig.path.read_text()
    asyncio.run(body())


def test_firing_numbers_go_on_across_a_reload(tmp_path: Path) -> None:
    """A reload that changed only the watcher's label numbered the action's firings from 1
    again: two `action-fired` records with `firing: 1` in one stream."""
    async def body() -> None:
        rig = Rig(tmp_path, watcher(program(tmp_path, "true")))
        async with rig:
            rig.deliver("ERROR 1")
            await rig.wait("action-result")
            changed = msgspec.structs.replace(rig.spec, label="relabelled")
            await rig.hub.reload(msgspec.structs.replace(rig.hub.config, watchers=(changed,)))
            rig.hub.deliver(changed, rig.matches("ERROR 2"), rig.stream)
            await rig.wait("action-result", 2)
        assert [r["firing"] for r in rig.records("action-fired")] == [1, 2]
        assert [r["firing"] for r in rig.records("action-result")] == [1, 2]
    asyncio.run(body())


def test_a_hostile_label_reaches_the_program_and_the_receiver_sanitized(tmp_path: Path) -> None:
    # before: WATCHRUN_LABEL, the JSON body's label and the Slack headline carried the label
    # as a `${VAR}` gave it: ESC ] 0 ; title BEL, an SGR colour, a newline, a bidi override
    out = tmp_path / "seen.json"
    label = "deploy \x1b]0;pwned\x07\x1b[31mred\x1b[0m\n\u202eevil\x9b2J"
    with receiver(200) as rx:
        async def body() -> None:
            spec = msgspec.structs.replace(watcher(
                program(tmp_path, PY, "-c", DUMP, str(out)),
                webhook(rx.url, name="json"), webhook(rx.url, name="slack", format="slack")),
                label=label)
            async with Rig(tmp_path, spec) as rig:
                rig.deliver("ERROR one")
                await rig.wait("action-result", 3)
        asyncio.run(body())
        sent = [r.body for r in rx.requests]
    shown = json.loads(out.read_text())["env"]["WATCHRUN_LABEL"]
    labels = [shown, *(json.loads(b).get("watcher", {}).get("label", "") for b in sent)]
    slack = next(json.loads(b)["text"] for b in sent if b"text" in b)
    for text in [*labels, slack]:
        assert not any(c in text for c in "\x1b\x07\x9b"), text
    # its controls shown escaped, as `status` shows the label: inert text, none of it dropped
    assert shown == "deploy \\u001b]0;pwned\\u0007\\u001b[31mred\\u001b[0m\n\u202eevil\\u009b2J"


def test_what_a_program_leaves_running_is_stopped_and_said(tmp_path: Path) -> None:
    """A program's tree was stopped when it exited, so a background job it left (`cmd &`, with
    its output elsewhere or holding the pipe) was killed with nothing to say so: the result was
    a plain `ok`. Now it is stopped as before and counted (`leftRunning`) and logged."""
    away = "sleep 30 >/dev/null 2>&1 & echo $! > away.pid; exit 0"
    holds = "sleep 30 & echo $! > holds.pid; echo started; exit 0"

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", away, name="away"),
                       program(tmp_path, "sh", "-c", holds, name="holds"),
                       program(tmp_path, "true", name="clean"))
        async with Rig(tmp_path, spec) as rig:
            rig.deliver("ERROR x")
            await rig.wait("action-result", 3)
            by = {r["action"]: r for r in rig.records("action-result")}
            for name in ("away", "holds"):
                assert (by[name]["status"], by[name]["exitCode"]) == ("ok", 0)
                assert by[name]["leftRunning"] == 1
                assert not alive(int((tmp_path / f"{name}.pid").read_text()))
            assert by["holds"]["output"] == "started"
            assert "leftRunning" not in by["clean"]
            log = rig.log.getvalue()
            assert "warning: action away firing 1: ok, exit code 0" in log
            assert "1 process it left running was stopped" in log
    asyncio.run(body())


def test_matches_of_a_watcher_a_reload_changed_are_recorded_as_unfired(tmp_path: Path) -> None:
    """A watcher a reload changed reads on until it stops; its matches meanwhile fired nothing
    and nothing said so. They are counted as dropped and written before its `stop`."""
    async def body() -> None:
        rig = Rig(tmp_path, watcher(program(tmp_path, "true")))
        async with rig:
            changed = msgspec.structs.replace(rig.spec, label="relabelled")
            await rig.hub.reload(msgspec.structs.replace(rig.hub.config, watchers=(changed,)))
            rig.deliver("ERROR 1", "ERROR 2")  # (the old watcher, still reading)
            await rig.hub.record_unfired("app", rig.stream)  # (as its stop does)
            (late,) = rig.records("action-dropped")
            assert (late["reason"], late["count"], late["matches"]) == (  # (its action as it
                "watcher-restarted", 1, 2)  # was: the watcher restarted, not the action)
            assert late["message"] == ("2 matches came after the actions stopped (a reload had "
                                       "restarted the watcher): nothing fired for them")
            assert rig.records("action-fired") == []
            assert rig.hub.counts()["app"]["run"]["dropped"] == 1
            await rig.hub.record_unfired("app", rig.stream)  # written once
            assert len(rig.records("action-dropped")) == 1
    asyncio.run(body())


def test_a_stop_on_a_full_disk_does_not_wait_for_the_action_records(
        tiny_fs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At a stop the actions' last records (a cancelled result, what was dropped) are written
    before the watchers stop, and a live runner's writes retry a failing disk for as long as it
    takes: on a full disk the stop waited for space forever, a second SIGTERM too. They are
    retried for CLOSE_WRITE_S now, then given up (said in the log; their seqs get a `gap`)."""
    import watchrun.actions.watcher_actions as watcher_actions

    monkeypatch.setattr(watcher_actions, "CLOSE_WRITE_S", 0.3)
    pidfile = tiny_fs / "pid"

    async def body() -> None:
        rig = Rig(tiny_fs, sleeper(tiny_fs, pidfile))
        async with rig:
            rig.deliver("ERROR x")
            await rig.wait("action-fired")
            await until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the pid")
            room = 4096 - rig.path.stat().st_size % 4096  # (in the file's last tmpfs page)
            rig.stream.sink.write("error", {"code": "pad", "message": "x" * (room - 150)})
            fill(tiny_fs)  # (the next record needs a page: ENOSPC)
            await asyncio.wait_for(rig.hub.shutdown(), 5.0)
        assert not alive(int(pidfile.read_text()))
        assert "action record(s) given up" in rig.log.getvalue()
    asyncio.run(body())


def test_a_firing_is_recorded_before_the_drops_it_causes(tmp_path: Path) -> None:
    """`queue: 0`: the first match goes out, the next one, while it runs, is dropped. The
    `action-dropped` record came first (the firing waited in the queue for its worker to run)
    and the firing said `dropped: 1`, as if dropped before it."""
    gate = tmp_path / "go"
    script = f"while [ ! -e {gate} ]; do sleep 0.02; done"

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", script, queue=0, concurrency=1))
        async with Rig(tmp_path, spec) as rig:
            await until(lambda: rig.hub.running, "the hub to run")
            rig.deliver("ERROR 1")
            rig.deliver("ERROR 2")  # (before the first one's worker ran)
            await rig.wait("action-dropped")
            gate.touch()
            await rig.wait("action-result")
            kinds = [(r["kind"], r.get("firing"), r.get("dropped"), r.get("count"))
                     for r in rig.records() if r["kind"].startswith("action-")]
            assert kinds == [("action-fired", 1, 0, 1), ("action-dropped", None, None, 1),
                             ("action-result", 1, None, None)], kinds
    asyncio.run(body())


def test_a_second_worker_takes_a_firing_while_the_first_has_not_run(tmp_path: Path) -> None:
    """`queue: 0, concurrency: 2`: two matches in a row. The first firing was counted twice
    until its worker ran (in the queue, and as the worker), so the second was dropped with a
    worker free."""
    gate = tmp_path / "go"
    script = f"touch started.$WATCHRUN_FIRING; while [ ! -e {gate} ]; do sleep 0.02; done"

    async def body() -> None:
        spec = watcher(program(tmp_path, "sh", "-c", script, queue=0, concurrency=2))
        async with Rig(tmp_path, spec) as rig:
            await until(lambda: rig.hub.running, "the hub to run")
            rig.deliver("ERROR 1")
            rig.deliver("ERROR 2")
            await until(lambda: len(list(tmp_path.glob("started.*"))) == 2, "two running")
            gate.touch()
            results = await rig.wait("action-result", 2)
            assert {r["status"] for r in results} == {"ok"}
            assert rig.records("action-dropped") == []
    asyncio.run(body())


def test_a_firing_whose_worker_never_ran_still_gets_its_result(tmp_path: Path) -> None:
    """A firing went out (`action-fired`) and its worker was cancelled before it ran (a stop
    in the same turn of the loop): its `action-result` says `cancelled`, none is missing, and
    the worker no longer counts as busy."""
    records: list[tuple[str, dict[str, Any]]] = []

    class Host:
        clock, log, redactor, running = SystemClock(), RunLog(stream=io.StringIO()), \
            Redactor(()), True

        def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
            return asyncio.ensure_future(coro)

        async def execute(self, *args: Any) -> Result:
            raise AssertionError("never carried out")

    async def body() -> None:
        spec = program(tmp_path, "true")
        action = ActionRuntime(watcher(spec), spec, Host(),  # type: ignore[arg-type]
                               lambda kind, fields: records.append((kind, fields)), {}, 10)
        action.offer(Rig(tmp_path, watcher(spec)).matches("ERROR 1"))
        (worker,) = action.workers
        worker.cancel()  # (before it ran)
        await asyncio.gather(worker, return_exceptions=True)
        assert [(k, f["firing"], f.get("status")) for k, f in records] == [
            ("action-fired", 1, None), ("action-result", 1, "cancelled")]
        assert not action.busy
    asyncio.run(body())


class _Quiet:
    """What `run_program` reads of a firing: no lines."""

    def stdin(self) -> bytes:
        return b""

    def environ(self) -> dict[str, str]:
        return {}


def test_a_program_cancelled_while_it_starts_gets_its_grace(tmp_path: Path) -> None:
    """A stop that came while the program was still being started (it ran already, the
    spawn had not returned: a loaded host) killed it at once, with no SIGTERM and no grace, and
    the actions' stop did not wait for it (a loaded suite's flaky test). Now it is stopped as a
    running program is: SIGTERM, its grace, then the cancel goes on."""
    from watchrun.actions.program import run_program
    from watchrun.config.model import ActionSpec
    from watchrun.process.spawn import Spawner

    pidfile, termed = tmp_path / "pid", tmp_path / "termed"
    script = f"trap 'echo yes > {termed}; exit 0' TERM; echo $$ > {pidfile}; " \
        "while :; do sleep 0.05; done"
    gate = asyncio.Event()

    class SlowToReturn(Spawner):  # the child runs; the start returns once the gate opens
        async def _start(self, *args: Any) -> Any:
            proc = await super()._start(*args)
            await gate.wait()
            return proc

    async def body() -> None:
        spec = ActionSpec(name="p", type="exec", command=("sh", "-c", script))
        task = asyncio.ensure_future(run_program(spec, _Quiet(), SlowToReturn(), 5.0,
                                                 Redactor(())))  # type: ignore[arg-type]
        await until(lambda: pidfile.exists() and bool(pidfile.read_text().strip()),
                    "the program to run")
        task.cancel()
        await asyncio.sleep(0)  # (the cancel lands while the start is held)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert termed.read_text() == "yes\n"  # SIGTERM came first, and it could act on it
        assert not alive(int(pidfile.read_text()))
    asyncio.run(body())
