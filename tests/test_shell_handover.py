"""A `${VAR}` in what another program hands to a shell is shell code (docs/config.md): ssh's
remote command, `su -c`, `runuser -c`, `flock FILE -c`, `script -c`, `watch CMD`, `env -S`'s
string, `git -c` values (an alias `!cmd`), tmux's commands. They were
passed on as one argument, unchecked, and that program's shell ran `V='x; touch pwned'`. Now
such a value is refused at load like one in `sh -c SCRIPT`, and an ordinary one is quoted as one
word, checked by running the real flock, script and su (ssh by a stand-in for its far side)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from liverunner import cli, write_config

from watchrun.config.handover import code_indexes

TOUCH = "x; touch pwned"
SSH_STAND_IN = """#!/bin/sh
# ssh's far side, for the test: past the options and DEST, the rest joined with spaces and run
# by the remote user's shell (what sshd does with ssh's command line)
while [ "${1#-}" != "$1" ]; do case $1 in -p|-i|-l|-o) shift;; esac; shift; done
shift
exec sh -c "$*"
"""


@pytest.mark.parametrize(("argv", "indexes"), [
    (["ssh", "host", "tail", "-F", "x"], [2, 3, 4]),
    (["ssh", "-p", "22", "-i", "key", "host", "tail -F x"], [6]),
    (["ssh", "-p22", "-tt", "host", "-v", "cmd", "a"], [5, 6]),
    (["/usr/bin/ssh", "-c", "aes128-ctr", "host"], []),
    (["ssh", "-N", "-L", "8080:x:80", "host"], []),
    (["autossh", "-M", "0", "host", "cmd"], [4]),
    (["sudo", "-u", "x", "ssh", "h", "cmd"], [5]),
    # ssh's -o command options run in a shell on this host (ProxyCommand, LocalCommand…)
    (["ssh", "-o", "ProxyCommand=x", "host"], [2]), (["ssh", "-oProxyCommand=x", "h"], [1]),
    (["ssh", "-vo", "localcommand x", "host"], [2]), (["ssh", "h", "-o", "KnownHostsCommand x"],
                                                      [3]),
    (["ssh", "-o", "RemoteCommand = x", "h"], [2]), (["ssh", "-o", "User=x", "-p22", "h"], []),
    (["ssh", "-p", "-oProxyCommand=x", "h"], []),  # (-p's value, a port, not an option)
    (["scp", "-P", "22", "-o", "ProxyCommand=x", "a", "h:b"], [4]),
    (["sftp", "-oProxyCommand=x", "h"], [1]), (["scp", "-o", "Port=2", "a", "h:b"], []),
    (["su", "-c", "cmd", "user"], [2]), (["su", "user", "-c", "cmd"], [3]),
    (["su", "-lc", "cmd"], [2]), (["su", "--command=cmd"], [1]), (["su", "-ccmd"], [1]),
    (["runuser", "-u", "x", "--session-command", "cmd"], [4]),
    (["flock", "/l", "-c", "cmd"], [3]), (["flock", "-w", "5", "/l", "--command", "cmd"], [5]),
    (["flock", "/l", "prog", "-c", "x"], []),
    (["script", "-q", "-c", "cmd", "/dev/null"], [3]), (["script", "-qc", "cmd"], [2]),
    (["watch", "-n", "5", "tail", "x"], [3, 4]), (["watch", "-n5", "cmd"], [2]),
    (["watch", "-x", "tail", "x"], []), (["watch", "-tx", "tail"], []),
    (["watch", "--exec", "tail"], []),
    (["grep", "-c", "su", "f"], []), (["bash", "-c", "s"], [2]),
    (["env", "-S", "sh -c x"], [2]), (["env", "-i", "-u", "A", "-SX"], [4]),
    (["env", "--split-string=x y"], [1]), (["env", "A=1", "tail", "f"], []),
    (["git", "-c", "alias.x=!cmd", "x"], [2]), (["git", "log", "--oneline"], []),
    (["tmux", "new-session", "-d", "cmd"], [2, 3]), (["tmux", "-L", "s", "run-shell", "x"], [4]),
    (["tmux", "-c", "cmd"], [2]),
])
def test_what_a_program_hands_to_a_shell_is_shell_code(argv: list[str],
                                                       indexes: list[int]) -> None:
    assert code_indexes(argv) == indexes


def run_once(folder: Path, command: list[str], value: str,
             path: str | None = None) -> subprocess.CompletedProcess[str]:
    cfg = write_config(folder, {"watchers": [{"id": "w", "command": command, "pattern": "ZZZ"}]})
    env = {"PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "V": value,
           **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    return cli("run", "--once", "-c", cfg, timeout=60, cwd=folder, env=env)


def commands(folder: Path) -> list[tuple[list[str], str, str | None]]:
    """(command, key, PATH) for each program, with `${V}` where it hands code to a shell."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ssh").write_text(SSH_STAND_IN)
    (bin_dir / "ssh").chmod(0o755)
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    found: list[tuple[list[str], str, str | None]] = [
        (["ssh", "-p", "22", "host", "echo", "got", "${V}"], "watchers[0].command[6]", path)]
    found.append((["env", "-S", "echo got ${V}"], "watchers[0].command[2]", None))
    if shutil.which("git"):
        found.append((["git", "-c", "alias.w=!echo got ${V}", "w"], "watchers[0].command[2]",
                      None))
    if shutil.which("flock"):
        found.append((["flock", str(folder / "lock"), "-c", "echo got ${V}"],
                      "watchers[0].command[3]", None))
    if shutil.which("script"):
        found.append((["script", "-qec", "echo got ${V}", "/dev/null"],
                      "watchers[0].command[2]", None))
    if shutil.which("su") and os.geteuid() == 0:
        found.append((["su", "root", "-s", "/bin/sh", "-c", "echo got ${V}"],
                      "watchers[0].command[5]", None))
    return found


