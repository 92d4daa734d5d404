"""The runner's Prometheus metrics: its counters and gauges, built from a snapshot at each
scrape, in a registry of their own beside `process_*`, `python_gc_*` and `python_info`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from watchrun import __version__

Snapshot = Callable[[], dict[str, Any]]
"""The supervisor's `metrics_snapshot`."""

WATCHER_COUNTERS = (
    ("lines", "watchrun_lines", "Lines read."),
    ("bytes", "watchrun_bytes", "Bytes read."),
    ("matches", "watchrun_matches", "Matched lines recorded."),
    ("truncated", "watchrun_truncated", "Matched lines cut at maxLineBytes."),
    ("linesCut", "watchrun_lines_cut",
     "Lines cut at maxLineBytes, matched or not (only their first maxLineBytes were matched)."),
    ("errors", "watchrun_errors", "Error records written."),
    ("skippedDuplicates", "watchrun_skipped_duplicates",
     "Lines not read again after a crash: their records were in the JSONL already."),
    ("restarts", "watchrun_restarts", "Times the watcher started again, as `watchrun list` "
     "counts them: its command restarted by its restart policy, `watchrun start`/`restart`, a "
     "reload that changed it."),
    ("rotations", "watchrun_rotations", "Rotations, truncations and replacements of a file."),
    ("gaps", "watchrun_gaps", "Gap records: data that could not be read, or records given up "
     "unwritten on a full disk (see the gap records)."),
    ("redactions", "watchrun_redactions", "Secrets redacted from records."),
)


class RunnerCollector(Collector):
    """The runner's own metrics, read from the supervisor's snapshot at each scrape.

    The snapshot: `up` (bool), `watchers` (live watchers: id → {"up": bool}), `totals` (every
    watcher seen or to run, started or not: `Tally.watchers()`), `reloads` (by result, and
    `last`), `agents` (the hub's snapshot: live agents), `agentTotals`
    (`Tally.agents()`), `actions` (`ActionHub.counts()`) and, when the loop monitor runs,
    `loop_lag_max_s`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def describe(self) -> Iterable[Metric]:
        """Every family this collector yields: the registry indexes them by name (`name[]`)."""
        return list(_families({"loop_lag_max_s": 0.0}))

    def collect(self) -> Iterable[Metric]:
        return _families(self.snapshot())


def _families(snap: dict[str, Any]) -> Iterable[Metric]:
    info = InfoMetricFamily("watchrun", "The running watchrun.")
    info.add_metric([], {"version": __version__})
    yield info
    yield GaugeMetricFamily("watchrun_up", "1 while the runner is running (not starting, "
                            "reloading or stopping).", value=1.0 if snap.get("up") else 0.0)
    lag = snap.get("loop_lag_max_s")
    if lag is not None:
        yield GaugeMetricFamily("watchrun_loop_lag_max_seconds", "The longest the event "
                                "loop was late to run a task in the last 5 minutes (a stop of "
                                "the whole process not counted).", value=float(lag))
    reloads = snap.get("reloads", {})
    yield GaugeMetricFamily("watchrun_config_last_reload_successful", "0 when the last SIGHUP "
                            "reload failed (the running config was kept) or applied only in "
                            "part (a watcher, the agents or the actions could not be started: "
                            "`watchrun status` says why), else 1.",
                            value=float(reloads.get("last", 1)))
    done = CounterMetricFamily("watchrun_config_reloads", "SIGHUP reloads, by result: ok, "
                               "partial (applied but for what could not start), failed (the "
                               "running config kept).", labels=["result"])
    for result in ("ok", "partial", "failed"):
        done.add_metric([result], float(reloads.get(result, 0)))
    yield done
    yield from _watchers(snap.get("watchers", {}), snap.get("totals", {}))
    yield from _agents(snap.get("agents", []), snap.get("agentTotals", {}))
    yield from _actions(snap.get("actions", {}))


ACTION_RESULTS = ("ok", "failed", "timeout", "cancelled")


def _actions(counts: dict[str, dict[str, dict[str, int]]]) -> Iterable[Metric]:
    """Per watcher and action (`actions/hub.py` counts them for the runner's life)."""
    labels = ["watcher", "action"]
    fired = CounterMetricFamily("watchrun_action_firings", "Action firings that went out.",
                                labels=labels)
    suppressed = CounterMetricFamily("watchrun_action_suppressed", "Action firings the "
                                     "throttle held back (sent later as one).", labels=labels)
    dropped = CounterMetricFamily("watchrun_action_dropped", "Action firings dropped: the "
                                  "queue was full, or the runner stopped first.", labels=labels)
    results = CounterMetricFamily("watchrun_action_results", "Action firings ended, by status.",
                                  labels=[*labels, "status"])
    for wid in sorted(counts):
        for name in sorted(counts[wid]):
            c = counts[wid][name]
            fired.add_metric([wid, name], float(c.get("fired", 0)))
            suppressed.add_metric([wid, name], float(c.get("suppressed", 0)))
            dropped.add_metric([wid, name], float(c.get("dropped", 0)))
            for status in ACTION_RESULTS:
                results.add_metric([wid, name, status], float(c.get(status, 0)))
    yield from (fired, suppressed, dropped, results)


def _watchers(live: dict[str, dict[str, Any]],
              totals: dict[str, dict[str, Any]]) -> Iterable[Metric]:
    ids = sorted(set(live) | set(totals))
    up = GaugeMetricFamily("watchrun_watcher_up", "1 while the watcher runs and can look at "
                           "its source and write its records (0: stopped, failed, backing off, "
                           "its disk full).", labels=["watcher"])
    last = GaugeMetricFamily("watchrun_last_match_timestamp_seconds", "When the last match was "
                             "recorded (Unix time; 0 before the first).", labels=["watcher"])
    for wid in ids:
        up.add_metric([wid], 1.0 if live.get(wid, {}).get("up") else 0.0)
        last.add_metric([wid], float(totals.get(wid, {}).get("lastMatchAt") or 0.0))
    yield up
    yield last
    for key, name, help_ in WATCHER_COUNTERS:
        family = CounterMetricFamily(name, help_, labels=["watcher"])
        for wid in ids:
            family.add_metric([wid], float(totals.get(wid, {}).get(key, 0)))
        yield family


def _agents(live: list[dict[str, Any]], totals: dict[str, dict[str, Any]]) -> Iterable[Metric]:
    names = sorted({str(a.get("name")) for a in live} | set(totals))
    turns = CounterMetricFamily("watchrun_agent_turns", "Agent turns started.", labels=["agent"])
    failures = CounterMetricFamily("watchrun_agent_failures", "Agent turns that failed.",
                                   labels=["agent"])
    tokens = CounterMetricFamily("watchrun_agent_tokens", "Tokens used by agent turns, by kind "
                                 "(`cached` is the cache-read part of `input`).",
                                 labels=["agent", "kind"])
    for name in names:
        t = totals.get(name, {})
        turns.add_metric([name], float(t.get("turns", 0)))
        failures.add_metric([name], float(t.get("failures", 0)))
        for kind, value in sorted(t.get("tokens", {"input": 0, "cached": 0, "output": 0}).items()):
            tokens.add_metric([name, kind], float(value))
    yield from (turns, failures, tokens)


def build_registry(snapshot: Snapshot) -> CollectorRegistry:
    """A registry of its own: the runner's metrics, `process_*`, `python_gc_*`, `python_info`."""
    registry = CollectorRegistry(auto_describe=False)
    for standard in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(standard)
    registry.register(RunnerCollector(snapshot))
    return registry
