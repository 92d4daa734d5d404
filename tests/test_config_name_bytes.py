"""A config whose paths hold a file name's undecodable bytes (U+DC80-U+DCFF) loads back from
the YAML `watchrun config` prints to the same paths, byte for byte (explore-layering F5: the
YAML held `"\\uDCFF"`, which watchrun's YAML loader, libyaml's, refused)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from watchrun.config import load_config
from watchrun.config.dump import config_to_dict, dump_config
from watchrun.config.interpolate import escape
from watchrun.match.sanitize import edge_text


def watchrun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WATCHRUN_CONFIG_CACHE": "0"}
    return subprocess.run([sys.executable, "-m", "watchrun", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("name", [b"nu\xff", b"caf\xe9", b"\x80\x80", b"x\xc3"],
                         ids=["ff", "latin1", "continuation", "cut-short"])
def test_config_yaml_loads_back_to_the_same_file_names(tmp_path: Path, name: bytes) -> None:
    folder = os.path.join(os.fsencode(tmp_path), name)
    os.mkdir(folder)
    with open(os.path.join(folder, b"w.yaml"), "w") as fh:
        fh.write("output: {dir: out}\nwatchers:\n"
                 "  - {id: a, path: a.log, pattern: X}\n"
                 "  - {id: b, command: [ls, ./x], cwd: ., pattern: X}\n")
    first = watchrun(tmp_path, "config", "-c", os.fsdecode(os.path.join(folder, b"w.yaml")))
    assert first.returncode == 0, first.stderr
    escaped = "".join(f"\\u{0xDC00 + b:04X}" if b >= 0x80 else chr(b) for b in name)
    assert f'{escaped}/a.log"' in first.stdout  # (each byte as its escape: `\\uDCFF`)
    (tmp_path / "out.yaml").write_text(first.stdout, encoding="utf-8")
    again = watchrun(tmp_path, "config", "-c", "out.yaml")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout  # it resolves to itself
    config = load_config([tmp_path / "out.yaml"], env={}).require()
    paths = [config.output.dir, config.watchers[0].path, config.watchers[1].cwd]
    assert [os.fsencode(p or "") for p in paths] == [
        os.path.join(folder, b"out"), os.path.join(folder, b"a.log"), folder]


def test_other_lone_surrogates_are_still_refused_in_yaml(tmp_path: Path) -> None:
    """Only a file name's bytes: `"\\ud800"` is no character and no byte (libyaml's error)."""
    (tmp_path / "w.yaml").write_text('watchers:\n  - {id: a, path: "a\\uD800\\uDCFF.log", '
                                     "pattern: X}\n")
    result = load_config([tmp_path / "w.yaml"], env={})
    assert result.config is None
    assert [d.message for d in result.diagnostics] == [
        "YAML syntax error: found invalid Unicode character escape code "
        "(while parsing a quoted scalar)"]


NAMES = st.binary(min_size=1, max_size=12).map(
    lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")).map(os.fsdecode)
"""File names, most of them not UTF-8: as Python reads them, undecodable bytes are
U+DC80-U+DCFF."""


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(folder=NAMES, name=NAMES, value=NAMES)
@example(folder="nu\udcff", name="a.log", value="\udc80")
@example(folder="$", name="${", value="${")
@example(folder=".", name="a", value="x")  # (a path is made absolute: docs/config.md)
def test_yaml_of_a_config_with_any_file_names_loads_back_to_it(
        tmp_path: Path, folder: str, name: str, value: str) -> None:
    src = tmp_path / "w.json"  # (JSON writes a lone surrogate as "\udcff")
    folder_, name_, value_ = escape(folder), escape(name), escape(value)  # (`$` as `$$`)
    src.write_text(json.dumps({"output": {"dir": f"/o/{folder_}"}, "watchers": [
        {"id": "a", "path": f"/l/{folder_}/{name_}", "pattern": "X"},
        {"id": "b", "command": ["ls", value_], "cwd": f"/c/{folder_}", "pattern": "X",
         "env": {"V": value_}}]}))
    first = load_config([src], env={}).require()
    printed = edge_text(dump_config(first, "yaml"), multiline=True)
    again = tmp_path / "again.yaml"
    again.write_text(printed, encoding="utf-8")
    second = load_config([again], env={}).require()
    assert config_to_dict(second) == config_to_dict(first)
    assert os.fsencode(second.watchers[0].path or "") == os.fsencode(
        os.path.abspath(f"/l/{folder}/{name}"))
