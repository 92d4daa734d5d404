"""What `watchrun clear` and a reload that removes a gone file's watcher leave on disk.

`wr` runs each `watchrun` command in this process (tests/inproc.py): they ask the runner (a
`clear` with none is refused) or read."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

from liverunner import LiveRunner, wait_for, write_config
from test_runtime_watchers import listed, wr


def state_files(out: Path, wid: str) -> set[str]:
    """The names under state/ that belong to watcher `wid`."""
    state = out / "state"
    return {p.name for p in state.iterdir()
            if p.name.startswith(f"{wid}.") or p.name == f"watchers-{wid}.unwritten"}


def every_file(wid: str) -> set[str]:
    return {f"{wid}.status.json", f"{wid}.tail", f"{wid}.checkpoint.json",
            f"watchers-{wid}.unwritten"}


def test_clear_removes_the_state_files_of_the_watchers_it_forgets(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("")
    (tmp_path / "old.log").write_text("")
    keep = {"id": "keep", "path": "a.log", "pattern": "ERROR"}
    config = write_config(tmp_path, {"watchers": [
        keep, {"id": "old", "path": "old.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun"
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert wr(tmp_path, "add", "rtfile", "--path", "a.log", "--pattern", "ERROR"
                  ).returncode == 0
        assert wr(tmp_path, "add", "rtcmd", "--command", "echo ERROR cmd", "--pattern", "ERROR"
                  ).returncode == 0
        with open(tmp_path / "a.log", "a") as f:
            f.write("ERROR one\n")
        with open(tmp_path / "old.log", "a") as f:
            f.write("ERROR old\n")
        wait_for(lambda: all(len(r.matches(w)) == 1 for w in ("keep", "rtfile", "rtcmd", "old")),
                 "a match of each watcher")
        wait_for(lambda: listed(r)["rtcmd"]["status"] == "exited", "rtcmd exited")
        for wid in ("rtfile", "keep"):
            assert wr(tmp_path, "stop", wid).returncode == 0
        write_config(tmp_path, {"watchers": [keep]})  # `old` removed; its file still there
        r.send(signal.SIGHUP)
        r.wait_log("[old] removed; stopped")
        for wid in ("keep", "rtfile", "old"):
            wait_for(lambda w=wid: state_files(out, w) == every_file(w), f"{wid}'s state files")
        assert state_files(out, "rtcmd") == every_file("rtcmd") - {"rtcmd.checkpoint.json"}
        assert listed(r)["old"]["status"] == "stopped"

        p = wr(tmp_path, "clear", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["cleared"] == 4, p.stdout + p.stderr
        assert listed(r) == {}
        for wid in ("rtfile", "rtcmd", "old"):  # forgotten for good: nothing of them in state/
            assert state_files(out, wid) == set(), wid
            assert (out / "watchers" / f"{wid}.jsonl").exists()  # the JSONL stays
        # The config's own watcher keeps its checkpoint: `start` resumes it where it stopped.
        assert state_files(out, "keep") == {"keep.checkpoint.json"}
        with open(tmp_path / "a.log", "a") as f:
            f.write("ERROR two\n")
        assert wr(tmp_path, "start", "keep").returncode == 0
        wait_for(lambda: len(r.matches("keep")) == 2, "keep's second match")
        assert [m["line"] for m in r.matches("keep")] == ["ERROR one", "ERROR two"]
        # Added again under the same id, a cleared watcher is new: from the end of its file.
        assert wr(tmp_path, "add", "rtfile", "--path", "a.log", "--pattern", "ERROR"
                  ).returncode == 0
        with open(tmp_path / "a.log", "a") as f:
            f.write("ERROR three\n")
        wait_for(lambda: "ERROR three" in [m["line"] for m in r.matches("rtfile")], "three")
        assert [m["line"] for m in r.matches("rtfile")] == ["ERROR one", "ERROR three"]
    finally:
        assert r.stop() == 0
    p = wr(tmp_path, "clear")  # no runner: refused, nothing removed
    assert p.returncode == 3 and "no live runner" in p.stderr
    assert state_files(out, "keep") == every_file("keep")


def test_clear_keeps_a_note_of_unexplained_seqs_and_follows_no_link(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": []})
    out = tmp_path / ".watchrun"
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"\0" * 4096)
    r = LiveRunner(config)
    try:
        r.wait_running()
        for wid in ("noted", "linked"):
            assert wr(tmp_path, "add", wid, "--command", "echo ERROR", "--pattern", "ERROR"
                      ).returncode == 0
            wait_for(lambda w=wid: listed(r)[w]["status"] == "exited", f"{wid} exited")
        noted = out / "state" / "watchers-noted.unwritten"
        noted.write_bytes(b'{"runs": [[9, 9, {"match": 1}]]}'.ljust(4096, b"\0"))
        linked = out / "state" / "watchers-linked.unwritten"
        linked.unlink()
        linked.symlink_to(outside)
        p = wr(tmp_path, "clear", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["cleared"] == 2
        assert state_files(out, "noted") == {"watchers-noted.unwritten"}  # seq 9 explained
        assert noted.read_bytes().startswith(b'{"runs"')  # by the next start, as before
        assert linked.is_symlink() and outside.read_bytes() == b"\0" * 4096
        r.wait_log("cannot delete the state files of the forgotten watcher")
    finally:
        assert r.stop() == 0


def test_a_reload_forgets_a_removed_watcher_whose_file_is_gone(tmp_path: Path) -> None:
    """The DaemonSet's pods.py: a pod goes away, its log's watcher leaves the config."""
    logs = {}
    for pod in ("a", "b", "c"):
        (tmp_path / "pods" / pod).mkdir(parents=True)
        logs[pod] = tmp_path / "pods" / pod / "0.log"
        logs[pod].write_text(f"ERROR {pod}\n")
    specs = {p: {"id": f"pod.{p}", "path": str(logs[p]), "pattern": "ERROR", "fromStart": True}
             for p in logs}
    config = write_config(tmp_path, {"watchers": list(specs.values())})
    out = tmp_path / ".watchrun"
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: all(len(r.matches(f"pod.{p}")) == 1 for p in logs), "a match each")
        wait_for(lambda: all(f"pod.{p}.checkpoint.json" in state_files(out, f"pod.{p}")
                             for p in logs), "the checkpoints")
        shutil.rmtree(tmp_path / "pods" / "b")  # pod b is gone; c is removed, its file stays
        write_config(tmp_path, {"watchers": [specs["a"]]})
        r.send(signal.SIGHUP)
        r.wait_log("[pod.b] its file")
        assert "gone: forgotten" in r.stderr()
        assert set(listed(r)) == {"pod.a", "pod.c"}
        assert listed(r)["pod.c"]["status"] == "stopped"
        assert state_files(out, "pod.b") == set()
        assert (out / "watchers" / "pod.b.jsonl").exists()  # for the shipper
        assert state_files(out, "pod.c") == every_file("pod.c")
        assert listed(r)["pod.a"]["status"] == "running"
        with open(logs["a"], "a") as f:
            f.write("ERROR a2\n")
        wait_for(lambda: len(r.matches("pod.a")) == 2, "pod.a goes on")
    finally:
        assert r.stop() == 0
    p = wr(tmp_path, "list", "--json")  # no runner: the snapshots
    assert {w["id"] for w in json.loads(p.stdout)["watchers"]} == {"pod.a", "pod.c"}
