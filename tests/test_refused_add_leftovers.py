"""An `add` refused `start_failed` keeps nothing of its watcher but its JSONL (docs/cli.md,
`add`; docs/control.md): an explorer's F5 found its empty `state/watchers-ID.unwritten` reserve
(8 KiB) left behind, one per refused add, and its metric series kept for the runner's life;
`clear`, even `--all`, removed neither. Now the refusal removes them, and `clear` forgets an
empty note such an add (of an earlier version) left, naming its id among the leftovers."""

from __future__ import annotations

import json
from pathlib import Path

from liverunner import LiveRunner, cli, write_config
from test_metrics_live import Scrape, free_port

from watchrun.output.notefile import NOTE_BYTES, SLOT, encode


def test_a_refused_add_leaves_no_note_and_no_series(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "a.log", "pattern": "x"}]})
    state = tmp_path / ".watchrun" / "state"
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_running()
        for _ in range(2):  # (a script that retries the bad add: nothing piles up)
            p = cli("add", "c2b", "--command", "pwd", "--cwd", "/nonexistent-watchrun-dir",
                    "--pattern", "x", "-c", config, cwd=tmp_path)
            assert p.returncode == 3 and "c2b could not be started" in p.stderr, p.stderr
            assert not (state / "watchers-c2b.unwritten").exists(), sorted(
                x.name for x in state.iterdir())
            assert Scrape(port).watcher("c2b") == {}
        assert (state / "watchers-a.unwritten").exists()  # (a watcher that runs keeps its own)
        assert [x["kind"] for x in r.records("c2b")].count("error") == 2  # (the JSONL stays)
        p = cli("clear", "--all", "--json", "-c", config, cwd=tmp_path)
        assert p.returncode == 0 and json.loads(p.stdout)["leftovers"] == [], p.stdout
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def test_clear_forgets_an_empty_note_an_earlier_add_left(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": []})
    state = tmp_path / ".watchrun" / "state"
    r = LiveRunner(config)
    try:
        r.wait_running()
        empty = state / "watchers-c2b.unwritten"  # as a refused add left it: all zeros
        empty.write_bytes(b"\0" * NOTE_BYTES)
        keeps = state / "watchers-c2k.unwritten"  # seqs its JSONL does not explain yet
        keeps.write_bytes(encode(1, [(5, 5, {"match": 1})], 0).ljust(NOTE_BYTES, b"\0"))
        p = cli("clear", "--json", "-c", config, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["leftovers"] == ["c2b"], doc
        assert doc["message"] == "cleared 0 watchers; also forgot what an earlier runner left " \
            "of c2b", doc
        assert not empty.exists()
        assert keeps.read_bytes()[:SLOT].startswith(b'{"gen":1')  # kept for its next start
        p = cli("clear", "--json", "-c", config, cwd=tmp_path)
        assert json.loads(p.stdout)["leftovers"] == [], p.stdout  # (nothing more to forget)
    finally:
        assert r.stop() == 0
