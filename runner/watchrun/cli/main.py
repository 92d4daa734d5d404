"""The `watchrun` command line: argparse subcommands dispatched to lazily imported handlers."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from watchrun import __version__
from watchrun.exitcodes import ExitStatus

__all__ = ["BROKEN_PIPE", "COMMANDS", "Command", "build_parser", "main"]

BROKEN_PIPE = 128 + 13
"""Exit status when stdout's reader went away (128 + SIGPIPE, as `yes | head` reports)."""


class Command:
    """One subcommand: its help, its arguments, and its handler imported only when it runs.

    `handler` is `module:function`, called with the parsed Namespace, returning an exit status.
    (A plain class, not a dataclass: `watchrun --help` must start fast.)
    """

    __slots__ = ("configure", "epilog", "handler", "help", "name")

    def __init__(self, name: str, help: str, epilog: str,
                 configure: Callable[[argparse.ArgumentParser], None], handler: str) -> None:
        self.name = name
        self.help = help
        self.epilog = epilog
        self.configure = configure
        self.handler = handler


def add_config_args(p: argparse.ArgumentParser) -> None:
    """`-c FILE…` (repeatable; layered in order) and `--output-dir DIR`."""
    p.add_argument("-c", "--config", metavar="FILE", type=Path, action="extend", nargs="+",
                   required=True, help="config file (.yaml/.yml/.json/.toml); repeat to layer "
                   "files: later keys win, watchers and agents merge by id/name")
    p.add_argument("--output-dir", metavar="DIR", type=Path,
                   help="override output.dir (default .watchrun beside the first config file)")


def _json_flag(p: argparse.ArgumentParser, dest: str = "format") -> None:
    p.add_argument("--json", dest=dest, action="store_const", const="json",
                   help="print JSON (same as --format json)")


def _configure_run(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--once", action="store_true", help="CI mode: run commands to their exit, "
                   "scan files to their end, print a verdict per gate, exit 1 if one is crossed")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="format of the runner's own log on stderr (default text)")
    p.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    p.add_argument("--junit", metavar="FILE", type=Path, help="with --once: write a JUnit report")
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve Prometheus metrics and /healthz on HOST:PORT")


def _configure_validate(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--strict", action="store_true", help="treat warnings (clamped limits, "
                   "appended {prompt}, ...) as errors")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default text)")
    p.add_argument("--each", action="store_true", help="validate every file on its own instead "
                   "of layering them (a pre-commit hook passes each changed config file)")
    _json_flag(p)


def _configure_config(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--format", choices=("yaml", "json", "toml"), default="yaml",
                   help="output format (default yaml)")
    _json_flag(p)


def _configure_schema(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default="config",
                   choices=("config", "record", "agent-watch", "transcript"),
                   help="which schema (default config)")
    p.set_defaults(format="json")
    _json_flag(p)


def _configure_init(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", default="watch.yaml", type=Path, metavar="PATH",
                   help="file to write (default watch.yaml; .json/.toml write that format; "
                   "a folder gets watch.yaml inside it)")
    p.set_defaults(format="text")
    _json_flag(p)


def add_where_args(p: argparse.ArgumentParser, *, table: bool = True) -> None:
    """`-c FILE…` or `--output-dir DIR`: where the output dir is (default: ./watch.yaml's)."""
    p.add_argument("-c", "--config", metavar="FILE", type=Path, action="extend", nargs="+",
                   help="config file(s) whose output dir to read (default ./watch.yaml)")
    p.add_argument("--output-dir", metavar="DIR", type=Path,
                   help="read this output dir directly (no config needed)")
    if table:
        p.add_argument("--json", dest="format", action="store_const", const="json",
                       default="text", help="print JSON instead of a table")


def _configure_ops(kind: str) -> Callable[[argparse.ArgumentParser], None]:
    def configure(p: argparse.ArgumentParser) -> None:
        add_where_args(p)
        if kind in ("status", "matches", "logs", "stop"):
            p.add_argument("id", help="watcher id")
        if kind in ("matches", "logs"):
            p.add_argument("--lines", type=int, metavar="N",
                           help="how many lines (default limits.matchLines)")
            p.add_argument("--follow", "-f", action="store_true",
                           help="then print each new one as it is recorded, like tail -F "
                           "(Ctrl-C ends; --json: one object per line)")
        if kind == "clear":
            p.add_argument("--all", action="store_true",
                           help="also stop running watchers before forgetting them")
        p.set_defaults(op=kind)
    return configure


def _configure_add(p: argparse.ArgumentParser) -> None:
    add_where_args(p)
    p.add_argument("id", help="watcher id (a file name: letters, digits, _ . -)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--path", metavar="P", help="file to follow (relative to here)")
    source.add_argument("--command", metavar="C", dest="source_command",
                        help="command to run under /bin/sh -c")
    p.add_argument("--pattern", metavar="RE", required=True, help="regex a line must match")
    p.add_argument("--exclude", metavar="RE", action="append", default=[],
                   help="regex that suppresses a match (repeatable)")
    p.add_argument("--case-sensitive", action="store_true", help="match case-sensitively")
    p.add_argument("--from-start", action="store_true",
                   help="file: scan what is there first (default: follow from the end)")
    p.add_argument("--label", metavar="L", help="display name (default: the source)")
    p.add_argument("--wake", metavar="AGENT", action="append", default=[],
                   help="agent woken by a match (repeatable; default limits.wakeOnMatch)")
    p.add_argument("--cwd", metavar="DIR", help="command: working directory (default: here)")


