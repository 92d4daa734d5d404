"""The text parts of `agent watch`: a byte-bounded tail, transcript messages with
`latest_text`, and the sanitized `output` / as-printed `raw_output` streams (the rules are in
views/agent_watch.py's docstring)."""

from __future__ import annotations

from collections import deque
from typing import Any

from watchrun.agents.answer import BOUNDARIES, AnswerTracker, is_root
from watchrun.agents.clean import clean_text

__all__ = ["Messages", "Output", "TailText"]


def _keep_end(data: bytes, limit: int) -> int:
    """Index where the last `limit` bytes of `data` start, moved forward to a char boundary."""
    cut = max(0, len(data) - max(0, limit))
    while cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut += 1
    return cut


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class TailText:
    """Text whose last `limit` UTF-8 bytes are kept (None: all of it); counts what is cut."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.omitted, self._size = limit, 0, 0
        self._parts: deque[bytes] = deque()

    def add(self, text: str) -> None:
        data = _utf8(text)
        self._parts.append(data)
        self._size += len(data)
        if self.limit is not None and self._size > 2 * self.limit + 65536:
            self._compact()

    def _compact(self) -> None:
        data = b"".join(self._parts)
        cut = _keep_end(data, self.limit if self.limit is not None else len(data))
        self.omitted += cut
        self._parts = deque([data[cut:]])
        self._size = len(data) - cut

    def result(self) -> tuple[str, bool, int]:
        """(text, truncated, omitted_bytes)."""
        self._compact()
        return b"".join(self._parts).decode("utf-8", "replace"), self.omitted > 0, self.omitted


class Messages:
    """Transcript messages from records (see the module docstring), kept within `tail`."""

    def __init__(self, provider: str, tail: int | None) -> None:
        self.provider, self.tail = provider, tail
        self.items: deque[tuple[dict[str, Any], int]] = deque()
        self.size = self.omitted = 0
        self._open: dict[str, Any] | None = None
        self._open_mid: object = None
        self._parts: list[str] = []  # the open message's texts, joined when it is pushed
        self._deltas: dict[Any, list[str]] = {}
        self._last: dict[Any, list[str]] = {}
        self._turn: Any = None
        self._tracker = AnswerTracker()
        self._finished = ""

    def feed(self, rec: dict[str, Any]) -> None:
        kind, turn, text = rec.get("kind"), rec.get("turnId"), rec.get("text")
        self._answer(kind, turn, rec)
        if kind == "prompt" and isinstance(text, str):
            self._flush()
            self._push({"role": "user", "text": text, "provider": self.provider,
                        "turn_id": turn, "source": "prompt"})
        elif kind in BOUNDARIES and is_root(rec):
            self._flush()
            self._flush_deltas(turn)
        elif kind == "text" and isinstance(text, str) and is_root(rec):
            self._deltas.pop(turn, None)
            final, mid = rec.get("final") is True, rec.get("messageId")
            source = str(rec.get("source") or "text")
            if final and text.strip() == "\n".join(self._last.get(turn, [])).strip():
                return
            o = self._open
            if (o is not None and not final and o["turn_id"] == turn and o["source"] == source
                    and self._open_mid == mid):
                self._parts.append(text)
            else:
                self._flush()
                self._open = {"role": "assistant", "text": "", "provider": self.provider,
                              "turn_id": turn, "source": source}
                self._open_mid, self._parts = mid, [text]
            self._last[turn] = self._parts
        elif kind == "text-delta" and isinstance(text, str) and is_root(rec):
            self._deltas.setdefault(turn, []).append(text)
        elif kind == "dispatch-finished":
            self._flush()
            self._flush_deltas(turn)

    def _answer(self, kind: Any, turn: Any, rec: dict[str, Any]) -> None:
        """`latest`: the newest turn's answer (its reply once it finished, `so_far` while it
        runs), or the last finished turn's reply while the newest has none yet."""
        if turn is None:
            return
        if kind == "dispatch-start" or turn != self._turn:
            self._turn, self._tracker = turn, AnswerTracker()
        if kind == "dispatch-finished":
            reply = rec.get("reply")
            self._finished = reply if isinstance(reply, str) and reply else self._finished
            self._turn = None
            return
        self._tracker.feed(str(kind), rec)

    @property
    def latest(self) -> str:
        """`latest_text` (see `_answer`), worked out once, when the view is built."""
        running = self._tracker.so_far() if self._turn is not None else ""
        return running or self._finished

    def _flush_deltas(self, turn: Any) -> None:
        parts = self._deltas.pop(turn, None)
        if parts and "".join(parts).strip():
            self._push({"role": "assistant", "text": "".join(parts),
                        "provider": self.provider, "turn_id": turn, "source": "text-delta"})

    def _flush(self) -> None:
        if self._open is not None:
            self._open["text"] = "\n".join(self._parts)
            self._push(self._open)
            self._open = None

    def _push(self, msg: dict[str, Any]) -> None:
        n = len(_utf8(msg["text"]))
        self.items.append((msg, n))
        self.size += n
        while self.tail is not None and self.items and self.size - self.items[0][1] >= self.tail:
            self.size -= self.items[0][1]
            self.omitted += self.items.popleft()[1]

    def result(self) -> list[dict[str, Any]]:
        self._flush()
        for turn in list(self._deltas):
            self._flush_deltas(turn)
        msgs = [m for m, _ in self.items]
        if self.tail is not None and self.size > self.tail:
            first, n = self.items[0]
            data = _utf8(first["text"])
            cut = _keep_end(data, self.tail - (self.size - n))
            self.omitted += cut
            first["text"] = data[cut:].decode("utf-8", "replace")
            if not first["text"]:
                msgs.pop(0)
        return msgs


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _raw_value(rec: dict[str, Any]) -> str | None:
    """A `raw` record's line as printed (`preview` in records written before `value`)."""
    value = rec.get("value", rec.get("preview"))
    return value if isinstance(value, str) else None


class Output:
    """`output` and `raw_output` (see the module docstring)."""

    def __init__(self, out: TailText, raw: TailText | None) -> None:
        self.out, self.raw = out, raw
        self._printed: set[Any] = set()  # turns whose stdout lines are in the output

    def feed(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        text = rec.get("text") if isinstance(rec.get("text"), str) else None
        terminal = kind == "text" and rec.get("source") == "stdout"
        if text is not None and (kind in ("output", "stderr") or terminal):
            self.out.add(_line(text))
            if terminal:
                self._printed.add(rec.get("turnId"))
            if self.raw is not None:
                self.raw.add(_line(rec["raw"] if isinstance(rec.get("raw"), str) else text))
        elif kind == "raw" and (value := _raw_value(rec)) is not None:
            self.out.add(_line(clean_text(value, None)[0]))
            if self.raw is not None:
                self.raw.add(_line(value))
        elif (kind == "dispatch-finished" and isinstance(rec.get("reply"), str) and rec["reply"]
              and rec.get("turnId") not in self._printed):
            self.out.add(_line(rec["reply"]))
