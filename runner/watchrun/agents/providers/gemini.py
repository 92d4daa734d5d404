"""Gemini CLI `--output-format stream-json` lines (and the `json` reply) to observations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import JsonAdapter, Observation, as_dict, as_str, observation
from watchrun.agents.providers.jsonline import TooDeep, load_json
from watchrun.agents.providers.toolinfo import classify_problem, result_text
from watchrun.agents.providers.usage import UsageTracker, gemini_models_usage, gemini_stats_usage

__all__ = ["GeminiAdapter"]

PRETTY_LIMIT = 4 * 1024 * 1024
"""Characters of a pretty-printed `--output-format json` object buffered before giving up."""

_ERROR_CODES = {"FatalTurnLimitedError": "max-turns", "FatalCancellationError": "cancelled",
                "FatalAuthenticationError": "auth"}
EXIT_CODES = {
    41: ("auth", "authentication failed"),
    42: ("input", "invalid input"),
    44: ("sandbox", "sandbox error"),
    52: ("config", "invalid configuration"),
    53: ("max-turns", "the session turn limit was reached"),
    54: ("tool", "a tool failed fatally"),
    55: ("untrusted-workspace", "the workspace is not trusted (Gemini CLI runs headless only in a "
         "folder it trusts: trust this one by running `gemini` in it once, or set "
         "GEMINI_CLI_TRUST_WORKSPACE=true in the agent's env, or add --skip-trust to the "
         "agent's command)"),
    130: ("cancelled", "cancelled"),
}
"""Gemini CLI exit codes (its `FatalError` subclasses) -> (failure code, message). 55: since
0.61 it refuses a headless run in a folder it has not trusted; watchrun does not skip the check
(`--skip-trust`) by itself, which is the user's safety decision: the message says how."""
AUTH_ADVICE = ("log in by running `gemini` once, or set GEMINI_API_KEY (or Vertex AI "
               "credentials) in the agent's env")
QUOTA_ADVICE = "a Gemini quota or rate limit was hit: wait for it to reset or pick another model"



