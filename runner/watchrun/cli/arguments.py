"""Each subcommand's options, and the shared ones (`-c`, `--output-dir`, `--json`, `--lines`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["MAX_LINES", "Formatter", "add_before_args", "add_config_args", "add_where_args",
           "json_flag", "lines_count"]

MAX_LINES = 2000
"""`--lines` is 1 to this (as limits.matchLines; seed 001's bound)."""
SHELLS = ("bash", "zsh", "fish")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, sized as `shutil.get_terminal_size` would size it, without
    importing shutil (and its archive modules) on every start: argparse builds a formatter for
    each argument it adds."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            try:
                width = int(os.environ.get("COLUMNS", "0"))
            except ValueError:
                width = 0
            if width <= 0:
                out = sys.__stdout__
                try:
                    width = os.get_terminal_size(out.fileno()).columns if out else 80
                except (ValueError, OSError):  # not a terminal
                    width = 80
            width -= 2
        super().__init__(prog, indent_increment, max_help_position, width)


def lines_count(text: str) -> int:
    """`--lines N`: an integer from 1 to MAX_LINES, else a usage error that says so."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_LINES}, "
                                         f"not {text!r}") from None
    if not 1 <= n <= MAX_LINES:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_LINES}, not {n}")
    return n


def nonempty(text: str) -> str:
    """A path given on the command line as typed (`init newdir/` keeps its slash); an empty one
    (an unset `$OUT`) is refused, never taken for the current directory."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty (an unset variable?)")
    return text


class MetricsAddress(argparse.Action):
    """`--metrics HOST:PORT`, parsed as it is read (`runtime.metrics.parse_address`): a bad one
    is a usage error that names it, before any config is read (with `--json`, the error
    document on stdout, as every usage error's)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from watchrun.runtime.metrics import parse_address

        try:
            setattr(namespace, self.dest, parse_address(str(values)))
        except ValueError as exc:
            parser.error(str(exc))


def path_arg(text: str) -> Path:
    """A path given on the command line (`nonempty`)."""
    return Path(nonempty(text))


def _config_arg(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("-c", "--config", metavar="FILE", type=path_arg, action="append", help=help)


def add_config_args(p: argparse.ArgumentParser) -> None:
    """`-c FILE` (repeatable; layered in order) and `--output-dir DIR`."""
    _config_arg(p, "config file (.yaml/.yml/.json/.toml); repeat to layer files: later keys "
                "win, watchers and agents merge by id/name (default: ./watch.yaml, watch.yml, "
                "watch.json or watch.toml)")
    p.add_argument("--output-dir", metavar="DIR", type=path_arg,
                   help="override output.dir (default .watchrun beside the first config file)")


def add_where_args(p: argparse.ArgumentParser) -> None:
    """`-c FILE` or `--output-dir DIR`: where the output dir is (default: ./watch.yaml's)."""
    _config_arg(p, "config file whose output dir to read; repeatable (default: ./watch.yaml, "
                "watch.yml, watch.json or watch.toml)")
    p.add_argument("--output-dir", metavar="DIR", type=path_arg,
                   help="read this output dir directly (no config needed)")


def add_before_args(p: argparse.ArgumentParser, default: object = None) -> None:
    """-c, --output-dir, --json (hidden) before a command, or an agent action (normalize moves
    them after it; `default` SUPPRESS: nothing set there for the action's to lose): so one
    without its value is a usage error, and the completion offers a file or folder after it."""
    hidden = argparse.SUPPRESS
    p.add_argument("-c", "--config", dest="pre_config", metavar="FILE", type=path_arg,
                   action="append", default=default, help=hidden)
    p.add_argument("--output-dir", dest="pre_output_dir", metavar="DIR", type=path_arg,
                   default=default, help=hidden)
    p.add_argument("--json", dest="pre_json", action="store_true",
                   default=False if default is None else default, help=hidden)


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", dest="format", action="store_const", const="json",
                   help="print one JSON object (docs/cli.md)")


def configure_run(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--once", action="store_true", help="CI mode: run commands to their exit, "
                   "scan files to their end, print a verdict per gate, exit 1 if one is crossed")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="format of the runner's own log on stderr (default text)")
    p.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    p.add_argument("--junit", metavar="FILE", type=path_arg,
                   help="with --once: write a JUnit report")
    p.add_argument("--metrics", metavar="HOST:PORT", action=MetricsAddress,
                   help="serve Prometheus metrics, /healthz and /livez on HOST:PORT")
    p.set_defaults(format="text")
    p.add_argument("--json", dest="format", action="store_const", const="json",
                   help="JSON log lines on stderr; with --once the verdicts as one JSON object "
                   "on stdout (command output is not echoed)")


def configure_validate(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--strict", action="store_true", help="treat warnings (clamped limits, "
                   "appended {prompt}, ...) as errors")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default text)")
    p.add_argument("--each", action="store_true", help="validate every file on its own instead "
                   "of layering them (a pre-commit hook passes each changed config file)")
    p.add_argument("files", nargs="*", type=path_arg, metavar="FILE",
                   help="more config files, after those of -c (as pre-commit passes them)")
    json_flag(p)


def configure_config(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--format", choices=("yaml", "json", "toml"), default="yaml",
                   help="output format (default yaml)")
    json_flag(p)


