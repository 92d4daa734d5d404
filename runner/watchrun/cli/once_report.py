"""A `run --once` run's report: each watcher's verdict, the summary printed, the exit status."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
from typing import TYPE_CHECKING, NamedTuple, Protocol

from msgspec.structs import replace

from watchrun.cli.gate_report import (
    StopCommands,
    github_workspace,
    in_github_actions,
    relativize,
)
from watchrun.cli.once_out import close_fence, open_fence, say, stdout_failed, stdout_stream
from watchrun.exitcodes import ExitStatus
from watchrun.output.safefs import write_all
from watchrun.runtime.gate import Evidence

if TYPE_CHECKING:
    from watchrun.config.model import Config
    from watchrun.output.outdir import OutputLayout
    from watchrun.output.runlog import RunLog


class Ran(Protocol):
    """What a once run's report reads of the supervisor that ran it."""

    @property
    def evidence(self) -> dict[str, Evidence]: ...
    @property
    def layout(self) -> OutputLayout: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def runtime_errors(self) -> list[str]: ...


class _NothingRan(NamedTuple):
    layout: OutputLayout
    evidence: dict[str, Evidence]
    stop_reason: str | None
    runtime_errors: list[str]


def never_ran(config: Config, args: argparse.Namespace, log: RunLog,
               fence: StopCommands | None, why: str) -> None:
    """The once report of a run that could not start at all (its output dir is unusable)."""
    from watchrun.output.outdir import layout_for

    open_fence(fence)
    try:
        report_once(_NothingRan(layout_for(config.output.dir), {}, None, []), config, args, 0.0,
                    log, fence=fence, missing=why)
    finally:
        close_fence(fence)


def report_once(sup: Ran, config: Config, args: argparse.Namespace, took: float,
                log: RunLog, *, fence: StopCommands | None = None,
                missing: str | None = None) -> int:
    """Print the verdicts (inside the fence), then the annotations; write the step summary
    and the JUnit report; return the once-mode exit status (0 pass, 1 crossed, 3 error).
    A gated watcher that never ran is an ERROR; `missing`: why the start failed, and then
    every watcher is one."""
    from watchrun.cli import gate_report as report
    from watchrun.output.logstream import EXIT_WAIT_S
    from watchrun.runtime import gate
    from watchrun.runtime.census import disabled

    evidence = _with_errors(sup, config)
    never_started = missing
    if missing is None:
        missing = gate.NEVER_RAN if config.limits.enabled else \
            f"it never ran: {disabled(config, once=True)}"
    verdicts = relativize(gate.judge_all(config.watchers, evidence, missing,
                                         start_failed=never_started is not None), os.getcwd())
    interrupted = sup.stop_reason if sup.stop_reason not in (None, "once", "startup-failed") \
        else None  # a signal ended the run before it ended by itself: never a pass
    problems = [f"it was interrupted by {interrupted} before it ended by itself"] \
        if interrupted else []  # (and what failed that no verdict names: never a pass)
    problems += [e for e in sup.runtime_errors if not any(
        v.status is gate.Status.ERROR and e.startswith(f"{v.id}: ") for v in verdicts)]
    if never_started is not None and not any(never_started in v.reasons for v in verdicts):
        problems.append(never_started)  # no verdict says why the start failed: the run's
    verdicts, problems = gate.redacted(verdicts, problems, config.records_redactor())
    status = ExitStatus.OK
    if args.junit is not None:  # first: a report that could not be written is no pass either
        try:
            write_report(args.junit, report.junit(verdicts, took, problems))
        except OSError as exc:
            log.error(f"cannot write the JUnit report {args.junit}: {exc.strerror}")
            problems.append(f"the JUnit report {args.junit} could not be written: "
                            f"{exc.strerror}")
            status = ExitStatus.RUNTIME
    as_json = getattr(args, "format", "text") == "json"
    if as_json:
        from watchrun.cli.verdicts import verdicts_doc
        from watchrun.match.sanitize import edge_json

        say(edge_json(verdicts_doc(verdicts, interrupted, problems), indent=2))
    else:
        say(report.summary_table(verdicts, problems))
        if interrupted is not None:
            say(f"watchrun: INTERRUPTED by {interrupted} before the run ended: exit 3")
    close_fence(fence)  # annotations are the only workflow commands watchrun prints
    if in_github_actions():
        for line in report.annotation_lines(verdicts, github_workspace(), problems):
            if as_json:  # stdout holds the document; the runner reads stderr too
                print(line, file=sys.stderr)
            else:
                say(line)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                write_report(summary, report.markdown(verdicts, problems).encode(), append=True)
            except OSError as exc:
                log.warning(f"cannot append to GITHUB_STEP_SUMMARY {summary}: {exc.strerror}")
    for v in verdicts:
        if v.status is gate.Status.ERROR:
            if v.errors != (never_started,):  # (a failed start's cause is logged once, above)
                log.error("; ".join(v.errors), v.id)
            status = ExitStatus.RUNTIME
    if sup.runtime_errors:
        status = ExitStatus.RUNTIME
    if interrupted is not None:
        log.error(f"the run was interrupted by {interrupted}: exit 3", event="interrupted")
        status = ExitStatus.RUNTIME
    lost, left = stdout_failed()
    if left:  # (a pager paused for good: the verdict is said here rather than not at all)
        log.warning(f"stdout took nothing for {EXIT_WAIT_S:g} s: its last {left} lines, the "
                    f"verdict among them, were not written (the JSONL has every match); "
                    f"{report.footer(verdicts, problems).removeprefix('watchrun: ')}",
                    event="stdout-stalled", lines=left)
    if lost is not None:
        log.error(f"cannot write to stdout: {lost}; what this run printed there is lost (the "
                  "JSONL has every match)", event="stdout-failed", reason=lost)
        status = ExitStatus.RUNTIME
    if status == ExitStatus.OK and any(not v.ok for v in verdicts):
        status = ExitStatus.GATE_FAILED
    return status


