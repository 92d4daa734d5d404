"""A `${VAR}` inside the code an interpreter runs (`python -c`, `perl -e`, awk's program…) is
refused when the config is loaded: its value would be code in that language, and no quoting
makes a value one literal in every language. `V='");open("pwned","w");print("'` in
`["python3", "-c", "print(\\"${V}\\")"]` created the file (found by the claims audit). The same
value as an argument of its own after the code reaches the program as one literal value."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import cli, write_config

from watchrun.config.programcode import program_code

PY = "the Python code `python` runs"


@pytest.mark.parametrize(("argv", "found"), [
    (["python3", "-c", "X"], {2: PY}), (["python3", "-Sc", "X"], {2: PY}),
    (["python3.11", "-cX"], {1: PY}), (["/usr/bin/python3", "script.py", "-c", "x"], {}),
    (["python3", "-c", "X", "-c", "y"], {2: PY}),  # (after the code: its sys.argv)
    (["sudo", "-u", "x", "python3", "-c", "X"], {5: PY}),
    (["perl", "-ne", "X", "f"], {2: "the Perl code `perl` runs"}),
    (["perl", "-I", "/lib", "-e", "A", "-E", "B"], {4: "the Perl code `perl` runs",
                                                    6: "the Perl code `perl` runs"}),
    (["env", "V=1", "ruby", "-e", "X"], {4: "the Ruby code `ruby` runs"}),
    (["node", "--eval", "X"], {2: "the JavaScript code `node` runs"}),
    (["node", "--print=X"], {1: "the JavaScript code `node` runs"}),
    (["node", "app.js", "-e", "x"], {}),
    (["node", "-pe", "X"], {2: "the JavaScript code `node` runs"}),  # node's -pe: -p -e
    (["node", "-ep", "X", "v"], {2: "the JavaScript code `node` runs"}),
    (["node", "-r", "m", "-p", "X"], {4: "the JavaScript code `node` runs"}),
    (["awk", "-F:", "{print $1}", "f"], {2: "the awk code `awk` runs"}),
    (["awk", "-v", "a=1", "X", "f"], {3: "the awk code `awk` runs"}),
    (["gawk", "-f", "prog.awk", "f"], {}),
    (["gawk", "-e", "X", "f"], {2: "the awk code `gawk` runs"}),
    (["php", "-r", "X"], {2: "the PHP code `php` runs"}),
    (["php", "-B", "X", "-R", "Y", "-E", "Z"], {2: "the PHP code `php` runs",
                                               4: "the PHP code `php` runs",
                                               6: "the PHP code `php` runs"}),
    (["php", "-F", "f.php"], {}),
    (["Rscript", "-e", "X"], {2: "the R code `Rscript` runs"}),
    (["expect", "-c", "X"], {2: "the Tcl code `expect` runs"}),
    (["tail", "-F", "x"], {}), (["grep", "-e", "x", "f"], {}),
])
def test_the_code_an_interpreter_runs_is_found(argv: list[str], found: dict[int, str]) -> None:
    assert program_code(argv) == found


HOSTILE = '");open("pwned","w");print("'


def _config(folder: Path, command: list[str] | str, agents: bool = False) -> Path:
    if agents:
        return write_config(folder, {"agents": [{"name": "a", "provider": "generic",
                                                 "command": command}]})
    return write_config(folder, {"watchers": [{"id": "w", "command": command,
                                               "pattern": "ZZZ"}]})


@pytest.mark.parametrize(("tool", "command", "key"), [
    ("python3", ["python3", "-c", 'print("${V}")'], "watchers[0].command[2]"),
    ("perl", ["perl", "-e", 'print "${V}"'], "watchers[0].command[2]"),
    ("awk", ["awk", 'BEGIN{print "${V}"}'], "watchers[0].command[1]"),
    ("python3", ["sudo", "python3", "-c", "print('${V}')"], "watchers[0].command[3]"),
    ("node", ["node", "-pe", '"${V}"'], "watchers[0].command[2]"),  # (-pe: -p -e, code next)
])
def test_a_value_in_an_interpreters_code_is_refused(tmp_path: Path, tool: str,
                                                    command: list[str], key: str) -> None:
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")
    _config(tmp_path, command)
    env = {**os.environ, "V": HOSTILE}
    checked = inproc(tmp_path, "validate", env=env)
    assert checked.returncode == 2, checked.stdout
    assert f"error: {key}: `${{V}}` is in the " in checked.stdout
    assert "its value would run as code there" in checked.stdout
    ran = cli("run", "--once", cwd=tmp_path, env=env, timeout=60)
    assert ran.returncode == 2 and "nothing was started" in ran.stderr
    assert not (tmp_path / "pwned").exists()


def test_a_value_after_the_code_is_one_literal_argument(tmp_path: Path) -> None:
    _config(tmp_path, ["python3", "-c", "import sys; print('got', sys.argv[1])", "${V}"])
    ran = cli("run", "--once", cwd=tmp_path, env={**os.environ, "V": HOSTILE}, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert f"got {HOSTILE}" in ran.stdout and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("command", [
    'python3 -c "print(\'${V}\')"', ["python3", "-c", "print('${V}')"]])
def test_an_agents_command_with_a_value_in_its_code_is_refused(
        tmp_path: Path, command: str | list[str]) -> None:
    _config(tmp_path, command, agents=True)
    checked = inproc(tmp_path, "validate", env={**os.environ, "V": HOSTILE})
    assert checked.returncode == 2 and "`${V}` is in the Python code `python` runs" in \
        checked.stdout, checked.stdout


def test_an_agents_prompt_in_an_interpreters_code_is_refused(tmp_path: Path) -> None:
    _config(tmp_path, ["python3", "-c", "print('{prompt}')"], agents=True)
    checked = inproc(tmp_path, "validate")
    assert checked.returncode == 2, checked.stdout
    assert "has {prompt} inside the Python code `python` runs: matched log text would run as " \
        "code" in checked.stdout
