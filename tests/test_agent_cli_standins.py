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
codex-resume.err; fork's, codex exec --json fork, run by this fix's helper). Outside a git
repository, without --skip-git-repo-check, it exits 1 saying so on stderr (NOT_A_REPO)."""
import json, os, sys
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
here = os.getcwd()
while not os.path.isdir(os.path.join(here, ".git")) and here != "/":
    here = os.path.dirname(here)
if "--skip-git-repo-check" not in args and not os.path.isdir(os.path.join(here, ".git")):
    sys.exit(NOT_A_REPO)
for event in ({"type": "thread.started", "thread_id": "t-1"}, {"type": "turn.started"},
              {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                                                  "text": f"prompt: {word}"}},
              {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0,
                                                   "output_tokens": 2}}):
    print(json.dumps(event), flush=True)
'''

CODEX_NOT_A_REPO = (
    # codex-cli 0.171.0, `codex exec --json -- hello` in a folder of no git repository, HOME
    # empty under /tmp: explore-clis out/codex-plain.err, run again by this fix's helper
    'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create '
    'helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf('
    '"/tmp/home/.codex"))\n'
    "Reading additional input from stdin...\n"
    "Not inside a trusted directory and --skip-git-repo-check was not specified.")
PI_NO_KEY = (
    # pi 0.73.1 (@mariozechner/pi-coding-agent), `pi --mode json -p "say hi"` with no
    # credentials: explore-clis out/pi.err, run again by this fix's helper (exit 1)
    "No API key found for the selected model.\n\n"
    "Use /login to log into a provider via OAuth or API key. See:\n"
    "  /tmp/node_modules/@mariozechner/pi-coding-agent/docs/providers.md\n"
    "  /tmp/node_modules/@mariozechner/pi-coding-agent/docs/models.md")
PI_SESSION = ('{"type":"session","version":3,"id":"01a25317-c02a-7578-826c-9338a28b355a",'
              '"timestamp":"2026-12-08T00:39:55.178Z","cwd":"/tmp/plain"}')
COPILOT_NO_AUTH = (
    # @github/copilot 1.0.102, `copilot -p "say hi" --output-format json` with no credentials:
    # explore-clis out/copilot.err, run again by this fix's helper (exit 1, nothing on stdout)
    "Error: No authentication information found.\n\n"
    "Copilot can be authenticated with GitHub using an OAuth Token or a Fine-Grained Personal "
    "Access Token.\n\n"
    "To authenticate, you can use any of the following methods:\n"
    "  \u2022 Start 'copilot' and run the '/login' command\n"
    "  \u2022 Set the COPILOT_GITHUB_TOKEN, GH_TOKEN, or GITHUB_TOKEN environment variable\n"
    "  \u2022 Run 'gh auth login' to authenticate with the GitHub CLI")

GEMINI = r'''
"""Gemini CLI 0.61.0 (@google/gemini-cli) in a folder it has not trusted, a key set: it exits 55
saying so in red on stderr (explore-clis out/gemini-key.err, run again by this fix's helper),
unless given --skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true; then it goes on (the real one to
the network: here the stream of the docs' example, docs_stream_json_example.jsonl, cut down)."""
import json, os, sys
if "--skip-trust" not in sys.argv and os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") != "true":
    sys.stderr.write(
        "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use "
        "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or "
        "trust this directory in interactive mode. For more details, see "
        "https://geminicli.com/docs/cli/trusted-folders/#headless-and-automated-environments"
        "\x1b[0m\n")
    sys.exit(55)
for event in ({"type": "init", "session_id": "abc123", "model": "gemini-2.0-flash-exp"},
              {"type": "message", "role": "assistant", "content": "trusted", "delta": True},
              {"type": "result", "status": "success", "stats": {
                  "total_tokens": 12, "input_tokens": 10, "output_tokens": 2, "cached": 0}}):
    print(json.dumps(event), flush=True)
'''


def saying(stdout: str, stderr: str, code: int) -> str:
    """A stand-in's body: it prints `stdout` and `stderr` (a line each at least) and exits
    `code`."""
    return (f"import sys\nsys.stdout.write({stdout!r})\nsys.stdout.flush()\n"
            f"sys.stderr.write({stderr!r} + '\\n')\nsys.exit({code})\n")


def standin(bin_dir: Path, name: str, body: str) -> None:
    """`name` on PATH: `body` run by this Python."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    if name == "codex":
        body = f"NOT_A_REPO = {CODEX_NOT_A_REPO!r}\n{body}"
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
    (tmp_path / ".git").mkdir()  # (the agent's cwd: the config's folder)
    status, recs = agent_run(tmp_path, "codex", word)
    assert status == 0, capsys.readouterr().err
    assert capsys.readouterr().out == f"prompt: {word}\n"
    (start,) = of(recs, "dispatch-start")
    assert start["command"] == ["codex", "exec", "--json", "--", "{prompt}"]
    assert json.dumps(of(recs, "dispatch-finished")[0]["reply"]) == json.dumps(f"prompt: {word}")


@pytest.mark.parametrize(("provider", "body", "reason", "code"), [
    ("codex", CODEX, "Not inside a trusted directory and --skip-git-repo-check was not "
                     "specified.", "untrusted-workspace"),
    ("pi", saying(PI_SESSION + "\n", PI_NO_KEY, 1), "No API key found for the selected model.",
     "auth"),
    ("copilot", saying("", COPILOT_NO_AUTH, 1), "Error: No authentication information found.",
     "auth"),
])
def test_a_cli_that_exits_saying_why_on_stderr_fails_with_its_words(
        tmp_path: Path, bin_dir: Path, provider: str, body: str, reason: str, code: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Explore-clis F2: codex, pi and copilot exit 1 before their stream says anything of why
    (no API key, no login, no git repository); `agent run` and `agent list` said only "the
    process exited with code 1", the reason left in the `stderr` records. The turn's error is
    the CLI's own line that says why: not its last line (a list of ways to log in, a path),
    nor a WARNING before it."""
    standin(bin_dir, provider, body)
    status, recs = agent_run(tmp_path, provider, "say hi")
    assert status == 1
    err = capsys.readouterr().err
    (fin,) = of(recs, "dispatch-finished")
    assert fin["error"]["message"].startswith(reason), fin["error"]
    assert fin["error"]["code"] == code
    assert f"turn-1 failed: {reason}" in err
    (failure,) = of(recs, "failure")
    assert failure["message"] == fin["error"]["message"]


def test_the_reason_read_on_stderr_is_redacted_and_bounded(
        tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The line lifted out of stderr becomes the turn's error, which `agent run` prints and
    `agent list` shows: a key the CLI echoes there is `[REDACTED:kind]`, a `${VAR}` secret of
    the agent's `env` too, as in a prompt; a long line keeps its first KiB."""
    key = "sk-ant-api03-" + "B" * 40
    monkeypatch.setenv("PASS_FOR_AGENT", "hunter2-correct-horse")
    line = (f"Error: the key {key} was refused; the token $AGENT_TOKEN too "
            + "and so on " * 300)
    standin(bin_dir, "pi", "import os, sys\n"
            f"sys.exit({line!r}.replace('$AGENT_TOKEN', os.environ['AGENT_TOKEN']))\n")
    status, recs = agent_run(tmp_path, "pi", "say hi",
                             "    env: {AGENT_TOKEN: '${PASS_FOR_AGENT}'}\n")
    assert status == 1
    err = capsys.readouterr().err
    (fin,) = of(recs, "dispatch-finished")
    message = fin["error"]["message"]
    assert key not in message and "hunter2" not in message and key not in err
    assert "hunter2" not in err
    assert message.startswith("Error: the key [REDACTED:anthropic-api-key] was refused; the "
                              "token [REDACTED:"), message
    assert message.endswith("…") and len(message.encode()) <= 1024 + 3
    assert any(key in str(r.get("text")) for r in of(recs, "stderr"))  # (recorded as printed)


def test_codex_outside_a_git_repository_says_how_to_fix_it(
        tmp_path: Path, bin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Explore-clis F3: `codex exec` outside a git repository exits 1 unless given
    `--skip-git-repo-check`; the agent's `cwd` (the config's folder by default) need not be
    one. watchrun does not add the flag: its error says what to do."""
    standin(bin_dir, "codex", CODEX)
    status, recs = agent_run(tmp_path, "codex", "say hi")
    assert status == 1
    err = capsys.readouterr().err
    (fin,) = of(recs, "dispatch-finished")
    message = fin["error"]["message"]
    assert "set the agent's `cwd` to a git repository" in message
    assert "add --skip-git-repo-check to the agent's command" in message
    assert message in err
    status, recs = agent_run(tmp_path, "codex", "say hi", "    command: [codex, exec, --json, "
                             "--skip-git-repo-check, --, '{prompt}']\n")
    assert status == 0 and capsys.readouterr().out == "prompt: say hi\n"


@pytest.mark.parametrize("trusted", [
    "    env: {GEMINI_API_KEY: fake-key, GEMINI_CLI_TRUST_WORKSPACE: 'true'}\n",
    "    env: {GEMINI_API_KEY: fake-key}\n    command: [gemini, -p, '{prompt}', "
    "--output-format, stream-json, --skip-trust]\n",
])
def test_gemini_in_an_untrusted_folder_says_how_to_trust_it(
        tmp_path: Path, bin_dir: Path, trusted: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Explore-clis F1: Gemini CLI 0.61 exits 55 in every folder it has not trusted (a fresh
    checkout, a container, a CI job), and the error said only "the workspace is not trusted".
    watchrun does not skip the check (the user's safety decision): the error says the three
    ways to trust the folder, and either of the two a config can hold works."""
    standin(bin_dir, "gemini", GEMINI)
    status, recs = agent_run(tmp_path, "gemini", "say hi", "    env: {GEMINI_API_KEY: x}\n")
    assert status == 1
    err = capsys.readouterr().err
    (fin,) = of(recs, "dispatch-finished")
    message = fin["error"]["message"]
    assert fin["error"]["code"] == "untrusted-workspace"
    assert message.startswith("gemini exited with code 55: the workspace is not trusted")
    for fix in ("running `gemini` in it once", "set GEMINI_CLI_TRUST_WORKSPACE=true in the "
                "agent's env", "add --skip-trust to the agent's command"):
        assert fix in message and fix in err, fix
    status, recs = agent_run(tmp_path, "gemini", "say hi", trusted)
    assert status == 0 and capsys.readouterr().out == "trusted\n"
