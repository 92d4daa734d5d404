"""POST one firing to a webhook, retrying with backoff on a 5xx, 408, 429, a timeout or a
connection error (never on another 4xx or a TLS failure: those will not heal by themselves)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

from watchrun.actions.hidden import Hidden, words
from watchrun.actions.http import HttpError, Response, basic_credentials, post
from watchrun.actions.results import Result
from watchrun.config.model import ActionSpec
from watchrun.match.redact import Redactor
from watchrun.match.sanitize import clip, sanitize

__all__ = ["BACKOFF_MAX_S", "BACKOFF_S", "RETRY_STATUSES", "send"]

BACKOFF_S = 0.5
"""The first wait before a retry; it doubles per attempt (±10 % jitter)."""
BACKOFF_MAX_S = 30.0
"""No wait is longer, whatever the attempt or a server's Retry-After."""
RETRY_STATUSES = frozenset({408, 425, 429})
"""Statuses below 500 worth retrying (the request timed out, too early, too many requests)."""
Retry = Callable[[int, float, str], None]
"""Told of each retry: (attempt about to start, delay in seconds, why)."""


async def send(spec: ActionSpec, body: bytes, redactor: Redactor, *,
               backoff_s: float = BACKOFF_S, on_retry: Retry | None = None,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> Result:
    """POST `body` to the action's URL, up to `1 + retries` attempts of `timeout` each."""
    assert spec.url is not None
    timeout_s = spec.timeout_ms / 1000
    scrub = _scrub(spec, redactor)
    attempt = 0
    while True:
        attempt += 1
        response: Response | None = None
        try:
            response = await post(spec.url, body, spec.headers, timeout_s)
        except HttpError as exc:
            retry, why = exc.code != "tls", _clean(exc.message, scrub)
            failed = Result("timeout" if exc.code == "timeout" else "failed", attempt,
                            error={"code": exc.code, "message": why})
        else:
            if 200 <= response.status < 300:
                return Result("ok", attempt, http_status=response.status)
            retry = response.status >= 500 or response.status in RETRY_STATUSES
            why = _clean(f"HTTP {response.status} {response.reason}", scrub)
            failed = Result("failed", attempt, http_status=response.status,
                            error={"code": f"http-{response.status}",
                                   "message": _explain(response, scrub)})
        if not retry or attempt > spec.retries:
            return failed
        delay = backoff_s * 2 ** (attempt - 1) * random.uniform(0.9, 1.1)
        if response is not None and response.retry_after is not None:
            delay = max(delay, response.retry_after)
        delay = min(delay, BACKOFF_MAX_S)  # (a Retry-After of an hour holds no slot that long)
        if on_retry is not None:
            on_retry(attempt + 1, delay, why)
        await sleep(delay)


def _explain(response: Response, redactor: _Redacts) -> str:
    """The status, its reason phrase and the start of the server's explanation, cleaned and
    redacted (a receiver may echo the request back)."""
    text = _clean(response.body.decode("utf-8", "replace"), redactor)
    if 300 <= response.status < 400:
        text = "redirects are not followed: point `url` at the final address"
    head = _clean(f"HTTP {response.status} {response.reason}", redactor)
    return f"{head}: {text}" if text else head


def _clean(text: str, redactor: _Redacts) -> str:
    """What a server sent (a reason phrase, a body, the start of a reply that is not HTTP) as it
    may go into a record or the log: no escape sequences, one line, every secret redacted, then
    at most 300 bytes (cut after redaction: a cut cannot leave part of a secret)."""
    text = " ".join(redactor.redact(sanitize(text)[0])[0].split())
    return clip(text, 300)[0]


class _Redacts(Protocol):
    def redact(self, text: str) -> tuple[str, dict[str, int]]: ...


def _scrub(spec: ActionSpec, rules: Redactor) -> Hidden:
    """The config's redactor, after the action's own secrets are hidden: a receiver echoes the
    request (`Cannot POST /hooks/…`, `bad key …`), and the URL's path, query and credentials
    and the header values must never reach a record or the log."""
    parts = urlsplit(spec.url or "")
    whole = [parts.path + (f"?{parts.query}" if parts.query else ""), parts.query,
             parts.username or "", parts.password or "", *spec.headers.values()]
    if parts.username is not None:  # (sent as `Authorization: Basic …`)
        whole.append(basic_credentials(spec.url or ""))
    pieces = [*parts.path.split("/"), *(v for _, v in parse_qsl(parts.query)),
              *words(spec.headers.values())]
    return Hidden("webhook", whole, pieces, rules)
