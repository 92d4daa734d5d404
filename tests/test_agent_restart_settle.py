"""A turn a killed runner left open is closed at the next start (`runner-restarted`) with what
its records had said: the usage increments recorded so far (never exact: the provider's final
totals never came) and the answer so far, so `agent list` and the transcript keep its tokens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from watchrun.agents.history import read_history, settle_history
from watchrun.clock import SystemClock
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.sink import JsonlSink


def _stream(tmp_path: Path, *turns: list[tuple[str, dict[str, Any]]]) -> Path:
    path = prepare_output_dir(tmp_path / "out").jsonl("agent", "ag")
    with JsonlSink(path, "ag", max_bytes=1 << 30, keep=1, clock=SystemClock()) as sink:
        for turn in turns:
            for kind, fields in turn:
                sink.write(kind, fields)
    return path


def _usage(turn: str, inp: int, cached: int, out: int) -> tuple[str, dict[str, Any]]:
    return "usage", {"turnId": turn, "input": inp, "cached": cached, "output": out,
                     "complete": True, "source": "claude"}


def test_an_open_turn_is_closed_with_the_usage_and_answer_it_recorded(tmp_path: Path) -> None:
    done = [("dispatch-start", {"turnId": "turn-1", "trigger": "wake", "pid": 1}),
            _usage("turn-1", 100, 0, 10),
            ("dispatch-finished", {"turnId": "turn-1", "status": "done", "tokens": 110,
                                   "reply": "first"})]
    killed = [("dispatch-start", {"turnId": "turn-4", "trigger": "wake", "pid": 2}),
              _usage("turn-4", 9386, 0, 12),
              ("text", {"turnId": "turn-4", "text": "looking at the log", "messageId": "m1"}),
              _usage("turn-4", 19827, 15077, 40)]
    path = _stream(tmp_path, done, killed)
    history = asyncio.run(read_history(path))
    emitted: list[tuple[str, dict[str, Any]]] = []
    settle_history(lambda kind, fields: emitted.append((kind, dict(fields))), history,
                   SystemClock())
    (kind, fin), = emitted
    assert kind == "dispatch-finished" and fin["turnId"] == "turn-4"
    assert fin["status"] == "cancelled" and fin["error"]["code"] == "runner-restarted"
    assert fin["usage"] == {"input": 29213, "cached": 15077, "output": 52, "complete": False}
    assert fin["tokens"] == 29213 + 52
    assert fin["reply"] == "looking at the log"
    assert history.tokens == 110 + 29265  # (what `agent list` starts from)
    assert history.reply == "looking at the log"


def test_an_open_turn_that_recorded_nothing_is_closed_with_unknown_usage(tmp_path: Path) -> None:
    path = _stream(tmp_path, [("dispatch-start", {"turnId": "turn-1", "trigger": "wake",
                                                  "pid": 1})])
    history = asyncio.run(read_history(path))
    emitted: list[tuple[str, dict[str, Any]]] = []
    settle_history(lambda kind, fields: emitted.append((kind, dict(fields))), history,
                   SystemClock())
    (_, fin), = emitted
    assert fin["usage"] == {"input": 0, "cached": 0, "output": 0, "complete": False}
    assert (fin["tokens"], fin["reply"]) == (0, "")
