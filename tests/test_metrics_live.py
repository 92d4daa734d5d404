"""`watchrun run --metrics HOST:PORT` against a live runner, scraped as a user's Prometheus and
kubelet do: `/healthz` says 503 while the runner reloads or stops (held there by a command whose
SIGTERM trap waits for the test) and 200 again once it runs; `/livez` stays 200; the counters
go up by exactly what happened (lines, bytes, matches, cut lines, rotations, restarts, errors),
with the names, labels and types the README's table gives, in both exposition formats."""

from __future__ import annotations

import http.client
import signal
import socket
import time
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

DEADLINE_S = 20.0
"""For each wait: generous for a loaded 2-core box; a passing run takes a fraction of it."""

Key = tuple[str, tuple[tuple[str, str], ...]]
"""A sample as Prometheus stores it: its name and its sorted labels."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, method: str = "GET",
        headers: dict[str, str] | None = None) -> tuple[int, str]:
    """One request to the runner's metrics endpoint: its status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


class Scrape:
    """One `/metrics` scrape, parsed by prometheus_client's parser (text format, or OpenMetrics
    as Prometheus asks for it first): samples by name and labels, and each family's type."""

    def __init__(self, port: int, openmetrics: bool = False) -> None:
        headers = {"Accept": "application/openmetrics-text; version=1.0.0"} if openmetrics \
            else {}
        status, body = get(port, "/metrics", headers=headers)
        assert status == 200, (status, body)
        parse = openmetrics_families if openmetrics else text_string_to_metric_families
        self.samples: dict[Key, float] = {}
        self.types: dict[str, str] = {}
        for family in parse(body):
            self.types[family.name] = family.type
            for s in family.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def __call__(self, name: str, **labels: str) -> float:
        """The sample's value; KeyError naming it when the series is missing."""
        key = (name, tuple(sorted(labels.items())))
        if key not in self.samples:
            raise KeyError(f"no series {name}{labels}; have "
                           f"{sorted(k for k in self.samples if k[0] == name)}")
        return self.samples[key]

    def watcher(self, wid: str) -> dict[str, float]:
        """Every `watchrun_*` series of that watcher, by name."""
        return {name: value for (name, labels), value in self.samples.items()
                if name.startswith("watchrun_") and labels == (("watcher", wid),)}


