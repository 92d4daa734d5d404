"""CI gates (SPEC §8): the evidence a once run gathers per watcher and the verdict on it (pure;
`cli/gate_report.py` prints them)."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from enum import StrEnum

from msgspec import Struct, field
from msgspec.structs import replace

from watchrun.config.model import WatcherSpec
from watchrun.match.redact import Redactor, clean_text

FIRST_LINES = 5
"""Matched lines shown per crossed gate."""
_NOT_RUN_CODES = {126: "a program found but not executable", 127: "a command not found"}
"""What /bin/sh and `#!/usr/bin/env` exit with when the program could not run: an ERROR
whatever the gate (said as its meaning, not as what happened: a program that ran may exit 127
too)."""


class Trouble(StrEnum):
    """What kind of ERROR a verdict is: the one place its headline is decided."""

    NOT_RUN = "not-run"
    """Nothing was started or read: the command could not start (or exited 126 or 127: it may
    never have run), the file was never there."""
    UNREAD = "unread"
    """It ran, but some lines were not looked at (cut, never read, output held open) or never
    printed (the command was killed by a signal)."""
    INTERRUPTED = "interrupted"
    """The run was stopped before the command exited, or before the file was read to its end."""
    FAILED = "failed"
    """The watcher itself failed part-way (its records could not be written, a bug)."""

    def said(self, many: bool = False) -> str:
        """The headline: `deploy: could not run`, `2 watchers were interrupted`."""
        if self is Trouble.INTERRUPTED:
            return "were interrupted" if many else "was interrupted"
        return {Trouble.NOT_RUN: "could not run", Trouble.UNREAD: "could not look at every line",
                Trouble.FAILED: "could not finish"}[self]


class Evidence(Struct, frozen=True):
    """What one watcher saw during a once run."""

    matches: int
    first: Sequence[tuple[str, str]] = ()
    """(where, line) of the first matched lines: `path:12` or `run 1:12`."""
    exit_code: int | None = None
    signal: str | None = None
    ran: bool = True
    """False when the command could not be started."""
    require_seen: bool = False
    read_since: str | None = None
    """What a file watcher read when it went on from the last run's checkpoint (`the 2 lines
    read since the last run, from line 3 of app.log`): where a `require` was not seen."""
    path: str | None = None
    error: str | None = None
    """Why the source could not do its job (the command could not start: why; the file could
    not be read). A watcher with an error gets an `error` verdict, gated or not."""
    trouble: Trouble = Trouble.UNREAD
    """What kind of error `error` is (an error that says lines went unread, unless told)."""
    cut: str | None = None
    """Lines matched only in part (longer than maxLineBytes): a gate that held is an ERROR."""
    interrupted: bool = False
    """The command was still running when the run was stopped: it did not run to its exit (an
    ERROR), and its exit (shown) was the stop's doing, which crosses no gate."""
    signal_sent: bool = False
    """`signal` is one the runner sent (its stop): no death of the command's own."""


class Status(StrEnum):
    PASS = "pass"
    FAIL = "FAIL"
    """A gate was crossed."""
    ERROR = "ERROR"
    """The watcher could not do its job (exit status 3): `Verdict.trouble` says how."""


class Line(Struct, frozen=True):
    """One matched line as shown: `where` is `path:12` or `run 1:12`."""

    where: str
    text: str
    path: str | None = None
    line_no: int | None = None


class Verdict(Struct, frozen=True):
    id: str
    label: str
    status: Status
    reasons: tuple[str, ...]
    matches: int
    threshold: int | None
    exit: str | None
    """The exit code (or the signal that killed the command); None for files."""
    first: tuple[Line, ...] = field(default_factory=tuple)
    too_many: bool = False
    """The `maxMatches` condition is crossed (the first lines are its evidence)."""
    crossed_too: bool = False
    """An ERROR whose gate the lines it did read crossed anyway: `reasons` are the crossing
    ones, then the error (last)."""
    trouble: Trouble | None = None
    """What kind of ERROR it is (None unless an ERROR; one made without it: NOT_RUN)."""
    gated: bool = True
    """The watcher has a gate (False: an ungated watcher's ERROR, which counts as no gate)."""

    @property
    def error_kind(self) -> Trouble | None:
        """What kind of ERROR it is; None unless an ERROR."""
        if self.status is not Status.ERROR:
            return None
        return self.trouble or Trouble.NOT_RUN

    @property
    def headline(self) -> str:
        """What went wrong, as every report heads it: `gate crossed`, `could not run`, `gate
        crossed, and it was interrupted` (empty for a pass)."""
        kind = self.error_kind
        if kind is None:
            return "gate crossed" if self.status is Status.FAIL else ""
        return f"gate crossed, and it {kind.said()}" if self.crossed_too else kind.said()

    @property
    def ok(self) -> bool:
        return self.status is Status.PASS

    @property
    def crossed(self) -> bool:
        """The gate is crossed: a FAIL, or an ERROR that crossed it anyway."""
        return self.status is Status.FAIL or self.crossed_too

    @property
    def shown(self) -> str:
        """The verdict as the table shows it: `FAIL+ERROR` for an ERROR that crossed too."""
        return "FAIL+ERROR" if self.crossed_too else str(self.status)

    @property
    def crossings(self) -> tuple[str, ...]:
        """Why the gate is crossed (none when it is not)."""
        if self.status is Status.ERROR:
            return self.reasons[:-1] if self.crossed_too else ()
        return self.reasons if self.status is Status.FAIL else ()

    @property
    def errors(self) -> tuple[str, ...]:
        """Why the watcher could not do its job (none unless an ERROR)."""
        if self.status is not Status.ERROR:
            return ()
        return self.reasons[-1:] if self.crossed_too else self.reasons


def _lines(ev: Evidence) -> tuple[Line, ...]:
    """The lines shown; a file watcher's with the file each was read from (the watched path,
    or a rotated generation of it: `app.log.1`) and its line number there."""
    out = []
    for where, text in ev.first[:FIRST_LINES]:
        path, _, num = where.rpartition(":")
        if ev.path is not None and path and num.isdigit():
            out.append(Line(where, text, path, int(num)))
        else:
            out.append(Line(where, text))
    return tuple(out)


def judge(spec: WatcherSpec, ev: Evidence) -> Verdict | None:
    """The verdict of one watcher: None when it has no gate and nothing went wrong. Pure. A
    gate crossed by what was read is crossed whatever else went wrong (what was not read could
    only add matches): an error then makes it an ERROR that crossed too, with the lines."""
    gate = spec.gate
    exit_ = ev.signal or (None if ev.exit_code is None else str(ev.exit_code))
    threshold = gate.max_matches if gate is not None else None
    error, trouble = ev.error, ev.trouble
    if spec.kind == "command" and not ev.ran:
        error = "the command could not be started" + (f": {ev.error}" if ev.error else "")
        trouble = Trouble.NOT_RUN
    elif spec.kind == "command" and (exit_ is None or ev.interrupted) and error is None:
        error = "the command did not run to its exit (the run was interrupted)"
        trouble = Trouble.INTERRUPTED
    elif spec.kind == "command" and error is None and ev.exit_code in _NOT_RUN_CODES:
        error, trouble = _not_run(spec, ev.exit_code), Trouble.NOT_RUN
    elif (spec.kind == "command" and error is None and gate is not None and not gate.exit_code
          and (killed := _killed_by(spec, ev)) is not None):  # (`exitCode: true`: crossed)
        error = (f"{killed}: its output may be incomplete (what it would still have printed "
                 "was never seen)")
        trouble = Trouble.UNREAD
    if gate is None:
        return None if error is None else Verdict(spec.id, spec.label, Status.ERROR, (error,),
                                                  ev.matches, threshold, exit_, trouble=trouble,
                                                  gated=False)
    reasons: list[str] = []
    too_many = gate.max_matches is not None and ev.matches > gate.max_matches
    if too_many:
        n = f"{ev.matches} match{'' if ev.matches == 1 else 'es'}"
        reasons.append(f"{n} of /{spec.pattern}/ (at most {gate.max_matches} allowed)")
    if gate.exit_code and spec.kind == "command" and not ev.interrupted:
        if ev.signal and not ev.signal_sent:
            reasons.append(f"the command was killed by {ev.signal}")
        elif ev.exit_code not in (0, None, *_NOT_RUN_CODES):
            reasons.append(f"the command exited with code {ev.exit_code}")
    first = _lines(ev) if too_many else ()
    if error is not None:  # (`require` unseen is no crossing then: it may be in the unread)
        return Verdict(spec.id, spec.label, Status.ERROR, (*reasons, error), ev.matches,
                       threshold, exit_, first, too_many, bool(reasons), trouble)
    if gate.require is not None and not ev.require_seen:
        if ev.cut is not None and not reasons:  # it may be in what was cut: cannot tell
            return Verdict(spec.id, spec.label, Status.ERROR, (
                f"required pattern /{gate.require}/ was not seen in what was read, and {ev.cut}",),
                ev.matches, threshold, exit_, trouble=Trouble.UNREAD)
        reasons.append(f"required pattern /{gate.require}/ " + (
            "never appeared" if ev.read_since is None else f"was not seen in {ev.read_since}"))
    # what was cut may hold a match (a crossed gate stays FAIL: the rest could only add); it
    # cannot change a gate of `exitCode` alone
    reads_lines = gate.max_matches is not None or gate.require is not None
    if not reasons and ev.cut is not None and reads_lines:
        return Verdict(spec.id, spec.label, Status.ERROR, (ev.cut,), ev.matches, threshold, exit_,
                       trouble=Trouble.UNREAD)
    status = Status.FAIL if reasons else Status.PASS
    return Verdict(spec.id, spec.label, status, tuple(reasons), ev.matches, threshold, exit_,
                   first, too_many)


def _killed_by(spec: WatcherSpec, ev: Evidence) -> str | None:
    """How the command was killed by a signal the runner did not send, if it was: its own
    death, or, for a string command, its shell's exit code 128+N (a program killed by signal
    N: dash does not hand the shell's process to even a lone command)."""
    if ev.signal is not None:
        return None if ev.signal_sent else f"the command was killed by {ev.signal}"
    code = ev.exit_code
    if not isinstance(spec.command, str) or code is None or not 128 < code <= 128 + 64:
        return None
    try:
        name = signal.Signals(code - 128).name
    except ValueError:
        name = f"signal {code - 128}"
    return (f"the command exited with code {code} (the shell's code for a program killed by "
            f"{name})")


def _not_run(spec: WatcherSpec, code: int) -> str:
    """Why an exit of 126 or 127 is no evidence: the program may never have run."""
    who = "the shell's code" if isinstance(spec.command, str) else \
        "the code a shell or `#!/usr/bin/env` exits with"
    return (f"the command exited with code {code} ({who} for {_NOT_RUN_CODES[code]}): it may "
            "never have run")


