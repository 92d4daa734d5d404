"""Property fuzzing of everything that reads input others control (issue #12 item 5): the config
loader and its reader of shell commands, framing + sanitizer, every provider adapter, the
control-socket request parsing and the JSONL record reader. For each: no exception escapes,
every output that reaches a record or a terminal is sanitized, memory stays bounded.

This is the short run (a few seconds in the suite). The long run is coverage-guided atheris on
the same properties (`tests/fuzzparts.py`): `python tests/fuzz_atheris.py TARGET
-max_total_time=600` (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzzparts import (
    MARK,
    ask,
    check_contexts,
    check_framing,
    check_load,
    check_reply,
    check_turn,
    idle_runner,
    sanitized,
    shown_fields,
    strings,
    turn_records,
)
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from watchrun.agents.providers import PROVIDERS
from watchrun.config import load_config
from watchrun.match.framing import BOM, LineFramer
from watchrun.output.backward import last_records
from watchrun.output.records import ReadStats, iter_records
from watchrun.runtime.commands import FIELDS, dispatch
from watchrun.runtime.control import ControlServer

FIXTURES = Path(__file__).parent / "fixtures" / "providers"
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
QUICK = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))

NASTY = st.sampled_from(["\x1b[2J", "\x1b]0;t\x07", "\x9b31m", "\u2028", "\x85", "\x00", "\x7f",
                         "\r", "\ud800", "é", "😀", "${X}", "$$", "\n", "'", '"', "\\"])
TEXT = st.lists(st.one_of(NASTY, st.text(max_size=8)), max_size=12).map("".join)
JSON_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=16,
)


# -- the config loader --------------------------------------------------------------------------

KEYS = {
    None: ["limits", "output", "watchers", "agents", "redact", "$schema", "bogus"],
    "limits": ["enabled", "maxWatchers", "pollMs", "maxLineBytes", "stopTimeout", "matchLines"],
    "output": ["dir", "maxBytes", "keep", "redact"],
    "watchers": ["id", "label", "path", "command", "cwd", "env", "pattern", "exclude", "wake",
                 "restart", "restartDelay", "schedule", "gate", "fromStart", "caseSensitive"],
    "agents": ["name", "provider", "command", "prompt", "cwd", "env", "deadline", "idleTimeout",
               "until", "maxTurns", "schedule"],
}
VALUES = st.one_of(
    JSON_ANY,
    st.sampled_from(["ERROR", "(a+)+$", "(?<=x)y", "[", "*/5 * * * *", "5s", "64KiB", "-1",
                     "claude", "mock", "generic", "sh -c 'echo ${X}'", "`${X}`", "${X:-d}",
                     "${UNSET}", "{prompt}", "a" * 300, "never", "always", ".", "/", ""]),
)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS[None]), max_size=5, unique=True)):
        if key in ("watchers", "agents"):
            doc[key] = [
                {k: draw(VALUES) for k in draw(st.lists(st.sampled_from(KEYS[key]), max_size=7,
                                                        unique=True))}
                for _ in range(draw(st.integers(0, 3)))
            ]
        elif key in KEYS:
            doc[key] = {k: draw(VALUES) for k in draw(st.lists(st.sampled_from(KEYS[key]),
                                                               max_size=4, unique=True))}
        else:
            doc[key] = draw(VALUES)
    return doc


@FAST
@given(doc=configs(), fmt=st.sampled_from(["yaml", "json"]))
@example(doc={"limits": {"enabled": "\ud800${X}"}}, fmt="json")  # (RE2 refused a lone
# surrogate when the secrets of a config's ${VAR}s were looked for: UnicodeEncodeError)
@example(doc={"watchers": [{"id": "a", "command": "x --password=\ud800${X}",
                            "pattern": "p"}]}, fmt="json")
def test_config_loader_never_raises_on_structured_input(
    tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], fmt: str
) -> None:
    folder = tmp_path_factory.mktemp("cfg")
    path = folder / f"w.{fmt}"
    try:
        text = yaml.safe_dump(doc) if fmt == "yaml" else json.dumps(doc)
    except (ValueError, yaml.YAMLError):
        assume(False)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check_load(path)


@FAST
@given(data=st.binary(max_size=400) | TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))
       | st.sampled_from([b"[" * 5000, b'{"a":' * 3000, b"a = " + b"[" * 5000,
                          b"a: " + b"[" * 900, b"- " * 2000]),
       suffix=st.sampled_from([".yaml", ".json", ".toml"]))
def test_config_loader_never_raises_on_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, suffix: str
) -> None:
    path = tmp_path_factory.mktemp("cfg") / f"w{suffix}"
    path.write_bytes(data)
    check_load(path)


def test_config_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        result = load_config([tmp_path / "bomb.yaml"], env={})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.config is None and "alias bomb" in result.diagnostics[0].message
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


SHELL = st.lists(st.sampled_from([
    MARK, "<<", "<<-", "<<<", " ", "\t", "\n", "'", '"', "\\", "$", "(", ")", "{", "}", "`", "#",
    ";", "x", "EOF", "$(", "${", "$((", "$'", "case a in a) :;; esac"]), max_size=20).map("".join)
"""Shell syntax around references (MARK), as `${VAR}`s in a command are read."""


@FAST
@given(text=SHELL)
@example(text=f"cat <<{MARK}")  # (found by the atheris run: a reference in a here-document's
# delimiter was given no context, and `validate` of `command: cat <<${X}` ended in a traceback)
def test_shell_reader_gives_every_reference_a_context_or_a_refusal(text: str) -> None:
    check_contexts(text)


# -- framing + sanitizer ------------------------------------------------------------------------


@FAST
@given(parts=st.lists(st.binary(max_size=300) | TEXT.map(lambda t: t.encode("utf-8",
                                                                              "surrogatepass")),
                      max_size=12),
       max_line=st.integers(4, 64))
@example(parts=[BOM], max_line=4)  # (found beside two busy loops: a lone byte order mark)
@example(parts=[BOM[:1], BOM[1:] + b"ab\n", b"c"], max_line=4)
def test_framing_and_sanitizer_bound_every_line_and_clean_it(
    parts: list[bytes], max_line: int
) -> None:
    check_framing(parts, max_line)


def test_a_long_line_is_framed_in_bounded_memory() -> None:
    framer = LineFramer(4096)
    block = b"x" * (1 << 20)
    tracemalloc.start()
    try:
        for _ in range(64):  # 64 MiB without a newline
            assert framer.feed(block) is None
        chunk = framer.feed(b"\n")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert chunk is not None and chunk.cuts[0].omitted == 64 * (1 << 20) - 4096
    assert peak < 8 << 20, f"peak {peak >> 20} MiB"


# -- every provider adapter ---------------------------------------------------------------------


def fixture_lines() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for folder in sorted(FIXTURES.iterdir()):
        if folder.is_dir():
            out[folder.name] = [line for f in sorted(folder.glob("*.jsonl"))
                                for line in f.read_text("utf-8").splitlines() if line.strip()]
    out["mock"] = out["claude"]
    out["generic"] = [*out["claude"][:5], "plain text", "\x1b[31mcolour\x1b[0m"]
    return out


LINES = fixture_lines()


def mutate(value: Any, rnd: random.Random, replacement: Any) -> Any:
    """`value` with one randomly chosen node replaced (or a key dropped)."""
    if isinstance(value, dict) and value and rnd.random() < 0.8:
        key = rnd.choice(sorted(value))
        if rnd.random() < 0.15:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: mutate(value[key], rnd, replacement)}
    if isinstance(value, list) and value and rnd.random() < 0.8:
        i = rnd.randrange(len(value))
        return [*value[:i], mutate(value[i], rnd, replacement), *value[i + 1:]]
    return replacement


@st.composite
def provider_lines(draw: st.DrawFn, provider: str) -> list[str]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    out = []
    for _ in range(draw(st.integers(1, 8))):
        how = draw(st.sampled_from(["mutate", "mutate", "mutate", "real", "text", "cut"]))
        base = rnd.choice(LINES[provider])
        try:
            obj = json.loads(base)
        except ValueError:
            how = "real"  # generic's plain lines
        if how == "real":
            out.append(base)
        elif how == "text":
            out.append(draw(TEXT))
        elif how == "cut":
            out.append(base[: rnd.randrange(len(base) + 1)])
        else:
            obj = mutate(obj, rnd, draw(JSON_ANY))
            out.append(json.dumps(obj, ensure_ascii=rnd.random() < 0.5))
    return out


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_adapter_survives_mutated_protocol_lines(provider: str) -> None:
    """No exception, every text value and key sanitized, output bounded by the input."""

    @QUICK
    @given(lines=provider_lines(provider))
    def check(lines: list[str]) -> None:
        check_turn(provider, lines)

    check()


# Found by the fuzzer above (issue #12 item 5), for #13 (agents/): an adapter copies protocol
# objects into its fields as they are, and `agents.recorder.clean_record` must sanitize
# object keys and non-finite floats too (`json.loads` accepts NaN and Infinity), so a hostile
# agent stream puts an escape sequence in a record key, or makes the recorder's encoder
# (allow_nan=False) refuse the record. One line per provider, from the fuzzer's findings.
KEY_AND_NAN = {
    "claude": '{"type":"system","subtype":"task_started","task_id":"t1",'
              '"tool_use_id":{"\\u001b[2J":1},"description":"d","prompt":"p","x":NaN}',
    "codex": '{"type":"item.completed","item":{"id":"item_4","type":"file_change",'
             '"changes":[{"path":"a.py","kind":"update"}],"status":{"\\u001b[2J":NaN}}}',
    "gemini": '{"type":"tool_use","timestamp":"2025-11-25T03:27:54.691Z","tool_name":"read_file",'
              '"tool_id":"t1","parameters":{"file_path":{"\\u001b[2J":Infinity}}}',
    "mock": '{"type":"system","subtype":"task_started","task_id":"t1",'
            '"tool_use_id":{"\\u001b[2J":1},"description":"d","prompt":"p","x":NaN}',
    "opencode": '{"type":"text","timestamp":1767038000500,"sessionID":"s","part":{"id":"p1",'
                '"sessionID":"s","messageID":{"\\u001b[2J":Infinity},"type":"text","text":"ok",'
                '"time":{"start":1767038000500,"end":1767038000500}}}',
    "pi": '{"type":"tool_execution_start","toolCallId":"tool_1","toolName":"bash",'
          '"args":{"command":{"\\u001b[2J":Infinity}}}',
}


@pytest.mark.parametrize("provider", sorted(set(PROVIDERS) - {"generic"}))
def test_adapter_survives_deeply_nested_json(provider: str) -> None:
    for line in ("[" * 100_000, '{"a":' * 100_000):
        turn_records(provider, [line])


@pytest.mark.parametrize("provider", sorted(KEY_AND_NAN))
def test_adapter_records_have_clean_keys_and_finite_numbers(provider: str) -> None:
    for kind, fields in turn_records(provider, [KEY_AND_NAN[provider]]):
        assert all(sanitized(s) for s in strings(shown_fields(kind, fields))), (kind, fields)
        json.dumps(fields, allow_nan=False)  # what the recorder's encoder requires


# -- the control socket -------------------------------------------------------------------------


FIELD_VALUES: dict[type, st.SearchStrategy[Any]] = {
    str: TEXT, bool: st.booleans(), list: st.lists(TEXT, max_size=3),
    dict: st.dictionaries(st.sampled_from(["id", "path", "pattern", "command"]), TEXT)}
REQUESTS = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")),
    JSON_ANY.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"cmd": st.sampled_from(["stop", "clear", "agent-send", "agent-stop",
                                                   "status", "nope"]) | JSON_ANY},
                          optional={"id": JSON_ANY, "name": JSON_ANY, "text": JSON_ANY,
                                    "all": JSON_ANY}).map(lambda d: json.dumps(d).encode()),
    st.sampled_from(sorted([*FIELDS, "list", "status"])).flatmap(
        lambda cmd: st.fixed_dictionaries(
            {"cmd": st.just(cmd), **{k: FIELD_VALUES[t] for k, (t, req) in
                                     FIELDS.get(cmd, {}).items() if req}},
            optional={k: FIELD_VALUES[t] for k, (t, req) in FIELDS.get(cmd, {}).items()
                      if not req})).map(lambda d: json.dumps(d).encode()),
)
"""Request lines: any bytes, any JSON, and requests of every command with fields of the right
types (which reach the runner)."""


def test_control_socket_answers_every_request_line(tmp_path: Path) -> None:
    runner = idle_runner(tmp_path)
    sock = Path(os.path.join(tmp_path, "c.sock"))

    @QUICK
    @given(lines=st.lists(REQUESTS, min_size=1, max_size=4))
    def check(lines: list[bytes]) -> None:
        async def main() -> None:
            server = ControlServer(sock, lambda req: dispatch(runner, req))
            await server.start()
            try:
                for line in lines:
                    check_reply(await ask(sock, line))
                assert (await ask(sock, b'{"cmd": "status"}'))["ok"] is True  # still serving
            finally:
                await server.close()

        asyncio.run(main())

    check()


def test_control_socket_answers_a_deeply_nested_request(tmp_path: Path) -> None:
    runner = idle_runner(tmp_path)

    async def main() -> dict[str, Any]:
        server = ControlServer(tmp_path / "c.sock", lambda req: dispatch(runner, req))
        await server.start()
        try:
            return await ask(tmp_path / "c.sock", b"[" * 100_000 + b"]" * 100_000)
        finally:
            await server.close()

    assert asyncio.run(main())["ok"] is False


# -- the JSONL record reader --------------------------------------------------------------------

RECORD_LINES = st.one_of(
    st.integers(0, 2**64).map(lambda n: json.dumps({"seq": n, "kind": "match"}).encode()),
    JSON_ANY.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.just(b'{"seq": NaN}'), st.just(b'{"seq": 1e400}'), st.just(b"[" * 5000),
)


@FAST
@given(files=st.lists(st.lists(RECORD_LINES, max_size=8), min_size=1, max_size=3),
       torn=st.booleans(), since=st.none() | st.integers(-5, 2**64))
def test_record_reader_never_raises_and_returns_only_records(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[bytes]], torn: bool,
    since: int | None,
) -> None:
    folder = tmp_path_factory.mktemp("jsonl")
    live = folder / "x.jsonl"
    for n, lines in enumerate(reversed(files)):
        path = live if n == 0 else folder / f"x.jsonl.{n}"
        path.write_bytes(b"".join(line + b"\n" for line in lines) + (b'{"seq": 9' if torn else b""))
    stats = ReadStats()
    recs = list(iter_records(live, since_seq=since, stats=stats))
    tail = last_records(live, 3, stats=ReadStats())
    for rec in [*recs, *tail]:
        assert isinstance(rec, dict) and type(rec["seq"]) is int
        assert since is None or rec in tail or rec["seq"] > since
    assert stats.torn == (len(files) if torn else 0)


@FAST
@given(seqs=st.lists(st.integers(1, 10**6), min_size=1, max_size=300, unique=True),
       since=st.integers(0, 10**6))
def test_cursor_search_agrees_with_a_linear_scan(
    tmp_path_factory: pytest.TempPathFactory, seqs: list[int], since: int
) -> None:
    seqs.sort()
    path = tmp_path_factory.mktemp("jsonl") / "x.jsonl"
    pad = "p" * 400  # long lines, so the binary search has blocks to skip
    path.write_text("".join(json.dumps({"seq": s, "pad": pad}) + "\n" for s in seqs))
    assert [r["seq"] for r in iter_records(path, since_seq=since)] == [s for s in seqs
                                                                      if s > since]
