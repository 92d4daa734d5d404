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


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("run", "run the watchers and agents (the default command)",
                "examples:\n  watchrun -c watch.yaml\n  watchrun run -c base.yaml -c prod.yaml "
                "--output-dir /var/lib/watchrun\n  watchrun run --once -c ci.yaml --junit "
                "report.xml", _configure_run, "watchrun.app:run"),
        Command("validate", "check config files; every problem is reported at once",
                "exit status: 0 valid, 2 invalid\nexamples:\n  watchrun validate -c watch.yaml"
                "\n  watchrun validate -c base.yaml -c prod.yaml --strict --format json",
                _configure_validate, "watchrun.cli_config:cmd_validate"),
        Command("config", "print the resolved, clamped config (paths absolute, ms, bytes)",
                "examples:\n  watchrun config -c watch.yaml\n  watchrun config -c base.yaml "
                "-c prod.yaml --format toml > resolved.toml",
                _configure_config, "watchrun.cli_config:cmd_config"),
        Command("schema", "print a JSON Schema (config, record, agent-watch, transcript)",
                "examples:\n  watchrun schema > watch.schema.json\n  watchrun schema record",
                _configure_schema, "watchrun.cli_config:cmd_schema"),
        Command("init", "write a commented starter config",
                "examples:\n  watchrun init\n  watchrun init ci/watch.yaml\n  watchrun init "
                "watch.toml", _configure_init, "watchrun.cli_config:cmd_init"),
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
