"""What an action sends (pure): the webhook body (generic JSON or a Slack message), an exec's
stdin (JSONL) and WATCHRUN_* variables — every matched line redacted before it leaves."""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct

from watchrun.actions.windows import Firing
from watchrun.match.redact import Redactor, add_counts
from watchrun.match.sanitize import clip, name_text, shorten
from watchrun.output.jsonl import valid_unicode

__all__ = ["ENV_LINES_BYTES", "LABEL_BYTES", "SLACK_TEXT_CHARS", "Context", "Outgoing", "build"]

ENV_LINES_BYTES = 32 * 1024
"""WATCHRUN_LINES is clipped to this (Linux allows 128 KiB per variable, 2 MiB in all)."""
LABEL_BYTES = 4096
"""A watcher's label in a body is clipped to this (a command line may be 200 KB)."""
SLACK_TEXT_CHARS = 3500
"""A Slack message's text is kept under this many characters (Slack folds longer ones)."""


class Context(Struct, frozen=True):
    """Who fires: the watcher, the action, the firing's number and what was lost before it."""

    watcher: str
    label: str
    action: str
    firing: int
    """1 for the action's first firing since the runner started."""
    ts: str
    dropped: int = 0
    """Firings dropped (queue full) since the previous firing that went out."""
    dropped_matches: int = 0


class Outgoing(Struct, frozen=True):
    """One firing as it leaves: the lines (redacted), and what redaction replaced."""

    lines: list[dict[str, Any]]
    redacted: dict[str, int]
    document: dict[str, Any]

    def json_body(self) -> bytes:
        return _utf8(json.dumps(self.document, ensure_ascii=False, separators=(",", ":")))

    def slack_body(self) -> bytes:
        return _utf8(json.dumps({"text": slack_text(self.document)}, ensure_ascii=False))

    def shown(self, slack: bool) -> int:
        """How many matched lines the body shows (a Slack message may show fewer)."""
        return _slack_fit(self.document)[1] if slack else len(self.lines)

    def stdin(self) -> bytes:
        """One JSON object per matched line."""
        return b"".join(_utf8(json.dumps(item, ensure_ascii=False)) + b"\n"
                        for item in self.lines)

    def environ(self) -> dict[str, str]:
        d = self.document
        texts = [item["line"] for item in self.lines]
        joined = clip("\n".join(texts), ENV_LINES_BYTES)[0]
        env = {
            "WATCHRUN_WATCHER": d["watcher"]["id"], "WATCHRUN_LABEL": d["watcher"]["label"],
            "WATCHRUN_ACTION": d["action"], "WATCHRUN_FIRING": str(d["firing"]),
            "WATCHRUN_REASON": d["reason"], "WATCHRUN_COUNT": str(d["count"]),
            "WATCHRUN_SUPPRESSED": str(d["suppressed"]["firings"]),
            "WATCHRUN_SUPPRESSED_MATCHES": str(d["suppressed"]["matches"]),
            "WATCHRUN_DROPPED": str(d["dropped"]["firings"]),
            "WATCHRUN_FIRST_CURSOR": d["cursors"]["first"],
            "WATCHRUN_LAST_CURSOR": d["cursors"]["last"],
            "WATCHRUN_LINE": clip(texts[0], ENV_LINES_BYTES)[0] if texts else "",
            "WATCHRUN_LINES": joined,
        }
        return {k: v.replace("\0", "") for k, v in env.items()}


def build(ctx: Context, firing: Firing, redactor: Redactor, limit: int) -> Outgoing:
    """The firing's document (the generic JSON body), at most `limit` bytes encoded: its lines
    redacted together (a secret spanning lines, a private-key block, is found whole), and the
    watcher's label too (by default its command line, which may carry a `${VAR}` password),
    its controls escaped as records hold a name (`name_text`: a `\\r` in a path drops
    nothing), and each line's `where` (a file's path may hold one as well).
    Lines that do not fit are left out (`omitted`), a first line that alone does not fit is
    clipped; a line cut either way is marked `truncated`. A line cut at limits.maxLineBytes
    loses the head of a secret that went on past the cut too."""
    texts, counts = redactor.redact_lines([m.line for m in firing.matches],
                                          [m.cut is not None for m in firing.matches])
    label, found = redactor.redact(name_text(ctx.label))  # (a `${VAR}` in it: untrusted)
    add_counts(counts, found)
    doc = {
        "source": "watchrun", "ts": ctx.ts,
        "watcher": {"id": ctx.watcher, "label": clip(label, LABEL_BYTES)[0]},
        "action": ctx.action, "firing": ctx.firing, "reason": firing.reason,
        "count": firing.count, "shown": 0, "omitted": 0,
        "suppressed": {"firings": firing.suppressed, "matches": firing.suppressed_matches},
        "dropped": {"firings": ctx.dropped, "matches": ctx.dropped_matches},
        "cursors": {"first": firing.first_cursor, "last": firing.last_cursor},
        "lines": [],
    }
    room = limit - _size(doc) - 2 * len(str(firing.count))  # (`shown`, `omitted` set below)
    lines: list[dict[str, Any]] = []
    wheres: dict[str, str] = {}  # (a file's path, as the label: `db_password=${PW}/app.log`)
    for m, text in zip(firing.matches, texts, strict=True):
        if (where := wheres.get(m.where)) is None:
            where, found = redactor.redact(m.where)
            wheres[m.where] = where
            add_counts(counts, found)
        item: dict[str, Any] = {"line": text, "lineNo": m.line_no, "offset": m.offset,
                                "where": where, "cursor": m.cursor}
        if m.cut is not None:
            item["truncated"] = True
        size = _size(item) + 1
        if size > room and not lines:
            item, size = _clipped(item, room)
        if size > room:
            break
        lines.append(item)
        room -= size
    doc.update(lines=lines, shown=len(lines), omitted=max(0, firing.count - len(lines)))
    return Outgoing(lines, counts, doc)


