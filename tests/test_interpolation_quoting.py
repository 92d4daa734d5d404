"""`${VAR}` cannot inject (issue #12 item 2): in a string command (/bin/sh -c) a value is one
shell-quoted word wherever it stands; in an argv list, one argument; in an agent's command
string, one argument too (the string is split before substitution). Checked by running real
shells (dash as /bin/sh, and bash where present) on the quoted commands."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from liverunner import watchrun_bin, write_config

from watchrun.config import load_config
from watchrun.config.interpolate import interpolate
from watchrun.config.shellwords import contexts, script_indexes

ARGV = str(Path(__file__).parent / "progs" / "argv_json.py")
PROG = f"{sys.executable} {ARGV}"
HOSTILE = "main; touch pwned; echo $(id -u)"
M = "\ue000"


def shell_argv(command: str, shell: str = "/bin/sh") -> list[str]:
    res = subprocess.run([shell, "-c", command], capture_output=True, text=True, timeout=30,
                         check=False)
    assert res.returncode == 0, (command, res.stderr)
    *_, last = res.stdout.splitlines()
    parsed: list[str] = json.loads(last)
    return parsed


TEMPLATES = [
    # (template, what argv_json receives for the value V)
    ("{p} ${{V}}", lambda v: [v]),
    ('{p} "${{V}}"', lambda v: [v]),
    ("{p} '${{V}}'", lambda v: [v]),
    ('{p} "pre ${{V}} post"', lambda v: [f"pre {v} post"]),
    ("{p} 'pre ${{V}} post'", lambda v: [f"pre {v} post"]),
    ("{p} x${{V}}y", lambda v: [f"x{v}y"]),
    ("{p} ${{V}} # and ${{V}} in a comment", lambda v: [v]),
    ('{p} "$(printf %s ${{V}})"', lambda v: [v]),
    ('{p} "$(printf %s "${{V}}")"', lambda v: [v]),
    ("{p} $${{X:-a}} ${{V}}", lambda v: ["a", v]),
    ("{p} ${{V}}\necho ${{V}} >/dev/null", lambda v: [v]),
    # after `$(…)` or `$((…))` a `#` continues the word: no comment (these ran `touch`)
    ("{p} $(printf %s x)#${{V}}", lambda v: [f"x#{v}"]),
    ("{p} $((1))#${{V}}", lambda v: [f"1#{v}"]),
]


@pytest.mark.parametrize(("template", "want"), TEMPLATES)
def test_hostile_branch_name_is_one_word_and_runs_nothing(
    tmp_path: Path, template: str, want: object
) -> None:
    command, problems = interpolate(template.format(p=PROG), {"V": HOSTILE}, shell="sh")
    assert problems == []
    res = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                         timeout=30, check=False, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == want(HOSTILE)  # type: ignore[operator]
    assert not (tmp_path / "pwned").exists()
    assert res.stdout.count("\n") == 1 and str(0) not in res.stdout.replace(HOSTILE, "")


SHELL_TEXT = st.lists(
    st.sampled_from([*"ab $'\"\\`;&|()<>{}*?[]~#!\n\t=%^,-", "$(", "${", "é", "\u2028"]),
    max_size=12,
).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=SHELL_TEXT, which=st.integers(0, 8))
def test_any_value_arrives_whole_through_dash(value: str, which: int) -> None:
    template, want = TEMPLATES[which]
    if "printf" in template:
        value = value.rstrip("\n")  # $(…) drops trailing newlines: the shell's rule, not ours
    command, problems = interpolate(template.format(p=PROG), {"V": value, "X": ""}, shell="sh")
    assert problems == []
    assert shell_argv(command) == want(value)  # type: ignore[operator]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=SHELL_TEXT, which=st.integers(0, 5))
def test_any_value_arrives_whole_through_bash(value: str, which: int) -> None:
    template, want = TEMPLATES[which]
    command, problems = interpolate(template.format(p=PROG), {"V": value}, shell="sh")
    assert problems == []
    assert shell_argv(command, str(shutil.which("bash"))) == want(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("echo `${V}`", "inside backticks"),
        ("echo $$((${V} + 1))", "inside an arithmetic"),
        ("echo $${X:-${V}}", "inside a shell parameter expansion"),
        ("cat <<EOF\n${V}\nEOF", "inside a here-document"),
        ("echo \\${V}", "right after a `\\`"),
        ('echo "\\${V}"', "right after a `\\`"),
        ("echo $$${V}", "right after a `$`"),
        ("echo $'${V}'", "inside bash's $'…' quoting"),
        ("echo $'ref: \\'${V}'", "inside bash's $'…' quoting"),
        ("echo \"$$(printf %s $'${V}')\"", "inside bash's $'…' quoting"),
        ("x=$$(case a in a) :;; esac) ${V}", "a `case` inside $(…)"),
    ],
)
def test_where_a_value_cannot_be_quoted_the_config_is_refused(template: str, why: str) -> None:
    _, problems = interpolate(template, {"V": HOSTILE, "X": ""}, shell="sh")
    assert len(problems) == 1 and why in problems[0], problems
    assert 'write "$$V"' in problems[0]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_a_value_in_bashs_ansi_c_quotes_is_refused_not_run(tmp_path: Path) -> None:
    """In `$'…'` a `\\'` does not end the quotes: a value quoted as if it did would break out
    (`${V}` = `'; touch pwned; #` ran `touch` under bash). Text after `$'…'` is read as usual."""
    argv = ["bash", "-c", "echo $'ref: \\${V}'"]
    _, problems = interpolate(argv[2], {"V": "'; touch pwned; #"}, shell="sh")
    assert len(problems) == 1 and "right after a `\\`" in problems[0], problems  # in $'…'
    text = f"echo $'a\\'b' {M} \"{M}\" $'x'"
    assert contexts(text, M, "sh") == ["plain", "double"]
    command, problems = interpolate(f"{PROG} $'a\\'b' ${{V}}", {"V": HOSTILE}, shell="sh")
    assert problems == []
    res = subprocess.run([str(shutil.which("bash")), "-c", command], capture_output=True,
                         text=True, timeout=30, check=False, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == ["a'b", HOSTILE]
    assert not (tmp_path / "pwned").exists()


def test_here_document_ends_where_the_shell_ends_it() -> None:
    text = f"cat <<-'EOF'\n\t{M}\n\tEOF\necho {M} '{M}'"
    assert contexts(text, M, "sh") == ["inside a here-document", "plain", "single"]


def test_dollar_dollar_stays_a_literal_dollar() -> None:
    command, _ = interpolate(f"{PROG} $$HOME '$$HOME' ${{V}}", {"V": "$HOME"}, shell="sh")
    assert shell_argv(command) == [str(Path.home()), "$HOME", "$HOME"]


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["sh", "-c", "s"], 2), (["/bin/bash", "-lc", "s", "name"], 2),
        (["bash", "-e", "-c", "s"], 3), (["sh", "-c", "-e", "s"], 3), (["sh", "-c", "--", "s"], 3),
        (["sh", "script.sh"], None), (["python3", "-c", "s"], None), (["sh", "-c"], None),
        (["env", "sh", "-c", "s"], 3), (["/usr/bin/env", "X=1", "bash", "-lc", "s"], 4),
        (["nice", "-n", "5", "sh", "-c", "s"], 5), (["sh", "-o", "errexit", "-c", "s"], 4),
        (["sh", "-c", "-o", "errexit", "s"], 4), (["bash", "--rcfile", "f", "-c", "s"], 4),
        (["sh", "-o", "errexit", "script.sh"], None), (["sh", "--", "-c"], None),
        (["busybox", "sh", "-c", "s"], 3), (["sudo", "-u", "x", "bash", "-lc", "s"], 5),
    ],
)
def test_script_indexes(argv: list[str], index: int | None) -> None:
    assert script_indexes(argv) == ([] if index is None else [index])


# -- through the config loader ----------------------------------------------------------------


def load(tmp_path: Path, doc: dict[str, object], env: dict[str, str]) -> object:
    path = write_config(tmp_path, doc)
    result = load_config([path], env=env)
    assert result.config is not None, [d.format() for d in result.diagnostics]
    return result.config


def test_watcher_string_command_quotes_the_value(tmp_path: Path) -> None:
    cfg = load(tmp_path, {"watchers": [
        {"id": "a", "command": "git log ${BRANCH}", "pattern": "x"}]}, {"BRANCH": HOSTILE})
    assert cfg.watchers[0].command == f"git log '{HOSTILE}'"  # type: ignore[attr-defined]


def test_list_command_keeps_each_value_one_argument_and_quotes_sh_c_scripts(
    tmp_path: Path
) -> None:
    cfg = load(tmp_path, {"watchers": [
        {"id": "a", "command": [sys.executable, ARGV, "--ref=${BRANCH}"], "pattern": "x"},
        {"id": "b", "command": ["sh", "-c", f"{PROG} ${{BRANCH}}"], "pattern": "x"},
    ]}, {"BRANCH": HOSTILE})
    a, b = cfg.watchers  # type: ignore[attr-defined]
    assert a.command[2] == f"--ref={HOSTILE}"
    assert shell_argv(b.command[2]) == [HOSTILE]


@pytest.mark.parametrize(("command", "branch"), [
    (["sh", "-o", "errexit", "-c", "{p} ${{BRANCH}}"], HOSTILE),
    (["env", "sh", "-c", "{p} ${{BRANCH}}"], HOSTILE),
    (["/usr/bin/env", "LC_ALL=C", "nice", "-n", "1", "bash", "-e", "-c", "{p} ${{BRANCH}}"],
     HOSTILE),
    (["env", "GIT_BRANCH=${{BRANCH}}", "sh", "-c", "{p} ${{BRANCH}}"], "y;touch pwned;#/sh"),
])
def test_a_shell_script_behind_options_or_a_wrapper_is_quoted_too(
        tmp_path: Path, command: list[str], branch: str) -> None:
    """`sh -o errexit -c SCRIPT` and `env sh -c SCRIPT` run SCRIPT as shell code as well: a
    value there is one shell word (it ran `touch` when only `sh -c` was recognised, and when a
    value ending in `/sh` before the shell was taken for it)."""
    argv = [a.format(p=PROG) for a in command]
    cfg = load(tmp_path, {"watchers": [{"id": "a", "command": argv, "pattern": "x"}]},
               {"BRANCH": branch})
    got = list(cfg.watchers[0].command)  # type: ignore[attr-defined]
    res = subprocess.run(got, capture_output=True, text=True, timeout=30, check=False,
                         cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == [branch], res.stderr
    assert not (tmp_path / "pwned").exists()


def test_agent_command_string_value_with_spaces_stays_one_argument(tmp_path: Path) -> None:
    cfg = load(tmp_path, {"agents": [{
        "name": "t", "provider": "generic",
        "command": f"{PROG} --model ${{MODEL}} '{{prompt}}'",
    }]}, {"MODEL": "x --dangerously-skip-permissions"})
    assert cfg.agents[0].command == (  # type: ignore[attr-defined]
        sys.executable, ARGV, "--model", "x --dangerously-skip-permissions", "{prompt}")


@pytest.mark.parametrize("command", [
    ["sh", "-c", "claude -p '{prompt}'"],
    ["env", "TAG=${TAG}", "sh", "-c", "claude -p '{prompt}'"],  # TAG ends in `/sh`
])
def test_agent_sh_c_with_prompt_in_the_script_is_refused(tmp_path: Path,
                                                          command: list[str]) -> None:
    path = write_config(tmp_path, {"agents": [{
        "name": "t", "provider": "generic", "command": command}]})
    result = load_config([path], env={"TAG": "v1/sh"})
    assert result.config is None
    (err,) = [d for d in result.diagnostics if d.severity == "error"]
    assert err.path == "agents[0].command" and "inside the script of a shell's -c" in err.message


# -- end to end: `watchrun run --once` and `watchrun agent run` ---------------------------------


def test_run_once_with_a_hostile_branch_runs_nothing_extra(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "build", "command": f"{PROG} ${{BRANCH}}", "pattern": "touch",
         "gate": {"maxMatches": 0}}]})
    env = {"PATH": "/usr/bin:/bin", "BRANCH": HOSTILE}
    res = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(cfg)], capture_output=True,
                         text=True, timeout=60, check=False, cwd=tmp_path, env=env)
    assert not (tmp_path / "pwned").exists()
    assert json.dumps([HOSTILE]) in res.stdout  # echoed: one argument, the literal value
    assert res.returncode == 1  # the gate sees the literal text, as one line


def test_agent_run_receives_the_value_as_one_argument(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"agents": [{
        "name": "t", "provider": "generic", "command": f"{PROG} --flags ${{FLAGS}} {{prompt}}",
        "prompt": "hello"}]})
    env = {"PATH": "/usr/bin:/bin", "FLAGS": "--dangerously-skip-permissions --yolo"}
    res = subprocess.run([watchrun_bin(), "agent", "run", "t", "-c", str(cfg)],
                         capture_output=True, text=True, timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0]) == [
        "--flags", "--dangerously-skip-permissions --yolo", "hello"]
