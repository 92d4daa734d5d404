"""The `watch` tool as MCP lists it: name, description, input and output JSON Schemas (the
seed's parameters and `WatchDetails`) and annotations. Plain data, no SDK types."""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIONS", "ANNOTATIONS", "DESCRIPTION", "INPUT_SCHEMA", "MAX_LINES",
           "MAX_RESULT_BYTES", "NAME", "OUTPUT_SCHEMA", "RECORD_SCHEMA", "TITLE"]

NAME = "watch"
TITLE = "Watch files and commands for log patterns"
ACTIONS = ("add", "list", "status", "matches", "logs", "stop", "clear")
MAX_LINES = 2000
"""`lines` is 1 to this (seed 001's bound, as `watchrun matches --lines`)."""
MAX_WATCHES = 500
"""`list` and `clear` return this many watchers at most (a runner runs at most 500; an output
dir's snapshots, listed with no runner, may be thousands); the rest are counted in `omitted`."""
MAX_RESULT_BYTES = 1 << 20
"""The lines of one `matches` or `logs` result, at most (2000 lines of 64 KiB made one 262 MB
message): with their JSON escapes, in the structured result and its text, the message stays
within a few MiB. What is left out is counted in `omitted`."""

DESCRIPTION = """\
Tail a file or a command's merged output, match each new line against a regular expression, \
and keep the matching lines (watchrun). Actions:
- add: start a watcher (`path` or `command`, `pattern`, optional `exclude`, `caseSensitive`, \
`label`, `wake`, `fromStart`, `cwd`, `id`); returns its id (w1, w2, …).
- list: every watcher of this session (or of the live runner; with none, the last status of \
each) with status and counts.
- status: one watcher (`id`).
- matches: a watcher's matched lines (`id`, `lines`); pass the returned `cursor` back as \
`since` to get only the matches recorded after it. A result holds at most 1 MiB of lines \
(`omitted` counts those left out).
- logs: a watcher's last raw lines, sanitized (`id`, `lines`).
- stop: stop a watcher (`id`); stopping one that is not running is not an error. On a live \
runner only one this session added.
- clear: forget stopped and ended (exited, fatal) watchers; with `all`, stop and forget every \
one. On a live runner only those this session added.
A file is followed like `tail -F` from its end unless `fromStart`; a command runs under \
/bin/sh -c in its own process group. Watchers added here end with the MCP session. Subscribe \
to the resource watchrun://watchers/{id}/matches to be told when a watcher records new matches."""

ANNOTATIONS: dict[str, Any] = {
    "title": TITLE,
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
"""The seed's annotations: `add` runs commands and `stop`/`clear` end them."""

_STRINGS = {"type": "array", "items": {"type": "string"}}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do."},
        "path": {"type": "string", "description": "add: the file to tail; exactly one of "
                 "`path`/`command`. A relative path is taken from the server's working "
                 "directory."},
        "command": {"type": "string", "description": "add: a shell command whose merged "
                    "stdout/stderr to tail (run under /bin/sh -c, in its own process group)."},
        "cwd": {"type": "string", "description": "add: working directory of a `command`; "
                "default: the server's working directory."},
        "pattern": {"type": "string", "description": "add (required): the regular expression "
                    "a line must match (RE2 syntax; no lookaround or backreferences)."},
        "exclude": {**_STRINGS, "description": "add: regular expressions that suppress a "
                    "match."},
        "caseSensitive": {"type": "boolean", "description": "add: match case-sensitively; "
                          "default false."},
        "label": {"type": "string", "description": "add: a short display label; default: "
                  "the source."},
        "wake": {"anyOf": [{"type": "boolean"}, {"type": "string"}, _STRINGS],
                 "description": "add: agents of the watchrun config woken by a match: true "
                 "for every agent, or agent names; default limits.wakeOnMatch."},
        "fromStart": {"type": "boolean", "description": "add: scan the file's existing "
                      "content first instead of following from its end."},
        "id": {"type": "string", "description": "A watcher id such as w1 (status, matches, "
               "logs, stop). add: optional; default the next free w1, w2, …"},
        "lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES,
                  "description": f"matches, logs: how many lines, 1 to {MAX_LINES}; default "
                  "limits.matchLines (50)."},
        "since": {"type": "string", "description": "matches: a `cursor` from an earlier "
                  "matches result; only matches recorded after it are returned, oldest "
                  "first, with the cursor to pass next time."},
        "all": {"type": "boolean", "description": "clear: also stop and forget running "
                "watchers."},
    },
    "required": ["action"],
    "additionalProperties": False,
}

