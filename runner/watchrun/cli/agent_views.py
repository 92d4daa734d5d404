"""Handlers of `watchrun agent watch | transcript | list`: read the output dir, print a view.

Where: `-c FILE…` (the config names the agents and the output dir; `--output-dir` overrides
it), or `--output-dir DIR` alone (agents are the `agents/*.jsonl` files there, the provider
the one their last dispatch-start names); without either, `main` found ./watch.yaml (or says
there is none). A live runner is not needed.

`watch` and `transcript` print the seed-shaped JSON by default (`--format text` for a
person); `list` prints a table (`--json` for `{"agents": [...]}`, camelCase). A view error is
printed as `{"error": {"code", "message", ...}}` on stdout in JSON mode (one JSON document
either way), or as `watchrun: error: CODE: MESSAGE` on stderr in text mode; exit status per
`view_window.EXIT_STATUS`. An invalid config is `config_invalid` (exit 2): its errors on
stderr, or in the error document.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from msgspec import Struct

from watchrun.cli.emit import Out, config_failed
from watchrun.exitcodes import ExitStatus
from watchrun.output.backward import last_records
from watchrun.output.outdir import layout_for
from watchrun.output.records import ID_PATTERN, iter_records, stream_ids
from watchrun.views.agent_wait import parse_until, wait_until
from watchrun.views.agent_watch import build_watch, parse_include
from watchrun.views.agent_window import ViewError, settled, writer_gone
from watchrun.views.humanize import no_paint, paint
from watchrun.views.parent import AgentStream, build_agent_transcript, build_run_transcript
from watchrun.views.render import dumps, render_list, render_transcript, render_watch
from watchrun.views.transcript import summarize

__all__ = ["AgentRef", "cmd_agent_list", "cmd_agent_transcript", "cmd_agent_watch",
           "cmd_transcript"]


class AgentRef(Struct, frozen=True):
    """An agent as the views know it: from the config, or only from its JSONL file."""

    name: str
    provider: str
    workspace: str | None = None


class _ConfigInvalid(Exception):
    """The config has errors; they were printed, `status` is the exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _where(args: argparse.Namespace, out: Out) -> tuple[Path, dict[str, AgentRef]]:
    """(output dir, agents by name) from the config (`-c`, or the one `main` found) or from
    `--output-dir` alone."""
    configs = list(getattr(args, "config", None) or [])
    output_dir = getattr(args, "output_dir", None)
    if not configs:
        if output_dir is None:
            raise ViewError("not_found", "no config: pass -c FILE or --output-dir DIR")
        root = Path(output_dir)
        found = stream_ids(root / "agents")
        return root, {n: AgentRef(n, _provider(root, n)) for n in found if _valid_id(n)}
    from watchrun.config import load_config

    result = load_config(configs, output_dir=output_dir, cache=True)
    if result.config is None:
        raise _ConfigInvalid(config_failed(out, result.diagnostics))
    agents = {a.name: AgentRef(a.name, a.provider, str(a.cwd)) for a in result.config.agents}
    return result.config.output.dir, agents


def _provider(root: Path, name: str) -> str:
    """The provider its last dispatch-start names (the runner records it), else "unknown"."""
    start = last_records(layout_for(root).jsonl("agent", name), 1, {"dispatch-start"})
    provider = start[0].get("provider") if start else None
    return provider if isinstance(provider, str) and provider else "unknown"


def _valid_id(name: str) -> bool:
    return re.fullmatch(ID_PATTERN, name) is not None


def _agent(agents: dict[str, AgentRef], name: str) -> AgentRef:
    agent = agents.get(name)
    if agent is None:
        known = ", ".join(sorted(agents)) or "none"
        raise ViewError("not_found", f"no agent named {name!r} (known agents: {known})",
                        name=name, known=sorted(agents))
    return agent


def _tail(value: Any) -> int | None:
    if value is None:
        return None
    from watchrun.config.units import parse_size

    try:
        tail = value if isinstance(value, int) else int(value) if re.fullmatch(
            r"-?\d+", str(value)) else parse_size(value)
    except ValueError as exc:
        raise ViewError("invalid_argument", f"--tail {value!r}: {exc}") from None
    if tail < 0:
        raise ViewError("invalid_argument", f"--tail {tail}: must be 0 or more bytes")
    return tail


def _timeout_s(value: Any) -> float:
    from watchrun.config.units import parse_duration

    try:
        return parse_duration("10m" if value is None else value) / 1000
    except ValueError as exc:
        raise ViewError("invalid_argument", f"--timeout {value!r}: {exc}") from None