def configure_schema(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default="config",
                   choices=("config", "record", "agent-watch", "transcript"),
                   help="which schema (default config)")
    p.set_defaults(format="json")
    json_flag(p)


def configure_init(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", default="watch.yaml", metavar="PATH", type=nonempty,
                   help="file to write (default watch.yaml; .json/.toml write that format; "
                   "a folder gets watch.yaml inside it; missing folders are created)")
    p.set_defaults(format="text")
    json_flag(p)


def configure_completion(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(format="text")
    json_flag(p)


def configure_ops(kind: str) -> Callable[[argparse.ArgumentParser], None]:
    def configure(p: argparse.ArgumentParser) -> None:
        add_where_args(p)
        if kind in ("matches", "logs", "stop"):
            p.add_argument("id", help="watcher id")
        if kind == "status":
            p.add_argument("id", nargs="?", help="watcher id (none: the live runner's own "
                           "state and problems)")
        if kind in ("matches", "logs"):
            p.add_argument("--lines", type=lines_count, metavar="N",
                           help=f"how many lines, 1 to {MAX_LINES} (default limits.matchLines)")
            p.add_argument("--follow", "-f", action="store_true",
                           help="then print each new one as it is recorded, like tail -F "
                           "(Ctrl-C ends; --json: one object per line)")
        if kind == "clear":
            p.add_argument("--all", action="store_true",
                           help="also stop running watchers before forgetting them")
        p.set_defaults(op=kind, format="text")
        json_flag(p)
    return configure


def configure_add(p: argparse.ArgumentParser) -> None:
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
    p.set_defaults(format="text")
    json_flag(p)


def configure_start(kind: str) -> Callable[[argparse.ArgumentParser], None]:
    def configure(p: argparse.ArgumentParser) -> None:
        add_where_args(p)
        p.add_argument("id", help="watcher id")
        p.set_defaults(op=kind, format="text")
        json_flag(p)
    return configure


def _agent_parser(subs: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                  help: str, epilog: str) -> argparse.ArgumentParser:
    return subs.add_parser(name, help=help, description=help, epilog=epilog,
                           formatter_class=Formatter)


def configure_agent(p: argparse.ArgumentParser) -> None:
    add_before_args(p, argparse.SUPPRESS)
    subs = p.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    ls = _agent_parser(subs, "list", "every agent with its status, turns, tokens, last reply",
                       "example:\n  watchrun agent list -c watch.yaml")
    add_where_args(ls)
    ls.set_defaults(format="text")
    json_flag(ls)
    run = _agent_parser(subs, "run", "run one turn in the foreground and print the reply",
                        "examples:\n  watchrun agent run triage -c watch.yaml\n  watchrun agent "
                        "run triage --prompt 'why is the build red?'\nexit status: 0 the turn "
                        "completed, 1 it failed")
    add_config_args(run)
    run.add_argument("name", help="agent name")
    run.add_argument("--prompt", help="the prompt (default: the agent's prompt template)")
    run.set_defaults(format="text")
    json_flag(run)
    watch = _agent_parser(subs, "watch", "the readable view of an agent (JSON, seed-shaped)",
                          "examples:\n  watchrun agent watch triage -c watch.yaml\n  watchrun "
                          "agent watch triage --until status:idle --timeout 5m\n  watchrun agent "
                          "watch triage --since triage:0000000000000010 --raw")
    add_where_args(watch)
    watch.add_argument("name", help="agent name")
    watch.add_argument("--include", action="append", default=[], metavar="LIST",
                       help="comma list of status,transcript,output,delivery,raw_output,events")
    watch.add_argument("--raw", action="store_true", help="add raw_output to the include set")
    watch.add_argument("--since", metavar="CURSOR", help="only what is strictly after CURSOR")
    watch.add_argument("--tail", metavar="BYTES", help="cap text fields to BYTES (0 or more)")
    watch.add_argument("--until", metavar="COND", help="wait for a new status:S, output:TOKEN, "
                       "event:KIND or delivery:STATE")
    watch.add_argument("--timeout", default="10m", help="how long --until waits (default 10m)")
    watch.add_argument("--format", choices=("json", "text"), default="json")
    json_flag(watch)
    tr = _agent_parser(subs, "transcript", "turns grouped by prompt (JSON, seed-shaped)",
                       "example:\n  watchrun agent transcript triage -c watch.yaml")
    add_where_args(tr)
    tr.add_argument("name", help="agent name")
    tr.add_argument("--format", choices=("json", "text"), default="json")
    json_flag(tr)
    send = _agent_parser(subs, "send", "queue a prompt for an agent of the live runner",
                         "example:\n  watchrun agent send triage 'look at the last deploy'")
    add_where_args(send)
    send.add_argument("name", help="agent name")
    send.add_argument("text", help="the prompt")
    send.set_defaults(format="text")
    json_flag(send)
    stop = _agent_parser(subs, "stop", "abort an agent's running turn in the live runner",
                         "example:\n  watchrun agent stop triage")
    add_where_args(stop)
    stop.add_argument("name", help="agent name")
    stop.set_defaults(format="text")
    json_flag(stop)


def configure_mcp(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="format of the server's own log on stderr (default text)")


def configure_transcript(p: argparse.ArgumentParser) -> None:
    add_where_args(p)
    p.add_argument("--format", choices=("json", "text"), default="json")
    json_flag(p)
