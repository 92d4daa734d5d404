"""What users copy from the README: every `watchrun …` command parses, every config validates."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from liverunner import watchrun_bin

from watchrun.cli.main import parse

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)


def commands() -> list[str]:
    found = []
    for lang, body in BLOCKS:
        if lang != "sh":
            continue
        for line in body.splitlines():
            line = line.split("  #")[0].strip()
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("watchrun ") and "…" not in part and "|" not in part:
                    found.append(part)
    return found


def configs() -> list[str]:
    return [body for lang, body in BLOCKS if lang == "yaml" and
            ("watchers:" in body or "agents:" in body)]


def test_the_quick_start_has_exactly_the_two_setup_commands() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
    assert len(blocks) == 2
    assert "pip install ." in blocks[0] and "watchrun -c watch.yaml.example" in blocks[0]
    assert "pip install '.[test]'" in blocks[1] and "pytest" in blocks[1]
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "pip install '.[test]'" in ci and "pytest" in ci


@pytest.mark.parametrize("command", commands())
def test_readme_commands_parse(command: str) -> None:
    parse(shlex.split(command)[1:])  # as `main` parses; SystemExit (a usage error) fails it


def test_there_are_readme_commands_to_check() -> None:
    cmds = commands()
    assert len(cmds) >= 10
    assert any(c.startswith("watchrun agent watch") for c in cmds)


@pytest.mark.parametrize("body", configs())
def test_readme_configs_validate(body: str, tmp_path: Path) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(body)
    env = {**os.environ, "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/X"}
    p = subprocess.run([watchrun_bin(), "validate", "-c", str(config)], capture_output=True,
                       text=True, timeout=30, env=env)  # the README's reaction example uses it
    assert p.returncode == 0, p.stdout + p.stderr
