"""CI gates (SPEC §8): verdicts per watcher, the summary table, GitHub annotations, JUnit."""

from __future__ import annotations

import os
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

from watchrun.config.model import WatcherSpec

FIRST_LINES = 5
"""Matched lines shown per crossed gate."""
MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 error annotations per step; the rest are summarised."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one watcher saw during a once run."""

    matches: int
    first: Sequence[tuple[str, str]] = ()
    """(where, line) of the first matched lines: `path:12` or `run 1:12`."""
    exit_code: int | None = None
    signal: str | None = None
    ran: bool = True
    """False when the command could not be started."""
    require_seen: bool = False
    path: str | None = None
    first_line_no: int | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    id: str
    label: str
    ok: bool
    reasons: tuple[str, ...]
    matches: int
    threshold: int | None
    exit_code: int | None
    first: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    path: str | None = None
    first_line_no: int | None = None


def judge(spec: WatcherSpec, ev: Evidence) -> Verdict | None:
    """The verdict of a gated watcher (None when the watcher has no gate). Pure."""
    gate = spec.gate
    if gate is None:
        return None
    reasons: list[str] = []
    if gate.max_matches is not None and ev.matches > gate.max_matches:
        reasons.append(f"{ev.matches} matches of /{spec.pattern}/ (allowed {gate.max_matches})")
    if gate.exit_code and spec.kind == "command":
        if not ev.ran:
            reasons.append("the command could not be started")
        elif ev.signal:
            reasons.append(f"the command was killed by {ev.signal}")
        elif ev.exit_code not in (0, None):
            reasons.append(f"the command exited with code {ev.exit_code}")
    if gate.require is not None and not ev.require_seen:
        reasons.append(f"required pattern /{gate.require}/ never appeared")
    return Verdict(
        spec.id,
        spec.label,
        not reasons,
        tuple(reasons),
        ev.matches,
        gate.max_matches,
        ev.exit_code,
        tuple(ev.first[:FIRST_LINES]),
        ev.path,
        ev.first_line_no,
    )


def summary_table(verdicts: Sequence[Verdict]) -> str:
    """The human summary printed at the end of a once run."""
    if not verdicts:
        return "watchrun: no gated watchers"
    rows = [["WATCHER", "MATCHES", "THRESHOLD", "EXIT", "VERDICT"]]
    for v in verdicts:
        threshold = "-" if v.threshold is None else str(v.threshold)
        code = "-" if v.exit_code is None else str(v.exit_code)
        rows.append([v.id, str(v.matches), threshold, code, "pass" if v.ok else "FAIL"])
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for v in verdicts:
        if v.ok:
            continue
        lines.append(f"\n{v.id}: gate crossed")
        lines.extend(f"  - {r}" for r in v.reasons)
        lines.extend(f"    {where}: {text}" for where, text in v.first)
    failed = sum(not v.ok for v in verdicts)
    lines.append(f"\nwatchrun: {failed} of {len(verdicts)} gates crossed" if failed else
                 f"\nwatchrun: all {len(verdicts)} gates hold")
    return "\n".join(lines)


def escape_data(text: str) -> str:
    """GitHub workflow-command data escaping."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotations(verdicts: Sequence[Verdict]) -> list[str]:
    """`::error` lines for crossed gates, at most MAX_ANNOTATIONS, then one summary line."""
    failed = [v for v in verdicts if not v.ok]
    out = []
    for v in failed[:MAX_ANNOTATIONS]:
        props = [f"title={escape_property('watchrun gate: ' + v.id)}"]
        if v.path and v.first_line_no:
            props = [f"file={escape_property(v.path)}", f"line={v.first_line_no}", *props]
        msg = "; ".join(v.reasons)
        if v.first:
            msg += "\n" + "\n".join(f"{w}: {t}" for w, t in v.first)
        out.append(f"::error {','.join(props)}::{escape_data(msg)}")
    if len(failed) > MAX_ANNOTATIONS:
        rest = len(failed) - MAX_ANNOTATIONS
        out.append(f"::warning title=watchrun::{rest} more crossed gates (see the job log)")
    return out


class StopCommands:
    """Wraps echoed output so a log line cannot inject workflow commands."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(16)

    def begin(self) -> str:
        return f"::stop-commands::{self.token}"

    def end(self) -> str:
        return f"::{self.token}::"


def markdown(verdicts: Sequence[Verdict]) -> str:
    lines = ["### watchrun gates", "", "| watcher | matches | threshold | exit | verdict |",
             "|---|---|---|---|---|"]
    for v in verdicts:
        t = "-" if v.threshold is None else v.threshold
        c = "-" if v.exit_code is None else v.exit_code
        verdict = "✅ pass" if v.ok else "❌ FAIL"
        lines.append(f"| `{v.id}` | {v.matches} | {t} | {c} | {verdict} |")
    for v in verdicts:
        if not v.ok:
            lines += ["", f"**{v.id}**: " + "; ".join(v.reasons)]
            if v.first:
                body = "\n".join(f"{w}: {t}".replace("```", "'''") for w, t in v.first)
                lines += ["```", body, "```"]
    return "\n".join(lines) + "\n"


def junit(verdicts: Sequence[Verdict], duration_s: float) -> bytes:
    """A JUnit XML report: one testcase per gated watcher."""
    failures = sum(not v.ok for v in verdicts)
    suite = ET.Element(
        "testsuite",
        name="watchrun",
        tests=str(len(verdicts)),
        failures=str(failures),
        errors="0",
        time=f"{duration_s:.3f}",
    )
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname="watchrun.gate", name=v.id)
        if not v.ok:
            fail = ET.SubElement(case, "failure", message="; ".join(v.reasons), type="gate")
            fail.text = "\n".join(f"{w}: {t}" for w, t in v.first)
    ET.indent(suite)
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True) + b"\n"


def in_github_actions(environ: dict[str, str] | None = None) -> bool:
    env = environ if environ is not None else dict(os.environ)
    return env.get("GITHUB_ACTIONS") == "true"
