"""Webhook actions against a real HTTP server on loopback: retries on 5xx, timeouts against a
hanging server, throttles with suppressed counts, thresholds, bounded queues, redaction, and the
Slack body; every firing and result is a record that validates."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from actionrig import DEADLINE_S, FakeClock, Rig, until, watcher, webhook
from webhook_server import Receiver, receiver

from watchrun.actions.payload import SLACK_TEXT_CHARS
from watchrun.actions.webhook import RETRY_STATUSES
from watchrun.config.model import Limits, ThresholdSpec, WatcherSpec


def test_a_5xx_is_retried_until_the_receiver_takes_it(tmp_path: Path) -> None:
    with receiver(503, 502, 200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url, retries=3))) as rig:
                rig.deliver("ERROR disk full", "ERROR disk still full")
                (result,) = await rig.wait("action-result")
                assert (result["status"], result["attempts"], result["httpStatus"]) == (
                    "ok", 3, 200)
                (fired,) = rig.records("action-fired")
                assert fired["firing"] == result["firing"] == 1
                assert (fired["count"], fired["shown"], fired["reason"]) == (2, 2, "match")
                assert (fired["firstCursor"], fired["lastCursor"]) == (
                    "app:0000000000000001", "app:0000000000000002")
                assert fired["target"] == rx.url.split("/hooks")[0]  # never the secret path
                assert "s3cr3tpath" not in rig.path.read_text()
                assert "HTTP 503" in rig.log.getvalue()  # each retry is logged
        asyncio.run(body())
        assert rx.count() == 3
        doc = rx.bodies()[-1]
        assert [item["line"] for item in doc["lines"]] == ["ERROR disk full",
                                                           "ERROR disk still full"]
        assert doc["watcher"] == {"id": "app", "label": "the app"}
        assert doc["cursors"] == {"first": "app:0000000000000001", "last": "app:0000000000000002"}
        assert (doc["count"], doc["firing"], doc["reason"]) == (2, 1, "match")
        assert rx.requests[0].headers["Content-Type"] == "application/json"


def test_retries_stop_at_the_limit_and_a_4xx_is_not_retried(tmp_path: Path) -> None:
    with receiver(500) as failing, receiver(404) as missing:
        async def body() -> None:
            spec = watcher(webhook(failing.url, name="a", retries=2),
                           webhook(missing.url, name="b", retries=2))
            async with Rig(tmp_path, spec) as rig:
                rig.deliver("ERROR x")
                await rig.wait("action-result", 2)
                by = {r["action"]: r for r in rig.records("action-result")}
                assert (by["a"]["status"], by["a"]["attempts"], by["a"]["httpStatus"]) == (
                    "failed", 3, 500)
                assert by["a"]["error"]["code"] == "http-500"
                assert "error 500: try later" in by["a"]["error"]["message"]
                assert (by["b"]["status"], by["b"]["attempts"]) == ("failed", 1)
        asyncio.run(body())
        assert (failing.count(), missing.count()) == (3, 1)


RETRIED = sorted(RETRY_STATUSES)


@pytest.mark.parametrize("status", RETRIED)
def test_a_retry_status_below_500_is_retried(tmp_path: Path, status: int) -> None:
    with receiver(status, 200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url, retries=1))) as rig:
                rig.deliver("ERROR x")
                (result,) = await rig.wait("action-result")
                assert (result["status"], result["attempts"]) == ("ok", 2)
        asyncio.run(body())
        assert rx.count() == 2


def test_the_config_schema_and_the_docs_name_the_statuses_retried() -> None:
    """The config schema's `retries` description (what an editor shows) said "5xx, 408, 429"
    while 425 is retried too: it, docs/config.md and README name every 5xx and RETRY_STATUSES."""
    root = Path(__file__).resolve().parents[1]
    schema = json.loads((root / "runner" / "watchrun" / "schemas" / "watch.schema.json")
                        .read_text())
    row = next(line for line in (root / "docs" / "config.md").read_text().splitlines()
               if line.startswith("| `retries` |"))
    readme = re.search(r"A 5xx,.*?is retried `retries` times", (root / "README.md").read_text(),
                       flags=re.S)
    assert readme is not None
    texts = [schema["$defs"]["action"]["properties"]["retries"]["description"], row, readme[0]]
    for text in texts:
        assert "5xx" in text, text
        assert sorted(int(n) for n in re.findall(r"\b4\d\d\b", text)) == RETRIED, text


def test_a_hanging_receiver_times_out_and_delays_nothing_else(tmp_path: Path) -> None:
    with receiver("hang") as slow, receiver(200) as fast:
        async def body() -> None:
            spec = watcher(webhook(slow.url, name="slow", timeout_ms=400, retries=1),
                           webhook(fast.url, name="fast"))
            async with Rig(tmp_path, spec) as rig:
                took = rig.deliver("ERROR one")
                assert took < 0.2  # handing matches over never waits for a receiver (400 ms)
                (fast_result,) = await rig.wait("action-result", action="fast")
                assert fast_result["status"] == "ok"
                (result,) = await rig.wait("action-result", action="slow")
                assert fast_result["seq"] < result["seq"]
                assert (result["status"], result["attempts"]) == ("timeout", 2)
                assert result["error"]["code"] == "timeout"
                assert result["durationMs"] >= 800
                assert "127.0.0.1" in result["error"]["message"]
        asyncio.run(body())
        assert slow.count() == 2


def test_a_connection_refused_is_retried_then_failed(tmp_path: Path) -> None:
    with receiver(200) as rx:
        url = rx.url
    async def body() -> None:  # the server is gone: nothing listens on its port now
        async with Rig(tmp_path, watcher(webhook(url, retries=1))) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")
            assert (result["status"], result["attempts"]) == ("failed", 2)
            assert result["error"]["code"] == "connect"
            host_port = url.split("/")[2]  # (said in words, not asyncio's "Connect call failed
            assert result["error"]["message"] == f"{host_port}: Connection refused"  # (…)")
    asyncio.run(body())


@contextlib.asynccontextmanager
async def paged_once(tmp_path: Path, rx: Receiver, clock: FakeClock) -> AsyncIterator[Rig]:
    """A rig whose webhook (to `rx`) is throttled to one firing a minute, 10 s after it paged
    for a first match."""
    async with Rig(tmp_path, watcher(webhook(rx.url, throttle_ms=60_000)), clock=clock) as rig:
        rig.deliver("ERROR 1")
        await rig.wait("action-result")
        clock.advance(10)
        yield rig


def test_a_match_at_the_very_end_of_a_window_is_held_for_0_ms(tmp_path: Path) -> None:
    """records.md: `windowEndsInMs` is 0 for a match held at the very end of the window, and
    what it held goes out as the `throttle-end` firing as the window ends."""
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with paged_once(tmp_path, rx, clock) as rig:
                clock.advance(49.9999)  # 0.1 ms of the window left
                rig.deliver("ERROR 2")
                (held,) = await rig.wait("action-suppressed")
                assert (held["windowEndsInMs"], held["suppressed"]) == (0, 1)
                clock.advance(0.0001)
                rig.hub.poke()
                await rig.wait("action-result", 2)
                assert [f["reason"] for f in rig.records("action-fired")] == [
                    "match", "throttle-end"]
                assert rx.count() == 2
        asyncio.run(body())


def test_throttle_sends_once_per_window_and_then_what_it_suppressed(tmp_path: Path) -> None:
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with paged_once(tmp_path, rx, clock) as rig:
                rig.deliver("ERROR 2", "ERROR 3")
                clock.advance(10)
                rig.deliver("ERROR 4")
                sup = await rig.wait("action-suppressed", 2)
                assert [(s["count"], s["suppressed"]) for s in sup] == [(2, 1), (1, 2)]
                assert [s["windowEndsInMs"] for s in sup] == [50_000, 40_000]
                assert rx.count() == 1
                clock.advance(40)  # the window ends: what it held goes out as one firing
                rig.hub.poke()
                await rig.wait("action-result", 2)
                fired = rig.records("action-fired")
                assert [f["reason"] for f in fired] == ["match", "throttle-end"]
                assert (fired[1]["suppressed"], fired[1]["suppressedMatches"],
                        fired[1]["count"]) == (2, 3, 3)
                clock.advance(30)  # inside the next window: suppressed again
                rig.deliver("ERROR 5")
                await rig.wait("action-suppressed", 3)
                assert rig.hub.counts()["app"]["hook"] == {"fired": 2, "ok": 2,
                                                          "suppressed": 3}
        asyncio.run(body())
        docs = rx.bodies()
        assert len(docs) == 2
        assert docs[1]["suppressed"] == {"firings": 2, "matches": 3}
        assert [x["line"] for x in docs[1]["lines"]] == ["ERROR 2", "ERROR 3", "ERROR 4"]
        assert docs[1]["reason"] == "throttle-end"


def test_threshold_fires_when_n_matches_fall_within_the_window(tmp_path: Path) -> None:
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, threshold=ThresholdSpec(3, 10_000)))
            async with Rig(tmp_path, spec, clock=clock) as rig:
                rig.deliver("ERROR a")
                clock.advance(5)
                rig.deliver("ERROR b")
                clock.advance(7)  # `a` has left the window: 2 of 3
                rig.deliver("ERROR c")
                await asyncio.sleep(0)
                assert rig.records("action-fired") == []
                clock.advance(1)
                rig.deliver("ERROR d")
                (fired,) = await rig.wait("action-fired")
                assert (fired["reason"], fired["count"]) == ("threshold", 3)
                await rig.wait("action-result")
                rig.deliver("ERROR e")  # counting starts again after a firing
                await asyncio.sleep(0.05)
                assert len(rig.records("action-fired")) == 1
        asyncio.run(body())
        (doc,) = rx.bodies()
        assert [x["line"] for x in doc["lines"]] == ["ERROR b", "ERROR c", "ERROR d"]
        assert doc["reason"] == "threshold"


def queue_of_one(url: str) -> WatcherSpec:
    return watcher(webhook(url, timeout_ms=60_000, retries=0, queue=1))


async def first_request_hangs(rig: Rig, rx: Receiver) -> None:
    """The first firing goes out and its request hangs: from here the queue fills."""
    rig.deliver("ERROR 1")
    await until(lambda: rx.count() == 1, "the first request")


def test_a_full_queue_drops_with_a_count_and_the_next_firing_reports_it(tmp_path: Path) -> None:
    with receiver("hang") as rx:
        async def body() -> None:
            async with Rig(tmp_path, queue_of_one(rx.url)) as rig:
                await first_request_hangs(rig, rx)
                for i in range(2, 6):
                    rig.deliver(f"ERROR {i}")  # 2 waits in the queue, 3 4 5 are dropped
                (dropped,) = await rig.wait("action-dropped")  # one record, not three
                assert (dropped["count"], dropped["matches"], dropped["reason"]) == (
                    1, 1, "queue-full")
                # the other two are recorded when the second is up, with no firing to bring
                # them (a record's `ts` is when it was written, so it cannot time the rule)
                (later,) = await rig.wait("action-dropped", count=2)
                assert (later["matches"], later["reason"]) == (2, "queue-full")
                rx.release.set()  # the hanging request ends (no response): the queue moves
                await rig.wait("action-fired", 2)
                second = rig.records("action-fired")[1]
                assert (second["dropped"], second["count"]) == (3, 1)
                assert rig.hub.counts()["app"]["hook"]["dropped"] == 3
        asyncio.run(body())


def test_a_firing_does_not_write_a_drop_record_before_its_second_is_up(tmp_path: Path) -> None:
    """Each firing that went out wrote the drops pending before it, whatever the time: five
    `action-dropped` records in 1.3 s while a queue overflowed. (A fake clock: only `advance`
    moves the second on.)"""
    clock = FakeClock()
    with receiver("hang", 200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, queue_of_one(rx.url), clock=clock) as rig:
                await first_request_hangs(rig, rx)
                for i in (2, 3, 4):
                    rig.deliver(f"ERROR {i}")  # 2 waits; 3 is dropped (recorded), 4 is held
                await rig.wait("action-dropped")
                rx.release.set()  # the first request ends: firing 2 goes out
                await rig.wait("action-fired", 2)
                assert len(rig.records("action-dropped")) == 1
                clock.advance(1.0)
                rig.hub.poke()
                (_, later) = await rig.wait("action-dropped", 2)
                assert (later["count"], later["reason"]) == (1, "queue-full")
        asyncio.run(body())


def test_queue_full_drops_left_at_a_stop_keep_their_reason(tmp_path: Path) -> None:
    """A queue-full drop not recorded yet (within the second of the last record) was written at
    the stop as `runner-stopped`, merged with what the stop dropped."""
    with receiver("hang") as rx:
        async def body() -> None:
            async with Rig(tmp_path, queue_of_one(rx.url)) as rig:
                await first_request_hangs(rig, rx)
                rig.deliver("ERROR 2")  # waits in the queue
                rig.deliver("ERROR 3")  # dropped: recorded at once
                rig.deliver("ERROR 4")  # dropped: its record waits for the second to end
                await rig.wait("action-dropped")
            drops = [(d["count"], d["reason"]) for d in rig.records("action-dropped")]
            assert drops == [(1, "queue-full"), (1, "queue-full"), (1, "runner-stopped")]
        asyncio.run(body())


async def one_http_server(*answers: bytes) -> tuple[asyncio.Server, str, list[float]]:
    """A raw HTTP server on loopback answering each connection with the next of `answers` (the
    last repeats); the times of the requests."""
    times: list[float] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        times.append(time.monotonic())
        writer.write(answers[min(len(times), len(answers)) - 1])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook", times


def test_a_reason_phrase_is_cleaned_and_redacted_in_the_record_and_the_log() -> None:
    """The status line's reason phrase went into the record and the retry's log line as the
    server sent it: secrets and escape sequences kept."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    bad = (b"HTTP/1.1 500 password=hunter2hunter2 AKIAIOSFODNN7EXAMPLE \x1b[31mRED\x1b[0m\r\n"
           b"Content-Length: 0\r\n\r\n")

    async def body() -> tuple[object, list[str]]:
        server, url, _ = await one_http_server(bad)
        whys: list[str] = []
        async with server:
            result = await send(webhook(url, retries=1), b"{}", redactor(), backoff_s=0.01,
                                on_retry=lambda _a, _d, why: whys.append(why))
        return result, whys

    result, whys = asyncio.run(body())
    assert result.error == {"code": "http-500", "message":  # type: ignore[attr-defined]
                            "HTTP 500 password=[REDACTED:password] "
                            "[REDACTED:aws-access-key-id] RED"}
    assert whys == ["HTTP 500 password=[REDACTED:password] [REDACTED:aws-access-key-id] RED"]


def test_retry_after_as_an_http_date_is_honoured() -> None:
    """Only `Retry-After: <seconds>` was read; the HTTP-date form (RFC 9110) was ignored and the
    retry came after the short backoff."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> tuple[str, list[float]]:
        when = email.utils.formatdate(time.time() + 3, usegmt=True).encode()
        server, url, _ = await one_http_server(
            b"HTTP/1.1 503 Busy\r\nRetry-After: " + when + b"\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        delays: list[float] = []

        async def no_wait(s: float) -> None:
            delays.append(s)

        async with server:
            result = await send(webhook(url, retries=1), b"{}", redactor(), backoff_s=0.01,
                                sleep=no_wait)
        return result.status, delays

    status, delays = asyncio.run(body())
    assert status == "ok"
    assert len(delays) == 1 and 1.5 < delays[0] <= 3.0


def test_shutdown_cancels_a_running_firing_and_records_it(tmp_path: Path) -> None:
    with receiver("hang") as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, timeout_ms=60_000, throttle_ms=60_000))
            rig = Rig(tmp_path, spec)
            async with rig:
                rig.deliver("ERROR 1")
                await until(lambda: rx.count() == 1, "the request")
                rig.deliver("ERROR 2")  # held by the throttle: dropped at shutdown
            (result,) = rig.records("action-result")
            assert result["status"] == "cancelled"
            (dropped,) = rig.records("action-dropped")
            assert (dropped["reason"], dropped["count"]) == ("runner-stopped", 1)
            assert rig.task.done()  # the hub's TaskGroup ended: no firing task is left behind
            assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
        asyncio.run(body())


def test_headers_go_out_but_never_into_records_or_logs(tmp_path: Path) -> None:
    token = "Bearer tok-6f1d2a9c4b"
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, headers={"Authorization": token, "X-Team": "ops"}))
            async with Rig(tmp_path, spec) as rig:
                rig.deliver("ERROR x")
                await rig.wait("action-result")
                assert token not in rig.path.read_text()
                assert "tok-6f1d2a9c4b" not in rig.log.getvalue()
                assert "s3cr3tpath" not in rig.log.getvalue()
        asyncio.run(body())
        assert rx.requests[0].headers["Authorization"] == token
        assert rx.requests[0].headers["X-Team"] == "ops"


def test_secrets_in_matched_lines_are_redacted_in_what_leaves(tmp_path: Path) -> None:
    aws = "AKIAIOSFODNN7EXAMPLE"
    line = f"ERROR login failed password=hunter2hunter2 key={aws}"
    with receiver(200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url, format="slack"),
                                             webhook(rx.url, name="json"))) as rig:
                rig.deliver(line)
                await rig.wait("action-result", 2)
                fired = rig.records("action-fired")
                assert all(f["redacted"] == {"password": 1, "aws-access-key-id": 1} for f in fired)
        asyncio.run(body())
        for request in rx.requests:
            assert b"hunter2" not in request.body and aws.encode() not in request.body
            assert b"[REDACTED:password]" in request.body
            assert b"[REDACTED:aws-access-key-id]" in request.body


def test_a_slack_message_clips_a_long_line_and_its_record_counts_what_it_shows(
        tmp_path: Path) -> None:
    """A JSON log line of 4 000 characters: the Slack message held none of it ("matched 1 line
    … and 1 more") while `action-fired` said `shown: 1`. It is clipped into the message, and
    the record's `shown` is what the message shows (the JSON body would show both lines)."""
    long = '{"level":"ERROR","msg":"' + "x" * 4_000 + '"}'
    with receiver(200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url, format="slack"))) as rig:
                rig.deliver(long, "ERROR the next one")
                await rig.wait("action-result")
                (fired,) = rig.records("action-fired")
                assert (fired["count"], fired["shown"]) == (2, 1)
        asyncio.run(body())
    (doc,) = rx.bodies()
    text = doc["text"]
    assert len(text) <= SLACK_TEXT_CHARS and '```{"level":"ERROR","msg":"xxx' in text
    assert "x…```\n… and 1 more (see the watcher's JSONL from app:0000000000000001)" in text


