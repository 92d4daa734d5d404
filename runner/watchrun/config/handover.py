"""Which arguments of a list command other programs hand to a shell: ssh's remote command and
its `-o ProxyCommand=` (and LocalCommand, KnownHostsCommand, RemoteCommand; scp's and sftp's too),
`su -c`, `runuser -c`, `flock FILE -c`, `script -c`, what `watch` runs, `env -S`'s string,
`git -c` values (an alias `!cmd`, `core.pager`… run by a shell) and tmux's commands.

None of these is a shell, but each passes a string to one (the remote user's login shell, the
target user's shell, `sh -c`), which reads it as code: a `${VAR}` there is shell code as much as
in `sh -c SCRIPT` (`config/shellcode.py`). The options are read as each program reads them (its
getopt string); where that is unsure, more is taken for code, never less — the cost of a
mistake is the stricter rule for values, and their quoting, in that argument.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from watchrun.config.shellcode import script_indexes

_SSH_VALUE = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
"""ssh(1)'s options that take a value (`-p 22`, `-p22`); autossh adds `-M port`."""
_SSH_COMMANDS = re.compile(r"\s*(proxycommand|localcommand|knownhostscommand|remotecommand)"
                           r"(\s*=\s*|\s+)", re.IGNORECASE)
"""ssh_config(5) keywords whose value a shell runs (`-o ProxyCommand=CMD`, `-o 'LocalCommand
CMD'`): ProxyCommand, LocalCommand and KnownHostsCommand by `sh -c` on this host,
RemoteCommand by the remote user's shell."""
_COMMAND_OPTION = re.compile(r"-[A-Za-z]*c|--command|--session-command")
"""`-c CMD` (alone or ending a cluster: `su -lc CMD`) and the long forms, value next."""
_COMMAND_JOINED = re.compile(r"-c.+|--command=.*|--session-command=.*")
"""The same with the value in the argument itself (`-cCMD`, `--command=CMD`)."""


def code_indexes(argv: Sequence[str]) -> list[int]:
    """The indexes of the arguments of `argv` that a shell reads as code: a shell's `-c`
    script (`script_indexes`), and what a program named in `argv` (at any place, as a shell
    is: behind `sudo`, `env`, `timeout`…) hands to a shell."""
    found = set(script_indexes(argv))
    for i, arg in enumerate(argv):
        reader = _READERS.get(os.path.basename(arg).rstrip("0123456789.-"))
        if reader is not None:
            found.update(reader(argv, i))
    return sorted(found)


def _options(argv: Sequence[str], j: int, takes_value: frozenset[str]) -> int:
    """The index of the first operand at or after `j`, past single-letter option clusters
    (a letter in `takes_value` takes the rest of its argument, or the next one)."""
    while j < len(argv):
        arg = argv[j]
        if arg == "--":
            return j + 1
        if not arg.startswith("-") or arg == "-":
            return j
        if arg.startswith("--"):
            j += 1  # (a long option's value, if any, is written `--name=value` here)
            continue
        letters = arg[1:]
        at = next((k for k, letter in enumerate(letters) if letter in takes_value), None)
        j += 2 if at == len(letters) - 1 else 1
    return j


def _ssh(argv: Sequence[str], at: int) -> list[int]:
    """`ssh [options] DEST [options] CMD ARG…`: ssh joins CMD and its arguments with spaces
    into one command line that the remote user's shell runs; an `-o` command option's value is
    run by a shell too (`_ssh_config`)."""
    takes = _SSH_VALUE | {"M"} if os.path.basename(argv[at]).startswith("autossh") else _SSH_VALUE
    dest = _options(argv, at + 1, takes)
    command = _options(argv, dest + 1, takes)  # (ssh reads options after DEST too)
    return _ssh_config(argv, at + 1, command, takes) + list(range(command, len(argv)))


def _ssh_config(argv: Sequence[str], start: int, end: int, takes: frozenset[str]) -> list[int]:
    """The `-o KEYWORD=VALUE` arguments (`-oKEYWORD=VALUE`, a cluster ending in `o`) between
    `start` and `end` whose keyword names a command a shell runs (`_SSH_COMMANDS`)."""
    found = []
    j = start
    while j < end:
        arg = argv[j]
        j += 1
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            continue
        letters = arg[1:]
        at = next((k for k, letter in enumerate(letters) if letter in takes), None)
        if at is None:
            continue
        joined = at < len(letters) - 1
        index = j - 1 if joined else j
        value = letters[at + 1:] if joined else (argv[j] if j < len(argv) else "")
        if letters[at] == "o" and _SSH_COMMANDS.match(value):
            found.append(index)
        if not joined:
            j += 1  # (past the value)
    return found