def test_a_value_that_would_run_code_there_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    for command, key, path in commands(tmp_path):
        res = run_once(tmp_path, command, TOUCH, path)
        assert res.returncode == 2, (command, res.stdout, res.stderr)
        assert f"error: {key}: `${{V}}` is in shell code and its value holds ';'" in res.stderr
        assert not (tmp_path / "pwned").exists(), command


def test_an_ordinary_value_there_reaches_the_shell_as_one_word(tmp_path: Path) -> None:
    for command, _, path in commands(tmp_path):
        res = run_once(tmp_path, command, "release  1.2 *", path)
        assert res.returncode == 0, (command, res.stderr)
        assert "got release  1.2 *" in res.stdout, (command, res.stdout)


def test_an_agent_prompt_there_is_refused(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"agents": [{
        "name": "remote", "provider": "claude", "command": ["ssh", "box", "claude", "-p",
                                                            "{prompt}"]}]})
    res = cli("validate", "-c", cfg, timeout=60)
    assert res.returncode == 2, res.stdout
    assert "agents[0].command: has {prompt} inside the script of a shell's -c (or what ssh" \
        in res.stdout
    assert "leave {prompt} out: the prompt then goes to stdin" in res.stdout


def test_an_agent_prompt_in_env_split_string_is_refused(tmp_path: Path) -> None:
    """`["env", "-S", "sh -c 'echo got {prompt}'"]` passed `validate`, and a matched line
    `ERROR x; touch pwned` ran as shell code (the claims audit)."""
    cfg = write_config(tmp_path, {"agents": [{
        "name": "a", "provider": "generic", "command": ["env", "-S",
                                                        "sh -c 'echo got {prompt}'"]}]})
    res = cli("validate", "-c", cfg, timeout=60)
    assert res.returncode == 2, res.stdout
    assert "agents[0].command: has {prompt} inside the script of a shell's -c" in res.stdout


@pytest.mark.skipif(shutil.which("ssh") is None, reason="ssh is not installed")
def test_an_ssh_proxy_command_is_shell_code_on_this_host(tmp_path: Path) -> None:
    """`ssh -o ProxyCommand=${V}` ran the value in `sh -c` here, as the runner's user (root):
    only the remote command was taken for shell code (the security.md audit). The proxy
    `touch`es a file and exits, so ssh ends at once (no host is reached)."""
    command = ["ssh", "-o", "ProxyCommand=touch got-${V}", "-o", "BatchMode=yes",
               "nohost.invalid", "true"]
    res = run_once(tmp_path, command, TOUCH)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "error: watchers[0].command[2]: `${V}` is in shell code and its value holds ';'" \
        in res.stderr
    assert not (tmp_path / "pwned").exists()
    res = run_once(tmp_path, command, "release  1.2 *")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.glob("got-*")) == ["got-release  1.2 *"]
    cfg = write_config(tmp_path, {"agents": [{
        "name": "a", "provider": "generic", "command": "ssh -o ProxyCommand={prompt} box"}]})
    checked = cli("validate", "-c", cfg, timeout=60)
    assert checked.returncode == 2, checked.stdout
    assert "agents[0].command: has {prompt} inside the script of a shell's -c (or what ssh" \
        in checked.stdout
