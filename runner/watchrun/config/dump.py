"""Write a resolved Config back as a config document (YAML, JSON or TOML) that validates again."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from watchrun.config.interpolate import escape
from watchrun.config.model import ActionSpec, AgentSpec, Config, Limits, WatcherSpec
from watchrun.match.sanitize import edge_text

__all__ = ["DUMP_FORMATS", "config_to_dict", "dump_config"]

DUMP_FORMATS = ("yaml", "json", "toml")

_LIMIT_KEYS = {
    "enabled": "enabled",
    "wakeOnMatch": "wake_on_match",
    "maxWatchers": "max_watchers",
    "maxAgents": "max_agents",
    "maxMatches": "max_matches",
    "maxLogLines": "max_log_lines",
    "matchLines": "match_lines",
    "pollMs": "poll_ms",
    "maxLineBytes": "max_line_bytes",
    "maxEventBytes": "max_event_bytes",
    "stopTimeout": "stop_timeout_ms",
    "maxGenerations": "max_generations",
    "rotateWait": "rotate_wait_ms",
    "onceWriteTimeout": "once_write_ms",
}


def config_to_dict(config: Config) -> dict[str, Any]:
    """The camelCase document of `config`: absolute paths, durations in ms, sizes in bytes.

    Every string is `$`-escaped, so loading the document again gives the same Config.
    """
    return {
        "limits": _limits(config.limits),
        "output": {
            "dir": _s(str(config.output.dir)),
            "maxBytes": config.output.max_bytes,
            "keep": config.output.keep,
            "redact": config.output.redact,
        },
        "watchers": [_watcher(w) for w in config.watchers],
        "agents": [_agent(a) for a in config.agents],
        "redact": [{"kind": r.kind, "pattern": _s(r.pattern)} for r in config.redact
                   if not r.known],  # (a `${VAR}` secret's rule holds its value)
    }


def dump_config(config: Config, fmt: str) -> str:
    """`config` as a `yaml`, `json` or `toml` document."""
    return dump_document(config_to_dict(config), fmt)


def dump_document(doc: dict[str, Any], fmt: str) -> str:
    """A config document as text; TOML has no null, so keys set to None are left out."""
    doc = _drop_none(doc)
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if fmt == "toml":
        return _toml(doc)
    if fmt == "yaml":
        import yaml

        class _Dumper(yaml.SafeDumper):
            pass

        def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
            # double-quoted where the terminal edge would change a character (U+2028, a bidi
            # mark, a control): YAML escapes it there, and the edge's `\uXXXX` is YAML's too;
            # unquoted, U+2028 was written as a line break and the value loaded back changed
            style = '"' if edge_text(value, multiline=True) != value else (
                "|" if "\n" in value else None)
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        _Dumper.add_representer(str, text)
        return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                         width=1 << 20)
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(DUMP_FORMATS)}")


def _toml(doc: dict[str, Any]) -> str:
    """`doc` as TOML in which every character the edge sanitizer would change (C0 and C1
    controls, DEL, bidirectional controls, U+2028/U+2029) is a `\\u` escape, so the text
    printed is the text written and loads back to the same values. A lone surrogate, which no
    TOML string can hold, is written as U+FFFD (as the edge would show it).

    tomli_w writes such characters raw where TOML allows it (C1, U+2028) and turns `\\r\\n`
    into `\\n` in a multi-line string; so each is first replaced by a marker (a character
    absent from the document) and its code, and each marker is made the escape afterwards.
    tomli_w writes every string, key or value, as a basic string ("…" or \"\"\"…\"\"\"),
    where `\\uXXXX` is an escape.
    """
    import tomli_w

    texts: list[str] = []
    _strings(doc, texts)
    used: set[str] = set().union(*texts)
    mark = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in used)

    def marked(value: Any) -> Any:
        if isinstance(value, str):
            if not any(map(_edge_changes, set(value))):
                return value
            return "".join(f"{mark}{ord(c):x}{mark}" if _edge_changes(c) else c for c in value)
        if isinstance(value, dict):
            return {marked(k): marked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [marked(v) for v in value]
        return value

    text = tomli_w.dumps(marked(doc), multiline_strings=True)
    return re.sub(f"{mark}([0-9a-f]+){mark}", lambda m: _escape(int(m[1], 16)), text)


def _escape(code: int) -> str:
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _strings(value: Any, out: list[str]) -> None:
    """Every string of `value` (keys too) into `out`."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(k)
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


@functools.cache
def _edge_changes(char: str) -> bool:
    """Whether the edge sanitizer (`edge_text` of a multi-line text) changes `char`."""
    from watchrun.match.sanitize import edge_text

    return edge_text(char, multiline=True) != char


def _s(text: str) -> str:
    return escape(text)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _limits(limits: Limits) -> dict[str, Any]:
    return {key: getattr(limits, field) for key, field in _LIMIT_KEYS.items()}


def _watcher(w: WatcherSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": w.id, "label": _s(w.label)}
    if w.path is not None:
        doc["path"] = _s(str(w.path))
    if isinstance(w.command, str):
        doc["command"] = _s(w.command)
    elif w.command is not None:
        doc["command"] = [_s(arg) for arg in w.command]
    doc["pattern"] = _s(w.pattern)
    doc["exclude"] = [_s(x) for x in w.exclude]
    doc["caseSensitive"] = w.case_sensitive
    doc["backtracking"] = w.backtracking
    doc["wake"] = list(w.wake) if w.wake else False
    if w.path is not None:
        doc["fromStart"] = w.from_start
        doc["previousId"] = w.previous_id
    else:
        doc["cwd"] = _s(str(w.cwd)) if w.cwd is not None else None
        doc["env"] = {k: _s(v) for k, v in w.env.items()}
        doc["restart"] = w.restart.value
        doc["restartDelay"] = w.restart_delay_ms
        doc["schedule"] = _s(w.schedule) if w.schedule is not None else None
    if w.gate is not None:
        gate: dict[str, Any] = {"maxMatches": w.gate.max_matches}
        if w.path is None:
            gate["exitCode"] = w.gate.exit_code
        gate["require"] = _s(w.gate.require) if w.gate.require is not None else None
        doc["gate"] = gate
    if w.actions:
        doc["actions"] = [_action(a) for a in w.actions]
    return doc


def _action(a: ActionSpec) -> dict[str, Any]:
    when: Any = "match"
    if a.threshold is not None:
        when = {"threshold": f"{a.threshold.count} in {a.threshold.window_ms}ms"}
    doc: dict[str, Any] = {"type": a.type, "name": a.name, "when": when,
                           "throttle": a.throttle_ms, "timeout": a.timeout_ms,
                           "concurrency": a.concurrency, "queue": a.queue,
                           "maxBodyBytes": a.max_body_bytes}
    if a.type == "webhook":
        doc.update(url=_s(a.url or ""), format=a.format, retries=a.retries,
                   headers={k: _s(v) for k, v in a.headers.items()})
    else:
        doc.update(command=[_s(arg) for arg in a.command], cwd=_s(str(a.cwd)) if a.cwd else None,
                   env={k: _s(v) for k, v in a.env.items()})
    return doc


def _agent(a: AgentSpec) -> dict[str, Any]:
    return {
        "name": a.name,
        "provider": a.provider,
        "command": [_s(arg) for arg in a.command],
        "prompt": _s(a.prompt),
        "cwd": _s(str(a.cwd)),
        "env": {k: _s(v) for k, v in a.env.items()},
        "schedule": _s(a.schedule) if a.schedule is not None else None,
        "deadline": a.deadline_ms,
        "idleTimeout": a.idle_timeout_ms,
        "until": _s(a.until) if a.until is not None else None,
        "pty": a.pty,
        "maxTurns": a.max_turns,
        "dependsOn": list(a.depends_on),
    }
