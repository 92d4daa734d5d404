"""Shared machinery of the JSON-lines adapters (framing, tools, problems, why a process
exited); the contract they keep is `contract.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.contract import (
    KINDS,
    PREVIEW_CHARS,
    RESULT_CHARS,
    Adapter,
    Observation,
    observation,
)
from watchrun.agents.providers.jsonline import TooDeep, load_json
from watchrun.agents.providers.shape import (
    Shape,
    as_count,
    as_dict,
    as_list,
    as_str,
    epoch_to_iso,
    json_type,
)
from watchrun.agents.providers.stderr_tail import StderrTail
from watchrun.agents.providers.toolinfo import (
    classify_problem,
    clip,
    file_ops,
    retry_class,
    same_call,
    summary,
)
from watchrun.agents.providers.usage import Usage, UsageTracker, refused_counts
from watchrun.config.shellcode import script_indexes

__all__ = [
    "KINDS",
    "PREVIEW_CHARS",
    "RESULT_CHARS",
    "Adapter",
    "JsonAdapter",
    "Observation",
    "as_dict",
    "as_list",
    "as_str",
    "epoch_to_iso",
    "observation",
]

class JsonAdapter:
    """Shared machinery for JSON-lines protocols: framing rules, tool bookkeeping, problems.

    Blank lines are ignored; a line that does not start with `{` or `[` is `output`, and so is
    one starting with `[` that is not JSON (`[WARNING] ...`); a `{` line that does not parse,
    JSON that is not an object, or JSON nested deeper than `jsonline.MAX_DEPTH` (with
    `error`), is `raw` (`unparseable`); an object the subclass does not know is `raw`
    (`unknown-event`); an object whose fields break the handler is `raw`
    (`malformed-event`, with `error`), so no line ever raises; and so is one whose expected
    fields, read through `self.shape`, are of the wrong type (after what the rest of the line
    gave), so a line that carried text never vanishes without a record; and one that reuses
    a call id for another call or another result (`tool`, `tool_result`).
    """

    provider: ClassVar[str] = ""

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        self.tracker = tracker if tracker is not None else UsageTracker()
        self.argv = tuple(argv)
        self._tools: dict[str, str] = {}
        self._inputs: dict[str, Mapping[str, Any]] = {}
        self._results: dict[str, tuple[bool, int]] = {}
        """Call id (`denied:` id, of a denial): its result's error flag and output's hash."""
        self._touches: dict[str, list[tuple[str, str, str | None]]] = {}
        self._last_problem: str | None = None
        self._verdict = False  # a `completed` came: the exit status explains nothing
        self.said = StderrTail()
        """The stderr lines, for why the process exited without a result."""
        self.shape = Shape()
        """The wrong-typed fields of the line being handled."""

    # -- framing ---------------------------------------------------------------------------

    def parse(self, line: str) -> list[Observation]:
        text = line.rstrip("\r\n")
        stripped = text.strip()
        if not stripped:
            return []
        if stripped[0] not in "{[":
            return self.non_json(line.removesuffix("\n"))
        try:
            value = load_json(stripped)
        except TooDeep as exc:
            return [self.raw(text, "unparseable", error=str(exc))]
        except ValueError:
            if stripped[0] == "[":  # a log prefix such as "[WARNING] ...", merged from stderr
                return self.non_json(line.removesuffix("\n"))
            return [self.raw(text, "unparseable")]
        self.shape = Shape()
        try:
            with refused_counts() as refused:
                found = self.handle(value, text) if isinstance(value, dict) else \
                    self.handle_other(value, text)
        except Exception as exc:  # protocol drift must never break a turn
            return [self.raw(text, "malformed-event", error=f"{type(exc).__name__}: {exc}")]
        self.shape.problems += refused
        self._verdict = self._verdict or any(o.kind == "completed" for o in found)
        if self.shape.problems:
            return [*found, self.raw(text, "malformed-event",
                                     error="; ".join(self.shape.problems))]
        return found

    def non_json(self, line: str) -> list[Observation]:
        """A terminal line (with its `\r`, if any): `output`, kept raw for `--raw`."""
        return [observation("output", text=line.rstrip("\r"), raw=line)]

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        raise NotImplementedError

    def handle_other(self, value: Any, line: str) -> list[Observation]:
        return [self.raw(line, "unparseable", error="not a JSON object")]

    def stderr(self, line: str) -> list[Observation]:
        self.said.feed(line)
        return []

    def finish(self, exit_code: int | None) -> list[Observation]:
        """`end`'s observations; then, for a process that exited non-zero with no verdict (no
        `completed`, no failure), the failure its stderr told (`said`, `exit_problem`)."""
        out = self.end(exit_code)
        settled = self._verdict or self._last_problem is not None or \
            any(o.kind == "completed" for o in out)
        reason = None if settled or not exit_code else self.said.reason
        return out + (self.exit_problem(reason) if reason else [])

    def end(self, exit_code: int | None) -> list[Observation]:
        """What was pending when the process ended (the provider's own rules)."""
        return []

    def exit_problem(self, reason: str) -> list[Observation]:
        """The failure of a process that exited non-zero without a result, `reason` the stderr
        line that says why; a provider adds its advice."""
        return self.problem(reason)

    def resumed(self, *flags: str) -> bool:
        """True when the argv template resumes an earlier session (one of `flags`), looked for
        past a shell's `-c SCRIPT` when one runs it (`sh -c` is no `-c` of the provider's)."""
        start = max(script_indexes(self.argv), default=0) + 1
        return any(arg in flags for arg in self.argv[start:])

    def raw(self, line: str, reason: str, **extra: Any) -> Observation:
        return observation("raw", value=line[:PREVIEW_CHARS], reason=reason,
                           truncated=True if len(line) > PREVIEW_CHARS else None,
                           bytes=len(line.encode("utf-8", "surrogatepass")), **extra)

    def unknown(self, line: str, type_: Any) -> list[Observation]:
        return [self.raw(line, "unknown-event", type=str(type_) if type_ is not None else None)]

    def call_id(self, value: Any, what: str) -> str | None:
        """A tool call's id; None, its line kept `raw`, when there is none: calls without one
        cannot be told apart (every one after the first was dropped as a repeat)."""
        if isinstance(value, str) and value:
            return value
        self.shape.problems.append(f"{what}: expected a call id, got "
                                   f"{'an empty string' if value == '' else json_type(value)}")
        return None

    # -- tools -----------------------------------------------------------------------------

    def reset_tools(self) -> None:
        """Forget call ids (a protocol that numbers its calls afresh in every turn)."""
        self._tools.clear()
        self._inputs.clear()
        self._results.clear()
        self._touches.clear()

    def tool(self, call_id: str, name: str, args: Any, **extra: Any) -> list[Observation]:
        """A tool call, once per call id; its file ops wait for a successful result. The
        same call again is nothing; another call with its id keeps its line `raw`."""
        data = args if isinstance(args, Mapping) else ({} if args is None else {"value": args})
        if call_id in self._tools:
            if not same_call((self._tools[call_id], self._inputs[call_id]), (name, data)):
                self.shape.problems.append(f"call id {call_id!r}: already used by another "
                                           f"call ({self._tools[call_id]})")
            return []
        self._tools[call_id], self._inputs[call_id] = name, data
        self._touches[call_id] = file_ops(name, data)
        return [observation(
            "tool", callId=call_id, name=name, input=dict(data), summary=summary(name, data),
            **extra,
        )]

    def tool_result(
        self, call_id: str, is_error: bool, output: str, *, ran: bool = True, **extra: Any
    ) -> list[Observation]:
        """A tool's result, once per call id, then the files it touched: all of them when it
        succeeded; only the command (`op: run`) when it failed, since a failed command still
        ran, while a failed edit changed nothing; none when it never `ran` (refused). The
        same result again is nothing; another one for that call keeps its line `raw`."""
        answer = (bool(is_error), hash(output))
        if call_id in self._results:
            if self._results[call_id] != answer:
                self.shape.problems.append(f"call id {call_id!r}: already answered with "
                                           "another result")
            return []
        self._results[call_id] = answer
        text, cut = clip(output, RESULT_CHARS)
        out = [observation(
            "tool-result", callId=call_id, isError=bool(is_error), preview=text,
            characters=len(output), truncated=True if cut else None,
            name=self._tools.get(call_id), **extra,
        )]
        touches = self._touches.pop(call_id, []) if ran else []
        self._touches.pop(call_id, None)
        out += [self.file_change(path, op, call_id, detail) for path, op, detail in touches
                if not is_error or op == "run"]
        return out

    def denied(self, call_id: str | None, name: str | None, reason: str,
               message: str | None = None, **extra: Any) -> list[Observation]:
        """A tool call the agent's permissions refused (`tool-denied`), once per call id."""
        key = f"denied:{call_id}" if call_id else None
        if key is not None:
            if key in self._results:
                return []
            self._results[key] = (True, 0)
        return [observation("tool-denied", callId=call_id, name=name or (
            self._tools.get(call_id) if call_id else None), reason=reason, message=message,
            **extra)]

    def retry(self, message: str, attempt: Any = None, max_attempts: Any = None,
              delay_ms: Any = None, status: Any = None, error: str | None = None
              ) -> list[Observation]:
        """A provider retrying a model request by itself (`model-retry`): never a failure."""
        return [observation(
            "model-retry", attempt=as_count(attempt), maxAttempts=as_count(max_attempts),
            delayMs=as_count(delay_ms), status=as_count(status),
            error=error or retry_class(message, status), message=message or None,
        )]

    def file_change(
        self, path: str, op: str, call_id: str | None = None, detail: str | None = None
    ) -> Observation:
        tool = self._tools.get(call_id) if call_id else None
        return observation("file-change", path=path, op=op, callId=call_id, tool=tool,
                           detail=detail)

    # -- problems and usage ----------------------------------------------------------------

    def problem(
        self, message: str, code: str | None = None, resets_at: Any = None, *,
        hint: object = None, dedupe: bool = True, advice: str | None = None,
    ) -> list[Observation]:
        """A failure, or a quota when the message or hint says rate or usage limit. The same
        message twice in a row (an error line repeated by the terminal event) is kept once.
        `advice` is what the user can do (`hint` on the record)."""
        if dedupe and message == self._last_problem:
            return []
        self._last_problem = message
        kind = classify_problem(message, code, hint)
        if kind == "quota":
            return [observation("quota", message=message, resetAt=epoch_to_iso(resets_at),
                                code=code, hint=advice)]
        return [observation("failure", message=message, code="auth" if kind == "auth" else code,
                            hint=advice)]

    def usage(self, inc: Usage, **extra: Any) -> Observation:
        return observation("usage", **inc.fields(), **extra)
