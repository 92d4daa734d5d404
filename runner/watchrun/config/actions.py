"""Check and build a watcher's `actions:` (webhook, exec): type-specific keys, URLs, headers,
`when` thresholds, and the clamped timeout, throttle, concurrency, queue, retries and body
size."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from watchrun.config.checks import Ctx
from watchrun.config.clamp import RANGES, clamp
from watchrun.config.model import BODY_BYTES, ActionSpec, ThresholdSpec
from watchrun.config.tree import CMap, KeyPath

__all__ = ["EXEC_ONLY", "RESERVED_HEADERS", "WEBHOOK_ONLY", "build_actions", "parse_threshold"]

WEBHOOK_ONLY = ("url", "format", "headers", "retries")
EXEC_ONLY = ("command", "cwd", "env")
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Headers watchrun writes itself; a config may not set them."""
_THRESHOLD = re.compile(r"^ *([0-9]+) +in +(.+?) *$")
_DEFAULTS: dict[str, int | None] = {"timeout": 10_000, "concurrency": 1, "queue": 100,
                                    "retries": 3, "throttle": None,
                                    "maxBodyBytes": BODY_BYTES}


def parse_threshold(text: str) -> tuple[str, str] | None:
    """`"5 in 1m"` → ("5", "1m"); None when it is not `N in WINDOW`."""
    m = _THRESHOLD.match(text)
    return (m[1], m[2]) if m else None


def build_actions(ctx: Ctx, p: KeyPath, raw: Any) -> tuple[ActionSpec, ...]:
    """Check every action of one watcher (all problems reported) and build the valid ones."""
    if not isinstance(raw, list):
        return ()
    seen: dict[str, tuple[KeyPath, str]] = {}
    used: dict[str, int] = {}
    out: list[ActionSpec] = []
    for i, item in enumerate(raw):
        if not isinstance(item, CMap) or item.get("type") not in ("webhook", "exec"):
            continue  # the schema reported it
        kind = item["type"]
        used[kind] = used.get(kind, 0) + 1
        name = item.get("name")
        if not isinstance(name, str):
            name = kind if used[kind] == 1 else f"{kind}-{used[kind]}"
        ctx.unique((*p, i, "name"), name, seen, "action name",
                   "they name the action in records, logs and metrics")
        spec = _action(ctx, (*p, i), item, name)
        if spec is not None:
            out.append(spec)
    return tuple(out)


def _action(ctx: Ctx, p: KeyPath, a: CMap, name: str) -> ActionSpec | None:
    report, kind = ctx.report, a["type"]
    wrong = EXEC_ONLY if kind == "webhook" else WEBHOOK_ONLY
    for key in wrong:
        if key in a:
            other = "exec" if kind == "webhook" else "webhook"
            report.error((*p, key), f"`{key}` applies only to {other} actions; this action "
                         f"has type {kind}")
    ok = True
    if kind == "webhook":
        ok = _url(ctx, (*p, "url"), a.get("url"))
        ok = _headers(ctx, (*p, "headers"), a.get("headers")) and ok
    elif "command" not in a:
        report.error((*p, "command"), "an exec action needs `command`: the program and its "
                     "arguments as a list, e.g. [\"/usr/local/bin/page\", \"--team\", \"ops\"]")
        ok = False
    values: dict[str, int | None] = {}
    for key, default in _DEFAULTS.items():
        values[key] = default
        if key in a:
            values[key] = clamp(a[key], RANGES[f"action.{key}"], (*p, key), report)
            ok = ok and values[key] is not None
    threshold = _threshold(ctx, (*p, "when", "threshold"), a.get("when"))
    if not ok or threshold is False:
        return None
    command = a.get("command")
    cwd = None
    if kind == "exec":
        cwd = ctx.resolve((*p, "cwd"), a["cwd"]) if "cwd" in a else ctx.folder((*p, "command"))
    headers = a.get("headers")
    return ActionSpec(
        name=name, type=kind, threshold=threshold, throttle_ms=values["throttle"],
        timeout_ms=_int(values["timeout"]), concurrency=_int(values["concurrency"]),
        queue=_int(values["queue"]), retries=_int(values["retries"]),
        max_body_bytes=_int(values["maxBodyBytes"]),
        url=a.get("url") if kind == "webhook" else None, format=a.get("format", "json"),
        headers=dict(headers) if isinstance(headers, dict) else {},
        command=tuple(command) if isinstance(command, list) else (), cwd=cwd,
        env=ctx.env((*p, "env"), a.get("env")),
    )


def _int(value: int | None) -> int:
    assert value is not None  # a None was reported and no spec is built
    return value


def _url(ctx: Ctx, p: KeyPath, url: Any) -> bool:
    if url is None:
        ctx.report.error(p, "a webhook action needs `url`: the http:// or https:// address to "
                         "POST to, e.g. \"${SLACK_WEBHOOK_URL}\"")
        return False
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError as exc:
        ctx.report.error(p, f"is not a valid URL ({exc}); use http://HOST[:PORT]/PATH or "
                         "https://…")
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        ctx.report.error(p, f"is not an http:// or https:// URL with a host (scheme "
                         f"{parts.scheme or 'missing'!r}); use e.g. https://hooks.example/T")
        return False
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        ctx.report.error(p, "contains whitespace or control characters, which a URL cannot "
                         "hold; percent-encode them (a space is %20)")
        return False
    if parts.port == 0:  # (the request went to the scheme's default port instead)
        ctx.report.error(p, "has port 0, which no receiver listens on; give the receiver's "
                         "port, or none for the scheme's own (80, 443)")
        return False
    return True


def _headers(ctx: Ctx, p: KeyPath, raw: Any) -> bool:
    ok = True
    for key, value in (raw.items() if isinstance(raw, dict) else ()):
        if str(key).lower() in RESERVED_HEADERS:
            ctx.report.error((*p, key), f"`{key}` is written by watchrun itself; it cannot be "
                             "set here")
            ok = False
        elif isinstance(value, str) and any(c in value for c in "\r\n\0"):
            # the value is not shown: it may be a secret taken from the environment
            ctx.report.error((*p, key), "the value contains a line break or NUL, which would "
                             "end the header early (header injection); fix the value")
            ok = False
    return ok


def _threshold(ctx: Ctx, p: KeyPath, when: Any) -> ThresholdSpec | Literal[False] | None:
    """The threshold of `when` (None for `match`; False after reporting a problem)."""
    if not isinstance(when, dict) or not isinstance(when.get("threshold"), str):
        return None
    parsed = parse_threshold(when["threshold"])
    if parsed is None:
        return None  # the schema reported it
    count = clamp(parsed[0], RANGES["action.threshold.count"], p, ctx.report, digits=True)
    window = clamp(parsed[1], RANGES["action.threshold.window"], p, ctx.report)
    if count is None or window is None:
        ctx.report.error(p, f"{when['threshold']!r} is not a threshold: use \"N in WINDOW\", "
                         "e.g. \"5 in 1m\"")
        return False
    return ThresholdSpec(count, window)
