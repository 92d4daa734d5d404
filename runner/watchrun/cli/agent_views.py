"""Handlers of `watchrun agent watch | transcript | list`: read the output dir, print a view.

Where: `-c FILE…` (the config names the agents and the output dir; `--output-dir` overrides
it), or `--output-dir DIR` alone (agents are the `agents/*.jsonl` files there, the provider
the one their last dispatch-start names), or else `./watch.yaml`. A live runner is not needed.

`watch` and `transcript` print JSON by default (`--format text` for a person); `list` prints
a table (`--json` / `--format json` for JSON). A view error is printed as
`{"error": {"code", "message", ...}}` on stdout in JSON mode (one JSON document either way),
or as `watchrun: error: CODE: MESSAGE` on stderr in text mode; exit status per
`view_window.EXIT_STATUS`. An invalid config prints its diagnostics on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchrun.exitcodes import ExitStatus
from watchrun.output.outdir import layout_for
from watchrun.output.records import ID_PATTERN, iter_records, last_records
from watchrun.views.agent_wait import parse_until, wait_until
from watchrun.views.agent_watch import build_watch, parse_include
from watchrun.views.agent_window import ViewError
from watchrun.views.parent import AgentStream, build_agent_transcript, build_run_transcript
from watchrun.views.render import dumps, render_list, render_transcript, render_watch
from watchrun.views.transcript import summarize

__all__ = ["AgentRef", "cmd_agent_list", "cmd_agent_transcript", "cmd_agent_watch",
           "cmd_transcript"]


@dataclass(frozen=True, slots=True)
class AgentRef:
    """An agent as the views know it: from the config, or only from its JSONL file."""

    name: str
    provider: str
    workspace: str | None = None


class _ConfigInvalid(Exception):
    """The config has errors; its diagnostics were printed."""


def _where(args: argparse.Namespace) -> tuple[Path, dict[str, AgentRef]]:
    """(output dir, agents by name) from the config or the output dir."""
    configs = list(getattr(args, "config", None) or [])
    output_dir = getattr(args, "output_dir", None)
    if not configs and output_dir is None:
        if not Path("watch.yaml").is_file():
            raise ViewError("not_found", "no config: use -c FILE or --output-dir DIR "
                            "(./watch.yaml does not exist)")
        configs = [Path("watch.yaml")]
    if not configs and output_dir is not None:
        root = Path(output_dir)
        found = sorted(p.name.removesuffix(".jsonl") for p in (root / "agents").glob("*.jsonl"))
        return root, {n: AgentRef(n, _provider(root, n)) for n in found if _valid_id(n)}
    from watchrun.config import load_config

    result = load_config(configs, output_dir=output_dir)
    for d in result.diagnostics:
        print(d.format(), file=sys.stderr)
    if result.config is None:
        raise _ConfigInvalid
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


def _fmt(args: argparse.Namespace, default: str) -> str:
    if getattr(args, "json", False) is True:
        return "json"
    fmt = getattr(args, "format", None)
    return fmt if fmt in ("json", "text") else default


def _fail(exc: ViewError, fmt: str) -> int:
    if fmt == "json":
        print(dumps(exc.to_dict()))
    else:
        print(f"watchrun: error: {exc.code}: {exc.message}", file=sys.stderr)
    return exc.exit_status


def _tail(value: Any) -> int | None:
    if value is None:
        return None
    from watchrun.config.units import parse_size

    try:
        tail = value if isinstance(value, int) else parse_size(value)
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


def _run(args: argparse.Namespace, fmt: str, body: Any) -> int:
    """Run `body()` (returns the text to print), turning failures into printed errors."""
    try:
        sys.stdout.write(body())
        return ExitStatus.OK
    except _ConfigInvalid:
        return ExitStatus.USAGE
    except ViewError as exc:
        return _fail(exc, fmt)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(ViewError("read_failed", f"{where}{exc.strerror or exc}"), fmt)


def cmd_agent_watch(args: argparse.Namespace) -> int:
    """`watchrun agent watch NAME [--include L] [--raw] [--since C] [--tail N] [--until X]`."""
    fmt = _fmt(args, "json")

    def body() -> str:
        include = parse_include(getattr(args, "include", None) or [],
                                bool(getattr(args, "raw", False)))
        tail = _tail(getattr(args, "tail", None))
        until, since = getattr(args, "until", None), getattr(args, "since", None)
        timeout_s = _timeout_s(getattr(args, "timeout", None)) if until else 0.0
        if until:
            parse_until(until)
        root, agents = _where(args)
        agent = _agent(agents, args.name)
        path = layout_for(root).jsonl("agent", agent.name)
        anchor = None
        if until:
            anchor = wait_until(path, until, since_cursor=since, timeout_s=timeout_s)["anchor"]
        view = build_watch(path, agent, include=include, since=since, tail=tail,
                           anchor=anchor if since is None else None)
        return dumps(view) + "\n" if fmt == "json" else render_watch(view)

    return _run(args, fmt, body)


def cmd_agent_transcript(args: argparse.Namespace) -> int:
    """`watchrun agent transcript NAME [--format json|text]`."""
    fmt = _fmt(args, "json")

    def body() -> str:
        root, agents = _where(args)
        agent = _agent(agents, args.name)
        streams = _streams(root, agents)
        doc = build_agent_transcript(streams.pop(agent.name), streams.values())
        return dumps(doc) + "\n" if fmt == "json" else render_transcript(doc)

    return _run(args, fmt, body)


def _streams(root: Path, agents: dict[str, AgentRef]) -> dict[str, AgentStream]:
    """Each agent's records, read when iterated (plans need the other agents' streams)."""
    layout = layout_for(root)
    return {a.name: AgentStream(a.name, a.provider, iter_records(layout.jsonl("agent", a.name)),
                                a.workspace) for a in agents.values()}


def cmd_transcript(args: argparse.Namespace) -> int:
    """`watchrun transcript [--format json|text]`: every agent's turns, each plan as one turn."""
    fmt = _fmt(args, "json")

    def body() -> str:
        root, agents = _where(args)
        configs = list(getattr(args, "config", None) or [])
        workspace = str(Path(configs[0]).resolve().parent) if configs else str(root)
        doc = build_run_transcript(_streams(root, agents).values(), workspace)
        return dumps(doc) + "\n" if fmt == "json" else render_transcript(doc)

    return _run(args, fmt, body)


def cmd_agent_list(args: argparse.Namespace) -> int:
    """`watchrun agent list [--json]`: every agent's status, turns, tokens and last reply."""
    fmt = _fmt(args, "text")

    def body() -> str:
        root, agents = _where(args)
        layout = layout_for(root)
        rows = [summarize(iter_records(layout.jsonl("agent", a.name)), a.name, a.provider)
                for a in agents.values()]
        return dumps({"agents": rows}) + "\n" if fmt == "json" else render_list(rows)

    return _run(args, fmt, body)
