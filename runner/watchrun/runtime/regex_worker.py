"""The regex worker program: matches one watcher's chunks with Python `re` in its own process, so
a backtracking pattern can stall only this process, which the runner kills at the time budget.

Run as `python -m watchrun.runtime.regex_worker` (the runner starts it by `main`:
`process/helper_start.py`). Requests on stdin, replies on stdout, each a
header `!BI` (op or status, payload length) and a payload:

- INIT, payload JSON {pattern, exclude, caseSensitive, require}: reply OK, or FAILED + message;
- SCAN, payload a chunk of complete lines: reply OK + `!BI` (require hit, span count) + spans
  `!II` (start, end of each matching line, as `Matcher.find` returns them).
"""

from __future__ import annotations

import json
import struct
import sys
from typing import BinaryIO

from watchrun.match.matcher import Matcher

HEAD = struct.Struct("!BI")
SPANS = struct.Struct("!BI")
SPAN = struct.Struct("!II")
INIT, SCAN = 1, 2
OK, FAILED = 0, 1


def _read(stream: BinaryIO, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))
        if not part:
            return None
        data += part
    return data


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Answer requests until end of input."""
    find: Matcher | None = None
    require: Matcher | None = None
    while (head := _read(inp, HEAD.size)) is not None:
        op, size = HEAD.unpack(head)
        payload = _read(inp, size)
        if payload is None:
            return
        if op == INIT:
            try:
                spec = json.loads(payload)
                case = bool(spec["caseSensitive"])
                find = Matcher(spec["pattern"], spec["exclude"], case)
                require = Matcher(spec["require"], (), case) if spec["require"] else None
            except (ValueError, KeyError, TypeError) as exc:
                message = str(exc).encode()
                out.write(HEAD.pack(FAILED, len(message)) + message)
            else:
                out.write(HEAD.pack(OK, 0))
        elif op == SCAN and find is not None:
            spans = find.find(payload)
            hit = require is not None and bool(require.find(payload))
            body = SPANS.pack(hit, len(spans)) + b"".join(SPAN.pack(s, e) for s, e in spans)
            out.write(HEAD.pack(OK, len(body)) + body)
        else:
            message = f"unexpected request {op}".encode()
            out.write(HEAD.pack(FAILED, len(message)) + message)
        out.flush()


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
