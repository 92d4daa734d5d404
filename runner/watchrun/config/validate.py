"""Semantic checks and clamps on a schema-checked tree, and building the Config model from it."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from watchrun.config.checks import Ctx
from watchrun.config.clamp import RANGES, build_limits, clamp
from watchrun.config.diagnostics import Reporter
from watchrun.config.handover import code_indexes
from watchrun.config.homes import expand_home, unexpanded
from watchrun.config.model import AgentSpec, Config, Limits, OutputSpec
from watchrun.config.plans import check_dependencies
from watchrun.config.programcode import program_code
from watchrun.config.schema import did_you_mean
from watchrun.config.statuses import until_status_warning
from watchrun.config.tree import CMap, KeyPath
from watchrun.config.watchers import build_watchers
from watchrun.match.matcher import BACKTRACKING_BUDGET_S, Matcher, needs_backtracking
from watchrun.match.redact import RedactError, Rule, check_rule
from watchrun.match.redact_rules import re2_module
from watchrun.process.helper_start import helper_command

__all__ = [
    "DEFAULT_PROMPT",
    "PROMPT_FIELDS",
    "PROVIDER_COMMANDS",
    "build_config",
    "regex_engine_note",
]

PROVIDER_COMMANDS: dict[str, tuple[str, ...] | None] = {
    "claude": ("claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose"),
    # (`--`: a prompt that is one word naming a subcommand of `codex exec` — help, review,
    # resume, fork — ran that subcommand; after `--` codex-cli 0.171 reads it as the prompt,
    # checked with the real CLI, as it reads " help", the leading-space form, too)
    "codex": ("codex", "exec", "--json", "--", "{prompt}"),
    "gemini": ("gemini", "-p", "{prompt}", "--output-format", "stream-json"),
    "opencode": ("opencode", "run", "--format", "json", "{prompt}"),
    "pi": ("pi", "--mode", "json", "-p", "{prompt}"),
    "cursor": ("cursor-agent", "-p", "{prompt}", "--output-format", "stream-json"),
    "copilot": ("copilot", "-p", "{prompt}", "--output-format", "json"),
    "mock": (*helper_command("watchrun.agents.mock_agent"), "{prompt}"),
    "generic": None,
}
"""Each provider's default argv; `generic` has none, so its `command` is required."""

DEFAULT_PROMPT = "These lines appeared in {label}:\n{matches}\n"
PROMPT_FIELDS = ("matches", "watcher", "label", "count")
"""Placeholders replaced in an agent's prompt template; other `{...}` text stays as written."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

NOTHING_TO_RUN = "no watchers and no agents: there is nothing to run"
"""The warning for a config with neither (normal for `watchrun mcp`, which adds watchers)."""


def build_config(ctx: Ctx, sources: tuple[Path, ...], output_dir: Path | None,
                 known: tuple[Rule, ...] = ()) -> Config | None:
    """Run every semantic check on `ctx.root`; the Config when no error was reported. `known`:
    the rules that hide its `${VAR}` secrets (`config/secrets.py`), kept with `redact:`'s."""
    report, root = ctx.report, ctx.root
    limits = build_limits(root.get("limits"), report)
    output = _output(ctx, root.get("output"), output_dir)
    raw = root.get("agents")
    raw_agents: list[Any] = raw if isinstance(raw, list) else []
    rules = (*known, *_redact(ctx, root.get("redact")))
    agents = [replace(a, redact=rules) for a in _agents(ctx, raw_agents, limits)]
    check_dependencies(ctx, raw_agents)
    names = [a["name"] for a in raw_agents
             if isinstance(a, CMap) and isinstance(a.get("name"), str)]
    watchers = build_watchers(ctx, root.get("watchers"), names, limits,
                              output.dir if output is not None else None)
    if not root.get("watchers") and not root.get("agents") and not report.has_errors:
        report.warning((), NOTHING_TO_RUN)
    if report.has_errors or output is None:
        return None
    if agents or output.redact or any(w.actions for w in watchers):
        re2_module()  # (every prompt, action body and record redacted: said now, not at a match)
    return Config(
        limits=limits,
        output=output,
        watchers=tuple(watchers),
        agents=tuple(agents),
        sources=sources,
        redact=rules,
    )


