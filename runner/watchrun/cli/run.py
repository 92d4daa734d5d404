"""`watchrun run`: load the config, prepare the output dir, run the supervisor, exit."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from watchrun.cli import NO_MEMORY_LINE, end_now, not_begun
from watchrun.cli.emit import Out, log_diagnostic
from watchrun.cli.gate_report import StopCommands, github_workspace, in_github_actions
from watchrun.cli.main import startup_gc
from watchrun.cli.once_out import StdoutEcho, close_fence, open_fence
from watchrun.cli.once_report import never_ran, report_interrupted, report_once
from watchrun.cli.stops import LateStop, Stops, catch_early_stops, late_stops
from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_name
from watchrun.offload import stop_bound_s
from watchrun.runtime.deadline import StopDeadline
from watchrun.runtime.workers import Workers, run_with_workers, stuck_message

if TYPE_CHECKING:
    from watchrun.runtime.supervisor import Supervisor


def run(args: argparse.Namespace) -> int:
    catch_early_stops(once=args.once)
    try:
        with startup_gc():
            prepared = _prepare(args)
    except Exception as exc:  # (out of memory reading the config): one line, exit 3
        if Stops.caught and Stops.unwrapped(exc) is not None:
            raise  # (a stop: `cli.entry` ends as it says)
        return _not_begun(args, exc)
    if isinstance(prepared, int):
        return prepared
    return _run(args, *prepared)


def _not_begun(args: argparse.Namespace, exc: Exception) -> int:
    """What failed before the run began, said in one line: exit 3, never a traceback and
    Python's exit 1 (in a once run, the code of a crossed gate). `--json` once: the document
    is the error, `run_failed`."""
    json_once = args.once and getattr(args, "format", "text") == "json"
    if isinstance(exc, MemoryError) and not json_once:  # (its line made before it is needed)
        end_now(ExitStatus.RUNTIME, NO_MEMORY_LINE)
    message, line = not_begun(exc), None
    if json_once:
        status = Out(True).fail("run_failed", message)
    else:
        status, line = ExitStatus.RUNTIME, f"watchrun: error: {message}"
    if isinstance(exc, MemoryError):  # (its line the last: `end_now`)
        end_now(status, line)
    if line is not None:
        print(line, file=sys.stderr)
    return status


def _prepare(args: argparse.Namespace
             ) -> tuple[Supervisor, StopCommands | None, StdoutEcho | None] | int:
    """Load the config and build the supervisor, with no cyclic garbage collection meanwhile
    (`cli.main.startup_gc`); an exit status when that fails."""
    from watchrun.output.runlog import ForwardToRunLog, RunLog

    log = RunLog(args.log_format, quiet=args.quiet)
    ForwardToRunLog(log).install()  # (first: what the modules below log as they load, as
    # hashlib short of memory does, is a line of this log)
    from watchrun.clock import SystemClock
    from watchrun.config import load_config
    from watchrun.output.outdir import OutputDirError, prepare_output_dir
    from watchrun.process.spawn import Spawner, become_subreaper
    from watchrun.process.tree import raise_fd_limit, short_of_files
    from watchrun.runtime.supervisor import Supervisor

    paths = [Path(p) for p in args.config]
    output_dir = Path(args.output_dir) if args.output_dir else None
    result = load_config(paths, output_dir=output_dir, cache=True)
    config = result.config
    if config is None and args.once and args.log_format == "text":
        from watchrun.cli.config_cmds import located, printable

        for d in result.diagnostics:  # validate's lines: what editors and CI matchers read
            print(printable(located(d)), file=sys.stderr)
    else:
        for d in result.diagnostics:
            log_diagnostic(log, d)
    as_json = getattr(args, "format", "text") == "json"  # stdout is one JSON object: no echo
    if config is None:
        log.error("invalid config; nothing was started (see `watchrun validate`)")
        if args.once and in_github_actions():  # the job's annotations say why, as validate's
            from watchrun.cli.config_cmds import annotation

            for d in result.diagnostics:  # (stderr: with --json, stdout holds the document)
                print(annotation(d, github_workspace(), "watchrun config"), file=sys.stderr)
        if args.once and as_json:  # the document a once run promises: here, the error
            from watchrun.cli.emit import Out, config_failed

            return config_failed(Out(True), result.diagnostics)
        return ExitStatus.USAGE
    # GitHub Actions: everything a once run prints that carries log text (the echoed output,
    # the verdict table) is fenced, so a log line cannot run a workflow command. (A JSON
    # document needs no fence: no line of it can start a command.)
    fence = StopCommands() if args.once and in_github_actions() and not as_json else None
    try:
        layout = prepare_output_dir(config.output.dir)
    except OutputDirError as exc:
        hint = short_of_files(exc.errno_name)  # (out of descriptors: the limit, and its knob)
        why = str(exc) if hint is None else f"{exc} ({hint})"
        log.error(why)
        if args.once:  # the gates could not look: their verdicts say so (and the JUnit file)
            never_ran(config, args, log, fence, f"it never ran: {why}")
        return ExitStatus.RUNTIME
    for note in layout.fixed:
        log.warning(note)
    from watchrun.sources.orphans import orphan_diagnostics
    from watchrun.views.watchers import added_at_runtime

    for d in orphan_diagnostics(config, added_at_runtime):
        log_diagnostic(log, d)

    def reload() -> object | None:
        again = load_config(paths, output_dir=output_dir, cache=True)
        for d in again.diagnostics:
            log_diagnostic(log, d, "reload: ")
        return again.config

    become_subreaper()
    raise_fd_limit()
    echo = StdoutEcho(config.records_redactor()) if args.once and not args.quiet and \
        not as_json else None
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
        metrics=args.metrics,  # (HOST, PORT) or None: parsed as it was read (`MetricsAddress`)
        guardian=True,
    )
    Stops.tell(sup.request_stop, sup.request_reload)
    return sup, fence, echo


def _run(args: argparse.Namespace, sup: Supervisor, fence: StopCommands | None,
         echo: StdoutEcho | None) -> int:
    """Run the supervisor to its end; the exit status (once mode: the verdicts')."""
    from watchrun.runtime.supervisor import RunnerState, StartupError

    config, log = sup.config, sup.log
    open_fence(fence)
    log.info(f"writing JSONL under {edge_name(sup.layout.root)}")
    started = time.monotonic()
    failed: str | None = None
    workers = Workers()
    deadline = StopDeadline(stop_bound_s(config.limits.stop_timeout_ms / 1000), log, workers,
                            lambda: sup.state in (RunnerState.STOPPING, RunnerState.STOPPED))
    try:
        try:
            with deadline.watching():  # (a stop held past its bound ends the process, exit 3)
                run_with_workers(sup.run(), workers)
        except StartupError as exc:  # undone already: say why in one line
            failed = f"could not start: {exc}"
        except OSError as exc:  # (no event loop could be made: out of descriptors)
            from watchrun.process.tree import os_error_said

            failed = f"could not run: {os_error_said(exc)}"
        except Exception as exc:  # a bug: still one line and exit 3, never a traceback
            failed = f"internal error: {exc!r}"
        if failed is not None:
            log.error(failed)
        if workers.stuck:  # what they were doing may not have been done: never a clean exit
            stuck = stuck_message(workers.stuck)
            log.error(stuck, event="stuck-calls", calls=workers.stuck)
            sup.runtime_errors.append(stuck)
        if echo is not None and echo.unshown:
            log.warning(f"{echo.unshown} lines of the commands' output were not echoed: stdout "
                        "was not being read as the run stopped (the JSONL has every match)",
                        event="echo-dropped", count=echo.unshown)
        if not args.once:
            return ExitStatus.RUNTIME if failed or sup.runtime_errors else ExitStatus.OK
        try:
            with late_stops():
                status = report_once(sup, config, args, time.monotonic() - started, log,
                                     fence=fence,
                                     missing=f"it never ran: {failed}" if failed else None)
        except LateStop as stop:
            return report_interrupted(args, log, stop.name)
        return ExitStatus.RUNTIME if failed else status
    finally:
        close_fence(fence)
