"""A lone surrogate (a file name's undecodable byte, `"\\uDCFF"`) is refused in a config value
that is text (a webhook's URL and headers, a prompt, `until`), in YAML, JSON and TOML alike,
and kept where the value reaches the system as bytes, and in a label (a path's by default).
Explorer fresh5 F5: a webhook URL with one validated, then every firing failed as a "bad
response" and was retried."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from watchrun.config import load_config

BYTE = "\udcff"
"""The byte 0xFF of a name that is not UTF-8, as Python reads it."""


def _config(where: str, value: str) -> dict[str, Any]:
    watcher: dict[str, Any] = {"id": "a", "command": ["true"], "pattern": "ERROR"}
    agent: dict[str, Any] = {"name": "ag", "provider": "generic", "command": ["true"],
                             "prompt": "look"}
    hook: dict[str, Any] = {"name": "hook", "type": "webhook", "url": "http://127.0.0.1:9/p"}
    owner, key = where.split(".", 1)
    target = {"watcher": watcher, "agent": agent, "hook": hook}[owner]
    if key.startswith("headers.") or key.startswith("env."):
        target.setdefault(key.split(".")[0], {})[key.split(".")[1]] = value
    elif key == "command":
        target[key] = ["echo", value]
    else:
        target[key] = value
    watcher["actions"] = [hook]
    return {"output": {"dir": "out"}, "watchers": [watcher], "agents": [agent]}


def _write(tmp_path: Path, fmt: str, config: dict[str, Any], value: str) -> Path:
    """`config` in `fmt`, the value written as the format's escape (YAML, JSON) or as a
    `${V}` reference to the environment (TOML has no escape for it: a variable can)."""
    if fmt == "toml":
        text = json.dumps(config).replace(json.dumps(value), '"${V}"')
        lines = [f"[output]\ndir = {json.dumps(config['output']['dir'])}"]
        tree = json.loads(text)
        lines += ["[[watchers]]", *_toml_items(tree["watchers"][0], "watchers")]
        lines += ["[[agents]]", *_toml_items(tree["agents"][0], "agents")]
        path = tmp_path / "w.toml"
        path.write_text("\n".join(lines) + "\n")
        return path
    if fmt == "yaml":  # (the escape `watchrun config` writes: `"\uDCFF"`)
        text = json.dumps(config).replace("\\udcff", "\\uDCFF")
        path = tmp_path / "w.yaml"
    else:
        text = json.dumps(config)
        path = tmp_path / "w.json"
    path.write_text(text)
    return path


def _toml_items(table: dict[str, Any], name: str) -> list[str]:
    plain = [f"{k} = {json.dumps(v)}" for k, v in table.items() if not isinstance(v, dict)
             and not (isinstance(v, list) and v and isinstance(v[0], dict))]
    subs = [f"[{name}.{k}]\n" + "\n".join(f"{json.dumps(a)} = {json.dumps(b)}"
                                          for a, b in v.items())
            for k, v in table.items() if isinstance(v, dict)]
    actions = [f"[[{name}.actions]]\n" + "\n".join(_toml_items(a, f"{name}.actions"))
               for a in table.get("actions", [])]
    return plain + subs + actions


FORMATS = ("yaml", "json", "toml")

TEXT = [
    ("hook.url", "http://127.0.0.1:9/p" + BYTE, "watchers[0].actions[0].url",
     "a webhook's URL, sent in an HTTP request,"),
    ("hook.headers.X-A", "h" + BYTE, "watchers[0].actions[0].headers.X-A",
     "a webhook's header, sent in an HTTP request,"),
    ("agent.prompt", "look at " + BYTE, "agents[0].prompt",
     "a prompt, given to the model and written in the records,"),
    ("agent.until", "output:done" + BYTE, "agents[0].until",
     "a completion marker, compared with the agent's output,"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("where", "value", "path", "what"), TEXT,
                         ids=[t[0] for t in TEXT])
def test_a_text_value_cannot_hold_an_undecodable_byte(
        tmp_path: Path, fmt: str, where: str, value: str, path: str, what: str) -> None:
    config_file = _write(tmp_path, fmt, _config(where, value), value)
    result = load_config([config_file], env={"V": value})
    assert result.config is None
    assert [(d.path, d.message) for d in result.diagnostics if d.severity == "error"] == [
        (path, f"{json.dumps(value)} holds U+DCFF at character {value.index(BYTE)}, a lone "
         f"surrogate (the stand-in for an undecodable byte, 0xFF): {what} is text, which "
         "cannot hold one (only a path, a command, `cwd` or an `env` value, given to the "
         "system as bytes, may); write it in UTF-8")]


def test_another_lone_surrogate_is_refused_in_text_too(tmp_path: Path) -> None:
    """JSON's `"\\ud800"` (no byte at all): once, as text, not also as an OS string."""
    config_file = _write(tmp_path, "json", _config("hook.url", "http://h/\ud800"), "")
    result = load_config([config_file], env={})
    assert [d.message for d in result.diagnostics] == [
        '"http://h/\\ud800" holds U+D800 at character 9, a lone surrogate: a webhook\'s URL, '
        "sent in an HTTP request, is text, which cannot hold one (only a path, a command, "
        "`cwd` or an `env` value, given to the system as bytes, may); write it in UTF-8"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("where", ["watcher.command", "watcher.cwd", "watcher.env.X",
                                   "agent.env.X", "watcher.label", "hook.url"])
def test_a_value_given_to_the_system_as_bytes_keeps_it(tmp_path: Path, fmt: str,
                                                       where: str) -> None:
    """A command, `cwd` or `env` value is bytes for the system: a file name's byte is kept; a
    label may hold one, as a path's label does (the URL row: without the byte, it loads)."""
    value = "x" if where == "hook.url" else "/tmp/n" + BYTE
    config = _config(where, "http://127.0.0.1:9/" + value if where == "hook.url" else value)
    config_file = _write(tmp_path, fmt, config, value)
    result = load_config([config_file], env={"V": value})
    assert [d.message for d in result.diagnostics if d.severity == "error"] == []
