"""What users copy from the README: every `watchrun …` command parses, every config validates."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
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


def fuzz_commands() -> list[list[str]]:
    """The arguments of every `python tests/fuzz_atheris.py …` of a shell block."""
    found = []
    for body in SH_BLOCKS:
        for line in body.splitlines():
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.commenters, lex.whitespace_split = "#", True
            words = list(lex)
            for i in [i for i, w in enumerate(words) if w == "tests/fuzz_atheris.py"]:
                args = list(itertools.takewhile(lambda w: not set(w) <= set("();<>|&"),
                                                words[i + 1:]))
                found.append(args)
    return found


class StubAtheris(types.ModuleType):
    """What the harness uses of atheris, for the suite (which has no atheris): nothing is
    instrumented, and `Fuzz` runs the target on no bytes, then once on each input of the
    corpus directories its arguments name, as libFuzzer does before it mutates them."""

    def __init__(self) -> None:
        super().__init__("atheris")
        self.ran: dict[str, int] = {}

    def instrument_imports(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def instrument_all(self) -> None:
        pass

    def Setup(self, argv: list[str], target: Callable[[bytes], None]) -> None:
        self.argv, self.target = argv, target

    def Fuzz(self) -> None:
        inputs = [b"", *(f.read_bytes() for arg in self.argv[1:] if not arg.startswith("-")
                         for f in sorted(Path(arg).iterdir()))]
        for data in inputs:
            self.target(data)
        name = sys.argv[1]
        self.ran[name] = max(self.ran.get(name, 0), len(inputs))


def test_every_fuzz_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `tests/fuzz_atheris.py` command of the README and docs/ runs, atheris stubbed: `seed`
    writes a corpus for every target, and each target takes every input of its corpus (a
    harness whose imports or runner had gone stale failed only in the long run)."""
    stub = StubAtheris()
    monkeypatch.setitem(sys.modules, "atheris", stub)
    monkeypatch.delitem(sys.modules, "fuzz_atheris", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # (its scratch directories)
    harness = importlib.import_module("fuzz_atheris")
    runs = fuzz_commands()
    assert [args[0] for args in runs].count("seed") == 1, runs
    assert {args[0] for args in runs} == {"seed", *harness.TARGETS}, runs
    seeded = next(args[1] for args in runs if args[0] == "seed")
    for args in runs:
        argv = [arg.replace(seeded, str(tmp_path / "corpus")) for arg in args]
        monkeypatch.setattr(sys, "argv", ["tests/fuzz_atheris.py", *argv])
        harness.main()
    assert set(stub.ran) == set(harness.TARGETS)
    assert all(n > 1 for n in stub.ran.values()), stub.ran  # (each on a corpus of its own)


@pytest.mark.parametrize("body", configs())
def test_readme_configs_validate(body: str, tmp_path: Path) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(body)
    env = {**os.environ, "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/X"}
    p = subprocess.run([watchrun_bin(), "validate", "-c", str(config)], capture_output=True,
                       text=True, timeout=30, env=env)  # the README's reaction example uses it
    assert p.returncode == 0, p.stdout + p.stderr