def _configure_start(kind: str) -> Callable[[argparse.ArgumentParser], None]:
    def configure(p: argparse.ArgumentParser) -> None:
        add_where_args(p)
        p.add_argument("id", help="watcher id")
        p.set_defaults(op=kind)
    return configure


def _configure_agent(p: argparse.ArgumentParser) -> None:
    subs = p.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    ls = subs.add_parser("list", help="every agent with its status, turns, tokens, last reply",
                         formatter_class=raw,
                         epilog="example:\n  watchrun agent list -c watch.yaml")
    add_where_args(ls)
    run = subs.add_parser("run", help="run one turn in the foreground and print the reply",
                          formatter_class=raw, epilog="examples:\n  watchrun agent run triage "
                          "-c watch.yaml\n  watchrun agent run triage -c watch.yaml --prompt "
                          "'why is the build red?'\nexit status: 0 the turn completed, 1 it failed")
    add_config_args(run)
    run.add_argument("name", help="agent name")
    run.add_argument("--prompt", help="the prompt (default: the agent's prompt template)")
    watch = subs.add_parser("watch", help="the readable view of an agent (JSON)",
                            formatter_class=raw,
                            epilog="examples:\n  watchrun agent watch triage -c watch.yaml\n  "
                            "watchrun agent watch triage -c watch.yaml --until status:idle "
                            "--timeout 5m\n  watchrun agent watch triage -c watch.yaml --since "
                            "triage:0000000000000010 --raw")
    add_where_args(watch, table=False)
    watch.add_argument("name", help="agent name")
    watch.add_argument("--include", action="append", default=[], metavar="LIST",
                       help="comma list of status,transcript,output,delivery,raw_output,events")
    watch.add_argument("--raw", action="store_true", help="add raw_output to the include set")
    watch.add_argument("--since", metavar="CURSOR", help="only what is strictly after CURSOR")
    watch.add_argument("--tail", type=int, metavar="BYTES", help="cap text fields to BYTES")
    watch.add_argument("--until", metavar="COND", help="wait for a new status:S, output:TOKEN, "
                       "event:KIND or delivery:STATE")
    watch.add_argument("--timeout", default="10m", help="how long --until waits (default 10m)")
    watch.add_argument("--format", choices=("json", "text"), default="json")
    tr = subs.add_parser("transcript", help="turns grouped by prompt (JSON)", formatter_class=raw,
                         epilog="example:\n  watchrun agent transcript triage -c watch.yaml")
    add_where_args(tr, table=False)
    tr.add_argument("name", help="agent name")
    tr.add_argument("--format", choices=("json", "text"), default="json")
    send = subs.add_parser("send", help="queue a prompt for an agent of the live runner",
                           formatter_class=raw,
                           epilog="example:\n  watchrun agent send triage "
                           "'look at the last deploy'")
    add_where_args(send)
    send.add_argument("name", help="agent name")
    send.add_argument("text", help="the prompt")
    stop = subs.add_parser("stop", help="abort an agent's running turn in the live runner",
                           formatter_class=raw, epilog="example:\n  watchrun agent stop triage")
    add_where_args(stop)
    stop.add_argument("name", help="agent name")


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("run", "run the watchers and agents (the default command)",
                "examples:\n  watchrun -c watch.yaml\n  watchrun run -c base.yaml -c prod.yaml "
                "--output-dir /var/lib/watchrun\n  watchrun run --once -c ci.yaml --junit "
                "report.xml", _configure_run, "watchrun.cli.run:run"),
        Command("validate", "check config files; every problem is reported at once",
                "exit status: 0 valid, 2 invalid\nexamples:\n  watchrun validate -c watch.yaml"
                "\n  watchrun validate -c base.yaml -c prod.yaml --strict --format json"
                "\n  watchrun validate --each -c ci/watch.yaml deploy/watch.yaml",
                _configure_validate, "watchrun.cli.config_cmds:cmd_validate"),
        Command("config", "print the resolved, clamped config (paths absolute, ms, bytes)",
                "examples:\n  watchrun config -c watch.yaml\n  watchrun config -c base.yaml "
                "-c prod.yaml --format toml > resolved.toml",
                _configure_config, "watchrun.cli.config_cmds:cmd_config"),
        Command("schema", "print a JSON Schema (config, record, agent-watch, transcript)",
                "examples:\n  watchrun schema > watch.schema.json\n  watchrun schema record",
                _configure_schema, "watchrun.cli.config_cmds:cmd_schema"),
        Command("init", "write a commented starter config",
                "examples:\n  watchrun init\n  watchrun init ci/watch.yaml\n  watchrun init "
                "watch.toml", _configure_init, "watchrun.cli.config_cmds:cmd_init"),
        Command("list", "every watcher with its status and counts (live runner or not)",
                "examples:\n  watchrun list -c watch.yaml\n  watchrun list --output-dir "
                "/var/lib/watchrun --json", _configure_ops("list"), "watchrun.cli.ops:cmd_ops"),
        Command("status", "one watcher's status", "example:\n  watchrun status server -c "
                "watch.yaml", _configure_ops("status"), "watchrun.cli.ops:cmd_ops"),
        Command("matches", "a watcher's latest matched lines", "examples:\n  watchrun matches "
                "server -c watch.yaml --lines 20\n  watchrun matches server --follow --json",
                _configure_ops("matches"),
                "watchrun.cli.ops:cmd_ops"),
        Command("logs", "a watcher's latest raw lines (sanitized)", "examples:\n  watchrun logs "
                "server -c watch.yaml --lines 100\n  watchrun logs server -f",
                _configure_ops("logs"),
                "watchrun.cli.ops:cmd_ops"),
        Command("add", "add a watcher to the live runner (until stopped or the runner exits)",
                "examples:\n  watchrun add api --path /var/log/api.log --pattern 'ERROR|FATAL'"
                "\n  watchrun add tests --command 'make test' --pattern FAIL --wake triage\n"
                "checked like a config watcher; exit status 2 invalid or id in use, 3 refused",
                _configure_add, "watchrun.cli.watch_cmds:cmd_add"),
        Command("start", "start a stopped, exited or failed watcher of the live runner",
                "example:\n  watchrun start server -c watch.yaml", _configure_start("start"),
                "watchrun.cli.watch_cmds:cmd_start"),
        Command("restart", "stop and start a watcher of the live runner (files keep their "
                "position)", "example:\n  watchrun restart server -c watch.yaml",
                _configure_start("restart"), "watchrun.cli.watch_cmds:cmd_start"),
        Command("stop", "stop one watcher of the live runner", "example:\n  watchrun stop "
                "server -c watch.yaml", _configure_ops("stop"), "watchrun.cli.ops:cmd_ops"),
        Command("clear", "forget stopped watchers' status (--all: stop and forget every one)",
                "example:\n  watchrun clear --all -c watch.yaml", _configure_ops("clear"),
                "watchrun.cli.ops:cmd_ops"),
        Command("top", "the live screen: every watcher and agent, their matches, stop and "
                "clear (needs the [tui] extra)", "keys: j/k move, Enter opens matches, x stops, "
                "d clears, Esc back, q quits\nexample:\n  watchrun top -c watch.yaml",
                lambda p: add_where_args(p, table=False), "watchrun.cli.top:cmd_top"),
        Command("agent", "agents: list | run | watch | transcript | send | stop",
                "examples:\n  watchrun agent list -c watch.yaml\n  watchrun agent run triage "
                "-c watch.yaml --prompt 'hello'\n  watchrun agent watch triage -c watch.yaml",
                _configure_agent, "watchrun.cli.ops:cmd_agent"),
    )
}
"""Subcommands by name, in help order. Add an entry here to add a command."""


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="watchrun",
        description="Tail files and commands, match lines, supervise AI coding agents, "
        "write JSONL.",
        epilog="examples:\n  watchrun -c watch.yaml            run (same as `watchrun run -c "
        "watch.yaml`)\n  watchrun validate -c watch.yaml   check a config\n  watchrun init"
        "                     write a starter watch.yaml\n\nexit status: 0 ok, 1 gate failed, "
        "2 usage or config error, 3 runtime failure",
        formatter_class=raw,
    )
    parser.add_argument("--version", action="version", version=f"watchrun {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        sub = subs.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                              epilog=cmd.epilog, formatter_class=raw)
        cmd.configure(sub)
    return parser


def _handler(spec: str) -> Callable[[argparse.Namespace], int] | None:
    module_name, _, func = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return None
    handler: Callable[[argparse.Namespace], int] = getattr(module, func)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (SPEC §7)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0].startswith("-") and args_list[0] not in (
        "-h", "--help", "--version",
    ):
        args_list.insert(0, "run")  # bare `watchrun -c FILE` means `watchrun run -c FILE`
    parser = build_parser()
    if not args_list:
        parser.print_help(sys.stderr)
        return ExitStatus.USAGE
    args = parser.parse_args(args_list)
    cmd = COMMANDS[args.command]
    try:
        handler = _handler(cmd.handler)
        if handler is None:
            print(f"watchrun: error: `{cmd.name}` is not available in this build "
                  f"({cmd.handler.partition(':')[0]} is missing)", file=sys.stderr)
            return ExitStatus.RUNTIME
        return int(handler(args))
    except BrokenPipeError:
        # The reader went away (`watchrun validate ... | head`): stop quietly, without a
        # traceback, with the status of a process killed by SIGPIPE as coreutils tools end.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