def _scp(argv: Sequence[str], at: int) -> list[int]:
    """`scp`/`sftp -o ProxyCommand=CMD …`: their `-o` goes to ssh, which runs CMD in a shell."""
    return _ssh_config(argv, at + 1, len(argv), frozenset("BbcDFiJloPRSsX"))


def _command_option(argv: Sequence[str], at: int) -> list[int]:
    """`su`/`runuser`/`script` with `-c CMD`, `--command CMD` or `--command=CMD` anywhere
    after them (their getopt permutes): CMD is run by a shell."""
    found = []
    for j in range(at + 1, len(argv)):
        if _COMMAND_OPTION.fullmatch(argv[j]) and j + 1 < len(argv):
            found.append(j + 1)
        elif _COMMAND_JOINED.fullmatch(argv[j]):
            found.append(j)
    return found


def _flock(argv: Sequence[str], at: int) -> list[int]:
    """`flock [options] FILE -c CMD` (or `--command CMD`): CMD runs under `sh -c`.
    `flock FILE PROGRAM ARG…` runs PROGRAM itself."""
    file = _options(argv, at + 1, frozenset("wE"))
    if file + 2 < len(argv) and argv[file + 1] in ("-c", "--command"):
        return [file + 2]
    return []


def _watch(argv: Sequence[str], at: int) -> list[int]:
    """`watch [options] CMD ARG…`: joined with spaces and run by `sh -c`, unless `-x` (exec)."""
    first = _options(argv, at + 1, frozenset("nq"))
    options = argv[at + 1:first]
    if "--exec" in options or any(re.fullmatch(r"-[bcegprtwv]*x[bcegprtwvx]*", o)
                                  for o in options):
        return []
    return list(range(first, len(argv)))


def _env(argv: Sequence[str], at: int) -> list[int]:
    """`env -S STRING` (`-SSTRING`, `--split-string[=]STRING`): split with shell-like quoting
    into the command to run; a value's quotes as one shell word hold there too."""
    j = at + 1
    while j < len(argv) and argv[j].startswith("-") and argv[j] not in ("-", "--"):
        arg = argv[j]
        if arg.startswith("--split-string"):
            return [j] if "=" in arg else [j + 1]
        if not arg.startswith("--"):
            letters = arg[1:]
            at_s = next((k for k, c in enumerate(letters) if c in "SuC"), None)
            if at_s is not None and letters[at_s] == "S":
                return [j + 1] if at_s == len(letters) - 1 else [j]
            if at_s is not None and at_s == len(letters) - 1:
                j += 1  # (-u NAME, -C DIR)
        j += 1
    return []


def _git(argv: Sequence[str], at: int) -> list[int]:
    """`git -c NAME=VALUE …`: many values are run by a shell (an alias `!cmd`, `core.pager`,
    `core.sshCommand`, `credential.helper`…), so every one is taken for code."""
    return [j + 1 for j in range(at + 1, len(argv) - 1) if argv[j] == "-c"]


def _tmux(argv: Sequence[str], at: int) -> list[int]:
    """`tmux [options] COMMAND ARG…`: `new-session CMD`, `run-shell CMD`, `send-keys KEYS`…
    hand a shell its arguments; and `tmux -c CMD` runs CMD with the user's shell."""
    command = _options(argv, at + 1, frozenset("LSfcT"))
    found = [j + 1 for j in range(at + 1, command) if argv[j] == "-c"]
    return found + list(range(command + 1, len(argv)))


_READERS: dict[str, Callable[[Sequence[str], int], list[int]]] = {
    "ssh": _ssh, "autossh": _ssh, "scp": _scp, "sftp": _scp, "su": _command_option,
    "runuser": _command_option, "script": _command_option, "flock": _flock, "watch": _watch,
    "env": _env, "git": _git, "tmux": _tmux}
"""The programs by name (after a version suffix, as shells are), and how each is read."""
