"""Clamped settings: out of range is clamped with a warning, and --strict makes it an error."""
# ruff: noqa: RUF001 - messages say "allowed 10 to 60000" with an en dash, as users see it

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from inproc import inproc

from watchrun.config import load_config
from watchrun.config.clamp import LIMIT_RULES

W = "watchers:\n  - id: a\n    path: app.log\n    pattern: x\n"


def write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


LIMIT_CLAMPS = [
    ("pollMs", 5, 10, "5 clamped to 10 (allowed 10–60000)"),
    ("pollMs", 120000, 60000, "120000 clamped to 60000 (allowed 10–60000)"),
    ("pollMs", "'5ms'", 10, "5ms clamped to 10ms (allowed 10ms–1m)"),
    ("maxWatchers", 0, 1, "0 clamped to 1 (allowed 1–500)"),
    ("maxWatchers", 501, 500, "501 clamped to 500 (allowed 1–500)"),
    ("maxAgents", 65, 64, "65 clamped to 64 (allowed 1–64)"),
    ("maxMatches", -1, 1, "-1 clamped to 1 (allowed 1–100000)"),
    ("maxMatches", 100001, 100000, "100001 clamped to 100000 (allowed 1–100000)"),
    ("maxLogLines", 0, 1, "0 clamped to 1 (allowed 1–100000)"),
    ("matchLines", 2001, 2000, "2001 clamped to 2000 (allowed 1–2000)"),
    ("maxLineBytes", 100, 256, "100 clamped to 256 (allowed 256–16777216)"),
    ("maxLineBytes", "32MiB", 16 * 1024**2, "32MiB clamped to 16MiB (allowed 256B–16MiB)"),
    ("maxEventBytes", "1KiB", 4096, "1KiB clamped to 4KiB (allowed 4KiB–256MiB)"),
    ("maxEventBytes", "1GiB", 256 * 1024**2, "1GiB clamped to 256MiB (allowed 4KiB–256MiB)"),
    ("stopTimeout", "2m", 60_000, "2m clamped to 1m (allowed 0–1m)"),
    ("stopTimeout", -1, 0, "-1 clamped to 0 (allowed 0–60000)"),
]
FIELDS = {"pollMs": "poll_ms", "maxWatchers": "max_watchers", "maxAgents": "max_agents",
          "maxMatches": "max_matches", "maxLogLines": "max_log_lines",
          "matchLines": "match_lines", "maxLineBytes": "max_line_bytes",
          "maxEventBytes": "max_event_bytes", "stopTimeout": "stop_timeout_ms"}


@pytest.mark.parametrize(("key", "value", "clamped", "message"), LIMIT_CLAMPS)
def test_limits_are_clamped_with_a_warning(tmp_path: Path, key: str, value: object,
                                           clamped: int, message: str) -> None:
    path = write(tmp_path, "w.yaml", W + f"limits: {{{key}: {value}}}\n")
    result = load_config([path], env={})
    assert getattr(result.require().limits, FIELDS[key]) == clamped
    assert [(d.severity, d.path, d.message, d.line) for d in result.diagnostics] == [
        ("warning", f"limits.{key}", message, 5)]
    strict = load_config([path], env={}, strict=True)
    assert strict.config is None
    assert [(d.severity, d.message) for d in strict.diagnostics] == [("error", message)]


@pytest.mark.parametrize(
    ("extra", "where", "attr", "clamped", "message"),
    [
        ("output: {maxBytes: 1KiB}\n", "output.maxBytes", ("output", "max_bytes"), 65536,
         "1KiB clamped to 64KiB (allowed 64KiB–1TiB)"),
        ("output: {keep: 101}\n", "output.keep", ("output", "keep"), 100,
         "101 clamped to 100 (allowed 0–100)"),
        ("agents: [{name: t, provider: mock, deadline: 10ms}]\n", "agents[0].deadline",
         ("agents", "deadline_ms"), 1000, "10ms clamped to 1s (allowed 1s–1d)"),
        ("agents: [{name: t, provider: mock, idleTimeout: 2d}]\n", "agents[0].idleTimeout",
         ("agents", "idle_timeout_ms"), 86_400_000, "2d clamped to 1d (allowed 1s–1d)"),
        ("agents: [{name: t, provider: mock, maxTurns: 0}]\n", "agents[0].maxTurns",
         ("agents", "max_turns"), 1, "0 clamped to 1 (allowed 1–10000)"),
    ],
)
def test_other_ranges_are_clamped(tmp_path: Path, extra: str, where: str,
                                  attr: tuple[str, str], clamped: int, message: str) -> None:
    result = load_config([write(tmp_path, "w.yaml", W + extra)], env={})
    config = result.require()
    holder = config.output if attr[0] == "output" else config.agents[0]
    assert getattr(holder, attr[1]) == clamped
    assert [(d.path, d.message) for d in result.warnings] == [(where, message)]


def test_restart_delay_is_clamped(tmp_path: Path) -> None:
    text = "watchers:\n  - {id: a, command: make, pattern: x, restartDelay: 90s}\n"
    result = load_config([write(tmp_path, "w.yaml", text)], env={})
    assert result.require().watchers[0].restart_delay_ms == 60_000
    assert [d.format() for d in result.warnings] == [
        f"warning: watchers[0].restartDelay: 90s clamped to 1m (allowed 100ms–1m) "
        f"({tmp_path / 'w.yaml'}:2:40)"]