def _redact(ctx: Ctx, raw: Any) -> tuple[Rule, ...]:
    """`redact:` items (a pattern, or {kind, pattern}) as rules; each must compile in RE2."""
    rules: list[Rule] = []
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        where: KeyPath = ("redact", i)
        if isinstance(item, str):
            rule = Rule("custom", item)
        elif isinstance(item, dict) and isinstance(item.get("pattern"), str):
            kind = item.get("kind", "custom")
            rule, where = Rule(kind if isinstance(kind, str) else "", item["pattern"]), \
                ("redact", i, "pattern")
        else:
            continue  # the schema reported it
        try:
            check_rule(rule)
        except RedactError as exc:
            ctx.report.error(where, str(exc))
            continue
        rules.append(rule)
    return tuple(dict.fromkeys(rules))


def _output(ctx: Ctx, raw: Any, output_dir: Path | None) -> OutputSpec | None:
    raw = raw if isinstance(raw, dict) else {}
    if output_dir is not None:
        expanded = expand_home(str(output_dir))
        if expanded is None:
            ctx.report.error((), f"--output-dir {unexpanded(str(output_dir))}")
            return None
        folder = Path(os.path.abspath(expanded))
    elif isinstance(raw.get("dir"), str):
        said = len(ctx.report.diagnostics)
        ctx.os_strings(("output", "dir"), raw["dir"])  # (a NUL: no path can hold one)
        if len(ctx.report.diagnostics) > said:
            return None
        folder = ctx.resolve(("output", "dir"), raw["dir"])
    else:
        folder = next(iter(ctx.folders.values())) / ".watchrun"
    spec = OutputSpec(dir=folder, redact=raw.get("redact") is True)
    values: dict[str, int | None] = {"max_bytes": spec.max_bytes, "keep": spec.keep}
    for key, field in (("maxBytes", "max_bytes"), ("keep", "keep")):
        if key in raw:
            values[field] = clamp(raw[key], RANGES[f"output.{key}"], ("output", key), ctx.report)
    if values["max_bytes"] is None or values["keep"] is None:
        return None
    return OutputSpec(dir=folder, max_bytes=values["max_bytes"], keep=values["keep"],
                      redact=spec.redact)


def _agents(ctx: Ctx, raw: Any, limits: Limits) -> list[AgentSpec]:
    if not isinstance(raw, list):
        return []
    ctx.cap("agents", raw, limits.max_agents, "maxAgents")
    seen: dict[str, tuple[KeyPath, str]] = {}
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, CMap):
            ctx.unique(("agents", i, "name"), item.get("name"), seen, "name")
            spec = _agent(ctx, ("agents", i), item)
            if spec is not None:
                out.append(spec)
    return out


def _agent(ctx: Ctx, p: KeyPath, a: CMap) -> AgentSpec | None:
    report = ctx.report
    ctx.executed(p, a)
    command = _agent_command(ctx, p, a)
    prompt = a.get("prompt", DEFAULT_PROMPT)
    if isinstance(prompt, str):
        for name in dict.fromkeys(_PLACEHOLDER.findall(prompt)):
            if name not in PROMPT_FIELDS:
                report.warning((*p, "prompt"), f"unknown placeholder {{{name}}} is left as "
                               f"written{did_you_mean(name, list(PROMPT_FIELDS))}")
    times: dict[str, int | None] = {}
    for key in ("deadline", "idleTimeout", "maxTurns"):
        times[key] = clamp(a[key], RANGES[f"agent.{key}"], (*p, key), report) if key in a else None
    if "schedule" in a:
        ctx.cron((*p, "schedule"), a["schedule"])
    until, provider = a.get("until"), a.get("provider")
    if isinstance(until, str) and until.startswith("status:") and isinstance(provider, str):
        problem = until_status_warning(provider, until.removeprefix("status:"))
        if problem is not None:
            report.warning((*p, "until"), problem)
    if report.has_errors or command is None:
        return None
    # the file that defined the agent set its command or provider (every layer sets `name`)
    defined = (*p, "command") if "command" in a else (*p, "provider")
    cwd = ctx.resolve((*p, "cwd"), a["cwd"]) if "cwd" in a else ctx.folder(defined)
    return AgentSpec(
        name=a["name"],
        provider=a["provider"],
        command=command,
        prompt=prompt,
        cwd=cwd,
        env=ctx.env((*p, "env"), a.get("env")),
        schedule=a["schedule"].strip() if "schedule" in a else None,
        deadline_ms=times["deadline"],
        idle_timeout_ms=times["idleTimeout"],
        until=a.get("until"),
        pty=a.get("pty") is True,
        max_turns=times["maxTurns"] or 100,
        depends_on=tuple(d for d in a.get("dependsOn") or () if isinstance(d, str)),
    )


