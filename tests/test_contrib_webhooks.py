"""contrib/webhooks: the Slack template layered on a config and run against a loopback server
speaking for Slack; the generic-JSON template against contrib's own receiver.py (token checked,
one JSONL line per firing)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from liverunner import read_records, wait_for, watchrun_bin, write_config
from webhook_server import receiver

from watchrun.config.model import BODY_BYTES

WEBHOOKS = Path(__file__).resolve().parents[1] / "contrib" / "webhooks"


def run_once(tmp_path: Path, layer: str, env: dict[str, str], lines: int) -> str:
    base = write_config(tmp_path, {"watchers": [{
        "id": "app", "pattern": "ERROR",
        "command": ["sh", "-c", f"for i in $$(seq {lines}); do echo ERROR $$i; done"]}]})
    p = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(base), "-c",
                        str(WEBHOOKS / layer)], env={**os.environ, **env}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_the_slack_template_pages_with_a_slack_message(tmp_path: Path) -> None:
    with receiver(200) as slack:
        run_once(tmp_path, "slack.yaml", {"SLACK_WEBHOOK_URL": slack.url}, 1)
        (doc,) = slack.bodies()
    assert set(doc) == {"text"}
    assert doc["text"].startswith("*watchrun*: `app`")
    assert "```ERROR 1```" in doc["text"]


class Receiver(NamedTuple):
    url: str
    port: int
    out: Path
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def running_receiver(tmp_path: Path, token: str = "t0ken-9f8e", *extra: str
                     ) -> Iterator[Receiver]:
    """contrib's receiver.py on a free loopback port, its stdout (what it prints of firings)
    left in tmp_path/recv.out once it has stopped."""
    out = tmp_path / "alerts.jsonl"
    proc = subprocess.Popen([sys.executable, str(WEBHOOKS / "receiver.py"), "--port", "0",
                             "--out", str(out), *extra], stdout=subprocess.PIPE,
                            env={**os.environ, "ALERT_WEBHOOK_TOKEN": token})
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(b":", 1)[1])
        yield Receiver(f"http://127.0.0.1:{port}/watchrun", port, out, proc)
    finally:
        proc.terminate()
        rest = b"" if proc.stdout is None or proc.stdout.closed else proc.stdout.read()
        proc.wait(10)
        (tmp_path / "recv.out").write_bytes(rest)


@pytest.fixture
def json_receiver(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with running_receiver(tmp_path) as r:
        yield r.url, r.out


def test_the_json_template_reaches_the_contrib_receiver(tmp_path: Path,
                                                        json_receiver: tuple[str, Path]) -> None:
    url, out = json_receiver
    env = {"ALERT_WEBHOOK_URL": url, "ALERT_WEBHOOK_TOKEN": "t0ken-9f8e"}
    stderr = run_once(tmp_path, "json.yaml", env, 7)
    assert "t0ken-9f8e" not in stderr
    (doc,) = [json.loads(x) for x in out.read_text().splitlines()]  # 7 lines: one threshold
    assert doc["reason"] == "threshold" and 5 <= doc["count"] <= 7  # as the batches came
    assert doc["watcher"]["id"] == "app" and doc["lines"][0]["line"] == "ERROR 1"
    recs = (tmp_path / ".watchrun" / "watchers" / "app.jsonl").read_text()
    assert "t0ken-9f8e" not in recs and '"httpStatus":204' in recs
    with pytest.raises(urllib.error.HTTPError) as bad:  # a wrong token is refused
        urllib.request.urlopen(urllib.request.Request(
            url, data=b"{}", headers={"Authorization": "Bearer nope"}), timeout=10)
    assert bad.value.code == 401


def post(port: int, body: bytes, token: str = "t0ken-9f8e") -> bytes:
    """The status line of the receiver's answer to one POST (b"" when it closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Length: %d\r\n\r\n" % (token.encode(), len(body)) + body)
        return s.makefile("rb").readline().rstrip()