# -- docs/config.md's `limits` and `output` tables are what the runner does ----------------
def _doc_rows(section: str) -> dict[str, tuple[str, str]]:
    """key -> (default, range) of a docs/config.md table (`## limits`, `## output`)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 4:
            default, rng = cells[2:4] if section == "`limits`" else (cells[2], cells[3])
            rows[cells[0].strip("`")] = (default.strip("`"), rng.removesuffix(" (clamped)"))
    return rows


def _value(text: str) -> int | bool:
    from watchrun.config.units import parse_duration, parse_size

    if text in ("true", "false"):
        return text == "true"
    if text.isdigit():
        return int(text)
    return parse_size(text) if text[-1] == "B" else parse_duration(text)


def _config(tmp_path: Path, limits: str, *args: str) -> tuple[int, str, str]:
    cfg = write(tmp_path, "watch.yaml", limits + W)
    p = inproc(tmp_path, *args, "-c", str(cfg))  # (a read of the config, in this process)
    return p.returncode, p.stdout, p.stderr


def test_docs_config_md_defaults_and_ranges_are_the_runners(tmp_path: Path) -> None:
    tables = {"limits": _doc_rows("`limits`"), "output": _doc_rows("`output`")}
    assert len(tables["limits"]) == len(LIMIT_RULES) == 14
    assert {"maxBytes", "keep"} <= set(tables["output"])
    rc, out, _ = _config(tmp_path, "", "config", "--format", "json")
    resolved = json.loads(out)
    for section, rows in tables.items():
        for key, (default, _rng) in rows.items():
            if key != "dir":
                assert resolved[section][key] == _value(default), (section, key)
    # every range, from both sides: set each bound's neighbour and see it clamped to the bound
    ranged = {(s, k): rng.split("–") for s, rows in tables.items() for k, (_d, rng) in rows.items()
              if "–" in rng}
    assert len(ranged) == 14  # 12 limits (not the booleans), output.maxBytes and output.keep
    for side in (0, 1):
        lines: dict[str, list[str]] = {s: [] for s in tables}
        for (section, key), bounds in ranged.items():
            bound = _value(bounds[side])
            lines[section].append(f"{key}: {bound - 1 if side == 0 else bound * 2 + 1}")
        text = "".join(f"{s}: {{{', '.join(v)}}}\n" for s, v in lines.items())
        rc, out, err = _config(tmp_path, text, "config", "--format", "json")
        assert rc == 0, err
        resolved = json.loads(out)
        for (section, key), bounds in ranged.items():
            assert resolved[section][key] == _value(bounds[side]), (section, key, side)
            assert f"{section}.{key}: " in err and "clamped to" in err


def _defaults(section: str) -> dict[str, object]:
    """key -> default of a docs/config.md key table whose default is one literal value."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    body = text.split(f"\n{section}\n", 1)[1].split("\n#", 1)[0]
    found: dict[str, object] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        literal = re.fullmatch(r"`([^`]*)`|(\d+)|(\d+m?s)", cells[2]) if len(cells) > 3 else None
        if line.startswith("| `") and literal and not cells[2].startswith("`limits."):
            value = next(g for g in literal.groups() if g is not None)
            if value in ("true", "false", "[]", "{}"):
                found[cells[0].strip("`")] = json.loads(value)
            elif re.fullmatch(r"\d+m?s|\d+", value):
                found[cells[0].strip("`")] = _value(value)
            else:
                found[cells[0].strip("`")] = value.replace("\\n", "\n")
    return found


def test_docs_config_md_key_defaults_and_provider_commands_are_the_runners(
        tmp_path: Path) -> None:
    providers = ["claude", "codex", "gemini", "opencode", "pi", "cursor", "copilot"]
    agents = "".join(f"  - {{name: {p}, provider: {p}}}\n" for p in providers)
    text = ("watchers:\n  - {id: c, command: 'echo x', pattern: x, actions: [{type: webhook, "
            "url: 'http://127.0.0.1:9/'}, {type: exec, command: ['true']}]}\n"
            "  - {id: f, path: f.log, pattern: x}\n  - {id: d, command: 'echo x', pattern: x}\n"
            "agents:\n" + agents)
    cfg = write(tmp_path, "watch.yaml", text)
    p = inproc(tmp_path, "config", "--format", "json", "-c", str(cfg))  # (in this process)
    assert p.returncode == 0, p.stderr
    resolved = json.loads(p.stdout)
    command, file, plain = resolved["watchers"]
    tables = {"## `watchers[]`": {**plain, **file},
              "### `actions[]`": {**command["actions"][0], **command["actions"][1]},
              "## `agents[]`": resolved["agents"][0]}
    checked = 0
    for section, got in tables.items():
        for key, default in _defaults(section).items():
            if key in got:
                assert got[key] == default, (section, key)
                checked += 1
            else:
                assert key in ("fromStart", "gate", "schedule", "actions", "previousId"), key
    assert checked >= 20
    root = Path(__file__).resolve().parents[1]
    doc, readme = (root / "docs" / "config.md").read_text(), (root / "README.md").read_text()
    for agent in resolved["agents"]:
        name = agent["provider"]
        for shown in (re.search(rf"^\| {name} \| `([^`]*)` \|", doc, flags=re.M),
                      re.search(rf"^\| `{name}` \| `([^`]*)`", readme, flags=re.M)):
            assert shown is not None and agent["command"] == shown.group(1).split(), agent