def test_the_slack_body_escapes_mentions_and_stays_short(tmp_path: Path) -> None:
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, format="slack"))
            async with Rig(tmp_path, spec) as rig:
                rig.deliver("ERROR <!channel> ping & ```break out``` <https://evil|click>",
                            *[f"ERROR {i} " + "x" * 200 for i in range(40)])
                await rig.wait("action-result")
        asyncio.run(body())
        (doc,) = rx.bodies()
        assert set(doc) == {"text"}
        text = doc["text"]
        assert "<!channel>" not in text and "&lt;!channel&gt;" in text
        assert "<https://evil" not in text and "&amp;" in text
        assert text.count("```") == 2  # the log line cannot close the code block
        assert len(text) <= SLACK_TEXT_CHARS
        assert text.startswith("*watchrun*: `app` (the app) matched 41 lines")
        assert "more (see the watcher's JSONL from app:0000000000000001)" in text


def test_a_body_keeps_to_max_body_bytes_and_says_what_it_left_out(tmp_path: Path) -> None:
    """With matchLines raised to 2000, 300 matched lines of 1 KiB went out as one 300 KiB body,
    past a receiver's limit; lines of 16 MiB would have made a body of gigabytes."""
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, max_body_bytes=16 * 1024))
            async with Rig(tmp_path, spec, limits=Limits(match_lines=2000)) as rig:
                rig.deliver(*[f"ERROR {i} " + "x" * 1024 for i in range(300)])
                await rig.wait("action-result")
                (fired,) = rig.records("action-fired")
                assert (fired["count"], fired["shown"]) == (300, rx.bodies()[0]["shown"])
        asyncio.run(body())
        (request,) = rx.requests
        assert len(request.body) <= 16 * 1024
        doc = request.json()
        assert 10 <= doc["shown"] == len(doc["lines"]) < 16
        assert doc["omitted"] == 300 - doc["shown"]
        assert doc["lines"][0]["line"].startswith("ERROR 0 x")


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    with receiver(302) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url))) as rig:
                rig.deliver("ERROR x")
                (result,) = await rig.wait("action-result")
                assert (result["status"], result["attempts"], result["httpStatus"]) == (
                    "failed", 1, 302)
                assert "redirects are not followed" in result["error"]["message"]
        asyncio.run(body())
        assert rx.count() == 1