def cut_note(lines: int, limit: int) -> str | None:
    """The reason a gate cannot pass over `lines` cut at `limit` bytes, or None."""
    if not lines:
        return None
    one = lines == 1
    return (f"{lines} line{'' if one else 's'} {'was' if one else 'were'} longer than "
            f"limits.maxLineBytes ({limit}): only {'its' if one else 'their'} first {limit} "
            f"bytes were matched (raise limits.maxLineBytes, up to 16MiB, to look at all of "
            f"{'it' if one else 'them'})")


NEVER_RAN = "it never ran, so there is no evidence to judge it by"
STOPPED_BEFORE = "it never started: the run was stopped before it"
"""The error of a watcher built but never started (`runtime.ending.end`)."""


def judge_all(specs: Sequence[WatcherSpec], evidence: Mapping[str, Evidence],
              missing: str = NEVER_RAN, *, start_failed: bool = False) -> list[Verdict]:
    """Verdicts in config order: every gated watcher, and every watcher with an error. Fails
    closed: a gated watcher without evidence (it never started) is an ERROR, `missing` says
    why; a gate never passes because its watcher could not look. `start_failed`: the run's
    start failed, so no watcher ran: every one is an ERROR, gated or not, and one built but
    never started says `missing` too (why the start failed, not only that it stopped)."""
    found = (judge(w, _evidence(evidence.get(w.id), missing, start_failed)) for w in specs
             if start_failed or w.id in evidence or w.gate is not None)
    return [v for v in found if v is not None]


def _evidence(ev: Evidence | None, missing: str, start_failed: bool) -> Evidence:
    if ev is None or (start_failed and ev.error == STOPPED_BEFORE):
        return Evidence(0, error=missing, trouble=Trouble.NOT_RUN)
    return ev


def redacted(verdicts: Sequence[Verdict], problems: Sequence[str], redactor: Redactor | None
             ) -> tuple[list[Verdict], list[str]]:
    """The verdicts' labels and reasons, and the run's problems, as `status` shows a watcher:
    sanitized, and with `output.redact` (`redactor`) redacted (a `${VAR}` password in a
    label, a path in a reason). Pure."""
    return [replace(v, label=clean_text(v.label, redactor),
                    reasons=tuple(clean_text(r, redactor) for r in v.reasons))
            for v in verdicts], [clean_text(p, redactor) for p in problems]
