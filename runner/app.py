"""`watchrun run`: load the config, prepare the output dir, run the supervisor, exit."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from watchrun.exitcodes import ExitStatus
from watchrun.gate import StopCommands, in_github_actions

if TYPE_CHECKING:
    from watchrun.config.model import Config
    from watchrun.logs import RunLog
    from watchrun.supervisor import Supervisor


def _early_exit(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT before the loop owns signals: nothing runs yet, so leave cleanly."""
    raise SystemExit(0)


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _early_exit)
    signal.signal(signal.SIGINT, _early_exit)
    from watchrun.clock import SystemClock
    from watchrun.config import load_config
    from watchrun.logs import RunLog
    from watchrun.outdir import OutputDirError, prepare_output_dir
    from watchrun.procs import Spawner, become_subreaper
    from watchrun.supervisor import Supervisor

    log = RunLog(args.log_format, quiet=args.quiet)
    paths = [Path(p) for p in args.config]
    output_dir = Path(args.output_dir) if args.output_dir else None
    result = load_config(paths, output_dir=output_dir)
    for d in result.diagnostics:
        (log.error if d.severity == "error" else log.warning)(d.format())
    config = result.config
    if config is None:
        log.error("invalid config; nothing was started (see `watchrun validate`)")
        return ExitStatus.USAGE
    metrics = None
    if args.metrics:
        from watchrun.metrics import parse_address

        try:
            metrics = parse_address(args.metrics)
        except ValueError as exc:
            log.error(str(exc))
            return ExitStatus.USAGE
    try:
        layout = prepare_output_dir(config.output.dir)
    except OutputDirError as exc:
        log.error(str(exc))
        return ExitStatus.RUNTIME

    def reload() -> object | None:
        again = load_config(paths, output_dir=output_dir)
        for d in again.diagnostics:
            (log.error if d.severity == "error" else log.warning)("reload: " + d.format())
        return again.config

    become_subreaper()
    echo = _stdout_echo if args.once and not args.quiet else None
    fence = StopCommands() if args.once and in_github_actions() and echo else None
    if fence is not None:
        _say(fence.begin())
    sup = Supervisor(
        config,
        layout,
        log,
        SystemClock(),
        Spawner(),
        once=args.once,
        echo=echo,
        reload=reload,  # type: ignore[arg-type]
        force_poll=os.environ.get("WATCHRUN_FORCE_POLL") == "1",
        metrics=metrics,
    )
    log.info(f"writing JSONL under {layout.root}")
    started = time.monotonic()
    try:
        asyncio.run(sup.run())
    except OSError as exc:  # e.g. another runner is live on this output dir
        log.error(str(exc))
        return ExitStatus.RUNTIME
    finally:
        if fence is not None:
            _say(fence.end())
    if not args.once:
        return ExitStatus.RUNTIME if sup.runtime_errors else ExitStatus.OK
    return report_once(sup, config, args, time.monotonic() - started, log)


def report_once(sup: Supervisor, config: Config, args: argparse.Namespace, took: float,
                log: RunLog) -> int:
    """Print the verdicts, write annotations/summary/JUnit; the once-mode exit status."""
    from watchrun import gate

    verdicts = [
        v for v in (gate.judge(w, sup.evidence[w.id]) for w in config.watchers if w.id in
                    sup.evidence) if v is not None
    ]
    _say(gate.summary_table(verdicts))
    if in_github_actions():
        for line in gate.annotations(verdicts):
            _say(line)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(gate.markdown(verdicts))
            except OSError as exc:
                log.warning(f"cannot append to GITHUB_STEP_SUMMARY: {exc}")
    if args.junit is not None:
        try:
            Path(args.junit).write_bytes(gate.junit(verdicts, took))
        except OSError as exc:
            log.error(f"cannot write the JUnit report {args.junit}: {exc.strerror}")
            return ExitStatus.RUNTIME
    failed_to_start = [wid for wid, ev in sup.evidence.items() if not ev.ran]
    if failed_to_start or sup.runtime_errors:
        for wid in failed_to_start:
            log.error("the command could not be started", wid)
        return ExitStatus.RUNTIME
    return ExitStatus.GATE_FAILED if any(not v.ok for v in verdicts) else ExitStatus.OK


def _say(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


def _stdout_echo(data: bytes) -> None:
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except (BrokenPipeError, ValueError):
        pass