def test_a_servers_explanation_is_cleaned_and_redacted() -> None:
    from watchrun.actions.http import Response
    from watchrun.actions.webhook import _explain
    from watchrun.match.redact import redactor

    text = _explain(Response(500, "Oops", b"\x1b[31mbad\x1b[0m request password=hunter2xx\n"),
                    redactor())
    assert text == "HTTP 500 Oops: bad request password=[REDACTED:password]"


def test_a_bug_in_one_firing_is_logged_and_the_others_go_on(tmp_path: Path) -> None:
    with receiver(200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url))) as rig:
                real = rig.hub.execute
                calls = 0

                async def flaky(*args: object) -> object:
                    nonlocal calls
                    calls += 1
                    if calls == 1:
                        raise ZeroDivisionError("a bug")
                    return await real(*args)  # type: ignore[arg-type]

                rig.hub.execute = flaky  # type: ignore[method-assign,assignment]
                rig.deliver("ERROR 1")
                (first,) = await rig.wait("action-result")
                assert (first["status"], first["error"]["code"]) == ("failed", "internal")
                rig.deliver("ERROR 2")
                await rig.wait("action-result", status="ok")
                assert not rig.task.done()  # the hub's TaskGroup still runs
        asyncio.run(body())


async def held_open_server(answer: bytes) -> tuple[asyncio.Server, str, list[float]]:
    """A raw HTTP server on loopback that writes `answer` and then holds the connection open
    until the client closes it (the body it announced, or implied, never ends)."""
    times: list[float] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        times.append(time.monotonic())
        writer.write(answer)
        await writer.drain()
        await reader.read()  # (until the client hangs up)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook", times


