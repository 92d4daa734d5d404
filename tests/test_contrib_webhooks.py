"""contrib/webhooks: the Slack template layered on a config and run against a loopback server
speaking for Slack; the generic-JSON template against contrib's own receiver.py (token checked,
one JSONL line per firing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from liverunner import watchrun_bin, write_config
from webhook_server import receiver

WEBHOOKS = Path(__file__).resolve().parents[1] / "contrib" / "webhooks"


def run_once(tmp_path: Path, layer: str, env: dict[str, str], lines: int) -> str:
    base = write_config(tmp_path, {"watchers": [{
        "id": "app", "pattern": "ERROR",
        "command": ["sh", "-c", f"for i in $$(seq {lines}); do echo ERROR $$i; done"]}]})
    p = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(base), "-c",
                        str(WEBHOOKS / layer)], env={**os.environ, **env}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_the_slack_template_pages_with_a_slack_message(tmp_path: Path) -> None:
    with receiver(200) as slack:
        run_once(tmp_path, "slack.yaml", {"SLACK_WEBHOOK_URL": slack.url}, 1)
        (doc,) = slack.bodies()
    assert set(doc) == {"text"}
    assert doc["text"].startswith("*watchrun*: `app`")
    assert "```ERROR 1```" in doc["text"]


@pytest.fixture
def json_receiver(tmp_path: Path):  # type: ignore[no-untyped-def]
    out = tmp_path / "alerts.jsonl"
    proc = subprocess.Popen([sys.executable, str(WEBHOOKS / "receiver.py"), "--port", "0",
                             "--out", str(out)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "ALERT_WEBHOOK_TOKEN": "t0ken-9f8e"})
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        yield f"http://127.0.0.1:{port}/watchrun", out
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_json_template_reaches_the_contrib_receiver(tmp_path: Path,
                                                        json_receiver: tuple[str, Path]) -> None:
    url, out = json_receiver
    env = {"ALERT_WEBHOOK_URL": url, "ALERT_WEBHOOK_TOKEN": "t0ken-9f8e"}
    stderr = run_once(tmp_path, "json.yaml", env, 7)
    assert "t0ken-9f8e" not in stderr
    (doc,) = [json.loads(x) for x in out.read_text().splitlines()]  # 7 lines: one threshold
    assert doc["reason"] == "threshold" and 5 <= doc["count"] <= 7  # as the batches came
    assert doc["watcher"]["id"] == "app" and doc["lines"][0]["line"] == "ERROR 1"
    recs = (tmp_path / ".watchrun" / "watchers" / "app.jsonl").read_text()
    assert "t0ken-9f8e" not in recs and '"httpStatus":204' in recs
    with pytest.raises(urllib.error.HTTPError) as bad:  # a wrong token is refused
        urllib.request.urlopen(urllib.request.Request(
            url, data=b"{}", headers={"Authorization": "Bearer nope"}), timeout=10)
    assert bad.value.code == 401


def test_every_webhook_template_is_covered() -> None:
    assert {p.name for p in WEBHOOKS.iterdir()} == {"slack.yaml", "json.yaml", "receiver.py"}
