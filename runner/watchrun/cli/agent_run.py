"""`watchrun agent run NAME [--prompt TEXT]`: one turn in the foreground, without a runner."""

from __future__ import annotations

import argparse
import asyncio
import functools
import signal
import sys
from pathlib import Path
from typing import Any

from watchrun.agents.prompt import render_prompt
from watchrun.agents.recorder import open_recorder
from watchrun.agents.streamlock import StreamBusyError
from watchrun.agents.tally import REPLY_BYTES
from watchrun.agents.turn import TurnResult, TurnRunner
from watchrun.cli.emit import Out, config_failed
from watchrun.clock import SystemClock
from watchrun.config import load_config
from watchrun.config.model import AgentSpec, Config
from watchrun.match.sanitize import edge_name, edge_text
from watchrun.output.outdir import OutputDirError, OutputLayout, prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.output.safefs import UnsafePathError
from watchrun.output.sink import SinkWriteError
from watchrun.process.groups import GroupRegistry, agent_processes, end_leftovers
from watchrun.process.guard_lazy import LazyGuardian
from watchrun.process.spawn import Spawner, become_subreaper
from watchrun.runtime.signals import handle_signals
from watchrun.runtime.workers import Workers, run_with_workers, stuck_message

__all__ = ["cmd_agent_run", "manual_prompt", "run_one_turn", "turn_doc"]

MANUAL = {"matches": "", "watcher": "", "label": "manual", "count": "0"}


def manual_prompt(spec: AgentSpec) -> str:
    """The agent's prompt template with its placeholders empty (label `manual`, count 0)."""
    return render_prompt(spec.prompt, MANUAL)


def _error(message: str) -> None:
    print(f"watchrun: error: {edge_text(message)}", file=sys.stderr)


def _live(layout: OutputLayout) -> bool:
    from watchrun.runtime.client import is_live

    return is_live(layout.control_socket)  # any path length (AF_UNIX limit)


async def run_one_turn(config: Config, spec: AgentSpec, layout: OutputLayout, prompt: str,
                       log: RunLog) -> tuple[TurnResult, str | None]:
    """One turn of `spec`, recorded in its JSONL; SIGINT/SIGTERM abort it (`cancelled`), and
    another while it is stopping kills what remains at once. Also why its records were given
    up (a disk failing for `limits.onceWriteTimeout`), or None."""
    clock = SystemClock()
    rec, history = await open_recorder(  # (one turn: it must end, failing disk or not)
        layout.jsonl("agent", spec.name), spec.name, config.output,
        config.limits.max_line_bytes, log, clock, give_up_after=config.limits.once_write_ms / 1000)
    guardian, registry = await _own_processes(layout, spec.name,
                                              config.limits.stop_timeout_ms / 1000, log)
    spawner = Spawner(registry)
    runner = TurnRunner(spec, config.limits, rec, spawner, clock, history.tracker)

    def interrupted(sig: signal.Signals) -> None:
        if runner.stop_reason is not None:  # stopping already: no more grace
            spawner.kill_all()
        runner.abort(f"interrupted ({sig.name})", "interrupted")

    restore = handle_signals(asyncio.get_running_loop(), {
        sig: functools.partial(interrupted, sig) for sig in (signal.SIGINT, signal.SIGTERM)})
    try:
        result = await runner.run(prompt, trigger="manual")
    finally:
        restore()
        guardian.unwatch()
        await asyncio.to_thread(guardian.close)
        await rec.close()
    return result, rec.failed


async def _own_processes(layout: OutputLayout, name: str, grace_s: float, log: RunLog
                         ) -> tuple[LazyGuardian, GroupRegistry]:
    """As a runner owns its children (runtime/startup.py): what a SIGKILLed `agent run` of
    this agent left running is ended first (its groups file, read once the stream's lock is
    ours), and this turn's groups are recorded there and told to a guardian that ends them if
    this process is SIGKILLed."""
    path = layout.state / agent_processes(name)
    try:
        pid, ended = await asyncio.to_thread(end_leftovers, path, grace_s)
    except UnsafePathError as exc:
        log.warning(f"{edge_name(exc.filename)}: {exc.strerror}; not trusted, so no process it "
                    "names is ended", name)
    else:
        if ended:
            log.warning(f"ended {ended} processes left running by a previous `agent run` "
                        f"(pid {pid}) of {name}", name)
    guardian = LazyGuardian(lambda text: log.warning(text, name),
                            "if this process is SIGKILLed, the processes the agent started are "
                            "left running (the agent itself still dies with it; the next "
                            "`agent run` of it or runner of this output dir ends the rest)",
                            lambda text: log.info(text, name))
    registry = GroupRegistry(path, guardian.tell, log.warning, guardian.start)
    guardian.known = registry.groups.values
    return guardian, registry


