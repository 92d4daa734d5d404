"""`watchrun mcp`: load the config (or take the defaults), check for the MCP SDK, serve."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from watchrun.cli.emit import Out, config_failed, exit_status, log_diagnostic
from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_name

if TYPE_CHECKING:
    from watchrun.config.diagnostics import Diagnostic


def cmd_mcp(args: argparse.Namespace) -> int:
    out = Out(False)  # stdout is the protocol's: every word of ours goes to stderr
    from watchrun.config import load_config
    from watchrun.config.model import Config, Limits, OutputSpec
    from watchrun.config.validate import NOTHING_TO_RUN
    from watchrun.output.runlog import ForwardToRunLog, RunLog

    log = RunLog(args.log_format)
    json_lines = args.log_format == "json"  # then every line on stderr is one, as run's are

    paths = [Path(p) for p in args.config or []]
    said: list[Diagnostic] = []
    broken = None
    root = args.output_dir if args.output_dir is not None else Path(".watchrun")
    config = Config(Limits(), OutputSpec(Path(os.path.abspath(root))))
    if paths:  # (without one: the defaults, output dir .watchrun here, as beside ./watch.yaml)
        result = load_config(paths, output_dir=args.output_dir, cache=True)
        if result.config is None:  # served all the same: each call says why it cannot act
            if json_lines:
                for d in result.diagnostics:
                    log_diagnostic(log, d)
            else:
                config_failed(out, result.diagnostics)
            broken = _broken(paths, result.diagnostics)
        else:
            config = result.config
            said = [d for d in result.diagnostics if d.message != NOTHING_TO_RUN]
    try:
        from watchrun.mcp.server import serve
    except ModuleNotFoundError as exc:
        missing = (exc.name or "watchrun").split(".")[0]
        if missing == "watchrun":
            raise
        why = f"`watchrun mcp` needs the MCP SDK ({missing} is missing): pip install " \
              "'watchrun[mcp]'"
        if json_lines:
            log.error(why, event="missing-dependency")
            return exit_status("missing_dependency")
        return out.fail("missing_dependency", why)
    ForwardToRunLog(log).install()
    for d in said:  # (clamped limits, …: as `run` says them)
        log_diagnostic(log, d)
    log.info(f"MCP server on stdio; output dir {edge_name(config.output.dir)}", event="mcp")
    from watchrun.runtime.workers import Workers, run_with_workers, stuck_message

    workers = Workers()  # (a call stuck in a dead file system cannot hold the exit)
    try:
        run_with_workers(serve(config, log, os.getcwd(), broken), workers)
    except Exception as exc:  # a bug: one line and exit 3, never a traceback on the wire
        log.error(f"internal error: {exc!r}")
        return ExitStatus.RUNTIME
    if workers.stuck:  # (a session's watchers' records may not all be on disk)
        log.error(stuck_message(workers.stuck), event="stuck-calls", calls=workers.stuck)
        return ExitStatus.RUNTIME
    return ExitStatus.OK if broken is None else ExitStatus.USAGE


def _broken(paths: list[Path], diagnostics: list[Diagnostic]) -> str:
    """What every call answers when the config is invalid: the client sees why, not a server
    that closed before its handshake."""
    errors = [d.format() for d in diagnostics if d.severity == "error"]
    shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
    where = " ".join(str(p) for p in paths)
    return (f"the config {where} is invalid, so this server does nothing: {shown}. Fix it and "
            f"restart the MCP server (`watchrun validate -c {where}` lists every error)")
