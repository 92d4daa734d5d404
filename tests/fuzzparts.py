"""The fuzz properties and the control socket's runner, shared by test_fuzz.py and fuzz_atheris.py.

Each `check_*` raises AssertionError when a property breaks: the short Hypothesis run in the
suite (`tests/test_fuzz.py`) and the long coverage-guided atheris run (`tests/fuzz_atheris.py`)
check the same ones. Only watchrun and the standard library are imported here: the atheris run
needs neither pytest nor Hypothesis.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from watchrun.agents.clean import clean_record, unreserved
from watchrun.agents.providers import make_adapter
from watchrun.agents.tally import Tally
from watchrun.clock import SystemClock
from watchrun.config import load_config
from watchrun.config.model import Config, Limits, OutputSpec
from watchrun.config.shellwords import contexts
from watchrun.match.framing import BOM, LineFramer
from watchrun.match.sanitize import decode, edge_text, sanitize
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner
from watchrun.runtime.supervisor import RunnerState, Supervisor

UNSAFE = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
"""What no sanitized text field may hold (tab and newline are kept by `sanitize`)."""


def sanitized(text: str) -> bool:
    return not (set(text) & UNSAFE) and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def strings(value: Any, keys: bool = True) -> Iterator[str]:
    """Every string in a JSON value (with `keys`, the object keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if keys:
                yield str(k)
            yield from strings(v, keys)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings(v, keys)


def check_load(path: Path) -> None:
    """The config loader: no exception, every diagnostic sanitized, a config only without
    errors."""
    result = load_config([path], env={"X": "a b; touch x", "EMPTY": ""})
    for d in result.diagnostics:
        line = d.format()
        assert sanitized(line.replace("\n", " ")) and "\u2028" not in line, line
    if result.config is not None:
        assert not any(d.severity == "error" for d in result.diagnostics)


def check_framing(parts: list[bytes], max_line: int) -> None:
    """Framing + sanitizer over these reads: the buffer bounded, every line cut at the limit
    and clean, every byte accounted for."""
    framer = LineFramer(max_line)
    total = b"".join(parts)
    seen_source = len(BOM) if total.startswith(BOM) else 0  # (a UTF-8 byte order mark that
    # begins the stream is no line's: README, "Output")
    for chunk in [framer.feed(p) for p in parts] + [framer.finish()]:
        assert framer.pending <= len(total)
        assert framer.held <= max_line  # the bounded buffer, whatever the input
        if chunk is None:
            continue
        assert chunk.offset == seen_source and chunk.data.endswith(b"\n")
        seen_source = chunk.end
        for line in chunk.data.split(b"\n")[:-1]:
            assert len(line) <= max_line + 3  # cut on a UTF-8 boundary, never past the limit
            text, _ = sanitize(decode(line), max_line)
            assert sanitized(text) and "\n" not in text
            assert "\n" not in edge_text(text) and "\u2028" not in edge_text(text)
    assert seen_source == framer.position == len(total)


def turn_records(provider: str, lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """What a turn writes for these stdout lines: lines parsed as printed, then every record
    cleaned by the recorder (`clean_record`) and tallied, as agents/turn_output.py does."""
    adapter, tally = make_adapter(provider), Tally()
    found = [obs for line in lines for obs in adapter.parse(line)] + adapter.finish(0)
    records = []
    for obs in found:
        clean = clean_record(obs.kind, unreserved(obs.fields), 65536)
        tally.note(obs.kind, clean)
        records.append((obs.kind, clean))
    tally.reply()
    return records


def shown_fields(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields every surface shows: all but the two that keep what the agent printed, on
    purpose (a terminal line's `raw`, a `raw` record's `value`: shown only with `--raw`)."""
    hidden = {"raw", "value"} if kind == "raw" else {"raw"}
    return {k: v for k, v in fields.items() if k not in hidden}


def check_turn(provider: str, lines: list[str]) -> None:
    """A provider's adapter over these stdout lines: no exception; every shown string and key
    sanitized; every record one the recorder's encoder takes (no NaN); output bounded by the
    input."""
    size = sum(len(line) for line in lines)
    out = 0
    for kind, fields in turn_records(provider, lines):
        out += len(json.dumps(fields, allow_nan=False))
        assert all(sanitized(s) for s in strings(shown_fields(kind, fields))), (kind, fields)
    assert out <= 8 * size + 4096, f"{out} bytes of records from {size} bytes of input"


MARK = "\ue000"
"""A `${VAR}` reference as the shell reader sees it (interpolation's placeholder is a
private-use character too)."""


def check_contexts(text: str) -> None:
    """The shell reader, both dialects: every reference (MARK) has a context or a refusal."""
    for dialect in ("sh", "shlex"):
        found = contexts(text, MARK, dialect)  # type: ignore[arg-type]
        assert len(found) == text.count(MARK), (dialect, text, found)


def idle_runner(folder: Path) -> Supervisor:
    """A real Supervisor in state `running`, its loop never started: no watchers
    (`limits.enabled: false`: `add`, `start` and `restart` are refused before they compile or
    start anything), no agents, its output dir in `folder`. Control requests reach the
    attributes a runner has, not a fake's copy of them."""
    config = Config(Limits(enabled=False), OutputSpec(folder / "out"))
    sup = Supervisor(config, prepare_output_dir(config.output.dir), RunLog(quiet=True),
                     SystemClock(), Spawner())
    sup.state = RunnerState.RUNNING
    return sup


async def ask(path: Path, line: bytes) -> dict[str, Any]:
    """One request line on control socket `path`, and its reply."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(line + b"\n")
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    reply = json.loads(data)
    assert isinstance(reply, dict)
    return reply


def check_reply(reply: dict[str, Any]) -> None:
    """A control reply: `ok` a boolean, sanitized, and no `internal` error (the server's answer
    to an exception in a request's handler: a bug)."""
    assert isinstance(reply.get("ok"), bool), reply
    assert sanitized(json.dumps(reply)), reply
    error = reply.get("error")
    assert not (isinstance(error, dict) and error.get("code") == "internal"), reply
