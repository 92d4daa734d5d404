"""`watchrun run`'s own usage errors, through the console script (docs/cli.md, `run` and
"Output contract"): an explorer's F8 found `run --once --json --metrics bad` printing nothing on
stdout (exit 2) where every other usage error under `--json` prints the `{"error": …}`
document; F9 found `--junit FILE` without `--once` ignored: a live runner started and ran until
killed (a CI step that forgot `--once` hung), and no report was written. `--junit` is the one
option only a once run uses (`--json` and `--quiet` mean something to a live runner too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from liverunner import cli, write_config

BOUND_S = 15.0
"""A refusal is at once; a live runner that started instead would still run at this bound."""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "app.log").write_text("ERROR one\n")
    write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["run", "-c", "watch.yaml", "--junit", "j.xml"],
    ["-c", "watch.yaml", "--junit", "j.xml"],  # (the default command)
    ["run", "--junit=j.xml", "--quiet"],
], ids=" ".join)
def test_junit_without_once_is_a_usage_error(site: Path, argv: list[str]) -> None:
    p = cli(*argv, cwd=site, timeout=BOUND_S)
    assert (p.returncode, p.stdout) == (2, ""), p.stdout + p.stderr
    assert p.stderr.startswith("usage: watchrun run "), p.stderr
    assert p.stderr.endswith(
        "watchrun run: error: --junit needs --once: only a once run writes a JUnit report "
        "(`watchrun run --once --junit FILE`); without --once a live runner would run until "
        "stopped\n"), p.stderr
    assert not (site / ".watchrun").exists() and not (site / "j.xml").exists()


def test_junit_without_once_under_json_prints_the_error_document(site: Path) -> None:
    p = cli("run", "--json", "--junit", "j.xml", cwd=site, timeout=BOUND_S)
    assert (p.returncode, p.stderr) == (2, ""), p.stderr
    error = json.loads(p.stdout)["error"]
    assert error["code"] == "usage" and "--junit needs --once" in error["message"], error


def test_junit_with_once_writes_its_report(site: Path) -> None:
    p = cli("run", "--once", "--junit", "j.xml", cwd=site, timeout=BOUND_S)
    assert p.returncode == 0, p.stderr
    assert (site / "j.xml").read_text().startswith("<?xml")


@pytest.mark.parametrize(("address", "said"), [
    ("bad", "expected HOST:PORT, e.g. 127.0.0.1:9464"),
    ("1.2.3.4:99999", "port 99999 is out of range: use 1 to 65535, e.g. 127.0.0.1:9464"),
    ("", "expected HOST:PORT, e.g. 127.0.0.1:9464")])
@pytest.mark.parametrize("once", [["--once"], []], ids=["once", "live"])
def test_a_bad_metrics_address_under_json_prints_the_error_document(
        site: Path, address: str, said: str, once: list[str]) -> None:
    p = cli("run", *once, "--json", "--metrics", address, cwd=site, timeout=BOUND_S)
    assert (p.returncode, p.stderr) == (2, ""), p.stdout + p.stderr
    assert json.loads(p.stdout) == {"error": {
        "code": "usage", "message": f"watchrun run: --metrics {address!r}: {said}"}}
    assert not (site / ".watchrun").exists()  # (refused before the config was acted on)


def test_a_bad_metrics_address_is_said_before_the_config_is_read(tmp_path: Path) -> None:
    """Checked as it is parsed: no config is needed to hear that the address is wrong."""
    p = cli("run", "--metrics", "bad", "-c", "missing.yaml", cwd=tmp_path, timeout=BOUND_S)
    assert (p.returncode, p.stdout) == (2, ""), p.stdout
    assert p.stderr.endswith("watchrun run: error: --metrics 'bad': expected HOST:PORT, e.g. "
                             "127.0.0.1:9464\n"), p.stderr
