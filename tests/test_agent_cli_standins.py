"""Agent turns against stand-ins of the real CLIs: small scripts, on PATH under the CLI's name,
that parse the arguments and print what the real CLI prints (its words quoted, with where and
from which version they were taken), run with the provider's default command (explore-clis)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from test_agent_turn import check_records, of

from watchrun.cli.agent_run import cmd_agent_run

CODEX = r'''
"""codex-cli 0.171.0's `codex exec` as clap parses it (`codex exec --help`): options, then the
first positional names a subcommand (`resume`, `fork`, `review`, `help`) unless `--` came
before it; else it is the prompt. What each subcommand printed with no more arguments is
quoted from explore-clis' runs of the real CLI (out/codex-help.out, codex-review.err,
codex-resume.err; fork's, codex exec --json fork, run by this fix's helper)."""
import json, sys
args = sys.argv[1:]
assert args[0] == "exec", args
positional, literal = [], False
for a in args[1:]:
    if a == "--" and not literal:
        literal = True
    elif literal or a == "-" or not a.startswith("-"):
        positional.append((a, literal))
word, literal = positional[0]
if not literal and word == "help":
    print("Run Codex non-interactively\n\nUsage: codex exec [OPTIONS] [PROMPT]\n"
          "       codex exec [OPTIONS] <COMMAND> [ARGS]")
    sys.exit(0)
if not literal and word == "review":
    sys.exit("Error: Specify --uncommitted, --base, --commit, or provide custom review "
             "instructions")
if not literal and word == "resume":
    sys.exit("Reading prompt from stdin...\nNo prompt provided via stdin.")
if not literal and word == "fork":
    print("error: the following required arguments were not provided:\n  <SESSION_ID>\n\n"
          "Usage: codex exec fork <SESSION_ID> [PROMPT]\n\n"
          "For more information, try '--help'.", file=sys.stderr)
    sys.exit(2)
for event in ({"type": "thread.started", "thread_id": "t-1"}, {"type": "turn.started"},
              {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                                                  "text": f"prompt: {word}"}},
              {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0,
                                                   "output_tokens": 2}}):
    print(json.dumps(event), flush=True)
'''


def standin(bin_dir: Path, name: str, body: str) -> None:
    """`name` on PATH: `body` run by this Python."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{path}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return path


def agent_run(tmp_path: Path, provider: str, prompt: str, extra: str = ""
              ) -> tuple[int, list[dict[str, object]]]:
    """`agent run a --prompt PROMPT` of an agent with `provider`'s default command."""
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(f"agents:\n  - name: a\n    provider: {provider}\n    deadline: 20s\n"
                   f"{extra}")
    args = argparse.Namespace(config=[cfg], output_dir=tmp_path / "out", name="a",
                              prompt=prompt)
    status = cmd_agent_run(args)
    return status, check_records(tmp_path / "out" / "agents" / "a.jsonl")


@pytest.mark.parametrize("word", ["help", "review", "resume", "fork"])
def test_a_one_word_prompt_naming_a_codex_subcommand_is_the_prompt(
        tmp_path: Path, bin_dir: Path, word: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Explore-clis F6: `codex exec --json help` printed exec's help and exited 0 (a turn with
    no answer); `review` ran a code review. The default command puts `--` before the prompt."""
    standin(bin_dir, "codex", CODEX)
    status, recs = agent_run(tmp_path, "codex", word)
    assert status == 0, capsys.readouterr().err
    assert capsys.readouterr().out == f"prompt: {word}\n"
    (start,) = of(recs, "dispatch-start")
    assert start["command"] == ["codex", "exec", "--json", "--", "{prompt}"]
    assert json.dumps(of(recs, "dispatch-finished")[0]["reply"]) == json.dumps(f"prompt: {word}")
