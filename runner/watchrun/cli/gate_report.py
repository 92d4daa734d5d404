"""How a once run reports its gates (SPEC §8): the summary table, GitHub annotations, the step
summary and a JUnit file; a fence that keeps echoed lines from becoming workflow commands."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence

from msgspec.structs import replace

from watchrun.match.sanitize import edge_name, edge_text, shorten
from watchrun.runtime.gate import Line, Status, Trouble, Verdict

MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 error annotations per step; the rest are summarised in one warning."""
SHOW_CHARS = 300
"""A matched line is clipped to this many characters in the table, annotations and reports."""
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def path_under(path: str, base: str) -> str | None:
    """`path` relative to the directory `base`, or None when it is not inside it."""
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def relativize(verdicts: Sequence[Verdict], base: str) -> list[Verdict]:
    """Show paths under `base` relative to it in every `where`. Pure."""
    return [replace(v, first=tuple(replace(ln, where=path_under(ln.where, base) or ln.where)
                                   for ln in v.first)) for v in verdicts]  # fmt: skip


def _count(verdicts: Sequence[Verdict], status: Status) -> int:
    return sum(v.status is status for v in verdicts)


def _crossed(verdicts: Sequence[Verdict]) -> int:
    """Gates crossed: FAILs and the ERRORs that crossed theirs too."""
    return sum(v.crossed for v in verdicts)


def footer(verdicts: Sequence[Verdict], problems: Sequence[str] = ()) -> str:
    """The last line: `passed` only when every gate holds and the run had no `problems`;
    `N of M gates crossed` counts every gated watcher in M (one in ERROR too, as `--json`'s
    `gates` does), said when a gate was crossed or held."""
    failed, errors = _crossed(verdicts), _count(verdicts, Status.ERROR)
    gated = sum(v.gated for v in verdicts)
    unfinished = "; ".join(problems) if problems else None
    hold = "the 1 gate holds" if gated == 1 else f"all {gated} gates hold"
    if not failed and not errors:
        if unfinished is not None:
            held = f"{hold}, but " if gated else ""
            return f"watchrun: FAILED: {held}{unfinished}"
        return f"watchrun: passed: {hold}"
    parts = [f"{failed} of {gated} gate{'' if gated == 1 else 's'} crossed"] \
        if failed or any(v.ok for v in verdicts) else []
    for trouble in Trouble:  # (each kind of ERROR said as what it is)
        n = sum(v.error_kind is trouble for v in verdicts)
        if n:
            parts.append(f"{n} {'watcher' if n == 1 else 'watchers'} {trouble.said(n > 1)}")
    if unfinished is not None:
        parts.append(unfinished)
    return "watchrun: FAILED: " + ", ".join(parts)


def _shown(ln: Line, limit: int = SHOW_CHARS) -> str:
    """A matched line as every report shows it: `where: text`, both through the edge
    sanitizer (a file name or a line with escape sequences, bidi controls or U+2028 is shown
    escaped, never acted on by a terminal or a browser; the file name by `edge_name`, its tabs
    too), the text cut to `limit`."""
    return f"{edge_name(ln.where)}: {shorten(edge_text(ln.text), limit)}"


def summary_table(verdicts: Sequence[Verdict], problems: Sequence[str] = ()) -> str:
    """The human summary printed at the end of a once run."""
    if not verdicts:  # (a run that failed says only that: "no gated watchers" read as a pass)
        return footer(verdicts, problems) if problems else \
            "watchrun: no gated watchers (add `gate:` to a watcher to gate CI on it)"
    rows = [["WATCHER", "MATCHES", "THRESHOLD", "EXIT", "VERDICT"]]
    for v in verdicts:
        threshold = "-" if v.threshold is None else str(v.threshold)
        rows.append([v.id, str(v.matches), threshold, v.exit or "-", v.shown])
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for v in verdicts:
        if v.ok:
            continue
        lines.append(f"\n{v.id}: {v.headline}")
        lines.extend(f"  - {edge_text(r)}" for r in (v.crossings or v.errors))
        lines.extend(f"    {_shown(ln)}" for ln in v.first)
        if v.too_many and v.matches > len(v.first):
            more = v.matches - len(v.first)
            lines.append(f"    … and {more} more (every match is in watchers/{v.id}.jsonl)")
        lines.extend(f"  - {edge_text(r)}" for r in v.errors if v.crossed_too)
    lines.append("\n" + footer(verdicts, problems))
    return "\n".join(lines)