def test_the_receiver_answers_every_body_and_stores_only_firings(tmp_path: Path) -> None:
    """A body that was JSON but no firing (`watcher` a string) was appended to alerts.jsonl and
    then crashed the handler: the sender got no answer (and would retry: stored twice); a lone
    surrogate or deep nesting crashed it too. Now 400 for each, nothing stored."""
    escapes = json.dumps({"source": "watchrun", "watcher": {"id": "\x1b]0;PWNED\x07\x1b[31mRED"
                                                                "\u202e\u2028"},
                          "count": 3, "firing": 1, "lines": []}).encode()
    with running_receiver(tmp_path) as r:
        for body in (json.dumps({"source": "watchrun", "watcher": "x"}).encode(),
                     b'{"source":"watchrun","watcher":{"id":"\\ud800"},"count":1,"firing":1,'
                     b'"lines":[]}',
                     b"[" * 100000 + b"]" * 100000,
                     json.dumps({"source": "watchrun", "watcher": {"id": "a"}, "count": "\x1b[2J",
                                 "firing": 1, "lines": []}).encode()):
            assert post(r.port, body).startswith(b"HTTP/1.0 400 "), body[:60]
        assert not r.out.exists()
        assert post(r.port, escapes) == b"HTTP/1.0 204 No Content"
        assert r.proc.stdout is not None  # (it prints after it answers: read before it stops)
        printed = r.proc.stdout.readline()
        assert post(r.port, escapes, token="nope") == b"HTTP/1.0 401 Unauthorized"
        for length in ("9" * 5000, "\u00b2", ""):  # (an int too long to parse; a latin-1 digit)
            with socket.create_connection(("127.0.0.1", r.port), timeout=20) as s:
                s.sendall(b"POST / HTTP/1.1\r\nAuthorization: Bearer t0ken-9f8e\r\n"
                          b"Content-Length: %s\r\n\r\n" % length.encode("latin-1"))
                assert s.makefile("rb").readline().startswith(b"HTTP/1.0 413 "), length
    assert (tmp_path / "recv.out").read_bytes() == b""  # nothing else printed
    assert printed == b"\\u001b]0;PWNED\\u0007\\u001b[31mRED\\u202e\\u2028: 3 match(es), firing 1\n"
    (stored,) = [json.loads(ln) for ln in r.out.read_text().splitlines()]
    assert stored["watcher"]["id"] == "\x1b]0;PWNED\x07\x1b[31mRED\u202e\u2028"  # kept as sent


def test_the_receiver_stores_a_firing_once_when_its_console_is_gone(tmp_path: Path) -> None:
    """It stored a firing, then printed (its stdout's reader gone: BrokenPipeError) before
    answering: no answer, so watchrun retried, and each retry was stored again (6 copies of one
    firing, recorded `failed`). It answers as soon as the firing is stored."""
    doc = {"source": "watchrun", "watcher": {"id": "app"}, "count": 1, "firing": 1, "lines": []}
    with running_receiver(tmp_path) as r:
        assert r.proc.stdout is not None
        r.proc.stdout.close()  # like `receiver.py | head -1`, or a log collector that stopped
        assert post(r.port, json.dumps(doc).encode()) == b"HTTP/1.0 204 No Content"
        assert post(r.port, json.dumps({**doc, "firing": 2}).encode()) == (
            b"HTTP/1.0 204 No Content")  # and it goes on serving
        assert [json.loads(ln)["firing"] for ln in r.out.read_text().splitlines()] == [1, 2]


def threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("Threads:", 1)[1].split()[0])


def test_the_receiver_drops_silent_clients_and_bounds_its_threads(tmp_path: Path) -> None:
    """Connections that sent nothing (or half a body) held a thread each, forever: 200 of them
    left 201 threads. Now a client silent for --timeout is dropped (a half body answered 408),
    at most 64 are served at once, and the others wait their turn."""
    with running_receiver(tmp_path, "t0ken-9f8e", "--timeout", "2") as r:
        half = socket.create_connection(("127.0.0.1", r.port), timeout=20)
        half.sendall(b"POST / HTTP/1.1\r\nAuthorization: Bearer t0ken-9f8e\r\n"
                     b"Content-Length: 100\r\n\r\n{\"sou")
        silent = [socket.create_connection(("127.0.0.1", r.port), timeout=20)
                  for _ in range(100)]
        seen: list[int] = []
        try:
            for s in silent:  # each is closed by the receiver, in turn
                s.setblocking(False)
            wait_for(lambda: seen.append(threads(r.proc.pid)) or all(
                _closed(s) for s in silent), "every silent client dropped")
            assert half.makefile("rb").readline().startswith(b"HTTP/1.0 408 ")
            assert post(r.port, b"{}").startswith(b"HTTP/1.0 400 ")  # serving again
        finally:
            for s in [*silent, half]:
                s.close()
    # 64 clients' threads and the main one; a thread joined has given the interpreter up but may
    # still be ending in the kernel a moment (its task is in /proc until then): two such at most
    # on a loaded host, where the unbounded server had 201
    assert 60 <= max(seen) <= 67, seen


def test_the_receiver_answers_a_head_that_stops_or_trickles_in_with_408(tmp_path: Path) -> None:
    """A client that sent its request line and part of its head, then nothing, was dropped
    unanswered; one that sends a byte of its head now and then (never silent for --timeout)
    held its thread, one of 64, for good. Both are answered 408: the first after --timeout,
    the second at --deadline."""
    with running_receiver(tmp_path, "t0ken-9f8e", "--timeout", "1", "--deadline", "2") as r:
        stopped = socket.create_connection(("127.0.0.1", r.port), timeout=20)
        stopped.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\n")
        trickle = socket.create_connection(("127.0.0.1", r.port), timeout=20)
        trickle.sendall(b"POST /x HTTP/1.1\r\n")
        done = threading.Event()

        def drip() -> None:  # (the slow client itself: a header byte every 0.3 s)
            with contextlib.suppress(OSError):
                while not done.wait(0.3):
                    trickle.sendall(b"X")

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            started = time.monotonic()
            assert stopped.makefile("rb").readline().startswith(b"HTTP/1.0 408 ")
            assert trickle.makefile("rb").readline().startswith(b"HTTP/1.0 408 ")
            assert time.monotonic() - started < 15
        finally:
            done.set()
            dripper.join()
            for s in (stopped, trickle):
                s.close()


