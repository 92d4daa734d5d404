"""The long fuzz run: coverage-guided atheris on the properties of tests/test_fuzz.py, and more.

Not part of the suite (atheris is optional: `pip install -e '.[fuzz]'`). A corpus for every
target from real inputs (the provider fixtures, the repository's configs, every control command)
first, then one target on its corpus:

    python tests/fuzz_atheris.py seed DIR
    python tests/fuzz_atheris.py TARGET [-max_total_time=600] [libFuzzer options] [DIR/TARGET]

TARGET is one of: adapters, config, control, framing, records, redact, shellwords. Any exception
or broken property is a crash with the input saved as `crash-*`: turn it into a test. The
properties are `tests/fuzzparts.py`'s, which the suite's Hypothesis run checks too;
tests/test_readme.py runs each documented command on its seed corpus with atheris stubbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import atheris  # type: ignore[import-not-found]

with atheris.instrument_imports():
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
    )

    from watchrun.agents.providers import PROVIDERS
    from watchrun.config import (  # noqa: F401 (load_config imports these lazily: load
        checks,  # them now, so that instrument_all covers them)
        interpolate,
        layering,
        loader,
        schema,
        validate,
    )
    from watchrun.match.framing import BOM
    from watchrun.match.redact import redactor
    from watchrun.match.sanitize import decode, edge_json
    from watchrun.output.backward import last_records
    from watchrun.output.records import iter_records
    from watchrun.runtime.commands import FIELDS, dispatch
    from watchrun.runtime.control import ControlServer

Target = Callable[[bytes], None]


def fuzz_adapters(work: Path, data: bytes) -> None:
    """Input: one byte choosing the provider, then its stdout."""
    if data:
        provider = sorted(PROVIDERS)[data[0] % len(PROVIDERS)]
        check_turn(provider, [decode(line) for line in data[1:].split(b"\n")])


def fuzz_config(work: Path, data: bytes) -> None:
    """Input: one byte choosing the format (YAML, JSON, TOML), then the file."""
    if data:
        path = work / f"w{['.yaml', '.json', '.toml'][data[0] % 3]}"
        path.write_bytes(data[1:])
        check_load(path)


def fuzz_framing(work: Path, data: bytes) -> None:
    """Input: one byte for the line limit (4 to 300 bytes), then reads: each a length byte (1 to
    256 bytes) and that many bytes."""
    if not data:
        return
    parts, i = [], 1
    while i < len(data):
        parts.append(data[i + 1:i + 2 + data[i]])
        i += 2 + data[i]
    check_framing(parts, 4 + data[0] % 297)


def fuzz_control(loop: asyncio.AbstractEventLoop, sock: Path, data: bytes) -> None:
    """Input: one request line, sent to a runner's control socket."""
    check_reply(loop.run_until_complete(ask(sock, data.replace(b"\n", b" "))))


def fuzz_records(work: Path, data: bytes) -> None:
    """Input: a JSONL file, read forwards, from its end and from a cursor."""
    path = work / "x.jsonl"
    path.write_bytes(data)
    for rec in [*iter_records(path), *last_records(path, 5), *iter_records(path, since_seq=3)]:
        assert isinstance(rec, dict) and type(rec["seq"]) is int, rec


def fuzz_redact(work: Path, data: bytes) -> None:
    """Input: a line. Redacting it again changes nothing; its JSON for a terminal is clean."""
    once, _ = redactor().redact(decode(data))
    assert redactor().redact(once) == (once, {}), once
    assert sanitized(edge_json(once)), once


def fuzz_shellwords(work: Path, data: bytes) -> None:
    """Input: a command; U+E000 marks its references."""
    check_contexts(decode(data))


TARGETS: dict[str, Callable[..., None]] = {
    "adapters": fuzz_adapters, "config": fuzz_config, "control": fuzz_control,
    "framing": fuzz_framing, "records": fuzz_records, "redact": fuzz_redact,
    "shellwords": fuzz_shellwords}


