"""Output to a terminal whose encoding is not UTF-8 (a Latin-1 locale, PYTHONIOENCODING=ascii):
what it cannot show is written as `\\u` escapes, never a traceback, and JSON stays JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.mark.parametrize(("text", "at", "encoding", "said"), [
    ("echo \u041e\u0428", 5, "ascii", '"echo \\u041e\\u0428" contains U+041E, which cannot be '
     "written in this system's file name encoding (ascii): run watchrun under a UTF-8 locale "
     "(LANG=C.UTF-8) or with PYTHONUTF8=1"),
    ("\u0436.log", 0, "iso8859-1", '"\\u0436.log" contains U+0436, which cannot be written in '
     "this system's file name encoding (iso8859-1): run watchrun under a UTF-8 locale "
     "(LANG=C.UTF-8) or with PYTHONUTF8=1"),
    ("a\ud800", 1, "utf-8", '"a\\ud800" contains U+D800, a lone surrogate (not a character), '
     "which no command line, environment, path or URL can hold"),
    ("\udfff", 0, "ascii", '"\\udfff" contains U+DFFF, a lone surrogate (not a character), '
     "which no command line, environment, path or URL can hold"),
    ("\ue000", 0, "ascii", '"\\ue000" contains U+E000, which cannot be written in this '
     "system's file name encoding (ascii): run watchrun under a UTF-8 locale (LANG=C.UTF-8) or "
     "with PYTHONUTF8=1"),
], ids=["cyrillic-ascii", "cyrillic-latin1", "surrogate-utf8", "last-surrogate",
        "after-the-surrogates"])
def test_only_a_surrogate_is_called_one(text: str, at: int, encoding: str, said: str) -> None:
    """An explorer's P11: every character the file system's encoding could not take was called
    "a lone surrogate (not a character)", a Cyrillic letter under a Latin-1 locale too, with no
    way out. Only U+D800-U+DFFF is one; the others say the encoding and the way out."""
    from watchrun.config.checks import unencodable

    assert unencodable(text, at, encoding) == said


def test_a_command_the_locale_cannot_encode_says_so(tmp_path: Path) -> None:
    """`validate` under LC_ALL=C with UTF-8 mode off (file names in ASCII): the Cyrillic in a
    command is refused for what it is."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           env=env, capture_output=True, text=True, timeout=DEADLINE_S)
    if probe.stdout.strip() != "ascii":
        pytest.skip(f"LC_ALL=C PYTHONUTF8=0 gives file names in {probe.stdout.strip()!r} here")
    config = write_config(tmp_path, {"watchers": [
        {"id": "ru", "command": "echo \u041e\u0428\u0418\u0411\u041a\u0410 ERROR",
         "pattern": "ERROR"}]})
    done = subprocess.run([watchrun_bin(), "validate", "-c", str(config)], env=env,
                          capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 2, done.stderr
    assert ("watchers[0].command: \"echo \\u041e\\u0428\\u0418\\u0411\\u041a\\u0410 ERROR\" "
            "contains U+041E, which cannot be written in this system's file name encoding "
            "(ascii): run watchrun under a UTF-8 locale (LANG=C.UTF-8) or with PYTHONUTF8=1"
            ) in done.stdout.decode(), done.stdout