def _closed(s: socket.socket) -> bool:
    """True once the peer has closed `s` (a non-blocking socket)."""
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False


def test_the_json_template_and_receiver_carry_large_firings_and_any_token(
        tmp_path: Path) -> None:
    """receiver.py refused bodies over 1 MiB (413, which watchrun does not retry): 25 matched
    lines of 60 KB, under the default maxLineBytes, were lost (watchrun's bodies now keep to
    maxBodyBytes, 1 MiB by default, and the receiver takes 16 MiB). And a token with a non-ASCII
    character (sent as UTF-8, read as latin-1) was refused 401 every time."""
    token = "pässwörd-tökén"
    with running_receiver(tmp_path, token) as r:
        base = write_config(tmp_path, {"watchers": [{
            "id": "app", "pattern": "ERROR", "gate": {"maxMatches": 100},
            "command": ["python3", "-c", "import sys\nfor i in range(30): sys.stdout.write("
                        "'ERROR %d stack: ' % i + 'frame;\"' * 8000 + '\\n')"]}]})
        p = subprocess.run([watchrun_bin(), "run", "--once", "--quiet", "-c", str(base), "-c",
                            str(WEBHOOKS / "json.yaml")], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "ALERT_WEBHOOK_URL": r.url,
                                                        "ALERT_WEBHOOK_TOKEN": token})
        assert p.returncode == 0, p.stderr
        results = [x for x in read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
                   if x["kind"] == "action-result"]
        assert [x["httpStatus"] for x in results] == [204, 204], results
        stored = [json.loads(ln) for ln in r.out.read_text().splitlines()]
    assert [d["reason"] for d in stored] == ["threshold", "throttle-end"]
    size = len(json.dumps(stored[1], ensure_ascii=False, separators=(",", ":")).encode())
    assert 1 << 19 < size <= 1 << 20  # watchrun's largest body by default (maxBodyBytes)
    assert stored[1]["omitted"] > 0 and stored[1]["shown"] == len(stored[1]["lines"])


def test_the_receiver_takes_the_largest_body_at_watchrun_s_default_limits() -> None:
    """A firing's body is at most its action's maxBodyBytes (README "Size"), 1 MiB unless
    raised; the receiver takes that with room to spare (`--max-body` for a raised one)."""
    spec = importlib.util.spec_from_file_location("receiver", WEBHOOKS / "receiver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert BODY_BYTES <= module.MAX_BODY
    # README named 2 x matchLines x maxLineBytes, 6.25 MiB, as the bound to raise it by
    readme = " ".join((WEBHOOKS.parents[1] / "README.md").read_text().split())
    said = (f"accepts bodies up to {module.MAX_BODY >> 20} MiB, and watchrun's body is at most "
            f"the action's `maxBodyBytes`, {BODY_BYTES >> 20} MiB unless raised, so raise "
            f"`--max-body` only with a `maxBodyBytes` over {module.MAX_BODY >> 20} MiB")
    assert said in readme


def test_the_receiver_s_help_says_what_it_does_in_whole_sentences() -> None:
    """`receiver.py --help` ended mid-sentence ("…: checks the"): it showed the first line of
    its docstring, whose first sentence goes on over the next. It shows the first paragraph."""
    done = subprocess.run([sys.executable, str(WEBHOOKS / "receiver.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    description = " ".join(done.stdout.split("\n\n")[1].split())
    assert description == (
        "A generic receiver for watchrun's JSON webhook body (contrib/webhooks/json.yaml): "
        "checks the bearer token, appends each firing as one line to a JSONL file, answers 204.")


@pytest.mark.parametrize(("layer", "name"), [("slack.yaml", "slack"), ("json.yaml", "alerts")])
def test_each_template_says_it_replaces_the_watcher_s_actions(tmp_path: Path, layer: str,
                                                               name: str) -> None:
    """The templates said layering adds the action; layers replace lists, so the watcher's own
    action was silently gone. The comment now says what happens."""
    base = write_config(tmp_path, {"watchers": [{
        "id": "app", "command": ["true"], "pattern": "ERROR",
        "actions": [{"type": "exec", "name": "mine", "command": ["true"]}]}]})
    env = {**os.environ, "SLACK_WEBHOOK_URL": "http://127.0.0.1:9/x",
           "ALERT_WEBHOOK_URL": "http://127.0.0.1:9/x", "ALERT_WEBHOOK_TOKEN": "t"}
    p = subprocess.run([watchrun_bin(), "config", "--format", "json", "-c", str(base), "-c",
                        str(WEBHOOKS / layer)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert [a["name"] for a in json.loads(p.stdout)["watchers"][0]["actions"]] == [name]
    comments = " ".join(ln.lstrip("# ") for ln in (WEBHOOKS / layer).read_text().splitlines()
                        if ln.startswith("#"))
    assert "REPLACES that watcher's own" in comments and "is added" not in comments


def test_every_webhook_template_is_covered() -> None:
    assert {p.name for p in WEBHOOKS.iterdir()} == {"slack.yaml", "json.yaml", "receiver.py"}