INTERRUPTED_WAIT_S = 0.5
"""How long that line waits for a stdout reader that takes nothing (a paused pager)."""


def report_interrupted(args: argparse.Namespace, log: RunLog, signal_name: str) -> int:
    """A SIGTERM or SIGINT that came while the verdict was reported, after the run ended by
    itself (`cli.stops.late_stops`): what was not written yet is left out; exit 3, said so on
    stderr and, after what was written of the table, on stdout (with `--json` stdout holds the
    document only) to a reader that takes it within INTERRUPTED_WAIT_S."""
    log.error(f"the run was interrupted by {signal_name} while its verdict was reported: exit 3",
              event="interrupted")
    out = stdout_stream()
    if out is not None:
        out.abandon()
    if getattr(args, "format", "text") != "json":
        say(f"watchrun: INTERRUPTED by {signal_name} while the verdict was reported: exit 3")
    if out is not None and not out.drain(INTERRUPTED_WAIT_S):
        out.abandon()  # (and the exit does not wait for it either)
    return ExitStatus.RUNTIME


_REPORT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def write_report(path: str, data: bytes, *, append: bool = False) -> None:
    """Write `data` to a report file the run was told of (`--junit`, `$GITHUB_STEP_SUMMARY`),
    replacing it (or appended to it). Opened without waiting (a FIFO with no reader would
    hold the run for good) and refused unless it is a regular file, never through a symlink
    at the path itself (the directories above it are the caller's); OSError says why. A
    replacement that fails part-way (a full disk) is removed: no cut report is left to parse,
    nor the last run's (the run's exit status and log say why there is none)."""
    try:
        fd = os.open(path, _REPORT_FLAGS | (os.O_APPEND if append else 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            try:
                to = f" (to {os.readlink(path)})"
            except OSError:
                to = ""
            raise OSError(exc.errno, f"a symlink{to}, never written through") from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads, a socket, a device not there
            raise OSError(exc.errno, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        _write(fd, path, data, append)
    finally:
        os.close(fd)


def _write(fd: int, path: str, data: bytes, append: bool) -> None:
    """`data` into the regular file `fd` opened at `path`; a cut replacement is removed."""
    try:
        if not append:
            os.ftruncate(fd, 0)
        write_all(fd, data)
    except OSError:
        if not append:
            with contextlib.suppress(OSError):
                st, at = os.fstat(fd), os.lstat(path)
                if (st.st_dev, st.st_ino) == (at.st_dev, at.st_ino):  # (still ours)
                    os.unlink(path)
        raise


def _with_errors(sup: Ran, config: Config) -> dict[str, Evidence]:
    """The evidence, plus why a source could not do its job: a command that could not start
    (its last `error` record says why), a file that cannot be read after the run."""
    from watchrun.output.backward import last_records
    from watchrun.sources.regular import open_regular

    out = dict(sup.evidence)
    for w in config.watchers:
        ev = out.get(w.id)
        if ev is None or ev.error is not None:
            continue
        if w.kind == "command" and not ev.ran:
            last = last_records(sup.layout.jsonl("watcher", w.id), 1, {"error"})
            if last and last[0].get("message"):
                out[w.id] = replace(ev, error=str(last[0]["message"]))
        elif w.path is not None:
            try:
                os.close(open_regular(w.path)[0])  # as the file source opens it: never blocks
            except OSError as exc:
                out[w.id] = replace(ev, error=f"cannot read {w.path}: {exc.strerror}")
    return out
