"""`watchrun logs` marks a line the reader cut at `maxLineBytes` as `matches` does."""

from __future__ import annotations

from pathlib import Path

from liverunner import LiveRunner, cli, wait_for, write_config


def test_logs_says_how_much_of_a_line_the_reader_cut(tmp_path: Path) -> None:
    """A line longer than `maxLineBytes` (1 KiB here) is kept to its first 1 KiB: `matches`
    said `[cut: N more bytes not kept]` after it, `logs` showed the 1 KiB as if it were the
    whole line. Now `logs` says it too (with the runner running, and from the snapshot it
    left), and a whole line still has no note."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": 1024}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)

    def logs() -> list[str]:
        return cli("logs", "app", "-c", "watch.yaml", cwd=tmp_path,
                   timeout=60).stdout.splitlines()

    try:
        r.wait_running()
        with (tmp_path / "app.log").open("a") as f:
            f.write("ERROR huge " + "x" * 3000 + " END\nplain line\n")
        wait_for(lambda: r.matches("app"), "the match")
        (cut,) = r.matches("app")
        omitted = cut["omittedBytes"]
        assert omitted > 0
        note = f" [cut: {omitted} more bytes not kept]"
        huge = cli("matches", "app", "-c", "watch.yaml", cwd=tmp_path,
                   timeout=60).stdout.splitlines()[0]
        assert huge.endswith("xxx" + note)
        tail = r.out / "state" / "app.tail"
        wait_for(lambda: tail.exists() and b"plain line" in tail.read_bytes(), "the snapshot")
        kept = cut["line"]
        assert logs() == [kept + note, "plain line"]
    finally:
        assert r.stop() == 0
    assert logs() == [kept + note, "plain line"]
