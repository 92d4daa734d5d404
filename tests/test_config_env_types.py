"""A boolean or integer key given one whole `${VAR}` takes the value it spells (true/false,
decimal digits), as durations and sizes already did; anything else is an error that says the
value came from `${VAR}` and what it is read as (explore-layering F7: `expected true or false,
got string "true"`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from liverunner import cli

from watchrun.config import load_config
from watchrun.config.dump import config_to_dict, dump_config

CONFIG = """\
limits: {enabled: "${ENABLED:-true}", maxWatchers: "${MAXW:-20}", pollMs: "${POLL:-500}"}
output: {keep: "${KEEP:-5}", redact: "${REDACT:-false}"}
watchers:
  - id: x
    path: x.log
    pattern: X
    fromStart: "${FROM:-false}"
    caseSensitive: "${CASE:-false}"
    gate: {maxMatches: "${MM:-0}"}
  - {id: c, command: make, pattern: E, gate: {exitCode: "${EXIT}", maxMatches: 0}}
agents:
  - {name: a, provider: mock, pty: "${PTY:-false}", maxTurns: "${TURNS:-3}"}
"""


def fields(tmp_path: Path, env: dict[str, str], cache: bool = False) -> dict[str, Any]:
    (tmp_path / "w.yaml").write_text(CONFIG)
    c = load_config([tmp_path / "w.yaml"], env={"EXIT": "true", **env}, cache=cache).require()
    w, cmd, a = c.watchers[0], c.watchers[1], c.agents[0]
    assert w.gate is not None and cmd.gate is not None
    return {"enabled": c.limits.enabled, "maxWatchers": c.limits.max_watchers,
            "pollMs": c.limits.poll_ms, "keep": c.output.keep, "redact": c.output.redact,
            "fromStart": w.from_start, "caseSensitive": w.case_sensitive,
            "maxMatches": w.gate.max_matches, "exitCode": cmd.gate.exit_code, "pty": a.pty,
            "maxTurns": a.max_turns}


DEFAULTS = {"enabled": True, "maxWatchers": 20, "pollMs": 500, "keep": 5, "redact": False,
            "fromStart": False, "caseSensitive": False, "maxMatches": 0, "exitCode": True,
            "pty": False, "maxTurns": 3}


@pytest.mark.parametrize(("env", "changed"), [
    ({}, {}),
    ({"ENABLED": "false", "FROM": "true", "CASE": "True", "REDACT": "TRUE", "PTY": "true",
      "EXIT": "False"}, {"enabled": False, "fromStart": True, "caseSensitive": True,
                         "redact": True, "pty": True, "exitCode": False}),
    ({"MAXW": "3", "KEEP": "0", "MM": "+7", "TURNS": "12"},
     {"maxWatchers": 3, "keep": 0, "maxMatches": 7, "maxTurns": 12}),
], ids=["defaults", "booleans", "integers"])
def test_a_whole_reference_gives_a_boolean_or_an_integer(
        tmp_path: Path, env: dict[str, str], changed: dict[str, Any]) -> None:
    assert fields(tmp_path, env) == {**DEFAULTS, **changed}


@pytest.mark.parametrize(("env", "line", "key", "message"), [
    ({"ENABLED": "yes"}, 1, "limits.enabled",
     'expected true or false, got string "yes" (write true or false); it is the value of '
     "`${ENABLED:-true}`, which is read as a boolean when it is true or false (True, TRUE, "
     "False, FALSE)"),
    ({"FROM": "1"}, 7, "watchers[0].fromStart",
     'expected true or false, got string "1"; it is the value of `${FROM:-false}`, which is '
     "read as a boolean when it is true or false (True, TRUE, False, FALSE)"),
    ({"MAXW": "2x"}, 1, "limits.maxWatchers",
     'expected an integer, got string "2x"; it is the value of `${MAXW:-20}`, which is read '
     "as an integer when it is decimal digits (an optional sign, then 0-9)"),
    ({"MM": "-3"}, 9, "watchers[0].gate.maxMatches",
     "number -3 is below the minimum 0 (the value of `${MM:-0}`)"),
    ({"POLL": "fast"}, 1, "limits.pollMs", 'string "fast" is not a duration'),
], ids=["yes", "one", "not-digits", "below-minimum", "duration"])
def test_anything_else_is_an_error_that_names_the_reference(
        tmp_path: Path, env: dict[str, str], line: int, key: str, message: str) -> None:
    (tmp_path / "w.yaml").write_text(CONFIG)
    result = load_config([tmp_path / "w.yaml"], env={"EXIT": "true", **env})
    (error,) = [d for d in result.diagnostics if d.severity == "error"]
    assert (error.line, error.path) == (line, key)
    assert error.message.startswith(message)
    assert "`${" in error.message


@pytest.mark.parametrize("text", ['"on ${X}"', '"${X}${X}"', "'${X} '"])
def test_a_reference_inside_other_text_stays_a_string(tmp_path: Path, text: str) -> None:
    (tmp_path / "w.yaml").write_text("watchers:\n  - {id: x, path: x.log, pattern: X, "
                                     f"fromStart: {text}}}\n")
    result = load_config([tmp_path / "w.yaml"], env={"X": "true"})
    (error,) = result.diagnostics
    assert error.message.startswith("expected true or false, got string")
    assert "`${" not in error.message


@pytest.mark.parametrize("fmt", ["yaml", "json", "toml"])
def test_config_output_writes_the_values_and_loads_back(tmp_path: Path, fmt: str) -> None:
    env = {"ENABLED": "false", "MAXW": "3", "FROM": "true", "TURNS": "12", "EXIT": "true"}
    (tmp_path / "w.yaml").write_text(CONFIG)
    first = load_config([tmp_path / "w.yaml"], env=env).require()
    doc = config_to_dict(first)
    assert (doc["limits"]["enabled"], doc["limits"]["maxWatchers"],
            doc["watchers"][0]["fromStart"], doc["agents"][0]["maxTurns"]) == (False, 3, True, 12)
    (tmp_path / f"out.{fmt}").write_text(dump_config(first, fmt))
    again = load_config([tmp_path / f"out.{fmt}"], env={}).require()
    assert config_to_dict(again) == doc


def test_the_cache_gives_the_values_of_the_environment_now(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHRUN_CACHE_DIR", str(tmp_path / "cache"))
    assert fields(tmp_path, {"FROM": "true", "MAXW": "3"}, cache=True)["fromStart"] is True
    assert fields(tmp_path, {"FROM": "true", "MAXW": "3"}, cache=True)["maxWatchers"] == 3
    again = fields(tmp_path, {"FROM": "false", "MAXW": "4"}, cache=True)
    assert (again["fromStart"], again["maxWatchers"]) == (False, 4)


def test_validate_accepts_the_explorers_config(tmp_path: Path) -> None:
    (tmp_path / "ev.yaml").write_text(
        'limits: {enabled: "${ENABLED:-true}", maxWatchers: "${MAXW:-20}", '
        'pollMs: "${POLL:-500}"}\nwatchers:\n'
        '  - {id: x, path: x.log, pattern: X, fromStart: "${FROM:-false}"}\n')
    p = cli("validate", "-c", "ev.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ev.yaml: valid — 1 watcher" in p.stdout
