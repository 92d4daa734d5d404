"""Text that is not Unicode: a watched file whose name is not UTF-8 (named through `${VAR}`, as
Linux allows any bytes) is followed, its records and status stay valid UTF-8 with U+FFFD for the
odd byte (what a strict JSON parser such as Vector's reads), and no command prints a traceback;
an MCP request whose JSON holds a lone surrogate (`"\udcff"`) is answered, not dropped."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

from liverunner import DEADLINE_S, read_records, watchrun_bin, write_config

NAME = b"app\xff.log"


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "LOGF": os.fsdecode(os.path.join(os.fsencode(folder), NAME))}
    return subprocess.run([watchrun_bin(), *args], cwd=folder, env=env, capture_output=True,
                          timeout=DEADLINE_S, check=False)


def test_a_file_name_that_is_not_utf8_is_followed_and_recorded_as_valid_utf8(
        tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), NAME), "wb") as fh:
        fh.write(b"ERROR one\n")
    write_config(tmp_path, {"watchers": [
        {"id": "n", "path": "${LOGF}", "pattern": "ERROR", "fromStart": True}]})
    done = _cli(tmp_path, "run", "--once")
    # before: "Exception in callback StatusBoard.flush()", a UnicodeEncodeError, no status file
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    out = tmp_path / ".watchrun"
    shown = f"{tmp_path}/app\ufffd.log"
    for line in (out / "watchers" / "n.jsonl").read_bytes().splitlines():
        record = json.loads(line.decode("utf-8"))  # strict UTF-8
        assert "\udcff" not in json.dumps(record, ensure_ascii=False)
    matches = [r for r in read_records(out / "watchers" / "n.jsonl") if r["kind"] == "match"]
    assert [(m["line"], m["path"]) for m in matches] == [("ERROR one", shown)]
    status = json.loads((out / "state" / "n.status.json").read_bytes().decode("utf-8"))
    assert status["label"] == shown
    for args in (["list"], ["status", "n"], ["config"], ["logs", "n"], ["matches", "n"],
                 ["list", "--json"], ["validate"]):
        done = _cli(tmp_path, *args)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)


def test_an_mcp_request_with_a_lone_surrogate_is_answered(tmp_path: Path) -> None:
    # before: the SDK's parser refused the message and dropped it; the client waited forever
    proc = subprocess.Popen([watchrun_bin(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def ask(message: str) -> dict[str, object]:
        stdin.write(message.encode() + b"\n")
        stdin.flush()
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            ready, _, _ = select.select([stdout], [], [], end - time.monotonic())
            if ready:
                reply: dict[str, object] = json.loads(stdout.readline())
                if "id" in reply:  # (not a notification)
                    return reply
        raise AssertionError(f"no reply to {message}")

    try:
        ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}))
        stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        (tmp_path / "app.log").write_text("")
        added = ask('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"watch",'
                    '"arguments":{"action":"add","path":"app.log","pattern":"ERROR",'
                    '"label":"x\\udcffy"}}}')
        assert added["id"] == 2
        result = added["result"]
        assert isinstance(result, dict) and not result["isError"]
        assert result["structuredContent"]["watch"]["label"] == "x\ufffdy"
    finally:
        stdin.close()
        proc.wait(timeout=DEADLINE_S)
