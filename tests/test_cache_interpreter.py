"""The validated-config cache keys what the interpreter's settings change in a result: an entry
made under a UTF-8 locale is not used under an ASCII one (whose check of file names it would
skip), and one made in UTF-8 mode or with `-B` does not hand those on to a mock agent started
without them (explore-layering F4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from watchrun.config import load_config


def _python(tmp_path: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """This interpreter run in `tmp_path` with `env` over the runner's environment and one
    cache directory for every call of a test."""
    full = {**os.environ, "WATCHRUN_CACHE_DIR": str(tmp_path / "cache"), **env}
    full.pop("WATCHRUN_CONFIG_CACHE", None)
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=full, capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_name_validated_under_utf8_is_still_an_error_under_an_ascii_locale(
        tmp_path: Path) -> None:
    """`validate` in a UTF-8 terminal, then a cron job under LC_ALL=C: the run gets the
    located config error and exit 2, as without a cache, not a codec error and exit 3."""
    (tmp_path / "w.yaml").write_text('watchers:\n  - {id: a, path: "ж.log", pattern: X, '
                                     "fromStart: true, gate: {maxMatches: 0}}\n")
    (tmp_path / "ж.log").write_text("X\n")
    utf8 = _python(tmp_path, ["-m", "watchrun", "validate", "-c", "w.yaml"],
                   LC_ALL="C.UTF-8", PYTHONUTF8="1")
    assert utf8.returncode == 0, utf8.stderr
    assert list((tmp_path / "cache" / "config").glob("*.json")), "validate stored the config"
    ascii_run = _python(tmp_path, ["-m", "watchrun", "run", "--once", "-c", "w.yaml"],
                        LC_ALL="C", PYTHONUTF8="0")
    assert ascii_run.returncode == 2, ascii_run.stdout + ascii_run.stderr
    assert "w.yaml:2:" in ascii_run.stderr and "file name encoding (ascii)" in ascii_run.stderr
    assert "codec" not in ascii_run.stdout + ascii_run.stderr


AGENT = """\
watchers:
  - {id: a, path: a.log, pattern: X, wake: m}
agents:
  - {name: m, provider: mock}
"""

PROBE = ("import json, sys; from pathlib import Path; from watchrun.config import load_config; "
         "r = load_config([Path('w.yaml')], cache=True); "
         "print(json.dumps(r.config.agents[0].command))")


@pytest.mark.parametrize(("first", "then", "option"), [
    ({"PYTHONUTF8": "1"}, {"PYTHONUTF8": "0"}, "utf8=0"),
    ({"PYTHONUTF8": "0"}, {"PYTHONUTF8": "1"}, "utf8=1"),
    ({"PYTHONDONTWRITEBYTECODE": "1"}, {"PYTHONDONTWRITEBYTECODE": ""}, None),
    ({"PYTHONDONTWRITEBYTECODE": ""}, {"PYTHONDONTWRITEBYTECODE": "1"}, "-B"),
], ids=["utf8-then-not", "not-then-utf8", "B-then-not", "not-then-B"])
def test_the_mock_agents_command_is_this_interpreters_own(
        tmp_path: Path, first: dict[str, str], then: dict[str, str], option: str | None) -> None:
    """The mock agent's default command passes the runner's UTF-8 mode and `-B` on: a load
    after one under other settings gives the command of its own settings, as without a
    cache."""
    (tmp_path / "w.yaml").write_text(AGENT)
    assert _python(tmp_path, ["-c", PROBE], **first).returncode == 0
    second = _python(tmp_path, ["-c", PROBE], **then)
    assert second.returncode == 0, second.stderr
    fresh = _python(tmp_path, ["-c", PROBE], WATCHRUN_CONFIG_CACHE="0", **then)
    command = json.loads(second.stdout)
    assert command == json.loads(fresh.stdout)
    if option == "-B":
        assert "-B" in command
    elif option is None:
        assert "-B" not in command
    else:
        assert option in command


def test_a_longer_integer_limit_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """An integer longer than Python converts is an error; with PYTHONINTMAXSTRDIGITS
    raised, an entry of the error-free config is not used under the default limit."""
    monkeypatch.setenv("WATCHRUN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "w.yaml"
    path.write_text(f"limits: {{maxMatches: {'9' * 5000}}}\n"
                    "watchers:\n  - {id: a, path: a.log, pattern: X}\n")
    default = sys.get_int_max_str_digits()
    fresh = load_config([path])
    assert fresh.config is None, "5000 digits are an error under the default limit"
    try:
        sys.set_int_max_str_digits(0)  # (no limit)
        assert load_config([path], cache=True).config is not None
    finally:
        sys.set_int_max_str_digits(default)
    again = load_config([path], cache=True)
    assert again.config is None and again.diagnostics == fresh.diagnostics