def test_a_2xx_whose_body_never_ends_is_a_success_sent_once() -> None:
    """A receiver that answered `200 OK` and kept the connection open without a body length
    (keep-alive despite `Connection: close`) made the accepted POST a timeout: the body was
    read until the deadline, and the POST was sent again at each retry (three pages)."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> tuple[object, int, float]:
        server, url, times = await held_open_server(b"HTTP/1.1 200 OK\r\n\r\nthanks, and")
        async with server:
            start = time.monotonic()
            result = await send(webhook(url, timeout_ms=500, retries=2), b"{}", redactor(),
                                backoff_s=0.01)
            return result, len(times), time.monotonic() - start

    result, requests, took = asyncio.run(body())
    assert (result.status, result.attempts, result.http_status) == (  # type: ignore[attr-defined]
        "ok", 1, 200)
    assert requests == 1
    assert took < 0.4  # the status is the answer: nothing waits for the deadline


def test_a_2xx_whose_headers_never_end_is_a_success_sent_once() -> None:
    """The same with a head that stops half-way (`200 OK`, then a header line that never
    ends): the headers were read until the deadline, a timeout, sent again at each retry."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> tuple[object, int]:
        server, url, times = await held_open_server(b"HTTP/1.1 200 OK\r\nX-Trace: 4f")
        async with server:
            result = await send(webhook(url, timeout_ms=300, retries=2), b"{}", redactor(),
                                backoff_s=0.01)
            return result, len(times)

    result, requests = asyncio.run(body())
    assert (result.status, result.attempts) == ("ok", 1)  # type: ignore[attr-defined]
    assert requests == 1


