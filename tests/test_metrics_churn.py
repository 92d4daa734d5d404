"""Pod churn on a live runner with `--metrics`: the series of a watcher forgotten for good go
with its row; those of a stopped one stay."""

from __future__ import annotations

import http.client
import json
import re
import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for
from test_metrics import free_port

CYCLES = 30
PODS = 3  # live at any time


def body(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def labelled(text: str) -> set[str]:
    """The watchers the scrape has series of."""
    return set(re.findall(r'\{watcher="([^"]+)"', text))


def test_a_forgotten_watcher_s_series_go_and_a_stopped_one_s_stay(tmp_path: Path) -> None:
    """A watcher a reload forgot (its file gone, as a gone pod's log) kept its 13 series, `up`
    0 among them, for the runner's life: on a node with pod churn the scrape grew without end
    and an `up == 0` alert fired for every pod that ever went."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("base", "stays"):
        (logs / f"{name}.log").write_text("ERROR one\n")
    config = tmp_path / "watch.json"
    config.write_text(json.dumps({"watchers": [
        {"id": "base", "path": "logs/base.log", "pattern": "ERROR"}]}))
    layer = tmp_path / "layer.json"

    def pods(cycle: int) -> list[dict[str, Any]]:
        return [{"id": f"pod-c{cycle}-{j}", "path": f"logs/pod-c{cycle}-{j}.log",
                 "pattern": "ERROR", "fromStart": True} for j in range(PODS)]

    stays = {"id": "stays", "path": "logs/stays.log", "pattern": "ERROR", "fromStart": True}
    layer.write_text(json.dumps({"watchers": [stays]}))
    port = free_port()
    r = LiveRunner(config, "-c", str(layer), "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        wait_for(lambda: 'watchrun_matches_total{watcher="stays"} 1.0' in body(port),
                 "stays's match counted")
        sizes = []
        for cycle in range(CYCLES):
            for old in logs.glob("pod-*.log"):
                old.unlink()  # the previous pods go
            for w in pods(cycle):
                (tmp_path / w["path"]).write_text("ERROR one\n")
            layer.write_text(json.dumps({"watchers": pods(cycle)}))  # stays removed: stopped
            reloads = r.stderr().count("reloaded")
            r.send(signal.SIGHUP)
            wait_for(lambda n=reloads: r.stderr().count("reloaded") > n, f"reload {cycle}")
            live = {w["id"] for w in pods(cycle)}
            text = wait_for(lambda live=live: (t := body(port)) and all(
                f'watchrun_matches_total{{watcher="{w}"}} 1.0' in t for w in live) and t,
                f"cycle {cycle}'s pods matched")
            assert labelled(text) == {"base", "stays", *live}, sorted(labelled(text))
            sizes.append(len(text))
        assert "pod-c0-0" in r.stderr() and "is gone: forgotten" in r.stderr()
        assert sizes[-1] < sizes[1] + 2000, (sizes[1], sizes[-1])  # bounded, not ~680 B a pod
        # removed from the layer but its file still there: stopped, listed, its series kept
        assert 'watchrun_watcher_up{watcher="stays"} 0.0' in text
        assert 'watchrun_matches_total{watcher="stays"} 1.0' in text
        listed = r.control({"cmd": "list"})
        assert "stays" in json.dumps(listed), listed
        assert r.control({"cmd": "clear", "ids": ["stays"]})["cleared"] == 1
        assert labelled(body(port)) == {"base", *live}  # cleared, no config names it: gone
    finally:
        assert r.stop() == 0
