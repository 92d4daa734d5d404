"""Layered configs (`-c` repeated): what a file alone is checked for, a layer is checked for."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from liverunner import LiveRunner, cli, wait_for

from watchrun.config import Diagnostic, load_config
from watchrun.config.model import GateSpec
from watchrun.config.validate import PROVIDER_COMMANDS

# (format, a layer with one id/name written twice, the list, what the error calls it)
TWICE = [
    ("yaml", "watchers:\n  - id: api\n    path: x.log\n    pattern: FATAL\n"
     "  - id: api\n    path: z.log\n    pattern: Z\n", "watchers", "id `api`"),
    ("json", '{"watchers": [{"id": "api", "path": "x.log", "pattern": "FATAL"},\n'
     '  {"id": "api", "path": "z.log", "pattern": "Z"}]}', "watchers", "id `api`"),
    ("toml", '[[watchers]]\nid = "api"\npath = "x.log"\npattern = "FATAL"\n'
     '[[watchers]]\nid = "api"\npath = "z.log"\npattern = "Z"\n', "watchers", "id `api`"),
    ("yaml", "agents:\n  - name: t\n    provider: mock\n    prompt: one\n"
     "  - name: t\n    provider: mock\n    prompt: two\n", "agents", "name `t`"),
    ("json", '{"agents": [{"name": "t", "provider": "mock", "prompt": "one"},\n'
     '  {"name": "t", "provider": "mock", "prompt": "two"}]}', "agents", "name `t`"),
    ("toml", '[[agents]]\nname = "t"\nprovider = "mock"\nprompt = "one"\n'
     '[[agents]]\nname = "t"\nprovider = "mock"\nprompt = "two"\n', "agents", "name `t`"),
]

BASES = {
    "other entries": "watchers:\n  - {id: other, path: y.log, pattern: Q}\n"
                     "agents:\n  - {name: u, provider: mock}\n",
    "the same id": "watchers:\n  - {id: api, path: y.log, pattern: Q}\n"
                   "agents:\n  - {name: t, provider: mock}\n",
    "no such list": "limits: {pollMs: 100}\n",
}
"""Earlier layers: each list the duplicate goes into already has other items, already has the
duplicated id/name (merged into by the first of the two), or is not there at all."""


def _duplicates(diagnostics: list[Diagnostic], what: str) -> list[Diagnostic]:
    return [d for d in diagnostics if f"duplicate {what}" in d.message]


def _unindexed(message: str) -> str:
    return re.sub(r"\[\d+\]", "[N]", message)


@pytest.mark.parametrize("base_text", BASES.values(), ids=list(BASES))
@pytest.mark.parametrize(("fmt", "text", "key", "what"), TWICE,
                         ids=[f"{fmt}-{key}" for fmt, _, key, _ in TWICE])
def test_a_duplicate_inside_a_layer_is_the_error_it_is_alone(
        tmp_path: Path, base_text: str, fmt: str, text: str, key: str, what: str) -> None:
    """Layering merges an id/name of a LATER file into the earlier one; two items of one id in
    the same file were merged too, the second silently overriding the first."""
    base = tmp_path / "base.yaml"
    base.write_text(base_text, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    layer = tmp_path / "sub" / f"over.{fmt}"
    layer.write_text(text, encoding="utf-8")
    [alone] = _duplicates(load_config([layer], env={}).errors, what)
    layered = load_config([base, layer], env={})
    assert layered.config is None
    [dup] = _duplicates(layered.errors, what)
    assert (dup.file, dup.line, dup.column) == (alone.file, alone.line, alone.column)
    assert dup.file == str(layer)
    assert dup.line == (None if fmt == "toml" else 2 if fmt == "json" else 5)
    assert _unindexed(dup.message) == _unindexed(alone.message) == (
        f"duplicate {what} (also at {key}[N].{what.split()[0]}); each "
        f"{what.split()[0]} must be unique")
    assert re.fullmatch(rf"{key}\[\d+\]\.{what.split()[0]}", dup.path)


def test_validate_refuses_a_layer_with_one_id_twice(tmp_path: Path) -> None:
    """The finding's repro: `validate -c base.yaml -c sub/over.yaml` said valid (exit 0) and
    ran `api` with the second entry's pattern."""
    (tmp_path / "base.yaml").write_text("watchers:\n  - id: other\n    path: y.log\n"
                                        "    pattern: Q\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "over.yaml").write_text(
        "watchers:\n  - id: api\n    path: x.log\n    pattern: FATAL\n  - id: api\n"
        "    pattern: Z\n", encoding="utf-8")
    proc = cli("validate", "-c", "base.yaml", "-c", "sub/over.yaml", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "sub/over.yaml:5:5: error: watchers[2].id: duplicate id `api` (also at " \
           "watchers[1].id); each id must be unique" in proc.stdout + proc.stderr


def test_a_later_layer_still_merges_by_id(tmp_path: Path) -> None:
    """Across files the rule stands: one item per id in a later file changes the earlier one."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - {id: api, path: x.log, pattern: FATAL}\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text('{"watchers": [{"id": "api", "pattern": "Z"}]}', encoding="utf-8")
    middle = tmp_path / "middle.toml"
    middle.write_text('[[watchers]]\nid = "api"\npattern = "Y"\n', encoding="utf-8")
    result = load_config([base, middle, over], env={})
    assert result.errors == []
    assert result.config is not None
    [api] = result.config.watchers
    assert (api.pattern, api.path) == ("Z", tmp_path / "x.log")


COMMAND_BASE = ("watchers:\n  - id: b\n    command: make\n    cwd: sub\n    env: {A: x}\n"
                "    restart: always\n    restartDelay: 2s\n    schedule: '@hourly'\n"
                "    gate: {exitCode: true, maxMatches: 3}\n    pattern: x\n")
FILE_BASE = ("watchers:\n  - id: b\n    path: b.log\n    fromStart: true\n    previousId: old\n"
             "    pattern: x\n")
# (format, a layer that switches watcher `b` to a file watcher, one that switches it to a command)
SWITCH = [
    ("yaml", "watchers:\n  - id: b\n    path: b.log\n",
     "watchers:\n  - id: b\n    command: make\n"),
    ("json", '{"watchers": [{"id": "b", "path": "b.log"}]}',
     '{"watchers": [{"id": "b", "command": "make"}]}'),
    ("toml", '[[watchers]]\nid = "b"\npath = "b.log"\n',
     '[[watchers]]\nid = "b"\ncommand = "make"\n'),
]


@pytest.mark.parametrize(("fmt", "to_file", "to_command"), SWITCH)
def test_a_layer_that_switches_a_watcher_s_kind_drops_the_old_kind_s_keys(
        tmp_path: Path, fmt: str, to_file: str, to_command: str) -> None:
    """A layer setting `path` on a command watcher kept its `cwd`, `env`, `restart`, …: the
    merged config was refused at the base file's lines (`cwd applies only to command
    watchers`), and no layer could unset them."""
    (tmp_path / "cmd.yaml").write_text(COMMAND_BASE, encoding="utf-8")
    (tmp_path / "file.yaml").write_text(FILE_BASE, encoding="utf-8")
    (tmp_path / f"to_file.{fmt}").write_text(to_file, encoding="utf-8")
    (tmp_path / f"to_command.{fmt}").write_text(to_command, encoding="utf-8")
    made_file = load_config([tmp_path / "cmd.yaml", tmp_path / f"to_file.{fmt}"], env={})
    assert made_file.errors == [], [d.format() for d in made_file.errors]
    assert made_file.config is not None
    [b] = made_file.config.watchers
    assert (b.kind, b.path, b.cwd, b.env, b.schedule) == ("file", tmp_path / "b.log", None,
                                                          {}, None)
    assert b.gate == GateSpec(max_matches=3)
    where = {"yaml": ":3:5", "json": ":1:27", "toml": ""}[fmt]  # (TOML: no positions)
    assert [(d.file, d.line, d.path, d.message) for d in made_file.warnings] == [
        (str(tmp_path / "cmd.yaml"), 9, "watchers[0].gate.exitCode",
         f"dropped: a later layer ({tmp_path / f'to_file.{fmt}'}{where}) makes watcher `b` a "
         "file watcher (`path`), which has no exit code; the gate keeps its other conditions")]
    made_command = load_config([tmp_path / "file.yaml", tmp_path / f"to_command.{fmt}"], env={})
    assert made_command.errors == [], [d.format() for d in made_command.errors]
    assert made_command.config is not None
    [b] = made_command.config.watchers
    assert (b.kind, b.command, b.from_start, b.previous_id) == ("command", "make", False, None)


def test_the_same_kind_keeps_its_keys_and_a_gate_on_the_exit_code_alone_cannot_vanish(
        tmp_path: Path) -> None:
    (tmp_path / "cmd.yaml").write_text(COMMAND_BASE, encoding="utf-8")
    (tmp_path / "new.yaml").write_text("watchers:\n  - id: b\n    command: make all\n",
                                       encoding="utf-8")
    config = load_config([tmp_path / "cmd.yaml", tmp_path / "new.yaml"], env={}).require()
    [b] = config.watchers
    assert (b.command, b.cwd, b.schedule) == ("make all", tmp_path / "sub", "@hourly")
    assert b.gate == GateSpec(max_matches=3, exit_code=True)
    (tmp_path / "gate.yaml").write_text(
        "watchers:\n  - id: b\n    command: make\n    gate: {exitCode: true}\n    pattern: x\n",
        encoding="utf-8")
    (tmp_path / "file.yaml").write_text("watchers:\n  - id: b\n    path: b.log\n",
                                        encoding="utf-8")
    result = load_config([tmp_path / "gate.yaml", tmp_path / "file.yaml"], env={})
    assert [(d.file, d.line, d.path, d.message) for d in result.diagnostics] == [
        (str(tmp_path / "gate.yaml"), 4, "watchers[0].gate", "dropped with `exitCode`, its only "
         f"condition: a later layer ({tmp_path / 'file.yaml'}:3:5) makes watcher `b` a file "
         "watcher (`path`), which has no exit code; a gate that vanished would let every run "
         "pass: give it a condition in that layer (`gate: {maxMatches: 0}` or `require`), or "
         "take it out of the earlier file")]
    assert result.config is None
    (tmp_path / "file.yaml").write_text(
        "watchers:\n  - id: b\n    path: b.log\n    gate: {maxMatches: 0}\n", encoding="utf-8")
    config = load_config([tmp_path / "gate.yaml", tmp_path / "file.yaml"], env={}).require()
    assert config.watchers[0].gate == GateSpec(max_matches=0)


AGENT_BASE = ("agents:\n  - name: t\n    provider: claude\n"
              "    command: 'claude --model opus -p {prompt}'\n")
# (format, a layer that switches agent t to codex, one to generic, one that keeps claude)
REPROVIDE = [
    ("yaml", "agents:\n  - {name: t, provider: codex}\n",
     "agents:\n  - {name: t, provider: generic}\n",
     "agents:\n  - {name: t, provider: claude, deadline: 5m}\n"),
    ("json", '{"agents": [{"name": "t", "provider": "codex"}]}',
     '{"agents": [{"name": "t", "provider": "generic"}]}',
     '{"agents": [{"name": "t", "provider": "claude", "deadline": "5m"}]}'),
    ("toml", '[[agents]]\nname = "t"\nprovider = "codex"\n',
     '[[agents]]\nname = "t"\nprovider = "generic"\n',
     '[[agents]]\nname = "t"\nprovider = "claude"\ndeadline = "5m"\n'),
]


@pytest.mark.parametrize(("fmt", "to_codex", "to_generic", "same"), REPROVIDE)
def test_a_layer_that_changes_an_agent_s_provider_drops_the_old_command(
        tmp_path: Path, fmt: str, to_codex: str, to_generic: str, same: str) -> None:
    """`provider: codex` in a layer over a claude agent with its own command ran `claude …`
    under the codex adapter (which reads codex's output), valid and silent."""
    base = tmp_path / "base.yaml"
    base.write_text(AGENT_BASE, encoding="utf-8")
    layers = {}
    for name, text in (("codex", to_codex), ("generic", to_generic), ("same", same)):
        layers[name] = tmp_path / f"{name}.{fmt}"
        layers[name].write_text(text, encoding="utf-8")
    [t] = load_config([base, layers["codex"]], env={}).require().agents
    assert (t.provider, t.command) == ("codex", PROVIDER_COMMANDS["codex"])
    generic = load_config([base, layers["generic"]], env={})
    assert [(d.file, d.path, d.message) for d in generic.errors] == [
        (str(layers["generic"]), "agents[0].command",
         "is required for provider `generic` (it has no default command)")]
    [t] = load_config([base, layers["same"]], env={}).require().agents
    assert (t.provider, t.command, t.deadline_ms) == (
        "claude", ("claude", "--model", "opus", "-p", "{prompt}"), 300_000)


def test_a_reload_refuses_a_layer_with_one_id_twice(tmp_path: Path) -> None:
    """The live runner reloads the same layers: a copy-paste slip in the JSON layer used to be
    applied (the second `api` overriding the first's pattern); it is refused, and the runner
    keeps the config it has."""
    base = tmp_path / "watch.yaml"
    base.write_text("watchers:\n  - {id: other, path: y.log, pattern: Q}\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text('{"watchers": [{"id": "api", "path": "x.log", "pattern": "FATAL"}]}',
                    encoding="utf-8")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        over.write_text('{"watchers": [{"id": "api", "path": "x.log", "pattern": "FATAL"},\n'
                        '  {"id": "api", "pattern": "Z"}]}', encoding="utf-8")
        r.send(signal.SIGHUP)
        r.wait_log("error: reload: watchers[2].id: duplicate id `api` (also at watchers[1].id);"
                   " each id must be unique (<dir>/over.json:2:4)")
        wait_for(lambda: any(x.startswith("reload failed") for x in
                             r.control({"cmd": "status"})["problems"]), "the reload's problem")
        listed = {w["id"]: w for w in r.control({"cmd": "list"})["watchers"]}
        assert (set(listed), listed["api"]["pattern"]) == ({"other", "api"}, "FATAL")
    finally:
        assert r.stop() == 0


def test_a_layer_cannot_remove_or_rename_a_lower_layer_s_entries(tmp_path: Path) -> None:
    """docs/config.md, Layering: a layer's new id is one more watcher (a rename runs beside the
    old one), and a layer's empty `watchers`/`agents` removes nothing."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - {id: api, path: x.log, pattern: FATAL}\n"
                    "agents:\n  - {name: t, provider: mock}\n", encoding="utf-8")
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text("watchers:\n  - {id: api-v2, path: x.log, pattern: FATAL}\n"
                       "agents:\n  - {name: t2, provider: mock}\n", encoding="utf-8")
    emptied = tmp_path / "emptied.yaml"
    emptied.write_text("watchers: []\nagents: []\n", encoding="utf-8")
    for layer, ids, names in ((renamed, ["api", "api-v2"], ["t", "t2"]),
                              (emptied, ["api"], ["t"])):
        result = load_config([base, layer], env={})
        assert result.errors == [] and result.config is not None
        assert [w.id for w in result.config.watchers] == ids
        assert [a.name for a in result.config.agents] == names
        said = [(d.path, d.message) for d in result.warnings if "removes nothing" in d.message]
        assert said == ([] if layer is renamed else [
            ("watchers", "an empty list in a layer removes nothing: a layer adds watchers and "
             "changes them, never removes one (to run without one, keep it out of the base "
             "file; docs/config.md)"),
            ("agents", "an empty list in a layer removes nothing: a layer adds agents and "
             "changes them, never removes one (to run without one, keep it out of the base "
             "file; docs/config.md)")])
    alone = load_config([emptied], env={})
    assert not [d for d in alone.warnings if "removes nothing" in d.message]
    text = (Path(__file__).parents[1] / "docs" / "config.md").read_text(encoding="utf-8")
    assert "A layer can add to and change a lower layer's watchers and agents, never remove " \
           "or rename one" in " ".join(text.split())


def test_the_default_cwd_is_the_folder_of_the_layer_that_set_the_command_last(
        tmp_path: Path) -> None:
    """docs/config.md: a layer that sets a watcher's `command` (an agent's `command` or
    `provider`) again moves its default `cwd` to that layer's folder; one that does not, leaves
    it (the control/config audit: no test saw the cwd move)."""
    (tmp_path / "watch.yaml").write_text(
        "watchers:\n  - {id: tests, command: make test, pattern: FAIL}\n"
        "  - {id: lint, command: make lint, pattern: FAIL}\n"
        "agents:\n  - {name: triage, provider: mock}\n  - {name: other, provider: mock}\n",
        encoding="utf-8")
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "ci.yaml").write_text(
        "watchers:\n  - {id: tests, command: make test -j4}\n  - {id: lint, pattern: ERROR}\n"
        "agents:\n  - {name: triage, provider: mock, deadline: 5m}\n"
        "  - {name: other, deadline: 5m}\n", encoding="utf-8")
    config = load_config([tmp_path / "watch.yaml", tmp_path / "ci" / "ci.yaml"],
                         env={}).require()
    assert {w.id: w.cwd for w in config.watchers} == {"tests": tmp_path / "ci",
                                                      "lint": tmp_path}
    assert {a.name: a.cwd for a in config.agents} == {"triage": tmp_path / "ci",
                                                     "other": tmp_path}
