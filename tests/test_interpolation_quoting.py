"""`${VAR}` cannot inject (issue #12 item 2): in a string command (/bin/sh -c) a value is one
shell-quoted word wherever it stands, and one holding a character that could run code on a
second reading is refused (tests/test_shellcode.py); in an argv list, one argument; in an
agent's command string, one argument too (the string is split before substitution). Checked by
running real shells (dash as /bin/sh, and bash where present) on the quoted commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from liverunner import cli, write_config

from watchrun.config import load_config
from watchrun.config.interpolate import interpolate
from watchrun.config.shellcode import ORDINARY, script_indexes
from watchrun.config.shellwords import contexts

ARGV = str(Path(__file__).parent / "progs" / "argv_json.py")
PROG = f"{sys.executable} {ARGV}"
HOSTILE = "main; touch pwned; echo $(id -u)"
TRICKY = "main #1 *.log ?[ab] {c,d} ~/x !e %f=g, é"
"""Every kind of character a value in shell code may still hold: globs, braces, a tilde, a `#`,
history's `!`, non-ASCII."""
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
def test_hostile_branch_name_is_refused_wherever_it_stands(template: str, want: object) -> None:
    """It was quoted as one word; a shell that reads the word again would run it (cfgsec #6)."""
    _, problems = interpolate(template.format(p=PROG), {"V": HOSTILE, "X": ""}, shell="sh")
    assert len(problems) == template.count("${{V}}"), problems
    assert all("`${V}` is in shell code and its value holds ';'" in p for p in problems)


@pytest.mark.parametrize(("template", "want"), TEMPLATES)
def test_an_ordinary_value_is_one_word_and_runs_nothing(
    tmp_path: Path, template: str, want: object
) -> None:
    command, problems = interpolate(template.format(p=PROG), {"V": TRICKY, "X": ""}, shell="sh")
    assert problems == []
    res = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                         timeout=30, check=False, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == want(TRICKY)  # type: ignore[operator]
    assert res.stdout.count("\n") == 1


SHELL_TEXT = st.lists(
    st.sampled_from([*"ab $'\"\\`;&|()<>{}*?[]~#!\n\t=%^,-", "$(", "${", "é", "\u2028"]),
    max_size=12,
).map("".join)
ORDINARY_TEXT = st.lists(st.sampled_from([*sorted(ORDINARY), "é", "日", "\u0301", "\u2019", "€"]),
                         max_size=12).map("".join)
