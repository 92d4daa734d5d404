"""`watchrun agent …`: dispatch to the views and `agent run`; `agent send/stop` to the runner."""

from __future__ import annotations

import argparse
from typing import Any

from watchrun.cli.asking import Unanswered, ask
from watchrun.cli.emit import Out
from watchrun.cli.ops import (
    Where,
    _code,
    _done,
    _no_runner,
    _refused,
    resolve,
)


def _known_agents(where: Where) -> list[str]:
    from watchrun.output.records import stream_ids

    if where.config is not None:
        return sorted(a.name for a in where.config.agents)
    try:
        return stream_ids(where.root / "agents")
    except OSError:
        return []


def _agent_control(args: argparse.Namespace, out: Out) -> int:
    """`agent send NAME TEXT` / `agent stop NAME`: an agent nobody knows is exit 2 before the
    runner is asked; stopping an agent without a running turn is a success that says so."""
    where = resolve(args, out)
    if isinstance(where, int):
        return where
    name, action = args.name, args.agent_command
    known = _known_agents(where)
    if name not in known:
        return out.fail("not_found", f"no agent named {name!r} (known agents: "
                        f"{', '.join(known) or 'none'})", name=name, known=known)
    payload: dict[str, Any] = {"cmd": f"agent-{action}", "name": name}
    if action == "send":
        payload["text"] = args.text
        reply = ask(where.root, payload)
        if reply is None:
            return _no_runner(out, where.root)
        if not reply.get("ok"):
            return _refused(out, reply)
        did = reply.get("deliveryId")
        return _done(out, {"name": name, "queued": True, "deliveryId": did,
                           "message": f"queued for {name} as {did}"})
    reply = ask(where.root, payload)
    if reply is not None and reply.get("ok"):
        return _done(out, {"name": name, "stopped": True,
                           "message": str(reply.get("message", f"stopped {name}'s turn"))})
    if reply is not None and _code(reply) != "not_found":
        return _refused(out, reply)
    if reply is None:  # no runner: an `agent run` may have the agent
        from watchrun.agents.streamlock import held_by
        from watchrun.output.flocks import pid_said

        busy = held_by(where.root / "agents" / f"{name}.jsonl", name)
        if busy is not None:  # (its pid as seen here: one written in a container may be init)
            how = f"`kill -INT {busy.pid}`" if busy.pid else "`kill -INT` its pid there"
            return out.fail("agent_busy", f"{name}'s turn is run by another process "
                            f"({pid_said(busy.pid)}), not a runner: stop it with Ctrl-C "
                            f"there, or {how}", name=name, pid=busy.pid)
    why = "no runner is live on this output dir" if reply is None else "nothing to stop"
    return _done(out, {"name": name, "stopped": False,
                       "message": f"{name} has no running turn ({why})"})


def cmd_agent(args: argparse.Namespace) -> int:
    action = args.agent_command
    if action == "run":
        from watchrun.cli.agent_run import cmd_agent_run

        return cmd_agent_run(args)
    if action in ("send", "stop"):
        out = Out.for_args(args)
        try:
            return _agent_control(args, out)
        except Unanswered as exc:
            return exc.fail(out)
    from watchrun.cli import agent_views as view_cmd

    handler = {"list": view_cmd.cmd_agent_list, "watch": view_cmd.cmd_agent_watch,
               "transcript": view_cmd.cmd_agent_transcript}[action]
    return int(handler(args))
