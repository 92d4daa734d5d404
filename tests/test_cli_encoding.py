"""Output to a terminal whose encoding is not UTF-8 (a Latin-1 locale, PYTHONIOENCODING=ascii):
what it cannot show is written as `\\u` escapes, never a traceback, and JSON stays JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from liverunner import DEADLINE_S, watchrun_bin, write_config

from watchrun.cli.stdio import json_escape

LINE = "ERROR 日本語 ünïcödé — 😀"


@given(st.text())
def test_escaped_json_reads_back_as_the_same_value(text: str) -> None:
    import codecs

    codecs.register_error("test.escape", json_escape)
    dumped = json.dumps({"line": text}, ensure_ascii=False)
    for encoding in ("ascii", "latin-1"):
        try:
            encoded = dumped.encode(encoding, "test.escape")
        except UnicodeEncodeError:  # a lone surrogate: no encoding takes it, escaped or not
            assert any(0xD800 <= ord(c) <= 0xDFFF for c in text)
            continue
        assert json.loads(encoded.decode(encoding)) == {"line": text}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("enc")
    (folder / "app.log").write_text(LINE + "\n", encoding="utf-8")
    write_config(folder, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True,
         "label": "ünïcödé — app"}]})
    done = _cli(folder, "utf-8", "run", "--once")
    assert done.returncode == 0, done.stderr
    return folder


def _cli(folder: Path, encoding: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    return subprocess.run([watchrun_bin(), *args], cwd=folder, env=env, capture_output=True,
                          timeout=DEADLINE_S, check=False)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("args", [["logs", "app"], ["validate"], ["list"], ["config"],
                                  ["logs", "app", "--json"], ["list", "--json"]])
def test_a_terminal_without_utf8_gets_escapes_not_a_traceback(
        folder: Path, encoding: str, args: list[str]) -> None:
    done = _cli(folder, encoding, *args)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    out = done.stdout.decode(encoding)
    if "--json" in args:  # the same document as on a UTF-8 terminal
        same = _cli(folder, "utf-8", *args)
        assert json.loads(out) == json.loads(same.stdout.decode("utf-8"))
    elif args[0] == "logs":
        shown = "ERROR \\u65e5\\u672c\\u8a9e" if encoding == "ascii" else "ERROR \\u65e5"
        assert out.startswith(shown)


def test_a_once_runs_stdout_is_utf8_whatever_the_terminal_encoding(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": [
        {"id": "c", "command": f"echo '{LINE}'", "pattern": "ERROR"}]})
    done = _cli(tmp_path, "ascii", "run", "--once")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert done.stdout.decode("utf-8").splitlines()[0] == LINE  # the echo, as the command wrote it
