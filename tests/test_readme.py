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

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)
DOCS = {p.name: p.read_text() for p in (ROOT / "docs").glob("*.md")}
SH_BLOCKS = [body for text in (README, *DOCS.values())
             for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S) if lang == "sh"]
"""Shell blocks of the README and of docs/: what users copy."""
ASSIGN = re.compile(r"[A-Z_][A-Z0-9_]*=")


def commands() -> list[str]:
    """Every `watchrun …` command of a shell block, as the shell splits it: also after `&&` or
    `|`, after `VAR=value` assignments and inside `<(…)`, without its redirections; not a
    synopsis with `…`."""
    found = []
    for body in SH_BLOCKS:
        for line in body.splitlines():
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.commenters, lex.whitespace_split = "#", True
            words: list[str] = []
            for token in [*lex, ";"]:
                if token and set(token) <= set("();<>|&"):
                    if words and words[0] == "watchrun" and "…" not in words:
                        found.append(shlex.join(words))
                    words = [] if token != ">" else ["> target"]
                elif words[:1] != ["> target"] and not (not words and ASSIGN.match(token)):
                    words.append(token)
                elif words[:1] == ["> target"]:
                    words = []
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
    for hidden in ("watchrun run --once -c watch.ci.yaml",  # after SAMPLE_WARN=1
                   "watchrun completion bash",  # inside source <(…)
                   "watchrun -c watch.yaml status app-log"):  # docs/cli.md
        assert hidden in cmds, hidden


def test_every_fuzz_command_names_a_target() -> None:
    source = (ROOT / "tests" / "fuzz_atheris.py").read_text()  # imports atheris: read it
    targets = set(re.findall(r'"(\w+)": fuzz_\w+', source.split("TARGETS = ", 1)[1]))
    shown = re.findall(r"fuzz_atheris\.py (\w+)", README + "".join(DOCS.values()))
    also = re.findall(r"# also: ([\w, ]+)", DOCS["security.md"])
    named = shown + [t.strip() for group in also for t in group.split(",")]
    assert len(named) >= 8
    assert len(targets) == 7 and set(named) <= {"seed", *targets}, named


@pytest.mark.parametrize("body", configs())
def test_readme_configs_validate(body: str, tmp_path: Path) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(body)
    env = {**os.environ, "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/X"}
    p = subprocess.run([watchrun_bin(), "validate", "-c", str(config)], capture_output=True,
                       text=True, timeout=30, env=env)  # the README's reaction example uses it
    assert p.returncode == 0, p.stdout + p.stderr
