"""A `${VAR}` value that lands in shell code may hold no character that runs code on a second
reading (docs/security.md guard 2): quoting it as one word did not stop bash arithmetic
(`[[ ${V} -gt 0 ]]` with `V='x[$(id)]'`, cfgsec #1), a shell named inside a string command
(`bash -lc 'git log ${BRANCH}'`, `eval`, cfgsec #6), or a shell by another name in a list command
(`rbash -c`, `ksh93 -c`, `sh -c - SCRIPT`, cfgsec #15). Such a value is refused at load, naming
the key, the variable, the character and the fix; ordinary values work as before."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from liverunner import LiveRunner, cli, wait_for, write_config

from watchrun.config import load_config
from watchrun.config.interpolate import interpolate
from watchrun.config.shellcode import ORDINARY, script_indexes, unsafe_character

ARITH = "x[$(id > pwned)]"  # cfgsec #1
BRANCH = "main; id > pwned"  # cfgsec #6
TOUCH = "x; touch pwned"  # cfgsec #15
BASH = shutil.which("bash")

# (command as written, value of V, the character the error names): the contexts of the reports
REFUSED_IN_STRINGS = [
    ("if [[ ${V} -gt 0 ]]; then echo PR ${V}; fi", ARITH, "'$'"),
    ("(( ${V} ))", ARITH, "'$'"),
    ("let ${V}", ARITH, "'$'"),
    ("declare -i n=${V}", ARITH, "'$'"),
    ("test -v ${V}", ARITH, "'$'"),
    ("printf -v ${V} x", ARITH, "'$'"),
    ("read ${V} <<< x", ARITH, "'$'"),
    ("bash -lc 'git log -1 ${V}'", BRANCH, "';'"),
    ("sh -c 'echo ${V}'", BRANCH, "';'"),
    ('bash -c "echo ${V}"', BRANCH, "';'"),
    ('sh -c "sh -c \\"echo ${V}\\""', BRANCH, "';'"),
    ('exec sh -c "echo ${V}"', BRANCH, "';'"),
    ('find . -maxdepth 0 -exec sh -c "echo ${V}" \\;', BRANCH, "';'"),
    ("eval echo ${V}", BRANCH, "';'"),
    ('eval "echo ${V}"', BRANCH, "';'"),
    ('trap "echo ${V}" EXIT', BRANCH, "';'"),
    ("command eval echo ${V}", BRANCH, "';'"),
    ("echo ${V}  # ${V} in a comment", "a|b", "'|'"),
    ("git log ${V}", "a`id`", "'`'"),
    ("git log ${V}", "a&b", "'&'"),
    ("git log ${V}", "a<b", "'<'"),
    ("git log ${V}", "a>b", "'>'"),
    ("git log ${V}", "(a)", "'('"),
    ("git log ${V}", "a)", "')'"),
    ("git log ${V}", "it's", '"\'"'),
    ("git log ${V}", 'a"b', "'\"'"),
    ("git log ${V}", "a\\b", "'\\\\'"),
    ("git log ${V}", "a^b", "'^'"),
    ("git log ${V}", "a\nb", "'\\n' (U+000A)"),
    ("git log ${V}", "a\rb", "'\\r' (U+000D)"),
    ("git log ${V}", "a\tb", "'\\t' (U+0009)"),
    ("git log ${V}", "a\x1b[31m", "'\\x1b' (U+001B)"),
    ("git log ${V}", "a\x7f", "'\\x7f' (U+007F)"),
    ("git log ${V}", "a\x85", "'\\x85' (U+0085)"),
    ("git log ${V}", "a\u202eb", "'\\u202e' (U+202E)"),
    ("git log ${V}", "a\u2028b", "'\\u2028' (U+2028)"),
    ("git log ${V}", "a\udc80", "'\\udc80' (U+DC80)"),
    ("git log ${V:-a;b}", "", "';'"),  # a default is written into the code the same way
]


@pytest.mark.parametrize(("command", "value", "char"), REFUSED_IN_STRINGS)
def test_a_value_that_could_run_code_is_refused_in_shell_code(
        command: str, value: str, char: str) -> None:
    _, problems = interpolate(command, {"V": value}, shell="sh")
    assert problems, command
    assert f"`${{V}}` is in shell code and its value holds {char}:" in problems[0]
    assert '["git", "log", "${V}"]' in problems[0] and 'write "$$V"' in problems[0]


ORDINARY_VALUES = ["main", "feature/JIRA-12_fix.v2", "release 1.2", "user@host:8080",
                   "50%+1=x,y~z", "#123", "a*b?[c]{d,e}!", "été", "日本語", "naïve", "x[0]",
                   "--flag", ""]


@pytest.mark.parametrize("value", ORDINARY_VALUES)
def test_an_ordinary_value_is_still_quoted_as_one_word(value: str) -> None:
    text, problems = interpolate("bash -lc 'git log ${V}'", {"V": value}, shell="sh")
    assert problems == []
    assert unsafe_character(value) is None
    assert text == f"bash -lc 'git log '{shlex.quote(value)}''"


def test_outside_shell_code_every_value_is_taken_as_it_is() -> None:
    assert interpolate("x ${V} y", {"V": BRANCH}) == (f"x {BRANCH} y", [])
    # an agent's command string that cannot be split: split with shell rules, by no shell
    assert interpolate("a ${V}", {"V": BRANCH}, shell="shlex") == (f"a '{BRANCH}'", [])


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=12))
def test_a_value_is_refused_exactly_when_it_holds_a_character_outside_the_ordinary(
        value: str) -> None:
    _, problems = interpolate("git log ${V}", {"V": value}, shell="sh")
    ordinary = all(ch in ORDINARY or (not ch.isascii() and (ch.isalpha() or ch.isdigit()))
                   for ch in value)
    if ordinary:
        assert problems == []
    assert bool(problems) == (unsafe_character(value) is not None)
    assert not any(ch in value for ch in "$`;&|<>()'\"\\\n\r") or problems


# contexts where a second parse or arithmetic reads the value: run by a real bash
SECOND_READINGS = ["bash -c 'echo ${V}'", 'bash -c "echo x ${V}"', "eval echo ${V}",
                   "(( ${V} )) || :", "[[ ${V} -gt 0 ]] || :", "test -v ${V} || :",
                   "declare -i n=${V} 2>/dev/null || :", "let x=${V} 2>/dev/null || :",
                   "printf -v ${V} x 2>/dev/null || :", 'sh -c "sh -c \\"echo ${V}\\""']


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(value=st.lists(st.sampled_from([*sorted(ORDINARY), "touch", "pwned", " touch pwned",
                                       "a[", "]", "é"]), max_size=10).map("".join),
       command=st.sampled_from(SECOND_READINGS))
def test_no_value_that_passes_runs_code_on_a_second_reading(
        tmp_path: Path, value: str, command: str) -> None:
    text, problems = interpolate(command, {"V": value}, shell="sh")
    assert problems == []
    subprocess.run([str(BASH), "-c", text], cwd=tmp_path, capture_output=True, timeout=30,
                   check=False)
    assert not (tmp_path / "pwned").exists(), (value, text)


@pytest.mark.parametrize(
    ("argv", "indexes"),
    [
        (["rbash", "-c", "s"], [2]), (["/tmp/bin/ksh93", "-c", "s"], [2]),
        (["lksh", "-c", "s"], [2]), (["mksh", "-ec", "s"], [2]),
        (["/tmp/bin/sh.distrib", "-c", "s"], [2]), (["bash5.2", "-lc", "s"], [2]),
        (["busybox", "sh", "-c", "s"], [3]), (["pdksh", "-c", "s"], [2]),
        (["sh", "-c", "-", "s", "x"], [2, 3]), (["dash", "-e", "-c", "-", "s"], [3, 4]),
        (["fish", "--command", "s"], [2]), (["fish", "--command=s"], [1]),
        (["pwsh", "-Command", "s"], [2]), (["pwsh", "-NoProfile", "-COMMAND", "s"], [3]),
        (["pwsh", "-CommandWithArgs", "s", "a"], [2]), (["pwsh", "-File", "f.ps1"], []),
        (["python3", "-c", "s"], []), (["git", "--command=s"], []), (["rbash", "f.sh"], []),
        (["ssh", "-c", "aes128-ctr", "host"], []), (["/usr/bin/autossh", "-c", "x"], []),
    ],
)
def test_a_shell_by_any_name_runs_its_c_argument_as_code(argv: list[str],
                                                          indexes: list[int]) -> None:
    assert script_indexes(argv) == indexes


def _load_errors(tmp_path: Path, command: object, value: str) -> list[str]:
    path = write_config(tmp_path, {"watchers": [{"id": "w", "command": command,
                                                 "pattern": "ZZZ"}]})
    result = load_config([path], env={"V": value})
    assert result.config is None
    return [f"{d.path}: {d.message}" for d in result.diagnostics if d.severity == "error"]


@pytest.mark.parametrize(("command", "key"), [
    (["rbash", "-c", "echo ${V}"], "watchers[0].command[2]"),
    (["/opt/bin/ksh93", "-c", "echo ${V}"], "watchers[0].command[2]"),
    (["/opt/bin/sh.distrib", "-c", "echo ${V}"], "watchers[0].command[2]"),
    (["sh", "-c", "-", "echo ${V}"], "watchers[0].command[3]"),
    (["bash", "-lc", "bash -c 'echo ${V}'"], "watchers[0].command[2]"),
    (["bash", "-c", "if [[ ${V} -gt 0 ]]; then echo PR ${V}; fi"], "watchers[0].command[2]"),
    ("bash -lc 'git log -1 ${V}'", "watchers[0].command"),
])
def test_the_error_names_the_key_the_variable_and_the_character(
        tmp_path: Path, command: object, key: str) -> None:
    (err,) = _load_errors(tmp_path, command, TOUCH)
    assert err.startswith(f"{key}: `${{V}}` is in shell code and its value holds ';'")


def test_an_exec_actions_shell_script_gets_the_same_rule(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"watchers": [{
        "id": "w", "path": "app.log", "pattern": "E",
        "actions": [{"type": "exec", "command": ["ksh93", "-c", "notify ${V}"]}]}]})
    result = load_config([path], env={"V": TOUCH})
    (err,) = [d for d in result.diagnostics if d.severity == "error"]
    assert err.path == "watchers[0].actions[0].command[2]" and "holds ';'" in err.message


# -- end to end: `watchrun run --once` refuses before anything runs ------------------------------


def run_once(folder: Path, command: object, value: str) -> subprocess.CompletedProcess[str]:
    cfg = write_config(folder, {"watchers": [{"id": "w", "command": command, "pattern": "ZZZ"}]})
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "V": value,
           **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    return cli("run", "--once", "-c", cfg, timeout=60, cwd=folder, env=env)


def _refused(res: subprocess.CompletedProcess[str], folder: Path, key: str, char: str) -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert f"error: {key}: `${{V}}` is in shell code and its value holds {char}:" in res.stderr
    assert 'write "$$V"' in res.stderr
    assert not (folder / "pwned").exists()


def test_run_once_refuses_a_value_bash_arithmetic_would_run(tmp_path: Path) -> None:
    """cfgsec #1: `[[ ${V} -gt 0 ]]` with `V='x[$(id > pwned)]'` ran `id`, single-quoted."""
    res = run_once(tmp_path, ["bash", "-c", "if [[ ${V} -gt 0 ]]; then echo PR ${V}; fi"], ARITH)
    _refused(res, tmp_path, "watchers[0].command[2]", "'$'")