@contextlib.contextmanager
def target(name: str, work: Path) -> Iterator[Target]:
    """Target `name`, its files in `work`; the control target's runner serves a real socket."""
    if name != "control":
        yield functools.partial(TARGETS[name], work)
        return
    loop = asyncio.new_event_loop()
    sock = work / "c.sock"
    runner = idle_runner(work)
    server = ControlServer(sock, lambda req: dispatch(runner, req))
    loop.run_until_complete(server.start())
    try:
        yield functools.partial(fuzz_control, loop, sock)
    finally:
        loop.run_until_complete(server.close())
        loop.close()


def _reads(limit: int, *reads: bytes) -> bytes:
    """A framing input: the line limit, then each read with its length byte."""
    return bytes([limit - 4]) + b"".join(bytes([len(r) - 1]) + r for r in reads)


_VALUE = {dict: {"id": "w", "path": "/nonexistent/w.log", "pattern": "ERROR"}, str: "w",
          bool: True, list: ["w"]}
SEEDS: dict[str, list[bytes]] = {
    "control": [json.dumps({"cmd": cmd, **{k: _VALUE[t] for k, (t, _) in fields.items()}}).encode()
                for cmd, fields in {**FIELDS, "list": {}, "status": {}}.items()]
    + [b'{"cmd": "nope"}', b"[1]", b"{"],
    "framing": [_reads(16, b"plain\nline\n", b"\x1b[31mred\x1b[0m\r\n"),
                _reads(8, BOM, b"caf\xc3", b"\xa9 long line cut here\n", b"no newline")],
    "records": [b'{"seq": 1, "kind": "match", "line": "x"}\n{"seq": 2, "kind": "start"}\n'
                b'{"seq": 3, "kind": "match"}\n{"seq": 4', b'{"seq": 1e400}\n[[[]]]\n'],
    "redact": [b"password=hunter2 and AKIAIOSFODNN7EXAMPLE",
               b"Authorization: Bearer abc.def.ghi https://u:p4ss@example.com/x",
               b"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"],
    "shellwords": [f"echo {MARK} '{MARK}' \"{MARK}\" # {MARK}".encode(),
                   f"x=$(printf %s {MARK}) `{MARK}` $'{MARK}' ${{a:-{MARK}}}".encode(),
                   f"cat <<EOF\n{MARK}\nEOF\necho \\{MARK}".encode()],
}
"""Corpora written by hand, for the targets whose inputs the repository has no files of."""


def seed(folder: Path) -> None:
    """A corpus per target in `folder/TARGET`: every provider fixture file, the repository's
    configs, and SEEDS."""
    root = Path(__file__).resolve().parent.parent
    providers = sorted(PROVIDERS)
    for name in TARGETS:
        (folder / name).mkdir(parents=True, exist_ok=True)
    for f in sorted((root / "tests" / "fixtures" / "providers").glob("*/*.jsonl")):
        name = "mock" if f.parent.name == "claude" and "takopi" in f.name else f.parent.name
        data = bytes([providers.index(name)]) + f.read_bytes()
        (folder / "adapters" / f"{f.parent.name}-{f.stem}").write_bytes(data)
    for i, f in enumerate([root / "watch.yaml.example", *sorted(root.glob("contrib/**/*.yaml"))]):
        (folder / "config" / f"{i}-{f.name}").write_bytes(b"\x00" + f.read_bytes())
    for name, inputs in SEEDS.items():
        for i, data in enumerate(inputs):
            (folder / name / f"seed-{i}").write_bytes(data)


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "seed":
        seed(Path(args[1]))
        return
    if not args or args[0] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{seed DIR | {'|'.join(TARGETS)} [libFuzzer options]}}")
    atheris.instrument_all()  # (not for `seed`: instrumented, Python's exit prints errors)
    work = Path(tempfile.mkdtemp(prefix="watchrun-fuzz-"))  # (kept: libFuzzer ends the
    with target(args[0], work) as one:  # process, Python's cleanup does not run)
        atheris.Setup([sys.argv[0], *args[1:]], one)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
