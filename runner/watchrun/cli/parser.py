"""The argparse tree of `watchrun`: every subcommand, its options and its handler's name."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

from watchrun import __version__
from watchrun.cli.arguments import (
    Formatter,
    add_before_args,
    add_where_args,
    configure_add,
    configure_agent,
    configure_completion,
    configure_config,
    configure_init,
    configure_mcp,
    configure_ops,
    configure_run,
    configure_schema,
    configure_start,
    configure_transcript,
    configure_validate,
)

__all__ = ["COMMANDS", "Command", "Parser", "build_parser", "parsers"]



class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one JSON object on stdout when `--json` was
    given (`json_errors`, set by `main`), else argparse's usage and message on stderr; exit 2
    either way. The message quotes what was typed, so it goes through the edge sanitizer."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        from watchrun.match.sanitize import edge_json, edge_text

        if self.json_errors:
            print(edge_json({"error": {"code": "usage", "message": f"{self.prog}: {message}"}},
                            indent=2))
            sys.exit(2)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {edge_text(message)}\n")


class Command:
    """One subcommand: its help, its arguments, and its handler imported only when it runs.

    `handler` is `module:function`, called with the parsed Namespace, returning an exit status.
    `config` says what it reads: "required" (a config: `-c`, else ./watch.yaml …), "where" (a
    config or `--output-dir` alone), "optional" (as "where", else the defaults) or "none". (A
    plain class, not a dataclass: `watchrun --help` must start fast.)
    """

    __slots__ = ("config", "configure", "epilog", "handler", "help", "name")

    def __init__(self, name: str, help: str, epilog: str,
                 configure: Callable[[argparse.ArgumentParser], None], handler: str,
                 config: str = "where") -> None:
        self.name = name
        self.help = help
        self.epilog = epilog
        self.configure = configure
        self.handler = handler
        self.config = config


_OPS = "watchrun.cli.ops:cmd_ops"
COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("run", "run the watchers and agents (the default command)",
                "examples:\n  watchrun                          (runs ./watch.yaml)\n  "
                "watchrun -c watch.yaml\n  watchrun run -c base.yaml -c prod.yaml "
                "--output-dir /var/lib/watchrun\n  watchrun run --once -c ci.yaml --junit "
                "report.xml", configure_run, "watchrun.cli.run:run", "required"),
        Command("validate", "check config files; every problem is reported at once",
                "exit status: 0 valid, 2 invalid\nexamples:\n  watchrun validate -c watch.yaml"
                "\n  watchrun validate -c base.yaml -c prod.yaml --strict --format json"
                "\n  watchrun validate --each ci/watch.yaml deploy/watch.yaml",
                configure_validate, "watchrun.cli.config_cmds:cmd_validate", "required"),
        Command("config", "print the resolved, clamped config (paths absolute, ms, bytes)",
                "examples:\n  watchrun config -c watch.yaml\n  watchrun config -c base.yaml "
                "-c prod.yaml --format toml > resolved.toml",
                configure_config, "watchrun.cli.config_cmds:cmd_config", "required"),
        Command("schema", "print a JSON Schema (config, record, agent-watch, transcript)",
                "examples:\n  watchrun schema > watch.schema.json\n  watchrun schema record",
                configure_schema, "watchrun.cli.config_cmds:cmd_schema", "none"),
        Command("init", "write a starter config (commented in YAML)",
                "examples:\n  watchrun init\n  watchrun init ci/watch.yaml\n  watchrun init "
                "watch.toml", configure_init, "watchrun.cli.config_cmds:cmd_init", "none"),
        Command("list", "every watcher with its status and counts (live runner or not)",
                "examples:\n  watchrun list\n  watchrun list -c watch.yaml\n  watchrun list "
                "--output-dir /var/lib/watchrun --json", configure_ops("list"), _OPS),
        Command("status", "one watcher's status", "example:\n  watchrun status server -c "
                "watch.yaml", configure_ops("status"), _OPS),
        Command("matches", "a watcher's latest matched lines", "examples:\n  watchrun matches "
                "server -c watch.yaml --lines 20\n  watchrun matches server --follow --json",
                configure_ops("matches"), _OPS),
        Command("logs", "a watcher's latest raw lines (sanitized)", "examples:\n  watchrun logs "
                "server -c watch.yaml --lines 100\n  watchrun logs server -f",
                configure_ops("logs"), _OPS),
        Command("add", "add a watcher to the live runner (until stopped or the runner exits)",
                "examples:\n  watchrun add api --path /var/log/api.log --pattern 'ERROR|FATAL'"
                "\n  watchrun add tests --command 'make test' --pattern FAIL --wake triage\n"
                "checked like a config watcher; exit status 2 invalid or id in use, 3 refused",
                configure_add, "watchrun.cli.watch_cmds:cmd_add"),
        Command("start", "start a stopped, exited or failed watcher of the live runner",
                "example:\n  watchrun start server -c watch.yaml", configure_start("start"),
                "watchrun.cli.watch_cmds:cmd_start"),
        Command("restart", "stop and start a watcher of the live runner (files keep their "
                "position)", "example:\n  watchrun restart server -c watch.yaml",
                configure_start("restart"), "watchrun.cli.watch_cmds:cmd_start"),
        Command("stop", "stop one watcher of the live runner (already stopped: exit 0)",
                "example:\n  watchrun stop server -c watch.yaml", configure_ops("stop"), _OPS),
        Command("clear", "forget stopped watchers' status (--all: stop and forget every one)",
                "example:\n  watchrun clear --all -c watch.yaml", configure_ops("clear"), _OPS),
        Command("top", "the live screen: every watcher and agent, their matches, stop and "
                "clear (needs the [tui] extra)", "keys: j/k move, Enter opens matches, x stops, "
                "d clears, Esc back, q quits\nexample:\n  watchrun top -c watch.yaml",
                add_where_args, "watchrun.cli.top:cmd_top"),
        Command("mcp", "the `watch` tool for agents over MCP on stdio (needs the [mcp] extra)",
                "register it with an agent (README: Claude Code, Codex, Gemini CLI, opencode):\n"
                "  claude mcp add watchrun -- watchrun mcp -c watch.yaml\nit uses the runner "
                "live on the output dir; with none, its own, whose watchers end with the "
                "session\nwithout -c: ./watch.yaml if there is one, else the defaults "
                "(output dir ./.watchrun)", configure_mcp, "watchrun.cli.mcp_cmd:cmd_mcp",
                "optional"),
        Command("transcript", "every agent's turns, a plan of agents as one turn (JSON, "
                "seed-shaped)", "examples:\n  watchrun transcript -c watch.yaml\n  watchrun "
                "transcript --output-dir /var/lib/watchrun --format text", configure_transcript,
                "watchrun.cli.agent_views:cmd_transcript"),
        Command("agent", "agents: list | run | watch | transcript | send | stop",
                "examples:\n  watchrun agent list -c watch.yaml\n  watchrun agent run triage "
                "-c watch.yaml --prompt 'hello'\n  watchrun agent watch triage -c watch.yaml",
                configure_agent, "watchrun.cli.agent_ops:cmd_agent"),
        Command("completion", "print a shell completion script (bash, zsh, fish)",
                "examples:\n  source <(watchrun completion bash)\n  watchrun completion zsh > "
                "\"${fpath[1]}/_watchrun\"\n  watchrun completion fish > "
                "~/.config/fish/completions/watchrun.fish",
                configure_completion, "watchrun.cli.completion:cmd_completion", "none"),
    )
}
"""Subcommands by name, in help order. Add an entry here to add a command."""


def build_parser(only: str | None = None) -> Parser:
    """The whole command line; with `only`, that command alone (a start of `watchrun run` does
    not pay ~3 ms for building every command's parser: only the top-level help lists them,
    and it is built with `only` None)."""
    raw = Formatter
    parser = Parser(
        prog="watchrun",
        description="Tail files and commands, match lines, supervise AI coding agents, "
        "write JSONL.",
        epilog="examples:\n  watchrun                          run ./watch.yaml (same as "
        "`watchrun run`)\n  watchrun -c watch.yaml            run that config\n  watchrun "
        "validate                 check ./watch.yaml\n  watchrun init                     write "
        "a starter watch.yaml\n\n-c, --output-dir and --json may also come before the "
        "command.\nexit status: 0 ok, 1 gate failed, 2 usage or config error, 3 runtime failure",
        formatter_class=raw,
    )
    parser.add_argument("--version", action="version", version=f"watchrun {__version__}")
    add_before_args(parser)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        if only is None or only == cmd.name:
            cmd.configure(subs.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                                          epilog=cmd.epilog, formatter_class=raw))
    return parser


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """`parser` and every subparser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)