def turn_doc(name: str, result: TurnResult) -> dict[str, Any]:
    """`agent run --json`: how the turn ended, camelCase (docs/cli.md). `failure` is why it did
    not complete (null when done); the exit status says the same (0 done, 1 failed)."""
    u = result.usage
    return {"name": name, "turnId": result.turn_id, "status": result.status,
            "completed": result.completed, "reply": result.reply,
            "replyTruncated": result.reply_truncated,
            "usage": {"input": u.input, "cached": u.cached, "output": u.output,
                      "complete": u.complete},
            "tokens": u.tokens, "exitCode": result.exit_code, "signal": result.signal,
            "durationMs": result.duration_ms, "stopReason": result.stop_reason,
            "failure": result.error}


def cmd_agent_run(args: argparse.Namespace) -> int:
    """Exit 0 when the turn is done (the reply is printed), 1 when it failed, 130 when it was
    interrupted, 2 for a config error or an unknown agent, 3 when it cannot run at all (its
    command cannot start; another process, `agent run` or a runner, writing the agent's
    records)."""
    out = Out.for_args(args)
    loaded = load_config([Path(p) for p in args.config], output_dir=args.output_dir,
                         cache=True)
    if loaded.config is None:
        return config_failed(out, loaded.diagnostics)
    for d in loaded.diagnostics:
        print(edge_text(d.format()), file=sys.stderr)
    config = loaded.config
    spec = config.agent(args.name)
    if spec is None:
        known = [a.name for a in config.agents]
        return out.fail("not_found", f"no agent named {args.name!r}; known agents: "
                        f"{', '.join(known) or '(none: the config has no agents)'}",
                        name=args.name, known=known)
    try:
        layout = prepare_output_dir(config.output.dir)
    except OutputDirError as exc:
        return out.fail("output_dir", str(exc))
    if _live(layout):
        return out.fail("runner_live", f"a runner is live on {layout.control_socket} and owns "
                        f"{spec.name}'s records; use `watchrun agent send {spec.name} TEXT` "
                        "instead")
    prompt = args.prompt if args.prompt is not None else manual_prompt(spec)
    log = RunLog("text")
    become_subreaper()  # an orphan the agent leaves comes to us: its turn's end stops it
    workers = Workers()  # (a call stuck in a dead file system cannot hold the exit)
    try:
        result, lost = run_with_workers(run_one_turn(config, spec, layout, prompt, log), workers)
    except StreamBusyError as exc:
        return out.fail("agent_busy", str(exc), name=spec.name, pid=exc.pid)
    except SinkWriteError as exc:
        return out.fail("write_failed", f"cannot write {spec.name}'s records: {exc}")
    if workers.stuck:  # its records may not all be on disk: never a clean exit
        return out.fail("stuck_calls", f"agent {spec.name}: {result.turn_id} "
                        f"{result.status}, then {stuck_message(workers.stuck)}",
                        calls=workers.stuck)
    if lost is not None:  # a turn whose records were given up is no turn to report
        return out.fail("write_failed", f"agent {spec.name}: {lost}")
    status = 0 if result.status == "done" else 130 if result.status == "cancelled" else \
        1 if result.started else 3  # (a command that cannot start is a runtime failure)
    if out.as_json:
        out.doc(turn_doc(spec.name, result))
    elif result.reply:
        out.block(edge_text(result.reply, multiline=True))
    sys.stdout.flush()
    if result.reply_truncated and not out.as_json:
        print(f"watchrun: agent {spec.name}: the answer was longer than is kept "
              f"({REPLY_BYTES // 1024} KiB, or limits.maxLineBytes): this is its start",
              file=sys.stderr)
    if status:
        why = (result.error or {}).get("message", "no reason recorded")
        _error(f"agent {spec.name}: {result.turn_id} {result.status}: {why}")
    return status
