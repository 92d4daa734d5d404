"""The `watchrun` command line: parse, find the config, call the lazily imported handler."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from watchrun.cli.parser import COMMANDS, Command, build_parser, parsers
from watchrun.cli.stdio import StdoutFailed, std_fds, std_out, std_text
from watchrun.exitcodes import ExitStatus

__all__ = ["BROKEN_PIPE", "COMMANDS", "Command", "build_parser", "main", "parse"]

BROKEN_PIPE = 128 + 13
"""Exit status when stdout's reader went away (128 + SIGPIPE, as `yes | head` reports)."""
_TAKES_VALUE = {"-c", "--config", "--output-dir", "--log-format", "--junit", "--metrics"}
"""Options (of the top level or of `run`) whose value is the next word."""
_WHERE = {"-c", "--config", "--output-dir"}
"""Options naming a config or output dir, which `schema`, `init` and `completion` refuse."""


def _command_at(argv: Sequence[str]) -> int | None:
    """Index of the first word that is not an option or an option's value, if any."""
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word == "--":
            return i + 1 if i + 1 < len(argv) else None
        elif word in _TAKES_VALUE:
            skip = True
        elif not word.startswith("-") or word == "-":
            return i
    return None


def _names_where(words: Sequence[str]) -> bool:
    """Whether -c/--config/--output-dir is among these words (before a `--`)."""
    for word in words:
        if word == "--":
            return False
        if word.split("=")[0] in _WHERE:
            return True
    return False


def normalize(argv: Sequence[str]) -> list[str]:
    """`watchrun [-c FILE…] [run options]` without a command means `watchrun run …`; options
    before a command stay where they are (the top-level parser takes -c/--output-dir/--json),
    and those between `agent` and its action go after the action, whose parser takes them."""
    words = list(argv)
    if any(w in ("-h", "--help", "--version") for w in words[:1]):
        return words
    at = _command_at(words)
    if at is None:
        words.insert(0, "run")
    elif words[at] == "agent":  # (-c/--output-dir/--json between it and its action: after it)
        moved: list[str] = []
        j = at + 1
        while j < len(words) and words[j].split("=")[0] in (*_WHERE, "--json"):
            step = 1 if "=" in words[j] or words[j] == "--json" else 2
            if j + step > len(words):  # its value is missing: left where it is, for the
                moved = []  # agent parser's usage error (it declares them for that)
                break
            moved += words[j:j + step]
            j += step
        if moved and j < len(words):
            words[at + 1:j + 1] = [words[j], *moved]
        elif moved:  # (no action: before `agent`, so its usage says an action is due)
            words[at:j] = [*moved, words[at]]
    return words


_MEANT = {w: "a watcher is removed with `stop ID`, then `clear ID`;"
          for w in ("remove", "rm", "delete", "del")}
"""Commands people type that watchrun spells otherwise."""


def _unknown(word: str) -> str:
    """Why `word`, where a command was due, is refused: what it may have meant, and the
    commands there are (it was said as an unrecognized argument of `run`, never typed)."""
    if word.endswith((".yaml", ".yml", ".json", ".toml")) or os.path.isfile(word):
        import shlex

        return (f"{word!r} is not a command; to run a config, name it with -c: "
                f"`watchrun -c {shlex.quote(word)}`")
    import difflib  # (only here: not on every start)

    near = difflib.get_close_matches(word, COMMANDS, n=1)
    also = _MEANT.get(word, f"did you mean {near[0]!r}?" if near else "")
    also += " " if also else ""
    return f"unknown command {word!r}; {also}commands: {', '.join(COMMANDS)}"


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line as `main` does (usage errors exit 2); -c/--output-dir/--json given
    before the command are merged with those given after it."""
    words = normalize(argv)
    at = _command_at(words)
    parser = build_parser(words[at] if at is not None and words[at] in COMMANDS else None)
    if "--json" in words:
        for p in parsers(parser):
            p.json_errors = True  # type: ignore[attr-defined]
    if at is not None and words[at] not in COMMANDS:
        parser.error(_unknown(words[at]))
    if at is not None and words[at] in COMMANDS and COMMANDS[words[at]].config == "none" and \
            _names_where(words[at + 1:]):  # argparse would take the file for a positional
        parser.error(f"`watchrun {words[at]}` reads no config: drop -c/--output-dir")
    args, extra = parser.parse_known_args(words)
    if (args.pre_json or "--json" in extra) and not hasattr(args, "format"):
        parser.error(_no_json(args.command))  # (`watchrun --json top`: the screen opened)
    if extra:  # said with the command's own usage (`run --bogus` showed the top level's)
        _deepest(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "junit", None) is not None and not args.once:  # (ignored, it had run a
        _deepest(parser, args).error(  # live runner: a CI step that forgot --once hung)
            "--junit needs --once: only a once run writes a JUnit report (`watchrun run --once "
            "--junit FILE`); without --once a live runner would run until stopped")
    pre_config, pre_out, pre_json = args.pre_config, args.pre_output_dir, args.pre_json
    del args.pre_config, args.pre_output_dir, args.pre_json
    cmd = COMMANDS[args.command]
    if cmd.config == "none" and (pre_config or pre_out):
        parser.error(f"`watchrun {cmd.name}` reads no config: drop -c/--output-dir")
    if cmd.config != "none":
        args.config = [*(pre_config or []), *(getattr(args, "config", None) or []),
                       *(getattr(args, "files", None) or [])]
        if getattr(args, "output_dir", None) is None:
            args.output_dir = pre_out
    asked = [w.partition("=")[2] or (words[i + 1] if i + 1 < len(words) else "")
             for i, w in enumerate(words) if w == "--format" or w.startswith("--format=")]
    if "--json" in words and any(f != "json" for f in asked):  # (the last one given won)
        parser.error(f"--json and --format {next(f for f in asked if f != 'json')} disagree: "
                     "give one of them")
    if pre_json:
        args.format = "json"
    args.config_found = None
    return args


def _no_json(command: str) -> str:
    why = {"top": ": it is a screen; `watchrun list --json` gives its rows",
           "mcp": ": its answers are JSON-RPC already"}
    return f"`watchrun {command}` takes no --json{why.get(command, '')}"


def _deepest(parser: argparse.ArgumentParser, args: argparse.Namespace
             ) -> argparse.ArgumentParser:
    """The parser of the command (and subcommand) `args` were parsed as."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return _deepest(action.choices[chosen], args)
    return parser