def _clipped(item: dict[str, Any], room: int) -> tuple[dict[str, Any], int]:
    """`item` with its line cut until the item takes at most `room` bytes encoded (an escape
    makes a character take up to 6), marked `truncated`."""
    rest = {key: value for key, value in item.items() if key != "line"} | {"truncated": True}
    room -= _size({"line": "", **rest}) + 1  # what it takes without its text
    line = item["line"]
    while (size := _size(line) - 2) > room and line:  # (shrunk in proportion, then on)
        want = len(line.encode()) * max(0, room) // size
        line = clip(line, min(want, len(line.encode()) - 1))[0]
    clipped = {"line": line, **rest}
    return clipped, _size(clipped) + 1


def _size(value: object) -> int:
    return len(_utf8(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


def _slack_escape(text: str) -> str:
    """Slack's three control characters (`<!channel>`, `<@U…>`, links) written as entities, and
    no way out of the code block: each backtick stands between zero-width spaces, so no two
    touch, in the line or across its edges (the fences)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("`", "\u200b`\u200b")


SLACK_LABEL_CHARS = 300
"""A watcher's label in a Slack message's headline is clipped to this many characters."""


def slack_text(doc: dict[str, Any]) -> str:
    """A Slack incoming-webhook message: a headline, then the lines in a code block."""
    return _slack_fit(doc)[0]


def _slack_fit(doc: dict[str, Any]) -> tuple[str, int]:
    """The message, under SLACK_TEXT_CHARS, and how many lines it shows: those that fit, a
    first one that alone does not clipped; a line cut either way (or at maxLineBytes) ends in
    `…`."""
    w = doc["watcher"]
    label = shorten(w["label"], SLACK_LABEL_CHARS)
    head = (f"*watchrun*: `{_slack_escape(w['id'])}` ({_slack_escape(label)}) matched "
            f"{doc['count']} line{'s' if doc['count'] != 1 else ''}")
    extra = []
    if doc["suppressed"]["firings"]:
        extra.append(f"{doc['suppressed']['firings']} earlier firing(s) throttled "
                     f"({doc['suppressed']['matches']} matches)")
    if doc["dropped"]["firings"]:
        extra.append(f"{doc['dropped']['firings']} firing(s) dropped (queue full)")
    if extra:
        head += "; " + "; ".join(extra)

    def more(n: int) -> str:
        return f"\n… and {n} more (see the watcher's JSONL from {doc['cursors']['first']})"

    body: list[str] = []
    budget = SLACK_TEXT_CHARS - len(head) - len("\n``````") - len(more(doc["count"]))
    for item in doc["lines"]:
        line = _slack_escape(item["line"]) + ("…" if item.get("truncated") else "")
        if len(line) + 1 > budget and not body and (cut := _slack_clipped(item["line"],
                                                                       budget - 1)):
            body.append(cut)  # (the message is full)
            break
        if len(line) + 1 > budget:
            break
        body.append(line)
        budget -= len(line) + 1
    text = head + ("\n```" + "\n".join(body) + "```" if body else "")
    if doc["count"] > len(body):
        text += more(doc["count"] - len(body))
    return text, len(body)


def _slack_clipped(line: str, room: int) -> str:
    """`line` cut until, escaped and marked `…`, it takes at most `room` characters ("" when
    none of it fits): cut before the escape, so no entity or fenced backtick is cut in two."""
    cut = min(len(line), room)
    while cut > 0 and len(shown := _slack_escape(line[:cut]) + "…") > room:
        cut = min(cut - 1, cut * room // len(shown))
    return shown if cut > 0 else ""


def _utf8(text: str) -> bytes:
    return valid_unicode(text).encode()
