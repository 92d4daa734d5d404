"""Test helper: a real HTTP server on loopback (http.server in a thread) that records each
request and answers from a script: a status, `hang` (hold the connection until closed), or
`close` (drop the connection without a response)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """The server's state: the script of answers (last one repeats) and what it received."""

    script: list[int | str]
    requests: list[Request] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def next_answer(self) -> int | str:
        with self.lock:
            n = len(self.requests)
        return self.script[min(n - 1, len(self.script) - 1)]

    def bodies(self) -> list[Any]:
        with self.lock:
            return [r.json() for r in self.requests]

    def count(self) -> int:
        with self.lock:
            return len(self.requests)


def _handler(rx: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with rx.lock:
                rx.requests.append(Request(self.path, dict(self.headers.items()), body,
                                           time.monotonic()))
            answer = rx.next_answer()
            if answer == "hang":
                rx.release.wait(60)
                return
            if answer == "close":
                self.close_connection = True
                return
            assert isinstance(answer, int)
            text = b"ok" if answer < 400 else f"error {answer}: try later".encode()
            self.send_response(answer)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def receiver(*script: int | str) -> Iterator[Receiver]:
    """A server on 127.0.0.1 (a free port) answering with `script` (default 200)."""
    rx = Receiver(list(script) or [200])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rx))
    server.daemon_threads = True
    rx.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T0001/B0002/s3cr3tpath"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rx
    finally:
        rx.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
