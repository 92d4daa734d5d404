"""Text that is not Unicode: a watched file whose name is not UTF-8 (named through `${VAR}`, as
Linux allows any bytes) is followed, its records and status stay valid UTF-8 with U+FFFD for the
odd byte (what a strict JSON parser such as Vector's reads), and no command prints a traceback;
an MCP request whose JSON holds a lone surrogate (`"\udcff"`) is answered, not dropped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from liverunner import cli, read_records, write_config
from test_mcp_faults import RawClient

NAME = b"app\xff.log"


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGF": os.fsdecode(os.path.join(os.fsencode(folder), NAME))}
    return cli(*args, cwd=folder, env=env)


def test_a_file_name_that_is_not_utf8_is_followed_and_recorded_as_valid_utf8(
        tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), NAME), "wb") as fh:
        fh.write(b"ERROR one\n")
    write_config(tmp_path, {"watchers": [
        {"id": "n", "path": "${LOGF}", "pattern": "ERROR", "fromStart": True}]})
    done = _cli(tmp_path, "run", "--once")
    # before: "Exception in callback StatusBoard.flush()", a UnicodeEncodeError, no status file
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
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
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)


def test_an_mcp_request_with_a_lone_surrogate_is_answered(tmp_path: Path) -> None:
    # before: the SDK's parser refused the message and dropped it; the client waited forever
    (tmp_path / "app.log").write_text("")
    # (RawClient reads stdout raw: a notification and the reply may come in one read, which
    # select() and then readline() would wait past)
    client = RawClient(tmp_path)
    try:
        client.send(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"watch",'
                    b'"arguments":{"action":"add","path":"app.log","pattern":"ERROR",'
                    b'"label":"x\\udcffy"}}}\n')
        added = client.reply(2)
        result = added["result"]
        assert isinstance(result, dict) and not result["isError"]
        assert result["structuredContent"]["watch"]["label"] == "x\ufffdy"
    finally:
        client.close()