def test_run_once_refuses_a_value_a_named_shell_would_parse_again(tmp_path: Path) -> None:
    """cfgsec #6: the inner bash of `bash -lc 'git log -1 ${V}'` read `main; id > pwned`."""
    res = run_once(tmp_path, "bash -lc 'git log -1 ${V}'", BRANCH)
    _refused(res, tmp_path, "watchers[0].command", "';'")


def test_run_once_refuses_a_value_in_the_script_of_a_shell_by_another_name(
        tmp_path: Path) -> None:
    """cfgsec #15: `ksh93 -c SCRIPT` (here a link to sh) was not taken for a shell."""
    (tmp_path / "ksh93").symlink_to("/bin/sh")
    res = run_once(tmp_path, [str(tmp_path / "ksh93"), "-c", "echo ${V}"], TOUCH)
    _refused(res, tmp_path, "watchers[0].command[2]", "';'")
    res = run_once(tmp_path, ["sh", "-c", "-", "echo ${V}"], TOUCH)
    _refused(res, tmp_path, "watchers[0].command[3]", "';'")


def test_run_once_still_runs_an_ordinary_value_in_a_named_shell(tmp_path: Path) -> None:
    res = run_once(tmp_path, "bash -c 'echo branch ${V}'", "feature/x y#1")
    assert res.returncode == 0, res.stderr
    assert "branch feature/x y#1" in res.stdout


def _reloaded(r: LiveRunner) -> dict[str, Any] | None:
    """The runner's status once the reload ended: failed (a problem) or applied (`w` runs)."""
    status = r.control({"cmd": "status"})
    return status if status["problems"] or status["watchers"] != ["app"] else None


def test_a_reload_that_puts_such_a_value_into_shell_code_is_refused(tmp_path: Path) -> None:
    """A running runner's environment holds the value; a SIGHUP to a config that writes it into
    a shell's script is refused like a start, and the old config runs on."""
    (tmp_path / "app.log").write_text("")
    conf: dict[str, object] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "E"}]}
    r = LiveRunner(write_config(tmp_path, conf), env={"V": TOUCH})
    try:
        r.wait_running()
        conf["watchers"] = [*conf["watchers"],  # type: ignore[list-item]
                            {"id": "w", "command": ["rbash", "-c", "echo ${V}"], "pattern": "Z"}]
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        status = wait_for(lambda: _reloaded(r), "the reload's end")
        assert status["watchers"] == ["app"] and "reload failed" in status["problems"][0]
    finally:
        assert r.stop() == 0
    assert "watchers[1].command[2]: `${V}` is in shell code and its value holds ';'" in r.stderr()
    assert not (tmp_path / "pwned").exists()