def test_an_error_whose_body_stalls_keeps_its_status() -> None:
    """A 503 whose announced body never came was recorded as a `timeout` with no status: the
    server's answer was lost. Now the status stands, with what of the body arrived in time."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> object:
        server, url, _ = await held_open_server(
            b"HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\ndown for maint")
        async with server:
            return await send(webhook(url, timeout_ms=300, retries=0), b"{}", redactor())

    result = asyncio.run(body())
    assert (result.status, result.http_status) == ("failed", 503)  # type: ignore[attr-defined]
    assert result.error == {"code": "http-503",  # type: ignore[attr-defined]
                            "message": "HTTP 503 Busy: down for maint"}


def test_a_receiver_echoing_the_request_leaks_no_secret_of_the_url_or_headers(
        tmp_path: Path) -> None:
    """The URL's path and query and the header values are secrets that records and logs must
    never show; a receiver's error text went into both as it came, and receivers echo the
    request (`Cannot POST /hooks/…`, `bad key …`): the secrets were written. Three echoes: the
    request line as the reason phrase and the head as the body of a 500 (retried: the log
    line), the header's value in a 401 body, and the head as the reply (not HTTP at all)."""
    key = "k3y-4f9e1c2b7a"
    user, password = "hookuser", "pa55w0rd-8c1d"

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n")[0]
        if b"/as-reason/" in line:
            answer = b"HTTP/1.1 500 " + line + b"\r\nContent-Length: %d\r\n\r\n" % len(head)
            writer.write(answer + head)
        elif b"/key/" in line:
            said = b"unknown key " + head.split(b"X-Api-Key: ")[1].split(b"\r\n")[0]
            writer.write(b"HTTP/1.1 401 No\r\nContent-Length: %d\r\n\r\n" % len(said) + said)
        else:
            writer.write(head)
        await writer.drain()
        writer.close()

    async def body() -> None:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        base = f"http://{user}:{password}@127.0.0.1:{server.sockets[0].getsockname()[1]}"
        spec = watcher(
            webhook(f"{base}/as-reason/T0001/B0002/s3cr3tpath?token=q5ecr3t0ken", name="a",
                    retries=1),
            webhook(f"{base}/key/", name="b", retries=0, headers={"X-Api-Key": key}),
            webhook(f"{base}/raw/T0001/B0002/s3cr3tpath", name="c", retries=0))
        async with server, Rig(tmp_path, spec) as rig:
            rig.deliver("ERROR x")
            await rig.wait("action-result", 3)
            by = {r["action"]: r for r in rig.records("action-result")}
            assert (by["a"]["httpStatus"], by["b"]["httpStatus"]) == (500, 401)
            assert by["c"]["error"]["code"] == "protocol"
            assert "[REDACTED:webhook-secret]" in by["b"]["error"]["message"]
            text, log = rig.path.read_text(), rig.log.getvalue()
        assert "attempt 2" in log  # the retry's line, with the reason phrase, was logged
        for secret in ("s3cr3tpath", "q5ecr3t0ken", key, password, "B0002"):
            assert secret not in text, secret
            assert secret not in log, secret

    asyncio.run(body())