def escape_data(text: str) -> str:
    """GitHub workflow-command data escaping."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, message: str, title: str, file: str | None = None,
             line: int | None = None) -> str:  # fmt: skip
    props = [f"file={escape_property(file)}", f"line={line}"] if file and line else []
    props.append(f"title={escape_property(title)}")
    return f"::{kind} {','.join(props)}::{escape_data(message)}"


def annotation_lines(verdicts: Sequence[Verdict], workspace: str | None = None,
                     problems: Sequence[str] = ()) -> list[str]:
    """`::error` workflow commands: first one per run-level problem (`problems`: why the run
    is no pass although no verdict says so), then for crossed gates one per shown matched line
    (with file and line when the file is in `workspace`) and one per other reason; at most
    MAX_ANNOTATIONS, then one `::warning` that says how many were left out. Pure."""
    wanted = [_command("error", edge_text(p), "watchrun") for p in problems]
    for v in verdicts:
        if v.ok:
            continue
        title = f"watchrun gate {v.id}"
        reasons = [edge_text(r) for r in v.crossings]
        if v.too_many and v.first:
            head = reasons.pop(0)
            for ln in v.first:
                file = path_under(ln.path, workspace) if ln.path and workspace else None
                file = edge_name(file) if file is not None else None
                msg = f"{head}\n{_shown(ln)}"
                wanted.append(_command("error", msg, title, file, ln.line_no))
        wanted.extend(_command("error", r, title) for r in reasons)
        kind = v.error_kind  # (titled with what went wrong: `… (could not run)`)
        wanted.extend(_command("error", edge_text(r), f"{title} ({kind.said()})")
                      for r in v.errors if kind is not None)
    if len(wanted) <= MAX_ANNOTATIONS:
        return wanted
    rest = len(wanted) - MAX_ANNOTATIONS
    note = (f"{rest} more gate annotations not shown (GitHub shows {MAX_ANNOTATIONS} per step); "
            "the job log and the step summary list every crossed gate")  # fmt: skip
    return [*wanted[:MAX_ANNOTATIONS], _command("warning", note, "watchrun")]


class StopCommands:
    """Wraps echoed output so a log line cannot inject workflow commands: between `begin()`
    and `end()` GitHub Actions parses no `::command::` (nor `##[command]`) line."""

    def __init__(self) -> None:
        self.token = os.urandom(16).hex()
        self.open = False
        """Set by the printer while the fence is up (so it is closed exactly once)."""

    def begin(self) -> str:
        return f"::stop-commands::{self.token}"

    def end(self) -> str:
        return f"::{self.token}::"


def _md(text: str) -> str:
    """Markdown-escaped inline text."""
    return _MD_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


_MD_ICON = {Status.PASS: "✅ pass", Status.FAIL: "❌ FAIL", Status.ERROR: "⚠️ ERROR"}


def markdown(verdicts: Sequence[Verdict], problems: Sequence[str] = ()) -> str:
    """The step summary (GitHub `$GITHUB_STEP_SUMMARY`): a table, then each crossed gate."""
    lines = ["### watchrun gates", ""]
    if not verdicts and not problems:
        return "\n".join([*lines, "No gated watchers."]) + "\n"
    lines += ["| watcher | matches | threshold | exit | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        t = "-" if v.threshold is None else v.threshold
        icon = f"{_MD_ICON[Status.FAIL]} {_MD_ICON[v.status]}" if v.crossed_too else \
            _MD_ICON[v.status]
        lines.append(f"| `{v.id}` | {v.matches} | {t} | {v.exit or '-'} | {icon} |")
    for v in verdicts:
        if not v.ok:
            said = f" ({_md(v.headline)})" if v.error_kind else ""  # (`could not run`, …)
            lines += ["", f"**{v.id}**{said}: " + "; ".join(_md(edge_text(r)) for r in v.reasons)]
            if v.first:
                body = "\n".join(_shown(ln) for ln in v.first)
                fence = "`" * max(3, 1 + max(map(len, re.findall("`+", body)), default=0))
                lines += [fence + "text", body, fence]
    lines += ["", _md(footer(verdicts, problems))]
    return "\n".join(lines) + "\n"


@functools.cache
def _xml_bad() -> re.Pattern[str]:
    """What XML 1.0 cannot hold (compiled when a JUnit report is written: an astral range
    costs milliseconds to compile, which every `watchrun run` would pay)."""
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _xml_bad().sub("\ufffd", text)


def junit(verdicts: Sequence[Verdict], duration_s: float, problems: Sequence[str] = ()) -> bytes:
    """A JUnit XML report: one testcase per verdict (each gated watcher's, and an ungated
    one's `error`: `tests` counts them); `failure` for a crossed gate,
    `error` for a watcher that could not do its job, its text headed by what went wrong
    (`could not run`, `was interrupted`, …) (both, `error` first as junit-4.xsd orders them,
    for one that crossed its gate too); a `watchrun` testcase in `error` for a run that did
    not finish (`problems`: interrupted, a failure no verdict names)."""
    import xml.etree.ElementTree as ET  # only with --junit

    extra = 1 if problems else 0
    suite = ET.Element("testsuite", name="watchrun", tests=str(len(verdicts) + extra),
                       failures=str(_crossed(verdicts)),
                       errors=str(_count(verdicts, Status.ERROR) + extra),
                       time=f"{duration_s:.3f}")
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname="watchrun.runtime.gate", name=_xml(v.id))
        if v.ok:
            continue
        for tag, why in (("error", v.errors), ("failure", v.crossings)):
            if not why:
                continue
            reasons = [edge_text(r) for r in why]
            elem = ET.SubElement(case, tag, message=_xml("; ".join(reasons)), type=f"gate-{tag}")
            text = [_shown(ln, 4096) for ln in v.first] if tag == "failure" else []
            if text and v.too_many and v.matches > len(v.first):
                text.append(f"… and {v.matches - len(v.first)} more")
            said = [v.error_kind.said()] if tag == "error" and v.error_kind else []
            elem.text = _xml("\n".join([*said, *reasons, *text]))
    if problems:
        case = ET.SubElement(suite, "testcase", classname="watchrun.runtime.gate", name="watchrun")
        said = [edge_text(p) for p in problems]
        ET.SubElement(case, "error", message=_xml("; ".join(said)),
                      type="run-error").text = _xml("\n".join(said))
    ET.indent(suite)
    data: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def in_github_actions(environ: Mapping[str, str] | None = None) -> bool:
    env = environ if environ is not None else os.environ
    return env.get("GITHUB_ACTIONS") == "true"


def github_workspace() -> str:
    """The repository root annotations give files relative to (the working directory when the
    runner does not say)."""
    return os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
