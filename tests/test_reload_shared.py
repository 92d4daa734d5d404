"""Real-runner SIGHUPs that change what all watchers share (redact rules, limits, output) or
find a layer emptied: set in place, a restart only where a watcher reads it at its start."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from liverunner import LiveRunner, wait_for
from test_metrics_live import Scrape, free_port

SECRET = "corp-123456"


def _listed(r: LiveRunner) -> dict[str, dict[str, object]]:
    return {w["id"]: w for w in r.control({"cmd": "list"})["watchers"]}


def _reload(r: LiveRunner, layer: Path, doc: object) -> None:
    """Write `layer` (`doc` as JSON, or the text it is), SIGHUP, and wait for the reload's end
    (`reloaded` or `reload failed`)."""
    before = r.stderr().count("reloaded:") + r.stderr().count("reload failed")
    layer.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    r.send(signal.SIGHUP)
    wait_for(lambda: r.stderr().count("reloaded:") + r.stderr().count("reload failed") > before,
             "the reload's end")


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def test_a_reload_that_changes_the_redact_rules_redacts_the_running_watchers_with_them(
        tmp_path: Path) -> None:
    """explore-layering F1: a `redact:` rule a reload added was applied only to watchers whose
    own spec changed; the others kept the redactor they were built with, and the secret went
    into their JSONL, the run log and `logs`' tail while the log said `reloaded`. Now each
    running watcher redacts with the new rules from the reload on, without a restart (no
    second `start`), and a rule removed no longer redacts."""
    base = tmp_path / "base.yaml"
    base.write_text("output: {redact: true}\nwatchers:\n"
                    "  - {id: a, path: a.log, pattern: ERROR}\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text("{}", encoding="utf-8")
    log = tmp_path / "a.log"
    log.write_text("")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        _append(log, f"info before the reload {SECRET}")  # (in the tail: not a match)
        wait_for(lambda: _listed(r)["a"]["linesRead"] == 1, "the first line read")
        _reload(r, over, {"redact": ["corp-[0-9]{6}"]})
        _append(log, f"ERROR after the reload {SECRET}")
        wait_for(lambda: r.matches("a"), "the match")
        assert [m["line"] for m in r.matches("a")] == ["ERROR after the reload [REDACTED:custom]"]
        tail = tmp_path / ".watchrun" / "state" / "a.tail"
        wait_for(lambda: tail.exists() and "ERROR after" in tail.read_text(), "the tail written")
        assert SECRET not in tail.read_text() and "[REDACTED:custom]" in tail.read_text()
        _reload(r, over, {"limits": {}})  # the rule removed: it redacts no more
        _append(log, f"ERROR once removed {SECRET}")
        wait_for(lambda: len(r.matches("a")) == 2, "the second match")
        assert r.matches("a")[1]["line"] == f"ERROR once removed {SECRET}"
        assert [x["kind"] for x in r.records("a")].count("start") == 1  # (never restarted)
        r.wait_log("settings changed: redact applied in place (the running watchers go on)")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert f"ERROR after the reload {SECRET}" not in err and "stopped (reload)" not in err


def test_a_reload_of_settings_read_as_watchers_go_keeps_commands_running(
        tmp_path: Path) -> None:
    """explore-layering F2: any change of `limits` or `output` (matchLines, output.keep, …)
    stopped and restarted every watcher, killing its command, and the log said `config
    changed`. Now such a change is set in place (the command runs on, one `start` record; the
    new output.maxBytes/keep rotate the running watcher's JSONL), and only a limit a watcher
    reads at its start restarts it, the log saying which."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n"
                    "  - {id: srv, command: 'echo up; exec sleep 1000', pattern: up}\n"
                    "  - {id: f, path: f.log, pattern: ERROR}\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text("{}", encoding="utf-8")
    log = tmp_path / "f.log"
    log.write_text("")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        pid = wait_for(lambda: _listed(r)["srv"]["pid"], "the command's pid")
        _reload(r, over, {"limits": {"matchLines": 20, "maxMatches": 10, "maxAgents": 2,
                                     "stopTimeout": "2s", "pollMs": 200, "wakeOnMatch": True},
                          "output": {"maxBytes": "64KiB", "keep": 1}})
        assert _listed(r)["srv"]["pid"] == pid
        r.wait_log("settings changed: limits.wakeOnMatch, limits.maxAgents, limits.maxMatches, "
                   "limits.matchLines, limits.pollMs, limits.stopTimeout, output.maxBytes, "
                   "output.keep applied in place (the running watchers go on)")
        _append(log, "\n".join(f"ERROR {k:04d} " + "x" * 100 for k in range(600)))
        wait_for(lambda: any(m["line"].startswith("ERROR 0599") for m in r.matches("f")),
                 "the last match")  # (~150 KiB of records: rotated at 64 KiB, one kept)
        out = tmp_path / ".watchrun" / "watchers"
        assert (out / "f.jsonl.1").exists() and not (out / "f.jsonl.2").exists()
        _reload(r, over, {"limits": {"maxLineBytes": "32KiB"}})
        r.wait_log("[srv] restarting: limits.maxLineBytes changed")
        r.wait_log("[f] restarting: limits.maxLineBytes changed")
        wait_for(lambda: _listed(r)["srv"]["pid"] not in (None, pid), "the command again")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert err.count("[srv] started run") == 2 and "config changed" not in err, err


def test_a_reload_that_finds_a_layer_emptied_keeps_the_running_config(
        tmp_path: Path) -> None:
    """explore-layering F3: a layer truncated mid-write (an editor, `cat >`) was applied on a
    reload, its watchers removed and its commands killed, with a warning, an ok reload and no
    problem in `status`. Now the reload is refused as a missing layer is: the log, `status`
    and the reload metric say why, and everything runs on. A layer empty at the start and
    still empty is a warning, as before."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - {id: b, path: b.log, pattern: ERROR}\n", encoding="utf-8")
    services = tmp_path / "services.yaml"
    services.write_text("watchers:\n  - {id: svc, command: 'echo up; exec sleep 1000', "
                        "pattern: up}\n", encoding="utf-8")
    spare = tmp_path / "spare.yaml"
    spare.write_text("# nothing yet\n", encoding="utf-8")
    port = free_port()
    r = LiveRunner(base, "-c", str(services), "-c", str(spare), "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        pid = wait_for(lambda: _listed(r)["svc"]["pid"], "the command's pid")
        _reload(r, services, "")
        assert set(_listed(r)) == {"b", "svc"} and _listed(r)["svc"]["pid"] == pid
        (problem,) = r.control({"cmd": "status"})["problems"]
        assert f"reload failed: {services}: empty now" in problem
        r.wait_log("error: reload failed: <dir>/services.yaml: empty now, but it had "
                   "settings (a file being written, or emptied by mistake?): its watchers and "
                   "agents would be removed; to remove them, leave a setting in it (`limits: "
                   "{}`), or restart the runner; keeping the running one")
        scrape = Scrape(port)
        assert scrape("watchrun_config_last_reload_successful") == 0
        assert scrape("watchrun_config_reloads_total", result="failed") == 1
        services.write_text("limits: {}\n", encoding="utf-8")  # (removed on purpose: applies)
        r.send(signal.SIGHUP)
        wait_for(lambda: _listed(r)["svc"]["status"] == "stopped", "svc removed: stopped")
        assert r.control({"cmd": "status"})["problems"] == []
        assert Scrape(port)("watchrun_config_last_reload_successful") == 1
    finally:
        assert r.stop() == 0
    assert "spare.yaml: empty config file: this layer adds nothing" in r.stderr()