def _run(args: argparse.Namespace, body: Any) -> int:
    """Run `body(out)` (returns the text to print), turning failures into printed errors:
    `{"error": {...}}` on stdout in JSON mode, `watchrun: error: …` on stderr otherwise."""
    out = Out.for_args(args)
    try:
        text = body(out)
    except _ConfigInvalid as exc:
        return exc.status
    except ViewError as exc:
        return _fail(out, exc)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return out.fail("read_failed", f"{where}{exc.strerror or exc}")
    out.block(text)
    return ExitStatus.OK


def _fail(out: Out, exc: ViewError) -> int:
    out.fail(exc.code, exc.message if out.as_json else f"{exc.code}: {exc.message}",
             **exc.extra)
    return exc.exit_status


def cmd_agent_watch(args: argparse.Namespace) -> int:
    """`watchrun agent watch NAME [--include L] [--raw] [--since C] [--tail N] [--until X]`."""

    def body(out: Out) -> str:
        include = parse_include(getattr(args, "include", None) or [],
                                bool(getattr(args, "raw", False)))
        tail = _tail(getattr(args, "tail", None))
        until, since = getattr(args, "until", None), getattr(args, "since", None)
        timeout_s = _timeout_s(getattr(args, "timeout", None))  # (checked without --until too)
        if until:
            parse_until(until)
        root, agents = _where(args, out)
        agent = _agent(agents, args.name)
        path = layout_for(root).jsonl("agent", agent.name)
        anchor = None
        if until:
            anchor = wait_until(path, until, since_cursor=since, timeout_s=timeout_s)["anchor"]
        view = build_watch(path, agent, include=include, since=since, tail=tail,
                           anchor=anchor if since is None else None)
        return dumps(view) if out.as_json else render_watch(view)

    return _run(args, body)


def cmd_agent_transcript(args: argparse.Namespace) -> int:
    """`watchrun agent transcript NAME [--format json|text]`."""

    def body(out: Out) -> str:
        root, agents = _where(args, out)
        agent = _agent(agents, args.name)
        streams = _streams(root, agents)
        own = streams.pop(agent.name)
        doc = build_agent_transcript(own, [*streams.values(), *_removed(root, agents)])
        return dumps(doc) if out.as_json else render_transcript(doc)

    return _run(args, body)


def _streams(root: Path, agents: dict[str, AgentRef]) -> dict[str, AgentStream]:
    """Each agent's records, read when iterated (plans need the other agents' streams)."""
    layout = layout_for(root)
    paths = {a.name: layout.jsonl("agent", a.name) for a in agents.values()}
    return {a.name: AgentStream(a.name, a.provider, iter_records(paths[a.name]), a.workspace,
                                gone=writer_gone(paths[a.name])) for a in agents.values()}


def _removed(root: Path, agents: dict[str, AgentRef]) -> list[AgentStream]:
    """The streams in the output dir of agents the config no longer has: a plan's step whose
    agent a reload removed is recorded there (`dropped`, agent-removed)."""
    names = [n for n in stream_ids(root / "agents") if n not in agents and _valid_id(n)]
    return list(_streams(root, {n: AgentRef(n, _provider(root, n)) for n in names}).values())


def cmd_transcript(args: argparse.Namespace) -> int:
    """`watchrun transcript [--format json|text]`: every agent's turns, each plan as one turn."""

    def body(out: Out) -> str:
        root, agents = _where(args, out)
        configs = list(getattr(args, "config", None) or [])
        workspace = str(Path(configs[0]).resolve().parent) if configs else str(root)
        doc = build_run_transcript(_streams(root, agents).values(), workspace,
                                   _removed(root, agents))
        return dumps(doc) if out.as_json else render_transcript(doc)

    return _run(args, body)


LIST_KEYS = {"last_status_at": "lastStatusAt", "last_reply": "lastReply",
             "last_activity": "lastActivity", "last_turn": "lastTurn", "last_error": "lastError"}
"""`agent list --json` rows are camelCase like every CLI document (docs/cli.md)."""


def list_row(row: dict[str, Any]) -> dict[str, Any]:
    return {LIST_KEYS.get(k, k): v for k, v in row.items()}


def cmd_agent_list(args: argparse.Namespace) -> int:
    """`watchrun agent list [--json]`: every agent's status, turns, tokens and last reply."""

    def body(out: Out) -> str:
        root, agents = _where(args, out)
        layout = layout_for(root)
        rows = []
        for a in agents.values():
            path = layout.jsonl("agent", a.name)
            row = summarize(iter_records(path), a.name, a.provider)
            rows.append(list_row({**row, "status": settled(row["status"], path)}))
        if out.as_json:
            return dumps({"agents": rows})
        return render_list(rows, datetime.now(UTC), paint if out.colour else no_paint,
                           out.stdout.encoding)

    return _run(args, body)
