"""Valid configs: defaults, resolution, interpolation, layering and round trips."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from watchrun.config import load_config
from watchrun.config.dump import config_to_dict, dump_config
from watchrun.config.interpolate import escape, interpolate
from watchrun.config.model import Config, GateSpec, Limits, RestartPolicy
from watchrun.config.validate import regex_engine_note
from watchrun.process.helper_start import helper_command

ROOT = Path(__file__).parents[1]
W = "watchers:\n  - id: a\n    path: app.log\n    pattern: x\n"


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def ok(paths: list[Path], env: dict[str, str] | None = None, **kw: Any) -> Config:
    result = load_config(paths, env=env or {}, **kw)
    assert result.errors == [], [d.format() for d in result.diagnostics]
    assert result.config is not None
    return result.config


def test_example_config_is_valid() -> None:
    result = load_config([ROOT / "watch.yaml.example"])
    assert result.diagnostics == []
    config = result.require()
    assert [(w.id, w.kind, w.wake) for w in config.watchers] == [
        ("app-log", "file", ("triage",)), ("demo-writer", "command", ())]
    assert config.watchers[0].path == ROOT / ".watchrun" / "demo" / "app.log"
    assert config.watchers[1].cwd == ROOT
    assert config.output.dir == ROOT / ".watchrun"
    assert [(a.name, a.provider, a.deadline_ms, a.max_turns) for a in config.agents] == [
        ("triage", "mock", 120_000, 20)]


class _AnyEnv(Mapping[str, str]):
    """Every variable is set, so `${VAR}` templates in contrib/ validate."""

    def __getitem__(self, key: str) -> str:
        return "placeholder"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _contrib_configs() -> list[Path]:
    out = []
    for path in sorted((ROOT / "contrib").rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json", ".toml") or not path.is_file():
            continue
        if path.parent.name == "webhooks":  # layers, run on a base config in test_contrib_webhooks
            continue
        text = path.read_text(encoding="utf-8")
        if any(line.startswith(("watchers:", "agents:", '"watchers"', "[[watchers]]"))
               or (path.suffix == ".json" and '"watchers":' in line)
               for line in text.splitlines()):
            out.append(path)  # a watchrun config (not a shipper, CI or Kubernetes file)
    return out


@pytest.mark.parametrize("path", _contrib_configs() or [None], ids=str)
def test_contrib_configs_validate(path: Path | None) -> None:
    if path is None:
        assert _contrib_configs() == []  # nothing to check yet
        return
    result = load_config([path], env=_AnyEnv())
    assert result.errors == [], [d.format() for d in result.errors]


def test_defaults(tmp_path: Path) -> None:
    config = ok([write(tmp_path, "w.yaml", W + "  - id: b\n    command: [make, test]\n"
                       "    pattern: FAIL\n")])
    assert config.limits == Limits()
    assert config.output.dir == tmp_path / ".watchrun"
    assert (config.output.max_bytes, config.output.keep) == (64 * 1024**2, 5)
    a, b = config.watchers
    assert (a.label, a.path, a.cwd, a.from_start, a.case_sensitive) == (
        "app.log", tmp_path / "app.log", None, False, False)
    assert (b.label, b.command, b.cwd, b.restart, b.restart_delay_ms) == (
        "make test", ("make", "test"), tmp_path, RestartPolicy.NEVER, 1000)
    assert config.sources == (tmp_path / "w.yaml",)


@pytest.mark.parametrize(
    ("wake_on_match", "wake", "expected"),
    [
        (False, None, ()), (True, None, ("t", "u")), (True, "false", ()),
        (False, "true", ("t", "u")), (False, "u", ("u",)), (False, "[u, t]", ("u", "t")),
    ],
)
def test_wake(tmp_path: Path, wake_on_match: bool, wake: str | None,
              expected: tuple[str, ...]) -> None:
    text = W + (f"    wake: {wake}\n" if wake else "")
    text += f"limits: {{wakeOnMatch: {str(wake_on_match).lower()}}}\n"
    text += "agents:\n  - {name: t, provider: mock}\n  - {name: u, provider: codex}\n"
    assert ok([write(tmp_path, "w.yaml", text)]).watchers[0].wake == expected


@pytest.mark.parametrize(
    ("provider", "argv"),
    [
        ("claude", ("claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose")),
        ("codex", ("codex", "exec", "--json", "--", "{prompt}")),
        ("gemini", ("gemini", "-p", "{prompt}", "--output-format", "stream-json")),
        ("opencode", ("opencode", "run", "--format", "json", "{prompt}")),
        ("pi", ("pi", "--mode", "json", "-p", "{prompt}")),
        ("mock", (*helper_command("watchrun.agents.mock_agent"), "{prompt}")),
    ],
)
def test_agent_defaults(tmp_path: Path, provider: str, argv: tuple[str, ...]) -> None:
    config = ok([write(tmp_path, "w.yaml", f"agents:\n  - name: t\n    provider: {provider}\n")])
    [agent] = config.agents
    assert agent.command == argv
    assert agent.prompt == "These lines appeared in {label}:\n{matches}\n"
    assert (agent.cwd, agent.max_turns, agent.deadline_ms, agent.pty) == (tmp_path, 100, None,
                                                                         False)


@pytest.mark.parametrize(
    ("command", "argv", "warning"),
    [
        ("\"my-cli --name 'two words' {prompt}\"", ("my-cli", "--name", "two words", "{prompt}"),
         None),
        ("[my-cli, '--prompt={prompt}']", ("my-cli", "--prompt={prompt}"), None),
        ("my-cli --json", ("my-cli", "--json"), None),  # (the prompt: on its stdin)
        ("my-cli --json\n    pty: true", ("my-cli", "--json", "{prompt}"),
         "has no {prompt} placeholder, and under `pty` its stdin is the terminal: the prompt "
         "is appended as the last argument"),
    ],
)
def test_agent_command(tmp_path: Path, command: str, argv: tuple[str, ...],
                       warning: str | None) -> None:
    path = write(tmp_path, "w.yaml", f"agents:\n  - name: t\n    provider: generic\n"
                 f"    command: {command}\n")
    result = load_config([path], env={})
    assert result.require().agents[0].command == argv
    assert [d.message for d in result.warnings] == ([warning] if warning else [])
    strict = load_config([path], env={}, strict=True)
    assert strict.ok is (warning is None)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${HOST}", {"HOST": "db1"}, "db1"),
        ("a-${HOST}-b", {"HOST": "db1"}, "a-db1-b"),
        ("${HOST:-local}", {}, "local"),
        ("${HOST:-local}", {"HOST": ""}, "local"),
        ("${HOST:-}", {}, ""),
        ("${HOST}", {"HOST": ""}, ""),
        ("$$HOST", {"HOST": "db1"}, "$HOST"),
        ("$${HOST}", {"HOST": "db1"}, "${HOST}"),
        ("cost $5 and $(date)", {}, "cost $5 and $(date)"),
        ("${A}${B:-x}$$", {"A": "1"}, "1x$"),
        ("${HOST}", {"HOST": "${OTHER}"}, "${OTHER}"),
    ],
)
def test_interpolation(tmp_path: Path, text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(text, env) == (expected, [])
    path = write(tmp_path, "w.yaml", f"watchers:\n  - {{id: a, command: ls, pattern: x, "
                 f"env: {{V: '{text}'}}}}\n")
    assert ok([path], env).watchers[0].env == {"V": expected}


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("${MISSING}", "environment variable MISSING is not set (used as `${MISSING}`); set it "
         "or give a default: `${MISSING:-default}`"),
        ("${9LIVES}", "invalid reference `${9LIVES}`"),
        ("${OPEN", "invalid reference `${OPEN`"),
    ],
)
def test_interpolation_errors_name_the_key(tmp_path: Path, text: str, phrase: str) -> None:
    result = load_config([write(tmp_path, "w.yaml", W + f"    label: '{text}'\n")], env={})
    assert [(d.path, d.message[: len(phrase)]) for d in result.errors] == [
        ("watchers[0].label", phrase)]


@pytest.mark.parametrize("text", ["plain", "$", "a$$b", "${X}", "$${X}", "x$", "$$$", "{$}"])
def test_escape_round_trips(text: str) -> None:
    assert interpolate(escape(text), {"X": "no"}) == (text, [])


def test_layering(tmp_path: Path) -> None:
    base = write(tmp_path / "base", "watch.yaml", (
        "limits: {pollMs: 100, maxMatches: 50}\n"
        "watchers:\n"
        "  - {id: a, path: app.log, pattern: ERROR, exclude: [health]}\n"
        "  - {id: b, path: b.log, pattern: x}\n"
        "agents:\n  - {name: t, provider: mock, deadline: 1m}\n"))
    over = write(tmp_path / "prod", "watch.json", (
        '{"limits": {"pollMs": 250},'
        ' "watchers": [{"id": "a", "pattern": "FATAL"}, {"id": "b", "command": "make"},'
        '              {"id": "c", "path": "c.log", "pattern": "y"}],'
        ' "agents": [{"name": "t", "provider": "codex"}]}'))
    config = ok([base, over])
    assert (config.limits.poll_ms, config.limits.max_matches) == (250, 50)
    a, b, c = config.watchers
    assert (a.pattern, a.exclude, a.path) == ("FATAL", ("health",), tmp_path / "base/app.log")
    assert (b.kind, b.command, b.path, b.cwd) == ("command", "make", None, tmp_path / "prod")
    assert c.path == tmp_path / "prod" / "c.log"
    [t] = config.agents
    assert (t.provider, t.command[0], t.deadline_ms) == ("codex", "codex", 60_000)
    assert config.output.dir == tmp_path / "base" / ".watchrun"  # beside the FIRST file


def test_paths_resolve_against_the_config_folder_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "conf", "watch.yaml", (
        "output: {dir: ../out}\n"
        "watchers:\n  - {id: a, path: logs/app.log, pattern: x}\n"
        "  - {id: b, command: ls, cwd: sub, pattern: x}\n"
        "  - {id: c, path: ~/c.log, pattern: x}\n"
        "agents:\n  - {name: t, provider: mock, cwd: ..}\n"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = ok([Path("../conf/watch.yaml")])
    a, b, c = config.watchers
    assert a.path == tmp_path / "conf" / "logs" / "app.log"
    assert b.cwd == tmp_path / "conf" / "sub"
    assert c.path == Path(os.path.expanduser("~/c.log"))
    assert config.agents[0].cwd == tmp_path
    assert config.output.dir == tmp_path / "out"
    assert ok([Path("../conf/watch.yaml")], output_dir=Path("o")).output.dir == elsewhere / "o"


def test_a_layer_that_only_tunes_an_agent_or_watcher_leaves_its_cwd(tmp_path: Path) -> None:
    """A command watcher's or agent's `cwd` defaults to the folder of the file that defined
    it: a later layer in another folder that names it to change something else moves nothing."""
    base = write(tmp_path, "base.yaml", (
        "watchers:\n  - {id: b, command: ls, pattern: x}\n"
        "agents:\n  - {name: t, provider: generic, command: [pwd]}\n"
        "  - {name: m, provider: mock}\n"))
    over = write(tmp_path / "sub", "over.yaml", (
        "watchers:\n  - {id: b, pattern: y}\n"
        "agents:\n  - {name: t, deadline: 5s}\n  - {name: m, deadline: 5s}\n"))
    config = ok([base, over])
    assert config.watchers[0].cwd == tmp_path
    assert [(a.name, a.cwd) for a in config.agents] == [("t", tmp_path), ("m", tmp_path)]


def test_yaml_12_scalars_and_merge_keys(tmp_path: Path) -> None:
    text = (
        "$schema: ./schemas/watch.schema.json\n"
        "watchers:\n"
        "  - &w {id: a, path: app.log, pattern: x, label: on}\n"
        "  - {<<: *w, id: b, label: 1:30}\n"
        "  - {<<: *w, id: c, label: 2001-12-14}\n")
    config = ok([write(tmp_path, "w.yaml", text)])
    assert [(w.id, w.label, w.pattern) for w in config.watchers] == [
        ("a", "on", "x"), ("b", "1:30", "x"), ("c", "2001-12-14", "x")]


def test_gate(tmp_path: Path) -> None:
    text = ("watchers:\n  - {id: a, command: make, pattern: x, "
            "gate: {maxMatches: 0, exitCode: true, require: 'ok$'}}\n")
    (a,) = load_config([write(tmp_path, "w.yaml", text)], env={}).require().watchers
    assert a.gate == GateSpec(max_matches=0, exit_code=True, require="ok$")


@pytest.mark.parametrize("gate", ["{}", "{exitCode: false}", "{maxMatches: null}"])
def test_a_gate_without_a_condition_is_refused(tmp_path: Path, gate: str) -> None:
    """A gate that can never be crossed passed every CI run (a warning only): a gate that
    cannot look is an error, not a pass."""
    text = f"watchers:\n  - {{id: b, command: make, pattern: x, gate: {gate}}}\n"
    result = load_config([write(tmp_path, "w.yaml", text)], env={})
    assert not result.ok
    assert [(d.path, d.message) for d in result.errors if d.path == "watchers[0].gate"] == [
        ("watchers[0].gate", "has no condition: a gate that can never be crossed would pass "
         "every run; set maxMatches (0: any match crosses it), exitCode: true or require, or "
         "remove the gate")]


def test_nothing_to_run_is_a_warning(tmp_path: Path) -> None:
    result = load_config([write(tmp_path, "w.yaml", "limits: {pollMs: 100}\n")], env={})
    assert result.ok
    assert [d.message for d in result.warnings] == [
        "no watchers and no agents: there is nothing to run"]


RICH = (
    "limits: {pollMs: 250ms, maxLineBytes: 1MiB, stopTimeout: 2s, wakeOnMatch: true}\n"
    "output: {dir: out, maxBytes: 1GiB, keep: 0}\n"
    "watchers:\n"
    "  - {id: f, label: 'the $$file', path: logs/a.log, pattern: 'ERR$', exclude: [a, 'b$$'],"
    " caseSensitive: true, fromStart: true, wake: [t], gate: {maxMatches: 3, require: x}}\n"
    "  - id: c\n    command: \"echo '$${HOME}' $$((1+1))\"\n    cwd: sub\n"
    "    env: {A: '1', B: 2}\n    pattern: x\n    restart: always\n    restartDelay: 1.5s\n"
    "    schedule: '*/5 * * * *'\n    gate: {exitCode: true}\n"
    "  - {id: v, command: [ls, -l], pattern: y, wake: false}\n"
    "agents:\n"
    "  - name: t\n    provider: generic\n    command: [cli, --p, '{prompt}']\n"
    "    prompt: |\n      Look at {matches}\n      in {label}; cost $$5\n"
    "    env: {K: v}\n    schedule: '@hourly'\n    deadline: 30m\n    idleTimeout: 5m\n"
    "    until: 'output:DONE'\n    pty: true\n    maxTurns: 7\n"
    "  - {name: u, provider: claude}\n"
)


@pytest.mark.parametrize("fmt", ["yaml", "json", "toml"])
def test_round_trip_through_every_format(tmp_path: Path, fmt: str) -> None:
    first = ok([write(tmp_path / "a", "w.yaml", RICH)])
    assert first.watchers[1].command == "echo '${HOME}' $((1+1))"
    path = write(tmp_path / "b", f"resolved.{fmt}", dump_config(first, fmt))
    second = ok([path])
    assert config_to_dict(second) == config_to_dict(first)
    assert second.watchers == first.watchers
    assert second.agents == first.agents
    assert (second.limits, second.output) == (first.limits, first.output)


def test_dumped_yaml_is_camel_case_with_numbers(tmp_path: Path) -> None:
    doc = yaml.safe_load(dump_config(ok([write(tmp_path, "w.yaml", RICH)]), "yaml"))
    assert doc["limits"]["pollMs"] == 250 and doc["limits"]["maxLineBytes"] == 1024**2
    assert doc["output"] == {"dir": str(tmp_path / "out"), "maxBytes": 1024**3, "keep": 0,
                             "redact": False}
    assert doc["watchers"][1]["restartDelay"] == 1500
    assert doc["agents"][0]["deadline"] == 1_800_000


ISOLATED = "matched with Python re (backtracking) in an isolated worker, 250 ms per line"


@pytest.mark.parametrize(
    ("pattern", "note"),
    [
        ("ERROR|FATAL", None),
        (r"(?i)\berror\b", None),
        (r"(\w+) \1", f"uses a backreference \\N; {ISOLATED}"),
        (r"(?P<w>\w+)(?P=w)", f"uses a backreference \\N; {ISOLATED}"),
        (r"foo(?=bar)", f"uses lookahead (?=…); {ISOLATED}"),
        (r"(?<!x)y", f"uses negative lookbehind (?<!…); {ISOLATED}"),
        (r"a++", f"uses a possessive quantifier (*+, ++, ?+); {ISOLATED}"),
        (r"((?>a|b))?(?(1)x)", "uses an atomic group (?>…) and a conditional (?(N)…); "
         + ISOLATED),
        (r"end\Z", None),  # \Z is `$` per line: RE2 runs it
        (r"a{2000}", "uses syntax RE2 cannot run (invalid repetition size: {2000,2000}); "
         + ISOLATED),
    ],
)
def test_regex_engine_note(pattern: str, note: str | None) -> None:
    assert regex_engine_note(pattern) == note


@pytest.mark.parametrize(("written", "value"), [
    ("1e3", 1000.0), ("1.0e3", 1000.0), ("1.e3", 1000.0), ("-2E-1", -0.2), (".5", 0.5),
    ("1.0e+3", 1000.0), ("'1e3'", "1e3"), ("1e", "1e"), ("e3", "e3"), ("1e3x", "1e3x"),
])  # fmt: skip
def test_yaml_floats_are_yaml_1_2s(tmp_path: Path, written: str, value: object) -> None:
    """docs/config.md: YAML 1.2 scalars. PyYAML's 1.1 resolver wants a dot and a signed
    exponent, so `1e3` and `1.0e3` were strings (`limits.pollMs: string "1e3" is not a
    duration`; explorer config item 13); JSON and YAML 1.2 read them as numbers."""
    path = tmp_path / "watch.yaml"
    path.write_text("limits: {pollMs: " + written + "}\nwatchers:\n  - {id: a, command: 'true', "
                    "pattern: x, env: {V: " + written + "}}\n")
    result = load_config([path], env={})
    if value == 1000.0:
        assert result.config is not None, [d.format() for d in result.diagnostics]
        assert result.config.limits.poll_ms == 1000
        assert result.config.watchers[0].env["V"] == written  # (an env value: as written)
    else:
        assert result.config is None
        said = [d.format() for d in result.diagnostics]
        assert any(f"limits.pollMs: {'string' if isinstance(value, str) else 'number'} "
                   f"{json.dumps(value) if isinstance(value, str) else value}" in d
                   for d in said), said


@pytest.mark.parametrize(("written", "value"), [
    ("0x1F", 31), ("0o17", 15), ("017", 17), ("+12", 12), ("'0o17'", "0o17"),
    ('"0x1F"', "0x1F"), ("0b11", "0b11"), ("1:30", "1:30"), ("1_000", "1_000"), ("1_", "1_"),
    ("1__0", "1__0"), ("0x_1F", "0x_1F"), ("-0x1F", "-0x1F"), ("1_0.5", "1_0.5"),
])
def test_yaml_integers_are_yaml_1_2s(tmp_path: Path, written: str, value: object) -> None:
    """docs/config.md: `0x1F`/`0o17` are integers (YAML 1.2; `017` is decimal), quoted they
    are strings, and YAML 1.1's `0b`/sexagesimal/underscore forms stay strings: `1__0` had
    been read as 10 (`env` got "10", and an error named a number the file does not hold)."""
    path = tmp_path / "watch.yaml"
    watcher = "{id: a, command: 'true', pattern: x, env: {V: " + written + "}}"
    path.write_text(f"watchers:\n  - {watcher}\n")
    result = load_config([path], env={})
    assert result.config is not None, [d.format() for d in result.diagnostics]
    assert result.config.watchers[0].env["V"] == written.strip("'\"")  # (an env value: as
    # written, a number or not; the number it reads as is checked in `limits` below)
    limits = tmp_path / "limits.yaml"
    limits.write_text(f"limits: {{maxMatches: {written}}}\n")
    result = load_config([path, limits], env={})
    if isinstance(value, int):
        assert result.config is not None and result.config.limits.max_matches == value
    else:
        assert [d.path for d in result.errors] == ["limits.maxMatches"]


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "watch.yaml"
    path.write_bytes(b"\xef\xbb\xbfwatchers:\n  - {id: a, path: a.log, pattern: x}\n")
    result = load_config([path], env={})
    assert result.config is not None and result.config.watchers[0].id == "a"


def test_config_md_s_literal_dollar_brace_pattern_matches_that_text(tmp_path: Path) -> None:
    """docs/config.md's example of a literal `${` in a regex (the one before it, `a$${2}`, was
    itself an invalid regex: nothing to repeat)."""
    from watchrun.match.matcher import Matcher

    text = "watchers:\n  - {id: a, path: x.log, pattern: '\\$${HOME}'}\n"
    (w,) = load_config([write(tmp_path, "w.yaml", text)], env={"HOME": "/root"}).require().watchers
    assert w.pattern == "\\${HOME}"
    assert Matcher(w.pattern).find(b"x ${HOME} y\n/root\n") == [(0, 11)]
    assert "pattern: '\\$${HOME}'" in Path(__file__).parent.parent.joinpath(
        "docs/config.md").read_text()


@pytest.mark.parametrize(("fmt", "written", "passed"), [
    ("yaml", "1.10", "1.10"), ("yaml", "0022", "0022"), ("yaml", "0x1F", "0x1F"),
    ("yaml", "0o17", "0o17"), ("yaml", "1e3", "1e3"), ("yaml", "8080", "8080"),
    ("json", "1.10", "1.1"), ("json", "1e3", "1000.0"), ("json", "8080", "8080"),
    ("toml", "1.10", "1.1"), ("toml", "8080", "8080"),
])  # fmt: skip
def test_an_env_number_is_passed_as_written_or_warned_of(tmp_path: Path, fmt: str,
                                                         written: str, passed: str) -> None:
    """Explorer cmd F1: `VERSION: 1.10` reached the command as "1.1" (`0022` as "22"), with no
    word, not even with --strict. In YAML an env value is its text as written; JSON and TOML
    numbers are read before watchrun sees them, so a fraction is passed as the number reads,
    with a warning naming it (--strict refuses it)."""
    path = tmp_path / f"watch.{fmt}"
    path.write_text({
        "yaml": "watchers:\n  - {id: a, command: 'true', pattern: x, env: {V: %s}}\n",
        "json": '{"watchers": [{"id": "a", "command": "true", "pattern": "x", "env": {"V": %s}}]}',
        "toml": '[[watchers]]\nid = "a"\ncommand = "true"\npattern = "x"\nenv = {V = %s}\n',
    }[fmt] % written)
    result = load_config([path], env={})
    assert result.config is not None and result.config.watchers[0].env["V"] == passed
    warned = passed != written
    said = [d.message for d in result.diagnostics if d.path == "watchers[0].env.V"]
    assert said == ([f"read as the number {passed}, passed as \"{passed}\": a number's "
                     "spelling is not kept (`1.10` is 1.1); quote the value to pass it as "
                     "written"] if warned else [])
    assert (load_config([path], env={}, strict=True).config is None) == warned