def _agent_command(ctx: Ctx, p: KeyPath, a: CMap) -> tuple[str, ...] | None:
    """The argv template: the given command (a string split with shell rules) or the default."""
    raw = a.get("command")
    provider = a.get("provider")
    if raw is None:
        default = PROVIDER_COMMANDS.get(provider) if isinstance(provider, str) else None
        if provider == "generic":
            ctx.report.error((*p, "command"), "is required for provider `generic` (it has no "
                             "default command)")
        return default
    if isinstance(raw, str):
        try:
            argv = tuple(shlex.split(raw))
        except ValueError as exc:
            ctx.report.error((*p, "command"), f"cannot split {raw!r} into arguments: {exc}")
            return None
        if not argv:
            ctx.report.error((*p, "command"), "must not be empty")
            return None
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        argv = tuple(raw)
    else:
        return None  # the schema reported it
    if not any("{prompt}" in arg for arg in argv) and a.get("pty") is True:
        ctx.report.warning((*p, "command"), "has no {prompt} placeholder, and under `pty` its "
                           "stdin is the terminal: the prompt is appended as the last argument")
        argv = (*argv, "{prompt}")  # (without `pty`, the prompt goes to its stdin whole)
    code = next((what for i, what in program_code(argv).items() if "{prompt}" in argv[i]), None)
    if code is not None:
        ctx.report.error((*p, "command"), f"has {{prompt}} inside {code}: matched log text "
                         "would run as code; pass the prompt as an argument of its own after "
                         "the code, or leave {prompt} out: the prompt then goes to stdin")
    if any("{prompt}" in argv[i] for i in code_indexes(argv)):
        ctx.report.error((*p, "command"), "has {prompt} inside the script of a shell's -c (or "
                         "what ssh, su -c, watch… hand to a shell): the shell would read "
                         "matched log text as commands; pass the prompt as "
                         'an argument of its own, e.g. ["sh", "-c", "claude -p \\"$1\\"", "sh", '
                         '"{prompt}"], or leave {prompt} out: the prompt then goes to stdin')
    return argv


def regex_engine_note(pattern: str, case_sensitive: bool = False) -> str | None:
    """None when a linear-time engine runs `pattern`; else what needs Python `re` and how it
    runs (only under `backtracking: true`, which validation checks)."""
    try:
        what = needs_backtracking(pattern, case_sensitive)
    except ValueError:
        return None  # reported as an error already
    if what is None:
        return None
    return (f"uses {what}; matched with Python re (backtracking) in an isolated worker, "
            f"{BACKTRACKING_BUDGET_S * 1000:g} ms per line")


def check_engines(config: Config, report: Reporter) -> str | None:
    """`validate`: a watcher whose regexes no engine `WATCHRUN_ENGINES` allows can run is an
    error at its place, as the runner's start refuses it (exit 3). An engine name the variable
    names and no watcher's place locates is returned: the environment's error, not the file's."""
    for i, w in enumerate(config.watchers):
        regexes: list[tuple[KeyPath, str, tuple[str, ...]]] = [
            (("watchers", i, "pattern"), w.pattern, tuple(w.exclude))]
        if w.gate is not None and w.gate.require is not None:
            regexes.append((("watchers", i, "gate", "require"), w.gate.require, ()))
        for at, rx, exclude in regexes:
            try:
                Matcher(rx, exclude, case_sensitive=w.case_sensitive)
            except ValueError as exc:
                why = str(exc)
                if "WATCHRUN_ENGINES" in why:  # (of the environment, not of a watcher)
                    return why
                report.error(at, f"{why}; WATCHRUN_ENGINES="
                             f"{os.environ.get('WATCHRUN_ENGINES')} allows no other")
    return None
