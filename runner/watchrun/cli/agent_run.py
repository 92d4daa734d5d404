"""`watchrun agent run NAME [--prompt TEXT]`: one turn in the foreground, without a runner."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from watchrun.agents.prompt import render_prompt
from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder, read_history
from watchrun.agents.turn import TurnResult, TurnRunner
from watchrun.clock import SystemClock
from watchrun.config import load_config
from watchrun.config.model import AgentSpec, Config
from watchrun.output.outdir import OutputDirError, OutputLayout, prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.process.spawn import Spawner

__all__ = ["cmd_agent_run", "manual_prompt", "run_one_turn"]

MANUAL = {"matches": "", "watcher": "", "label": "manual", "count": "0"}


def manual_prompt(spec: AgentSpec) -> str:
    """The agent's prompt template with its placeholders empty (label `manual`, count 0)."""
    return render_prompt(spec.prompt, MANUAL)


def _error(message: str) -> None:
    print(f"watchrun: error: {message}", file=sys.stderr)


def _live(layout: OutputLayout) -> bool:
    from watchrun.runtime.control import is_live

    return is_live(layout.control_socket)  # any path length (AF_UNIX limit)


async def run_one_turn(config: Config, spec: AgentSpec, layout: OutputLayout, prompt: str,
                       log: RunLog) -> TurnResult:
    """One turn of `spec`, recorded in its JSONL; SIGINT/SIGTERM abort it (`cancelled`)."""
    clock = SystemClock()
    out = config.output
    sink = JsonlSink(layout.jsonl("agent", spec.name), spec.name, max_bytes=out.max_bytes,
                     keep=out.keep, clock=clock)
    rec = Recorder(sink, log, spec.name, max_bytes=config.limits.max_line_bytes)
    tracker = UsageTracker()
    read_history(rec, tracker, clock)
    runner = TurnRunner(spec, config.limits, rec, Spawner(), clock, tracker)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, runner.abort, f"interrupted ({sig.name})")
    try:
        return await runner.run(prompt, trigger="manual")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await rec.close()


def cmd_agent_run(args: argparse.Namespace) -> int:
    """Exit 0 when the turn is done (the reply is printed), 1 when it failed, 130 when it was
    interrupted, 2 for a config error or an unknown agent, 3 when it cannot run at all."""
    loaded = load_config([Path(p) for p in args.config], output_dir=args.output_dir)
    for d in loaded.diagnostics:
        print(d.format(), file=sys.stderr)
    config = loaded.config
    if config is None:
        return 2
    spec = config.agent(args.name)
    if spec is None:
        known = ", ".join(a.name for a in config.agents) or "(none: the config has no agents)"
        _error(f"no agent named {args.name!r}; known agents: {known}")
        return 2
    try:
        layout = prepare_output_dir(config.output.dir)
    except OutputDirError as exc:
        _error(str(exc))
        return 3
    if _live(layout):
        _error(f"a runner is live on {layout.control_socket} and owns {spec.name}'s records; "
               f"use `watchrun agent send {spec.name} TEXT` instead")
        return 3
    prompt = args.prompt if args.prompt is not None else manual_prompt(spec)
    log = RunLog("text")
    try:
        result = asyncio.run(run_one_turn(config, spec, layout, prompt, log))
    except SinkWriteError as exc:
        _error(f"cannot write {spec.name}'s records: {exc}")
        return 3
    if result.reply:
        sys.stdout.write(result.reply if result.reply.endswith("\n") else result.reply + "\n")
        sys.stdout.flush()
    if result.status == "done":
        return 0
    why = (result.error or {}).get("message", "no reason recorded")
    _error(f"agent {spec.name}: {result.turn_id} {result.status}: {why}")
    return 130 if result.status == "cancelled" else 1