def test_a_dns_lookup_that_never_returns_holds_none_of_the_loops_worker_threads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio looks a host name up with `getaddrinfo` in the loop's default executor, the
    runner's worker threads. A resolver that never answered kept a thread per attempt after the
    attempt timed out, so one firing with its retries took them all: the runner's checkpoint
    saves, /proc scans (an exec's stop) and snapshots waited behind it, and the stop said
    `stuck-calls` (exit 3). Lookups now run in threads of their own, a bounded number."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor
    from watchrun.runtime.workers import Workers, run_with_workers

    answer = threading.Event()
    real = socket.getaddrinfo

    def resolver(host: object, *args: object, **kw: object) -> object:
        if host == "hangs.example":  # a resolver that does not answer (until the test ends)
            answer.wait(DEADLINE_S)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    spec = webhook("http://hangs.example:9/hook", timeout_ms=200, retries=3)

    async def body() -> tuple[str, object, str, object]:
        server, url, _ = await one_http_server(b"HTTP/1.1 204 No Content\r\n\r\n")
        named = webhook(url.replace("127.0.0.1", "localhost"))
        async with server:  # a name that resolves is looked up (and connected) as before
            before = await send(named, b"{}", redactor())
            result = await send(spec, b"{}", redactor(), backoff_s=0.01)
            pool = await asyncio.wait_for(asyncio.to_thread(lambda: "answered"), 2.0)
            capped = await send(spec, b"{}", redactor(), backoff_s=0.01)
            other = await send(named, b"{}", redactor())  # another host: looked up still
        return before.status, result, pool, (other.status, capped)

    workers = Workers(max_workers=2, grace_s=0.5)
    try:
        before, result, pool, (other, capped) = run_with_workers(body(), workers)
    finally:
        answer.set()
    assert before == other == "ok"
    assert (result.status, result.attempts) == ("timeout", 4)  # type: ignore[attr-defined]
    assert result.error == {"code": "timeout",  # type: ignore[attr-defined]
                            "message": "hangs.example:9: the DNS lookup did not answer "
                                       "within 0.2 s"}
    assert pool == "answered"
    assert workers.stuck == []
    # LOOKUPS_MAX (4) lookups of the host still hang: no fifth thread, it fails at once
    assert (capped.status, capped.error["code"]) == ("failed", "connect")  # type: ignore[attr-defined]
    assert "4 DNS lookups of it still have no answer" in capped.error["message"]  # type: ignore[attr-defined]


def test_a_status_outside_100_to_599_is_a_protocol_error(tmp_path: Path) -> None:
    """`HTTP/1.1 999 Weird` became `httpStatus: 999` and `http-999`, a record its own schema
    refuses (100 to 599), retried as a 5xx."""
    async def body() -> None:
        server, url, _ = await one_http_server(b"HTTP/1.1 999 Weird\r\n\r\n")
        async with server, Rig(tmp_path, watcher(webhook(url, retries=0))) as rig:
            rig.deliver("ERROR x")
            (result,) = await rig.wait("action-result")  # (rig.records validates each one)
            assert (result["status"], result["error"]["code"]) == ("failed", "protocol")
            assert "httpStatus" not in result
            assert "not an HTTP/1.x status line: HTTP/1.1 999 Weird" in result["error"]["message"]
    asyncio.run(body())


def test_a_reload_does_not_reopen_a_throttle_window(tmp_path: Path) -> None:
    """A reload closes the actions of the watchers it changes (every watcher's when `limits`,
    `output` or `redact` change), and their throttle windows went with them: the next match
    paged again at once, twice inside one `throttle` window. An unchanged action keeps its
    window's end."""
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with paged_once(tmp_path, rx, clock) as rig:
                old = rig.hub.config
                await rig.hub.reload(msgspec.structs.replace(  # (a limit: every watcher)
                    old, limits=msgspec.structs.replace(old.limits, max_line_bytes=4096)))
                rig.deliver("ERROR 2")
                (held,) = await rig.wait("action-suppressed")
                assert held["windowEndsInMs"] == 50_000
                clock.advance(50)  # the window ends: what it held goes out
                rig.hub.poke()
                await rig.wait("action-result", 2)
                assert [f["reason"] for f in rig.records("action-fired")] == [
                    "match", "throttle-end"]
        asyncio.run(body())
        assert rx.count() == 2


def test_what_a_throttle_window_held_goes_out_after_a_reload_that_restarts_the_watcher(
        tmp_path: Path) -> None:
    """A reload that restarted the watcher (a limit changed; its action did not) dropped the
    matches its throttle window held: the page that would have said them never went out
    (found by an actions explorer). They are carried over and go out when the window ends."""
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with paged_once(tmp_path, rx, clock) as rig:
                rig.deliver("ERROR 2", "ERROR 3")
                await rig.wait("action-suppressed")
                old = rig.hub.config
                await rig.hub.reload(msgspec.structs.replace(
                    old, limits=msgspec.structs.replace(old.limits, max_line_bytes=4096)))
                rig.hub.attach(rig.spec, rig.stream)  # (the runner: when it starts again)
                clock.advance(50)  # the window ends
                rig.hub.poke()
                await rig.wait("action-result", 2)
                fired = rig.records("action-fired")
                assert [(f["reason"], f["count"]) for f in fired] == [
                    ("match", 1), ("throttle-end", 2)]
                assert rig.records("action-dropped") == []
        asyncio.run(body())
        assert [[x["line"] for x in doc["lines"]] for doc in rx.bodies()] == [
            ["ERROR 1"], ["ERROR 2", "ERROR 3"]]


def test_a_held_firing_whose_watcher_never_starts_again_is_counted_dropped(
        tmp_path: Path) -> None:
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with paged_once(tmp_path, rx, clock) as rig:
                rig.deliver("ERROR 2")
                await rig.wait("action-suppressed")
                old = rig.hub.config
                await rig.hub.reload(msgspec.structs.replace(
                    old, limits=msgspec.structs.replace(old.limits, max_line_bytes=4096)))
                await rig.hub.shutdown()  # (no attach: it failed to start again, say)
                assert rig.hub.counts()["app"]["hook"]["dropped"] == 1
                assert ("action hook: 1 firing (1 matches) held by its throttle dropped: its "
                        "watcher did not start again after the reload") in rig.log.getvalue()
        asyncio.run(body())


def test_a_host_name_that_cannot_be_looked_up_is_a_connect_error() -> None:
    """A label longer than 63 characters cannot be encoded for DNS: the codec's error was
    reported as `protocol`, "bad response", about a server never reached."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    url = f"http://{'a' * 64}.example/hook"
    result = asyncio.run(send(webhook(url, retries=0), b"{}", redactor()))
    assert (result.status, result.error["code"]) == ("failed", "connect")  # type: ignore[index]
    assert "cannot be looked up" in result.error["message"]  # type: ignore[index]
    assert "bad response" not in result.error["message"]  # type: ignore[index]


def test_an_answer_before_the_body_was_read_is_the_answer() -> None:
    """A receiver that refuses a body too large answers `413` at once and closes without
    reading it: the rest of the body met a reset connection, the firing said `protocol`,
    "Connection reset by peer", and sent the 4 MB again at each retry. The answer is read while
    the body goes out, so the 413 stands (a 4xx: not retried)."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> tuple[object, int]:
        server, url, times = await one_http_server(
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\n\r\ntoo large")
        async with server:
            result = await send(webhook(url, retries=2), b"x" * 4_000_000, redactor(),
                                backoff_s=0.01)
        return result, len(times)

    result, requests = asyncio.run(body())
    assert (result.status, result.http_status) == ("failed", 413)  # type: ignore[attr-defined]
    assert result.error["message"] == "HTTP 413 Payload Too Large: too large"  # type: ignore[attr-defined]
    assert requests == 1


def test_a_reload_keeps_the_matches_a_threshold_has_counted(tmp_path: Path) -> None:
    """`2 in 1m` with one match before a reload and one after never fired: closing the
    watcher's actions threw the counted matches away, and nothing said so."""
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, threshold=ThresholdSpec(2, 60_000)))
            async with Rig(tmp_path, spec, clock=clock) as rig:
                rig.deliver("ERROR 1")
                clock.advance(10)
                old = rig.hub.config
                await rig.hub.reload(msgspec.structs.replace(
                    old, limits=msgspec.structs.replace(old.limits, max_line_bytes=4096)))
                rig.deliver("ERROR 2")
                (fired,) = await rig.wait("action-fired")
                assert (fired["reason"], fired["count"]) == ("threshold", 2)
                await rig.wait("action-result")
        asyncio.run(body())
        (doc,) = rx.bodies()
        assert [x["line"] for x in doc["lines"]] == ["ERROR 1", "ERROR 2"]


