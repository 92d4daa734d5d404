"""Pure parts of agent turns: prompt and argv rendering, coalesced deliveries, turn limits."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from watchrun.match.redact import MARKERS, Redactor
from watchrun.match.sanitize import clip, edge_text

__all__ = [
    "ARG_BYTES",
    "NO_ANSWER",
    "PLACEHOLDERS",
    "PROMPT_TOKEN",
    "Delivery",
    "TurnWindow",
    "answer_cut_mark",
    "cut_mark",
    "fit_argument",
    "format_matches",
    "render_command",
    "render_prompt",
    "render_turn_prompt",
    "visible",
]

PROMPT_TOKEN = "{prompt}"
PLACEHOLDERS = ("matches", "watcher", "label", "count")
_PLACEHOLDER = re.compile(
    r"\{(matches|watcher|label|count)\}|\{deps\.([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.answer\}")
NO_ANSWER = "(no answer from {name}: this turn is not part of a plan)"
"""What `{deps.NAME.answer}` becomes outside a plan (a scheduled, sent or manual turn)."""


def cut_mark(line: str, cut: int | None, max_bytes: int, hide: Redactor) -> str:
    """A matched line as a woken agent reads it: one cut at limits.maxLineBytes (`cut`: the
    bytes left out; 0 when only its text was clipped there, `MatchInfo.cut`) says so at its
    end, so its start is not taken for the whole line; its text gives way to the mark, so the
    two fit in `max_bytes` (and the delivery record keeps the mark). The head of a secret the
    cut split is hidden (`hide.cut_end`): before the mark, the prompt's redaction would not see
    it as one."""
    if cut is None:
        return line
    size = len(line.encode())

    def mark(n: int) -> str:
        if not cut:
            return " [… text clipped at limits.maxLineBytes: the line was matched whole …]"
        return f" [… {n} bytes of this line cut: over limits.maxLineBytes …]"

    room = max(0, max_bytes - len(mark(cut + size).encode()))
    head = _clip_whole(line, room)
    return clip(hide.cut_end(head)[0], room)[0] + mark(cut + size - len(head.encode()))


def _clip_whole(line: str, room: int) -> str:
    """`line` clipped to `room` bytes; a marker the clip would cut (`[REDACTED:pass`, which the
    prompt's redaction would take for a password and count again) is kept whole, with less of
    the text before it."""
    head = clip(line, room)[0]
    for m in MARKERS.finditer(line, max(0, len(head) - 64), len(head) + 64):
        size = len(m.group().encode())
        if m.start() < len(head) < m.end() and size <= room:
            return clip(line[: m.start()], room - size)[0] + m.group()
    return head


def answer_cut_mark(name: str, answer: str, limit: int) -> str:
    """A plan step's answer handed to its dependents (`{deps.NAME.answer}`) when only its
    first `limit` bytes were kept: a mark says the rest (often the conclusion) is missing."""
    return (f"{answer}\n[… the rest of {name}'s answer was cut here: only its first "
            f"{limit // 1024} KiB are kept …]")


def render_prompt(template: str, values: Mapping[str, str],
                  deps: Mapping[str, str] | None = None) -> str:
    """Replace `{matches}` `{watcher}` `{label}` `{count}` and `{deps.NAME.answer}` (NAME's
    answer in a plan, from `deps`) in one pass (never str.format: other braces stay as written,
    and a value that contains `{label}` — or an answer that does — is not expanded again).
    An answer is another model's text: its invisible characters are shown escaped, as
    `visible` does to matched lines."""

    def sub(m: re.Match[str]) -> str:
        if m[2] is not None:
            answer = (deps or {}).get(m[2])
            return visible(answer) if answer is not None else NO_ANSWER.format(name=m[2])
        return values.get(m[1], m[0])

    return _PLACEHOLDER.sub(sub, template)


def visible(text: str) -> str:
    """Text others wrote (a log line, another agent's answer) as a model should read it: the
    tag characters that can spell a hidden instruction, zero-width and other format
    characters, bidi controls and U+2028/U+2029 written as `\\u` escapes, as every view shows
    them, so the model reads what a person reviewing the transcript sees. Newlines are kept."""
    return edge_text(text, multiline=True)


def format_matches(lines: Sequence[str], total: int, limit: int) -> str:
    """The first `limit` lines joined by newlines, then `… and N more` for the rest of `total`."""
    shown = list(lines[: max(0, limit)])
    rest = max(0, total - len(shown))
    return "\n".join([*shown, f"… and {rest} more"] if rest else shown)


ARG_BYTES = 128 * 1024 - 1
"""The most one argument of a program may hold on Linux (MAX_ARG_STRLEN, less its NUL): exec
fails with E2BIG past it, and the agent would never start."""
_KEEP_EDGE = 4096
"""How far a cut looks for a line break to end or start at (so no line is kept in part)."""


def fit_argument(command: Sequence[str], prompt: str, limit: int = ARG_BYTES) -> tuple[str, int]:
    """`prompt`, and the bytes cut from it so that every argument `render_command` makes of it
    fits in `limit` (else 0 cut). The middle is cut, where a template's `{matches}` usually is:
    the head (three quarters) and the tail (the instructions after the matches) are kept, cut at
    line breaks when one is near, and a line in their place says how much was cut and why."""
    data = prompt.encode()
    room = min((((limit - 1 - len(arg.replace(PROMPT_TOKEN, "").encode()))  # (1: `_not_an_option`)
                 // arg.count(PROMPT_TOKEN))
                for arg in command if PROMPT_TOKEN in arg), default=len(data))
    if len(data) <= room:
        return prompt, 0
    keep = max(0, room - 120)  # (the note's own bytes)
    head, tail = data[: keep * 3 // 4], data[len(data) - (keep - keep * 3 // 4):] if keep else b""
    if (nl := head.rfind(b"\n", max(0, len(head) - _KEEP_EDGE))) > 0:
        head = head[: nl + 1]
    if (nl := tail.find(b"\n", 0, _KEEP_EDGE)) >= 0:
        tail = tail[nl + 1:]
    kept_head, kept_tail = head.decode(errors="ignore"), tail.decode(errors="ignore")
    cut = len(data) - len(kept_head.encode()) - len(kept_tail.encode())
    note = (f"[… {cut} bytes of this prompt cut here: one command-line argument holds at most "
            f"{(limit + 1) // 1024} KiB …]")
    sep = "" if not kept_head or kept_head.endswith("\n") else "\n"
    return f"{kept_head}{sep}{note}\n{kept_tail}", cut


def render_command(command: Sequence[str], prompt: str) -> list[str]:
    """argv with `{prompt}` replaced inside each element: the prompt is never split or run by a
    shell, so it cannot inject arguments or shell syntax. Nor an option or a file to read: an
    element the prompt begins (`{prompt}`, whose text may begin with a matched line) that would
    begin with `-` or `@` begins with a space instead, which no option parser reads as an option
    and no CLI as `@FILE` (pi attaches the file an `@` argument names, and fails when there is
    none; gcc, javac and argparse's `fromfile_prefix_chars` read one as more arguments)."""
    return [_not_an_option(arg, arg.replace(PROMPT_TOKEN, prompt)) for arg in command]


def _not_an_option(template: str, arg: str) -> str:
    head = arg[:1]
    return f" {arg}" if head in ("-", "@") and not template.startswith(head) else arg


class Delivery(Struct):
    """Matches of one watcher (or one `send` text) waiting for an agent's next turn.

    All wake deliveries of one watcher that arrive before a turn takes them merge into one
    Delivery; at most `keep` lines are kept (the first ones), the rest are counted in `overflow`.
    """

    id: str
    label: str
    keep: int
    watcher: str | None = None
    source: str = "wake"
    """`wake` (a watcher's matches) or `send` (a manual prompt from the control socket)."""
    seq: int = 0
    """Order of creation (the seq of its `queued` record)."""
    plan: str | None = None
    """The plan this delivery is a step of (its `planId`)."""
    count: int = 0
    lines: list[str] = field(default_factory=list)
    overflow: int = 0

    def add(self, lines: Sequence[str]) -> None:
        room = max(0, self.keep - len(self.lines))
        self.lines.extend(lines[:room])
        self.overflow += max(0, len(lines) - room)
        self.count += len(lines)

    def record(self, state: str, match_lines: int, **extra: Any) -> dict[str, Any]:
        """The fields of its `delivery` record (`lines` clipped to `match_lines`)."""
        fields: dict[str, Any] = {
            "deliveryId": self.id, "deliveryState": state, "label": self.label,
            "count": self.count, "lines": self.lines[:match_lines], "overflow": self.overflow,
        }
        if self.watcher is not None:
            fields["watcher"] = self.watcher
        else:
            fields["source"] = self.source
        if self.plan is not None:
            fields["planId"] = self.plan
        fields.update({k: v for k, v in extra.items() if v is not None})
        return fields


def render_turn_prompt(template: str, deliveries: Sequence[Delivery], match_lines: int,
                       deps: Mapping[str, str] | None = None) -> str:
    """A wake turn's prompt from its deliveries. With several watchers, `{watcher}` and `{label}`
    list them all, `{count}` is the sum, and each line of `{matches}` starts with `[label] `.
    `deps`: in a plan, the answers of the agents this one depends on."""
    many = len(deliveries) > 1
    lines = [f"[{d.label}] {visible(line)}" if many else visible(line)
             for d in deliveries for line in d.lines]
    total = sum(d.count for d in deliveries)
    return render_prompt(template, {
        "matches": format_matches(lines, total, match_lines),
        "watcher": ", ".join(d.watcher or d.source for d in deliveries),
        "label": ", ".join(d.label for d in deliveries),
        "count": str(total),
    }, deps)


class TurnWindow:
    """`maxTurns` per hour: a sliding window of turn start times (`Clock.elapsed` seconds: an
    hour the machine slept through counts)."""

    def __init__(self, max_turns: int, window_s: float = 3600.0) -> None:
        self.max_turns = max_turns
        self.window_s = window_s
        self._starts: deque[float] = deque()

    def seed(self, ages_s: Iterable[float], now: float) -> None:
        """Turns that started `ages_s` seconds ago (an earlier runner's, from the agent's
        records): a restart does not give an agent a fresh hour."""
        for age in sorted((max(0.0, a) for a in ages_s), reverse=True):
            if age < self.window_s:
                self._starts.append(now - age)

    def _prune(self, now: float) -> None:
        while self._starts and self._starts[0] <= now - self.window_s:
            self._starts.popleft()

    def used(self, now: float) -> int:
        self._prune(now)
        return len(self._starts)

    def allow(self, now: float) -> bool:
        """True (and the start is counted) when fewer than `max_turns` started in the window."""
        if self.used(now) >= self.max_turns:
            return False
        self._starts.append(now)
        return True

    def retry_in(self, now: float) -> float:
        """Seconds until the oldest start leaves the window (0 when a turn is allowed now)."""
        if self.used(now) < self.max_turns:
            return 0.0
        return max(0.0, self._starts[0] + self.window_s - now)