class GeminiAdapter(JsonAdapter):
    """Gemini CLI stream-json (v0.11+), plus the one-object `--output-format json` reply (on one
    line, or pretty-printed across lines starting with a lone `{`).

    Usage rule: tokens are only in the final `result.stats`, an aggregate for this process, so
    it is emitted as this turn's increment (no baseline). `input_tokens` includes cached
    tokens; `cached` exists since v0.22 (before it the record is `complete: false`);
    `output_tokens` counts candidates only, so the rest of `total_tokens` (thoughts) is added
    to `output`. The json reply's `stats.models[*].tokens` gives prompt+tool as input,
    candidates+thoughts as output.

    Text comes only as `message` chunks with `delta: true`: each is a `text-delta`, and the
    joined chunks become one `text` when a tool call, the result or the end of the stream
    follows. The answer is that text after the last tool result. Status: `result.status`, but
    an `error` event of severity `error` (e.g. "Maximum session turns exceeded") makes the
    turn fail even when the result says success; severity `warning` is a `warning`.

    A fatal error before the stream starts (no credentials: exit 41) is a JSON object on
    stderr, `{"session_id"?, "error": {"type", "message", "code"}}`, pretty-printed across
    lines: it becomes a `failure` (code `auth`, with advice) or a `quota`. Without it, a known
    exit code with no `result` still says why.
    """

    provider: ClassVar[str] = "gemini"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._session: str | None = None
        self._chunks: list[str] = []
        self._last_text: str | None = None
        self._fatal: str | None = None
        self._ended = False
        self._pretty: list[str] | None = None
        self._pretty_chars = 0
        self._err: list[str] | None = None

    def parse(self, line: str) -> list[Observation]:
        text = line.rstrip("\r\n")
        if self._pretty is not None:
            self._pretty.append(text)
            self._pretty_chars += len(text) + 1
            if text.rstrip() == "}":
                joined = "\n".join(self._pretty)
                try:
                    value = load_json(joined)
                except TooDeep as exc:
                    self._pretty = None
                    return [self.raw(joined, "unparseable", error=str(exc))]
                except ValueError:
                    return self._pretty_unfinished() if self._over() else []
                self._pretty = None
                return super().parse(json.dumps(value))
            return self._pretty_unfinished() if self._over() else []
        if text.strip() == "{":
            self._pretty, self._pretty_chars = [text], len(text)
            return []
        return super().parse(line)

    def _over(self) -> bool:
        return self._pretty_chars > PRETTY_LIMIT

    def _pretty_unfinished(self) -> list[Observation]:
        joined = "\n".join(self._pretty or [])
        self._pretty = None
        return [self.raw(joined, "unparseable", error="unfinished multi-line JSON object")]

    def _flush(self) -> list[Observation]:
        if not self._chunks:
            return []
        text = "".join(self._chunks)
        self._chunks = []
        self._last_text = text
        return [observation("text", text=text)]

    def end(self, exit_code: int | None) -> list[Observation]:
        out = self._flush()
        if self._pretty is not None:
            out += self._pretty_unfinished()
        known = EXIT_CODES.get(exit_code) if exit_code is not None else None
        if known is not None and not self._ended and self._fatal is None:
            code, what = known
            out += self.problem(f"gemini exited with code {exit_code}: {what}", code=code,
                                advice=AUTH_ADVICE if code == "auth" else None)
        return out

    def stderr(self, line: str) -> list[Observation]:
        text = line.rstrip("\r\n")
        if self._err is None:
            stripped = text.strip()
            if stripped == "{":
                self._err = [text]
                return []
            if not (stripped.startswith("{") and stripped.endswith("}")):
                self.said.feed(line)  # (plain text: why it may exit; a JSON error says it)
                return []
            self._err = [text]
        else:
            self._err.append(text)
            if sum(len(t) for t in self._err) > PRETTY_LIMIT:
                self._err = None
                return []
            if text.rstrip() != "}":
                return []
        try:
            value = load_json("\n".join(self._err))
        except ValueError:
            self._err = None
            return []
        self._err = None
        error = as_dict(value).get("error") if isinstance(value, dict) else None
        return self._fatal_json(as_dict(error)) if error else []

    def _fatal_json(self, error: dict[str, Any]) -> list[Observation]:
        etype = as_str(error.get("type"))
        message = str(error.get("message") or etype or "fatal error")
        self._fatal = message
        code = error.get("code")
        auth = etype == "FatalAuthenticationError" or code == 41
        quota = classify_problem(message, etype) == "quota"
        return self.problem(message, code="auth" if auth else _ERROR_CODES.get(str(etype), etype),
                            hint=etype, advice=AUTH_ADVICE if auth else
                            QUOTA_ADVICE if quota else None)

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind = obj.get("type")
        if kind is None and ("response" in obj or "stats" in obj or "error" in obj):
            return self._json_reply(obj)
        if kind == "init":
            self._session = as_str(obj.get("session_id"))
            return [observation("session", sessionId=self._session, model=obj.get("model"))]
        if kind == "message":
            content = self.shape.text(obj.get("content"), "message.content")
            role = obj.get("role")
            if role == "model":  # (the Gemini API's name for the assistant)
                role = "assistant"
            elif role not in ("assistant", "user") and content:  # a role it does not know:
                self.shape.problems.append(  # (kept `raw`: its text never vanishes)
                    f"message.role: expected assistant, model or user, got {role!r}")
            if role != "assistant" or content is None:
                return []
            if obj.get("delta"):
                self._chunks.append(content)
                return [observation("text-delta", text=content)]
            return [*self._flush(), *self._text(content)]
        if kind == "tool_use":
            flushed = self._flush()
            self._last_text = None
            if (call := self.call_id(obj.get("tool_id"), "tool_use.tool_id")) is None:
                return flushed
            return [*flushed, *self.tool(call, str(obj.get("tool_name") or "?"),
                                         obj.get("parameters"))]
        if kind == "tool_result":
            error = as_dict(obj.get("error"))
            output = obj.get("output")
            text = output if isinstance(output, str) and output else ""
            if not text and error:
                text = str(error.get("message") or "")
            failed = obj.get("status") == "error"
            flushed = self._flush()
            self._last_text = None
            if (call := self.call_id(obj.get("tool_id"), "tool_result.tool_id")) is None:
                return flushed
            return [*flushed, *self.tool_result(call, failed, text,
                                                errorType=error.get("type") if error else None)]
        if kind == "error":
            message = str(obj.get("message") or "error")
            if obj.get("severity") == "warning":
                return [observation("warning", message=message)]
            self._fatal = message
            return self.problem(message)
        if kind == "result":
            return self._result(obj)
        return self.unknown(line, kind)

    def _text(self, text: str) -> list[Observation]:
        self._last_text = text
        return [observation("text", text=text)]

    def _result(self, obj: dict[str, Any]) -> list[Observation]:
        self._ended = True
        out = self._flush()
        stats = obj.get("stats")
        if isinstance(stats, dict):
            out.append(self.usage(gemini_stats_usage(stats), source="stats"))
        error = as_dict(obj.get("error"))
        ok = obj.get("status") == "success" and not error and self._fatal is None
        if error:
            out += self._fatal_json(error)
        out.append(observation("completed", ok=ok, result=self._last_text if ok else None,
                               sessionId=self._session,
                               reason=error.get("type") or self._fatal or obj.get("status")
                               or "its result event has no status (not Gemini CLI's stream-json? "
                               "`gemini -p … --output-format stream-json`)"))
        return out

    def _json_reply(self, obj: dict[str, Any]) -> list[Observation]:
        out: list[Observation] = []
        if as_str(obj.get("session_id")):
            self._session = obj["session_id"]
            out.append(observation("session", sessionId=self._session))
        response = self.shape.text(obj.get("response"), "response")
        if response is not None:
            out += self._text(response)
        models = as_dict(obj.get("stats")).get("models")
        if isinstance(models, dict):
            out.append(self.usage(gemini_models_usage(models), source="stats"))
        error = obj.get("error")
        self._ended = True
        if error:
            err = as_dict(error)
            if err:
                out += self._fatal_json(err)
            else:
                out += self.problem(result_text(error))
        out.append(observation("completed", ok=not error, sessionId=self._session,
                               result=None if error else self._last_text))
        return out