OK_204 = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize(("first", "attempts", "status"), [
    (b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", 2, "ok"),
    (b"HTTP/1.1 425 Too Early\r\nContent-Length: 0\r\n\r\n", 2, "ok"),
    (b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n", 2, "ok"),
    (b"HTTP/1.1 504 Gateway Timeout\r\nContent-Length: 0\r\n\r\n", 2, "ok"),
    (b"", 2, "ok"),  # closed without an answer
    (b"SSH-2.0-OpenSSH_9.2\r\n", 2, "ok"),  # an answer that is not HTTP
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", 1, "failed"),
    (b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", 1, "failed"),
    (b"HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n", 1, "failed"),
])
def test_which_answers_are_retried(first: bytes, attempts: int, status: str) -> None:
    """README and docs/config.md: a 5xx, 408, 425, 429, a connection closed without an
    answer or an answer that is not HTTP is retried; another 4xx is not (it will not heal)."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    async def body() -> tuple[object, int]:
        server, url, times = await one_http_server(first, OK_204)
        async with server:
            result = await send(webhook(url, retries=1), b"{}", redactor(), backoff_s=0.01,
                                sleep=lambda s: asyncio.sleep(0))
        return result, len(times)

    result, requests = asyncio.run(body())
    assert (result.status, result.attempts, requests) == (  # type: ignore[attr-defined]
        status, attempts, attempts)


def test_a_tls_failure_is_not_retried() -> None:
    """An https URL whose server does not speak TLS (it answers the handshake in plain HTTP)
    fails its handshake: that will not heal by itself, so it is one attempt, `tls`, whatever
    `retries` says."""
    from watchrun.actions.webhook import send
    from watchrun.match.redact import redactor

    connections: list[int] = []

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def body() -> object:
        server = await asyncio.start_server(plain, "127.0.0.1", 0)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
        async with server:
            return await send(webhook(url, retries=3), b"{}", redactor(), backoff_s=0.01,
                              sleep=lambda s: asyncio.sleep(0))

    result = asyncio.run(body())
    assert (result.status, result.attempts) == ("failed", 1)  # type: ignore[attr-defined]
    assert result.error["code"] == "tls"  # type: ignore[attr-defined]
    assert len(connections) == 1


@pytest.mark.parametrize(("answer", "expected"), [
    # 0.5 s doubling, ±10 %, to 30 s: the seventh wait (32 s ±10 %) is capped
    (b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", [0.5, 1, 2, 4, 8, 16, 32]),
    # a server's Retry-After is waited for, up to the same 30 s (it was 30 s plus the jitter,
    # up to 33 s, past the cap its constant names)
    (b"HTTP/1.1 429 Slow Down\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n", [30] * 7),
    (b"HTTP/1.1 503 Busy\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n",
     [5, 5, 5, 5, 8, 16, 32]),
])
def test_the_backoff_doubles_from_half_a_second_to_30_s(answer: bytes,
                                                        expected: list[float]) -> None:
    """docs/config.md: backoff 0.5 s doubling to 30 s (±10 %), at least a server's
    Retry-After (and never past 30 s: a slot is not held for the hour a server may ask)."""
    from watchrun.actions.webhook import BACKOFF_MAX_S, send
    from watchrun.match.redact import redactor

    delays: list[float] = []

    async def no_wait(s: float) -> None:
        delays.append(s)

    async def body() -> object:
        server, url, _ = await one_http_server(*[answer] * 7, OK_204)
        async with server:
            return await send(webhook(url, retries=7), b"{}", redactor(), sleep=no_wait)

    result = asyncio.run(body())
    assert (result.status, result.attempts) == ("ok", 8)  # type: ignore[attr-defined]
    assert len(delays) == len(expected) and max(delays) <= BACKOFF_MAX_S
    for got, want in zip(delays, expected, strict=True):
        assert want * 0.9 <= got <= min(want * 1.1, BACKOFF_MAX_S), delays
