"""`watchrun completion bash|zsh|fish`: a completion script generated from the parser by shtab."""

from __future__ import annotations

import argparse

from watchrun.cli.emit import Out
from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_text

__all__ = ["cmd_completion", "script"]

_BEFORE = {"pre_config": "config file (as after the command)",
           "pre_output_dir": "output dir (as after the command)",
           "pre_json": "print JSON (as after the command)"}
"""The options that may also come before the command, described for the completion."""


def script(shell: str) -> str:
    """The completion script for `shell` (imports shtab: only this command pays for it)."""
    import shtab

    from watchrun.cli.parser import build_parser, parsers

    parser = build_parser()
    for p in parsers(parser):
        for action in p._actions:
            if action.dest in _BEFORE:  # hidden from --help, and shtab leaves out what is
                action.help = _BEFORE[action.dest]  # hidden: `watchrun -c <TAB>` gave commands
            if action.dest in ("config", "pre_config", "junit") or action.dest == "path":
                action.complete = shtab.FILE  # type: ignore[attr-defined]
            elif action.dest in ("output_dir", "pre_output_dir"):
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
    text: str = shtab.complete(parser, shell=shell)
    return text if text.endswith("\n") else text + "\n"


def cmd_completion(args: argparse.Namespace) -> int:
    out = Out.for_args(args)
    try:
        text = script(args.shell)
    except ModuleNotFoundError as exc:
        return out.fail("not_supported", f"shell completion needs {exc.name} (pip install "
                        "shtab)")
    if out.as_json:
        out.doc({"shell": args.shell, "script": text})
    else:
        out.block(edge_text(text, multiline=True))
    return ExitStatus.OK
