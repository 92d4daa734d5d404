"""Text renderings of the agent views for a person (`--format text`, the `agent list` table).

Every text that reaches the terminal goes through the edge sanitizer (`edge_text`, newlines
kept); raw_output is first shown with its control characters as escapes (`printable`), so what
the terminal would have drawn is visible and still cannot restyle it. JSON goes out through
`edge_json`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from watchrun.match.sanitize import edge_json, edge_text
from watchrun.views.cells import cells, fit, pad
from watchrun.views.humanize import Paint, no_paint, when

__all__ = ["dumps", "printable", "render_list", "render_transcript", "render_watch"]

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_MARKS = {True: "✓", False: "✗", None: "…"}
_DETAIL = ("text", "message", "summary", "preview", "value", "deliveryState", "delivery_state",
           "status", "reason", "path", "name", "trigger")
"""The field of an event shown on its line in the text rendering, first present wins."""


def dumps(doc: Any) -> str:
    """Indented JSON (as in the seeds) through `edge_json`, ending with a newline."""
    return edge_json(doc, indent=2) + "\n"


def printable(text: str) -> str:
    """`text` with every control character but tab and newline shown as an escape (for
    raw_output: what the terminal would have interpreted, made visible)."""
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], text)


def _show(text: object) -> str:
    return edge_text(text, multiline=True)


def _line(text: object) -> str:
    """One line of a view: a newline in a value (an agent's error text) is shown as `\\n`, so
    no value can start a line of its own, unindented, that poses as another."""
    return edge_text(text)


def _indent(text: str, prefix: str = "  ", *, raw: bool = False) -> list[str]:
    shown = _show(printable(text) if raw else text)
    return [prefix + line for line in shown.rstrip("\n").split("\n")] if text else []


def _cut(note: dict[str, Any]) -> str:
    n = note.get("omitted_bytes") or 0
    return f" ({n} earlier bytes omitted)" if note.get("truncated") else ""


def render_watch(view: dict[str, Any]) -> str:
    """A person's reading of an `agent watch` view."""
    a = view["agent"]
    since = f" since {a['last_status_at']}" if a.get("last_status_at") else ""
    out = [_line(f"{a['name']} ({a['provider']}): {a['status']}{since}"),
           f"cursor {view['cursor']}"]
    transcript = view.get("transcript")
    if transcript is not None:
        out.append(f"\n── transcript{_cut(transcript)}")
        for m in transcript["messages"]:
            out.append(_line(f"{m['role']} [{m.get('turn_id') or '-'}, {m['source']}]:"))
            out += _indent(m["text"])
        if not transcript["messages"]:
            out.append("  (no messages)")
    output = view["output"]
    out.append(f"\n── output{_cut(output)}")
    out += _indent(output["text"]) or ["  (none)"]
    raw = view.get("raw_output")
    if raw is not None:
        out.append(f"\n── raw output, escaped{_cut(raw)}")
        out += _indent(raw["text"], raw=True) or ["  (none)"]
    deliveries = view["delivery"]["delivery"]
    if deliveries:
        out.append("\n── deliveries")
        for d in deliveries:
            turn = f" → {d['turn_id']}" if d.get("turn_id") else ""
            why = f" ({d['reason']})" if d.get("reason") else ""
            source = d.get("label") or d.get("watcher") or "-"
            out.append(_line(f"  {d['id']}  {d.get('state', '?')}{why}  {source}  "
                                 f"{d.get('count', 0)} match(es){turn}"))
    if view["events"]:
        out.append(f"\n── events ({len(view['events'])})")
        for e in view["events"]:
            detail = next((e[k] for k in _DETAIL if isinstance(e.get(k), str) and e[k]), "")
            detail = " ".join(str(detail).split())
            detail = detail if len(detail) <= 70 else detail[:69] + "…"
            out.append(_line(f"  {e.get('cursor')}  {e.get('kind')}  {detail}".rstrip()))
    return _show("\n".join(out)) + "\n"


def _step(s: dict[str, Any]) -> str:
    if s["kind"] == "guardrail":
        extra = f": {s['message']}" if s.get("message") else ""
        return f"    ! stopped ({s['rule']}){extra}"
    return f"    {_MARKS.get(s.get('ok'), '…')} {s['tool']}  {s.get('summary') or ''}".rstrip()


def render_transcript(doc: dict[str, Any]) -> str:
    """A person's reading of a transcript (`agent transcript`, `watchrun transcript`)."""
    who = doc.get("provider") or doc["mode"]
    out = [_line(f"{doc['session_id']} ({who}): {len(doc['turns'])} turn(s)")]
    for t in doc["turns"]:
        wall = f"{t['wall_seconds']:g} s" if t.get("wall_seconds") is not None else "-"
        agents = t["agents"]
        status = agents[0]["status"] if t["parent"] is None else t["outcome"] or "running"
        head = f"{t['run_id']}  {t.get('trigger') or '-'}  {status}  {t['tokens']} tokens  {wall}"
        out += ["", _line(head + ("  (partial: its start was rotated away)"
                                  if t.get("partial") else ""))]
        if t["parent"] is not None:
            out += _decision(t["parent"])
        out.append("  prompt:")
        out += _indent(t["user"]["text"], "    ") or ["    (not recorded)"]
        for agent in agents:
            if t["parent"] is not None:
                spent = f", {agent['wall_seconds']:g} s" if agent["wall_seconds"] is not None \
                    else ""
                out.append(_line(f"  agent {agent['id']}: {agent['status']}{spent}, "
                                 f"{agent['tokens']} tokens"))
            out += _agent(agent, t)
        for s in t.get("skipped") or []:
            out.append(_line(f"  skipped {s['id']}: {s['message']}"))
        if t.get("reply"):
            source = "" if t["reply"]["source"] == "agent" else f" ({t['reply']['source']})"
            out.append(f"  reply{source}:")
            out += _indent(t["reply"]["text"], "    ")
        err = t.get("error")
        if err:
            out.append(_line(f"  error: {err['error']}"))
            if err.get("hint"):
                out.append(_line(f"  hint: {err['hint']}"))
        out.append(f"  outcome: {t['outcome'] or 'running'}")
    return _show("\n".join(out)) + "\n"


def _decision(parent: dict[str, Any]) -> list[str]:
    """A plan's decision: why, and its agents in order with what each waits for."""
    steps = ", ".join(s["id"] + (f" (after {', '.join(s['depends_on'])})" if s["depends_on"]
                                 else "") for s in parent["plan"])
    return [_line(f"  parent: {parent['reason']}"), _line(f"  plan: {steps}")]


def _agent(agent: dict[str, Any], t: dict[str, Any]) -> list[str]:
    """An agent's steps and files; in a plan of several, its answer too."""
    out = []
    if agent["steps"]:
        out.append("  steps:")
        out += [_line(_step(s)) for s in agent["steps"]]
    if agent["files"]:
        files = ", ".join(f"{f['op']} {f['path']}" for f in agent["files"])
        out.append(_line(f"  files: {files}"))
    if t["parent"] is not None and agent["answer"] and len(t["agents"]) > 1:
        out.append("  answer:")
        out += _indent(agent["answer"], "    ")
    elif agent["status"] == "running" and agent["answer"] and not t.get("reply"):
        out.append("  so far:")
        out += _indent(agent["answer"], "    ")
    return out


def render_list(rows: list[dict[str, Any]], now: datetime, paint: Paint = no_paint,
                encoding: str | None = None) -> str:
    """The `agent list` table (rows as `agent list --json` has them, camelCase), padded by
    terminal cells on a stream of `encoding` (`views.cells`)."""
    header = ["NAME", "PROVIDER", "STATUS", "TURNS", "TOKENS", "LAST TURN", "LAST ACTIVITY",
              "LAST REPLY"]
    body = [[_line(x) for x in (r["name"], r["provider"], r["status"], r["turns"], r["tokens"],
                                _last_turn(r), when(r.get("lastActivity"), now, short=True),
                                _reply(r.get("lastReply"), encoding))] for r in rows]
    widths = [max(cells(row[i], encoding) for row in [header, *body])
              for i in range(len(header))]
    lines = []
    for n, row in enumerate([header, *body]):
        padded = [pad(c, w, encoding) for c, w in zip(row, widths, strict=True)]
        if n:
            padded[2] = paint(padded[2], row[2])
            padded[5] = paint(padded[5], str(rows[n - 1].get("lastTurn") or ""))
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines) + "\n"


REPLY_SHOWN = 60
"""Terminal cells of the last reply the `agent list` table shows, on one line."""


def _reply(reply: object, encoding: str | None) -> str:
    """The last reply on one line, as shown (escapes and all), cut to `REPLY_SHOWN` cells."""
    return fit(_line(" ".join(reply.split())), REPLY_SHOWN, encoding) or "-" \
        if isinstance(reply, str) else "-"


def _last_turn(row: dict[str, Any]) -> str:
    """How the last turn ended: `done`, or its status and error code (`failed (ENOENT)`)."""
    status, err = row.get("lastTurn"), row.get("lastError")
    if not status:
        return "-"
    return f"{status} ({err['code']})" if isinstance(err, dict) and err.get("code") else status