def _needs(cmd: Command, args: argparse.Namespace) -> str:
    if cmd.name == "agent" and args.agent_command == "run":
        return "required"
    return cmd.config


def _find_config(cmd: Command, args: argparse.Namespace) -> int | None:
    """Without -c, use ./watch.yaml (or .yml/.json/.toml) and say so; exit 2 when there is
    none (a command whose config is optional goes on without). `--output-dir` alone is enough
    for the commands that only read the output dir."""
    needs = _needs(cmd, args)
    if needs == "none" or args.config or (needs in ("where", "optional") and
                                          args.output_dir is not None):
        return None
    from watchrun.cli.discover import discover, none_found, using

    found = discover(Path.cwd())
    if found.path is None and needs == "optional":
        return None  # the command's defaults
    if found.path is None:
        from watchrun.cli.emit import Out

        return Out.for_args(args).fail("config_not_found", none_found(
            needs == "where"), looked=list(found.looked))
    args.config, args.config_found = [found.path], found.path
    note = using(found)
    if cmd.name == "run":
        from watchrun.output.runlog import RunLog

        if args.format == "json":
            args.log_format = "json"
        RunLog(args.log_format, quiet=args.quiet).info(note, event="config",
                                                        path=str(found.path))
    else:
        from watchrun.match.sanitize import edge_text

        print(f"watchrun: {edge_text(note)}", file=sys.stderr)
    return None


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


@contextlib.contextmanager
def startup_gc() -> Iterator[None]:
    """No cyclic garbage collection while modules are imported and the start is set up: the
    collector would walk the growing heap of a start over and over (7 ms of the ~100 ms of a
    `watchrun run --once`); what was built then is frozen out of later collections."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (SPEC §7)."""
    std_fds()
    std_text()
    std_out()
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list and not any(Path(n).is_file() for n in _candidates()):
        build_parser().print_help(sys.stderr)
        return ExitStatus.USAGE
    try:
        try:
            return _command(args_list)
        finally:  # (also after argparse's --help or --version, which exit)
            sys.stdout.flush()  # here, where a failure is seen, and not at the interpreter's exit
    except BrokenPipeError:
        # The reader went away (`watchrun validate ... | head`): stop quietly, without a
        # traceback, with the status of a process killed by SIGPIPE as coreutils tools end.
        _stdout_to_null()
        return BROKEN_PIPE
    except StdoutFailed as exc:  # (`> /dev/full`): what was printed is lost, and said so
        _stdout_to_null()
        print(f"watchrun: error: cannot write to stdout: {exc}", file=sys.stderr)
        return ExitStatus.RUNTIME
    except KeyboardInterrupt:
        return 130


def _command(args_list: list[str]) -> int:
    """Parse, find the config and run the command's handler."""
    with startup_gc():
        args = parse(args_list)
        cmd = COMMANDS[args.command]
        failed = _find_config(cmd, args)
        if failed is not None:
            return failed
        if cmd.name == "run" and args.format == "json":
            args.log_format = "json"
        handler = _handler(cmd.handler)
    if handler is None:
        print(f"watchrun: error: `{cmd.name}` is not available in this build "
              f"({cmd.handler.partition(':')[0]} is missing)", file=sys.stderr)
        return ExitStatus.RUNTIME
    return int(handler(args))


def _stdout_to_null() -> None:
    """What is still buffered for stdout goes nowhere (the interpreter's last flush would fail
    again, and print a traceback of its own)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _candidates() -> tuple[str, ...]:
    from watchrun.cli.discover import NAMES

    return NAMES