_TEXT_OR_NULL = {"type": ["string", "null"]}
_INT_OR_NULL = {"type": ["integer", "null"]}

RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "WatchRecord: one watcher's serializable state.",
    "properties": {
        "id": {"type": "string"},
        "label": {"type": "string"},
        "source": {
            "type": "object",
            "properties": {
                "kind": {"enum": ["file", "command"]},
                "path": {"type": "string"},
                "command": {"anyOf": [{"type": "string"}, _STRINGS]},
                "cwd": _TEXT_OR_NULL,
            },
            "required": ["kind"],
        },
        "pattern": {"type": "string"},
        "exclude": _STRINGS,
        "caseSensitive": {"type": "boolean"},
        "wake": {"type": "boolean", "description": "A match wakes agents (`wakeAgents`)."},
        "wakeAgents": _STRINGS,
        "fromStart": {"type": "boolean"},
        "status": {"enum": ["running", "stopped", "exited", "error"]},
        "state": {"type": "string", "description": "watchrun's own status: starting, "
                  "running, backoff, waiting, exited, fatal, stopped."},
        "origin": {"type": "string"},
        "startedAt": _TEXT_OR_NULL,
        "updatedAt": _TEXT_OR_NULL,
        "lastMatchAt": _TEXT_OR_NULL,
        "linesRead": {"type": "integer"},
        "matchCount": {"type": "integer"},
        "restarts": {"type": "integer"},
        "lastError": _TEXT_OR_NULL,
        "pid": _INT_OR_NULL,
        "exitCode": _INT_OR_NULL,
        "signal": _TEXT_OR_NULL,
        "live": {"type": "boolean", "description": "A runner holds it now."},
    },
    "required": ["id", "label", "source", "pattern", "exclude", "caseSensitive", "wake",
                 "fromStart", "status", "linesRead", "matchCount"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "WatchDetails (seed 001) plus where it ran and the matches cursor.",
    "properties": {
        "action": {"enum": list(ACTIONS)},
        "watch": RECORD_SCHEMA,
        "watches": {"type": "array", "items": RECORD_SCHEMA},
        "matches": {"type": "string", "description": "Sanitized matched lines, "
                    "newline-joined."},
        "logs": {"type": "string", "description": "Sanitized raw tail, newline-joined."},
        "count": {"type": "integer", "description": "matches, logs: lines returned."},
        "cursor": {"type": "string", "description": "matches: pass as `since` next time."},
        "since": {"type": "string", "description": "matches: the cursor this call read after."},
        "truncated": {"type": "boolean", "description": "More lines than returned: older "
                      "ones (or, with `since`, newer ones: call again with the cursor)."},
        "omitted": {"type": "integer", "description": "matches, logs: lines asked for but "
                    "left out, as a result holds at most 1 MiB of lines: the oldest ones (with "
                    "`since`, the newest: call again with the cursor). list, clear: watchers "
                    "past the first 500 (`watchrun list` shows them all)."},
        "stopped": {"type": "boolean", "description": "stop found a running watcher."},
        "cleared": {"type": "integer"},
        "warnings": _STRINGS,
        "runner": {"enum": ["live", "session", "none"], "description": "Who holds the "
                   "watchers: a live `watchrun run`, this MCP session, or nobody yet."},
        "outputDir": {"type": "string"},
        "error": {"type": "string"},
    },
    "required": ["action"],
}
