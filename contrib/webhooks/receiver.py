#!/usr/bin/env python3
"""A generic receiver for watchrun's JSON webhook body (contrib/webhooks/json.yaml): checks the
bearer token, appends each firing as one line to a JSONL file, answers 204.

    ALERT_WEBHOOK_TOKEN=… python3 receiver.py --port 8080 --out alerts.jsonl

Standard library only. Put it behind TLS (a reverse proxy) when it is not on loopback.
Every request gets an answer: 204 stored, 400 not a watchrun firing (nothing stored), 401 bad
token, 408 too slow, 413 too large, 500 not stored (the sender retries). A client silent for
--timeout (10 s), or whose request is not in after --deadline (60 s) however it trickles in,
is dropped (answered 408 once its request line came), and at most MAX_CLIENTS are served at
once (the rest wait).
What it prints of a firing has control and bidirectional characters escaped.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import io
import json
import os
import socket
import sys
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 16 << 20
"""watchrun's body is at most its action's maxBodyBytes (1 MiB unless raised, at most 64 MiB):
16 MiB takes any up to that; --max-body for a larger one."""
TIMEOUT_S = 10.0
DEADLINE_S = 60.0
MAX_CLIENTS = 64
SHOWN_CHARS = 200


def shown(value: object) -> str:
    """`value` for a terminal: controls, format (bidi) and line/paragraph separators escaped,
    so a firing cannot restyle the terminal or reorder what it shows; cut at SHOWN_CHARS."""
    text = str(value)[:SHOWN_CHARS]
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
                   else c for c in text)


def firing(doc: Any) -> str | None:
    """Why `doc` is not a watchrun firing, or None when it is one."""
    if not isinstance(doc, dict) or doc.get("source") != "watchrun":
        return "not a watchrun firing"
    watcher = doc.get("watcher")
    if not isinstance(watcher, dict) or not isinstance(watcher.get("id"), str):
        return "not a watchrun firing: `watcher.id` must be a string"
    for key in ("count", "firing"):
        if type(doc.get(key)) is not int:
            return f"not a watchrun firing: `{key}` must be an integer"
    if not isinstance(doc.get("lines"), list):
        return "not a watchrun firing: `lines` must be a list"
    return None


def _jsonl(doc: Any) -> bytes:
    """`doc` as one UTF-8 JSONL line; U+2028/U+2029 escaped (a reader splitting on Unicode line
    breaks sees one line too), a lone surrogate refused (UnicodeEncodeError)."""
    text = json.dumps(doc, ensure_ascii=False).replace("\u2028", "\\u2028")
    return text.replace("\u2029", "\\u2029").encode("utf-8") + b"\n"


class Deadline(io.RawIOBase):
    """A connection's reads, each waiting at most `timeout` and no later than `deadline`
    seconds after the first: past it, TimeoutError."""

    def __init__(self, sock: socket.socket, timeout: float, deadline: float) -> None:
        self.sock, self.timeout, self.end = sock, timeout, time.monotonic() + deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.sock.settimeout(min(self.timeout, left))
        return self.sock.recv_into(buffer)


def handler(token: str | None, out: str, max_body: int, timeout: float = TIMEOUT_S,
            deadline: float = DEADLINE_S) -> type[BaseHTTPRequestHandler]:
    lock, timeout_s = threading.Lock(), timeout
    # HTTP header bytes are read as latin-1; watchrun sends the token as UTF-8
    expected = f"Bearer {token}".encode() if token is not None else None

    class Receiver(BaseHTTPRequestHandler):
        # on every read and write of the connection: a silent or slow client is dropped
        timeout = timeout_s

        def setup(self) -> None:
            """Reads that end at `deadline`: a client that trickles its request in (a byte
            now and then: never silent) is cut off then, and answered 408."""
            super().setup()
            self.rfile = io.BufferedReader(Deadline(self.connection, timeout_s, deadline))

        def parse_request(self) -> bool:
            """The request's head; one that stopped coming (silent, or past the deadline) is
            answered 408 rather than dropped unanswered."""
            try:
                return super().parse_request()
            except TimeoutError:
                self.close_connection = True
                self.answer(408, "the request did not arrive in time")
                return False

        def do_POST(self) -> None:
            try:
                self.receive()
            except TimeoutError:
                self.close_connection = True
                self.answer(408, "the body did not arrive in time")
            except OSError:
                self.close_connection = True  # the client is gone: nobody to answer
            except Exception as exc:
                print(f"receiver: not stored: {shown(repr(exc))}", file=sys.stderr, flush=True)
                self.answer(500, "not stored")

        def receive(self) -> None:
            if expected is not None:
                given = self.headers.get("Authorization", "").encode("latin-1")
                if not hmac.compare_digest(given, expected):
                    return self.answer(401, "bad or missing bearer token")
            length = self.headers.get("Content-Length", "")
            digits = length.isascii() and length.isdigit() and len(length) <= 18  # ("²", 10**5000)
            if not digits or int(length) > max_body:
                return self.answer(413, f"body missing or larger than {max_body} bytes")
            body = self.rfile.read(int(length))
            if len(body) < int(length):  # (cut off at the deadline, or the client left)
                raise TimeoutError
            try:
                doc = json.loads(body)
                line = _jsonl(doc)
            except (ValueError, RecursionError):  # (UnicodeError is a ValueError)
                return self.answer(400, "not JSON (UTF-8, at most a sane nesting depth)")
            why = firing(doc)
            if why is not None:
                return self.answer(400, why)
            with lock, open(out, "ab") as fh:
                fh.write(line)
            # answered at once: a failure after storing (a gone stdout) would leave the sender
            # unanswered, and its retry would store the firing again; the console is best-effort
            self.answer(204, "")
            with contextlib.suppress(OSError, ValueError):
                print(f"{shown(doc['watcher']['id'])}: {doc['count']} match(es), firing "
                      f"{doc['firing']}", flush=True)

        def answer(self, status: int, text: str) -> None:
            self.connection.settimeout(timeout_s)  # (the last read may have left less)
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Receiver


class Server(ThreadingHTTPServer):
    """A thread per client, at most MAX_CLIENTS at once: the next waits in the listen backlog
    until one is done (or dropped as silent). A thread counts until it has ended and been
    joined: one that had only given its slot back, still ending, made MAX_CLIENTS + 1."""

    request_queue_size = 128  # the listen backlog (socketserver's default is 5)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.changed = threading.Condition()
        self.live = 0  # threads started and not joined yet
        self.done: list[threading.Thread] = []  # threads that are ending, to be joined

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.changed:
            while True:
                while self.done:  # (each has left the lock for good: joining it cannot wait
                    self.done.pop().join()  # on this one)
                    self.live -= 1
                if self.live < MAX_CLIENTS:
                    break
                self.changed.wait()
            self.live += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self.changed:
                self.live -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.changed:
                self.done.append(threading.current_thread())
                self.changed.notify()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--out", default="alerts.jsonl", help="JSONL file the firings go to")
    p.add_argument("--token-env", default="ALERT_WEBHOOK_TOKEN",
                   help="environment variable holding the bearer token (unset: no check)")
    p.add_argument("--max-body", type=int, default=MAX_BODY,
                   help=f"largest body accepted, in bytes (default {MAX_BODY})")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S,
                   help=f"seconds a client may stay silent (default {TIMEOUT_S:g})")
    p.add_argument("--deadline", type=float, default=DEADLINE_S,
                   help=f"seconds a request may take in all (default {DEADLINE_S:g})")
    args = p.parse_args()
    server = Server((args.host, args.port), handler(os.environ.get(args.token_env), args.out,
                                                    args.max_body, args.timeout, args.deadline))
    print(f"listening on {args.host}:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