"""Values the shell-code rule lets through: quoting alone must keep them one word."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=SHELL_TEXT | ORDINARY_TEXT, which=st.integers(0, 8))
def test_any_value_arrives_whole_through_dash_or_is_refused(value: str, which: int) -> None:
    template, want = TEMPLATES[which]
    command, problems = interpolate(template.format(p=PROG), {"V": value, "X": ""}, shell="sh")
    if any(ch not in ORDINARY and ch.isascii() for ch in value) or "\u2028" in value:
        assert problems and "is in shell code and its value holds" in problems[0]
        return
    assert problems == []
    assert shell_argv(command) == want(value)  # type: ignore[operator]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=ORDINARY_TEXT, which=st.integers(0, 5))
def test_any_ordinary_value_arrives_whole_through_bash(value: str, which: int) -> None:
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
        ("cat <<${V}", "in a here-document's delimiter"),  # (found by the atheris run: the
        ("cat <<-'E${V}'\nx\nE", "in a here-document's delimiter"),  # reader gave it none)
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
    command, problems = interpolate(f"{PROG} $'a\\'b' ${{V}}", {"V": TRICKY}, shell="sh")
    assert problems == []
    res = subprocess.run([str(shutil.which("bash")), "-c", command], capture_output=True,
                         text=True, timeout=30, check=False, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == ["a'b", TRICKY]
    assert not (tmp_path / "pwned").exists()


def test_here_document_ends_where_the_shell_ends_it() -> None:
    text = f"cat <<-'EOF'\n\t{M}\n\tEOF\necho {M} '{M}'"
    assert contexts(text, M, "sh") == ["inside a here-document", "plain", "single"]


def test_dollar_dollar_stays_a_literal_dollar() -> None:
    command, problems = interpolate(f"{PROG} $$HOME '$$HOME' ${{V}}", {"V": "~"}, shell="sh")
    assert problems == []
    assert shell_argv(command) == [str(Path.home()), "$HOME", "~"]
    _, problems = interpolate(f"{PROG} ${{V}}", {"V": "$HOME"}, shell="sh")
    assert "its value holds '$'" in problems[0]  # a value is never expanded, and `$` is refused


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


def refused(tmp_path: Path, doc: dict[str, object], env: dict[str, str]) -> list[str]:
    """The errors of a config that does not load, as `key: message`."""
    result = load_config([write_config(tmp_path, doc)], env=env)
    assert result.config is None
    return [f"{d.path}: {d.message}" for d in result.diagnostics if d.severity == "error"]


def test_watcher_string_command_quotes_the_value(tmp_path: Path) -> None:
    doc: dict[str, object] = {"watchers": [
        {"id": "a", "command": "git log ${BRANCH}", "pattern": "x"}]}
    cfg = load(tmp_path, doc, {"BRANCH": "feature/a b"})
    assert cfg.watchers[0].command == "git log 'feature/a b'"  # type: ignore[attr-defined]
    (err,) = refused(tmp_path, doc, {"BRANCH": HOSTILE})
    assert err.startswith("watchers[0].command: `${BRANCH}` is in shell code and its value "
                          "holds ';'")


def test_list_command_keeps_each_value_one_argument_and_quotes_sh_c_scripts(
    tmp_path: Path
) -> None:
    doc: dict[str, object] = {"watchers": [
        {"id": "a", "command": [sys.executable, ARGV, "--ref=${BRANCH}"], "pattern": "x"},
        {"id": "b", "command": ["sh", "-c", f"{PROG} ${{BRANCH}}"], "pattern": "x"},
    ]}
    a, b = load(tmp_path, doc, {"BRANCH": TRICKY}).watchers  # type: ignore[attr-defined]
    assert a.command[2] == f"--ref={TRICKY}"
    assert shell_argv(b.command[2]) == [TRICKY]
    (err,) = refused(tmp_path, doc, {"BRANCH": HOSTILE})  # only the script's, not `--ref=`'s
    assert err.startswith("watchers[1].command[2]: `${BRANCH}` is in shell code")


@pytest.mark.parametrize(("command", "hostile", "ordinary"), [
    (["sh", "-o", "errexit", "-c", "{p} ${{BRANCH}}"], HOSTILE, TRICKY),
    (["env", "sh", "-c", "{p} ${{BRANCH}}"], HOSTILE, TRICKY),
    (["/usr/bin/env", "LC_ALL=C", "nice", "-n", "1", "bash", "-e", "-c", "{p} ${{BRANCH}}"],
     HOSTILE, TRICKY),
    (["env", "GIT_BRANCH=${{BRANCH}}", "sh", "-c", "{p} ${{BRANCH}}"], "y;touch pwned;#/sh",
     "y #1/sh"),
])
def test_a_shell_script_behind_options_or_a_wrapper_is_shell_code_too(
        tmp_path: Path, command: list[str], hostile: str, ordinary: str) -> None:
    """`sh -o errexit -c SCRIPT` and `env sh -c SCRIPT` run SCRIPT as shell code as well: a
    value there is one shell word, refused if it could run code (it ran `touch` when only
    `sh -c` was recognised, and when a value ending in `/sh` before the shell was taken for
    it)."""
    argv = [a.format(p=PROG) for a in command]
    doc: dict[str, object] = {"watchers": [{"id": "a", "command": argv, "pattern": "x"}]}
    (err,) = refused(tmp_path, doc, {"BRANCH": hostile})
    assert err.startswith(f"watchers[0].command[{len(argv) - 1}]: `${{BRANCH}}` is in shell "
                          "code and its value holds ';'")
    cfg = load(tmp_path, doc, {"BRANCH": ordinary})
    got = list(cfg.watchers[0].command)  # type: ignore[attr-defined]
    res = subprocess.run(got, capture_output=True, text=True, timeout=30, check=False,
                         cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[0]) == [ordinary], res.stderr


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


def tree_env(**values: str) -> dict[str, str]:
    """A child's environment: PATH, the tree under test (PYTHONPATH), and `values`."""
    keep = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return {"PATH": "/usr/bin:/bin", **keep, **values}


def test_run_once_with_a_hostile_branch_runs_nothing(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "build", "command": f"{PROG} ${{BRANCH}}", "pattern": "touch",
         "gate": {"maxMatches": 0}}]})
    res = cli("run", "--once", "-c", cfg, timeout=60, cwd=tmp_path, env=tree_env(BRANCH=HOSTILE))
    assert not (tmp_path / "pwned").exists()
    assert res.returncode == 2, res.stderr  # refused: nothing ran
    assert "watchers[0].command: `${BRANCH}` is in shell code and its value holds ';'" \
        in res.stderr
    res = cli("run", "--once", "-c", cfg, timeout=60, cwd=tmp_path,
              env=tree_env(BRANCH="touch *"))
    assert json.dumps(["touch *"]) in res.stdout  # echoed: one argument, the literal value
    assert res.returncode == 1  # the gate sees the literal text, as one line


def test_agent_run_receives_the_value_as_one_argument(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"agents": [{
        "name": "t", "provider": "generic", "command": f"{PROG} --flags ${{FLAGS}} {{prompt}}",
        "prompt": "hello"}]})
    env = tree_env(FLAGS="--dangerously-skip-permissions --yolo")
    res = cli("agent", "run", "t", "-c", cfg, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0]) == [
        "--flags", "--dangerously-skip-permissions --yolo", "hello"]
