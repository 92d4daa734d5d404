#!/usr/bin/env python3
"""A generic receiver for watchrun's JSON webhook body (contrib/webhooks/json.yaml): checks the
bearer token, appends each firing as one line to a JSONL file, answers 204.

    ALERT_WEBHOOK_TOKEN=… python3 receiver.py --port 8080 --out alerts.jsonl

Standard library only. Put it behind TLS (a reverse proxy) when it is not on loopback.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20


def handler(token: str | None, out: str) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            if token is not None:
                given = self.headers.get("Authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return self.answer(401, "bad or missing bearer token")
            length = self.headers.get("Content-Length", "")
            if not length.isdigit() or int(length) > MAX_BODY:
                return self.answer(413, "body missing or larger than 1 MiB")
            try:
                doc = json.loads(self.rfile.read(int(length)))
            except ValueError:
                return self.answer(400, "not JSON")
            if not isinstance(doc, dict) or doc.get("source") != "watchrun":
                return self.answer(400, "not a watchrun firing")
            with lock, open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            w = doc.get("watcher", {})
            print(f"{w.get('id')}: {doc.get('count')} match(es), firing {doc.get('firing')}",
                  flush=True)
            self.answer(204, "")

        def answer(self, status: int, text: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Receiver


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--out", default="alerts.jsonl", help="JSONL file the firings go to")
    p.add_argument("--token-env", default="ALERT_WEBHOOK_TOKEN",
                   help="environment variable holding the bearer token (unset: no check)")
    args = p.parse_args()
    server = ThreadingHTTPServer((args.host, args.port),
                                 handler(os.environ.get(args.token_env), args.out))
    print(f"listening on {args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