def held_config(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """One command that prints `up` and, on its SIGTERM, exits only once the file `go` exists:
    a reload that stops it (or the runner's stop) lasts until the test creates `go`. Its
    stderr is closed: killed with the group, a `sleep` of the loop made the shell print
    `Terminated`, a line that some runs read and others did not."""
    go = tmp_path / "go"
    script = (f"exec 2>/dev/null; trap 'until [ -e {go} ]; do sleep 0.02; done; exit 0' TERM; "
              "echo up; while :; do sleep 0.02; done")
    return {"limits": {"stopTimeout": "30s"},
            "watchers": [{"id": "c", "command": script, "pattern": "up"}]}, go


def state(r: LiveRunner) -> str:
    return str(r.control({"cmd": "status"})["state"])


def test_healthz_is_503_while_a_live_runner_reloads_and_200_once_the_reload_is_done(
        tmp_path: Path) -> None:
    """README `### Metrics`: `/healthz` is 200 while running, 503 while reloading; `/livez` is
    200 whenever the loop answers ("a long reload is not a reason to restart it"). A real
    SIGHUP whose reload is held (the changed command's SIGTERM trap waits for `go`): 503 and
    `watchrun_up 0` all along, 200 and `watchrun_up 1` once it is done, and the rebuilt
    watcher's counters go on from where they were."""
    conf, go = held_config(tmp_path)
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        wait_for(lambda: r.matches("c"), "the command's `up` matched", DEADLINE_S)
        assert get(port, "/healthz") == (200, "ok\n")
        before = wait_for(lambda: (s := Scrape(port))("watchrun_matches_total", watcher="c") == 1
                          and s, "the first match counted", DEADLINE_S)
        assert before("watchrun_up") == 1

        conf["watchers"][0]["pattern"] = "up|down"  # changed: the reload stops the command
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: state(r) == "reloading", "the runner reloading", DEADLINE_S)
        assert get(port, "/healthz") == (503, "not running\n")
        assert get(port, "/healthz", method="HEAD")[0] == 503
        assert get(port, "/livez") == (200, "alive\n")  # a liveness probe does not restart it
        during = Scrape(port)  # /metrics still served, and says the runner is not up
        assert during("watchrun_up") == 0
        assert during("watchrun_matches_total", watcher="c") == 1
        assert get(port, "/healthz")[0] == 503
        assert state(r) == "reloading"  # (all of the above was seen while it reloaded)

        go.touch()
        wait_for(lambda: get(port, "/healthz") == (200, "ok\n"), "/healthz 200 after the reload",
                 DEADLINE_S)
        assert state(r) == "running"
        r.wait_log("reloaded:", timeout=DEADLINE_S)  # (the log is written by a task of its own)
        assert get(port, "/livez") == (200, "alive\n")
        wait_for(lambda: len(r.matches("c")) == 2, "the rebuilt command's `up`", DEADLINE_S)
        after = wait_for(lambda: (s := Scrape(port))("watchrun_matches_total", watcher="c") >= 2
                         and s, "the second match counted", DEADLINE_S)
        assert after("watchrun_up") == 1
        assert after("watchrun_watcher_up", watcher="c") == 1
        # one `up` line per run of the command: the rebuild neither reset nor doubled them
        assert after("watchrun_matches_total", watcher="c") == 2
        assert after("watchrun_lines_total", watcher="c") == 2
        assert after("watchrun_bytes_total", watcher="c") == 2 * len(b"up\n")
    finally:
        go.touch()
        assert r.stop() == 0
    assert r.stderr().replace(str(tmp_path), "<dir>").count("reloaded:") == 1, r.stderr()


def test_a_failed_reload_is_a_metric_until_a_reload_succeeds(tmp_path: Path) -> None:
    """A SIGHUP whose config is invalid keeps the running one and says so in the log and in
    `status`; an alert had nothing to scrape. `watchrun_config_last_reload_successful` is 0
    until a reload works, and `watchrun_config_reloads_total` counts each by result."""
    conf: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "E"}]}
    (tmp_path / "app.log").write_text("")
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        first = Scrape(port)
        assert first("watchrun_config_last_reload_successful") == 1
        assert first.types["watchrun_config_reloads"] == "counter"
        assert [first("watchrun_config_reloads_total", result=x) for x in ("ok", "failed")] == [
            0, 0]
        write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "("}]})
        r.send(signal.SIGHUP)
        failed = wait_for(lambda: (s := Scrape(port))(
            "watchrun_config_reloads_total", result="failed") == 1 and s,
            "the failed reload counted", DEADLINE_S)
        assert failed("watchrun_config_last_reload_successful") == 0
        assert failed("watchrun_up") == 1  # (the running config goes on)
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        ok = wait_for(lambda: (s := Scrape(port))(
            "watchrun_config_reloads_total", result="ok") == 1 and s,
            "the good reload counted", DEADLINE_S)
        assert ok("watchrun_config_last_reload_successful") == 1
        assert ok("watchrun_config_reloads_total", result="failed") == 1
    finally:
        assert r.stop() == 0


def test_healthz_is_503_while_a_live_runner_stops_and_livez_stays_200(tmp_path: Path) -> None:
    """README `### Metrics`: `/healthz` is 503 while stopping, so a load balancer takes the
    runner out before it is gone; `/livez` stays 200. A SIGTERM whose stop is held by the
    command's trap: the endpoint still answers, 503 and `watchrun_up 0`, until the runner exits."""
    conf, go = held_config(tmp_path)
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        assert get(port, "/healthz") == (200, "ok\n")
        r.send(signal.SIGTERM)
        r.wait_log("stopping (SIGTERM)", timeout=DEADLINE_S)
        assert get(port, "/healthz") == (503, "not running\n")
        assert get(port, "/livez") == (200, "alive\n")
        assert Scrape(port)("watchrun_up") == 0
        assert r.proc.poll() is None  # (still held by the command: seen while stopping)
        go.touch()
        assert r.proc.wait(timeout=DEADLINE_S) == 0
    finally:
        go.touch()
        r.close()
    assert r.left == []


def test_counters_scraped_from_a_live_runner_count_exactly_what_happened(
        tmp_path: Path) -> None:
    """README `### Metrics` table: `watchrun_lines_total`, `watchrun_bytes_total`,
    `watchrun_matches_total`, `watchrun_truncated_total`, `watchrun_lines_cut_total`,
    `watchrun_last_match_timestamp_seconds`, `watchrun_rotations_total`,
    `watchrun_restarts_total`, `watchrun_errors_total`, `watchrun_gaps_total` and
    `watchrun_watcher_up`, each with its `watcher` label, count what happened: the lines and
    bytes appended to a followed file, its matches, the two lines cut at `maxLineBytes` (one
    of them a match), a truncation; a crashing command's 4 restarts before the start limit
    (`start` records with the `attempt` of the `restart` before them); a command that cannot
    start (one `error` record). Counters are Prometheus counters, and the OpenMetrics
    exposition (what Prometheus asks for first) says the same."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": "256B"}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "flaky", "command": "echo ERROR crash; exit 1", "pattern": "ERROR",
         "restart": "always", "restartDelay": "100ms"},
        {"id": "broken", "command": [str(tmp_path / "no-such-program")], "pattern": "x"}]})
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        start = Scrape(port)
        assert start.watcher("app") == {
            **{f"watchrun_{n}_total": 0.0 for n in (
                "lines", "bytes", "matches", "truncated", "lines_cut", "errors",
                "skipped_duplicates", "restarts", "rotations", "gaps", "redactions")},
            "watchrun_watcher_up": 1.0, "watchrun_last_match_timestamp_seconds": 0.0}
        assert start("watchrun_up") == 1

        # 5 lines, 2 matches; two lines cut at 256 bytes, one of them matched (every byte is
        # read, cut or not)
        first = "ERROR a\nok\nERROR " + "x" * 300 + "\nfine " + "y" * 400 + "\nlast\n"
        t0 = time.time()
        with open(log, "a") as fh:
            fh.write(first)
        m = wait_for(lambda: (s := Scrape(port))("watchrun_lines_total", watcher="app") >= 5
                     and s("watchrun_matches_total", watcher="app") >= 2 and s,
                     "the first lines counted", DEADLINE_S)
        t1 = time.time()
        assert m("watchrun_lines_total", watcher="app") == 5
        assert m("watchrun_bytes_total", watcher="app") == len(first.encode())
        assert m("watchrun_matches_total", watcher="app") == 2 == len(r.matches("app"))
        assert m("watchrun_truncated_total", watcher="app") == 1
        assert m("watchrun_lines_cut_total", watcher="app") == 2
        first_match = m("watchrun_last_match_timestamp_seconds", watcher="app")
        assert t0 <= first_match <= t1

        # truncated in place (copytruncate): one rotation, then its new line is read
        second = "ERROR after truncation\n"
        t2 = time.time()
        log.write_text(second)
        m = wait_for(lambda: (s := Scrape(port))("watchrun_lines_total", watcher="app") >= 6
                     and s("watchrun_matches_total", watcher="app") >= 3 and s,
                     "the line after the truncation counted", DEADLINE_S)
        t3 = time.time()
        app = m.watcher("app")
        assert app["watchrun_rotations_total"] == 1
        assert app["watchrun_lines_total"] == 6
        assert app["watchrun_bytes_total"] == len(first.encode()) + len(second.encode())
        assert app["watchrun_matches_total"] == 3 == len(r.matches("app"))
        assert app["watchrun_truncated_total"] == 1 and app["watchrun_lines_cut_total"] == 2
        assert t2 <= app["watchrun_last_match_timestamp_seconds"] <= t3
        assert app["watchrun_last_match_timestamp_seconds"] > first_match
        assert app["watchrun_gaps_total"] == 0 and app["watchrun_errors_total"] == 0
        assert app["watchrun_watcher_up"] == 1

        # the crashing command: 5 starts (one `ERROR crash` each), the 6th refused
        wait_for(lambda: [x for x in r.records("flaky")
                          if x["kind"] == "stop" and x["reason"] == "start-limit"],
                 "the crashing command given up", DEADLINE_S)
        flaky = Scrape(port).watcher("flaky")
        restarts = [x for x in r.records("flaky") if x["kind"] == "restart"]
        again = [x["attempt"] for x in r.records("flaky")
                 if x["kind"] == "start" and "attempt" in x]
        assert flaky["watchrun_restarts_total"] == 4 == len(restarts)
        assert again == [1, 2, 3, 4]
        assert flaky["watchrun_matches_total"] == 5 == len(r.matches("flaky"))
        assert flaky["watchrun_lines_total"] == 5
        assert flaky["watchrun_bytes_total"] == 5 * len(b"ERROR crash\n")
        assert flaky["watchrun_errors_total"] == 0 and flaky["watchrun_rotations_total"] == 0
        assert flaky["watchrun_watcher_up"] == 0  # gave up: it cannot look

        final = Scrape(port)
        broken = final.watcher("broken")
        errors = [x for x in r.records("broken") if x["kind"] == "error"]
        assert broken["watchrun_errors_total"] == 1 == len(errors)
        assert broken["watchrun_restarts_total"] == 0 and broken["watchrun_lines_total"] == 0
        assert broken["watchrun_watcher_up"] == 0
        assert final("watchrun_up") == 1

        # what a user's PromQL relies on: counters typed as such (rate/increase), gauges not
        for name in ("lines", "bytes", "matches", "truncated", "lines_cut", "errors",
                     "restarts", "rotations", "gaps"):
            assert final.types[f"watchrun_{name}"] == "counter", name
        for name in ("watchrun_up", "watchrun_watcher_up", "watchrun_last_match_timestamp_seconds"):
            assert final.types[name] == "gauge", name
        om = Scrape(port, openmetrics=True)
        for wid in ("app", "flaky", "broken"):
            text = {k: v for k, v in final.watcher(wid).items() if k.endswith("_total")}
            assert {k: v for k, v in om.watcher(wid).items() if k.endswith("_total")} == text
    finally:
        assert r.stop() == 0


def test_a_restart_is_counted_when_the_command_starts_again_not_while_it_waits(
        tmp_path: Path) -> None:
    """helper-87: in its backoff a watcher said `restarts 1` (and the metric 1) for a run that
    had not happened, and that a stop in the backoff then made never happen."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "flappy", "command": "echo ERROR boom; exit 1", "pattern": "ERROR",
         "restart": "always", "restartDelay": "1m"}]})
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")

    def listed() -> dict[str, Any]:
        return next(w for w in r.control({"cmd": "list"})["watchers"] if w["id"] == "flappy")
    try:
        r.wait_running()
        wait_for(lambda: listed()["status"] == "backoff", "the backoff after run 1")
        assert [x["kind"] for x in r.records("flappy")][-1] == "restart"
        assert listed()["restarts"] == 0
        assert Scrape(port)("watchrun_restarts_total", watcher="flappy") == 0
        assert r.control({"cmd": "stop", "id": "flappy"})["ok"]
        assert listed()["restarts"] == 0
        assert Scrape(port)("watchrun_restarts_total", watcher="flappy") == 0
        assert [x["run"] for x in r.records("flappy") if x["kind"] == "start"] == [1]
    finally:
        assert r.stop() == 0
