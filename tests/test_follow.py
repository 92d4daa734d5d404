"""`matches --follow` and `logs --follow`: the readers against a real JsonlSink (rotation, several
rotations between reads, rotation past `keep`, a recreated stream, a torn record) and the real
CLI against real runners (rotation, a runner restart, Ctrl-C, a closed pipe)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from liverunner import LiveRunner, wait_for, watchrun_bin, write_config

from watchrun.clock import SystemClock
from watchrun.output import records, tailfile
from watchrun.output.sink import JsonlSink
from watchrun.views.follow import JsonlFollower, TailFollower

# --- the JSONL reader --------------------------------------------------------------------


def sink(path: Path, max_bytes: int = 1500, keep: int = 100) -> JsonlSink:
    return JsonlSink(path, "app", max_bytes=max_bytes, keep=keep, clock=SystemClock())


def write(s: JsonlSink, n: int) -> None:
    for _ in range(n):
        s.write("match", {"line": f"line {s.next_seq} " + "x" * 80})


def seqs(recs: list[dict[str, Any]]) -> list[int]:
    return [r["seq"] for r in recs]


# One step: write N records, or read (None).
STEPS = st.lists(st.one_of(st.integers(1, 60), st.none()), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(steps=STEPS)
def test_every_record_once_in_order_however_reads_and_rotations_interleave(
        steps: list[int | None]) -> None:
    """With enough rotated files kept, reads between any number of rotations return every
    record exactly once, in order; the old file is finished before the new one is read."""
    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / "app.jsonl"
        s = sink(path)
        write(s, 3)
        follower = JsonlFollower(path)
        follower.start_after(2)
        got = []
        for step in [*steps, None]:
            if step is None:
                got += follower.read()
            else:
                write(s, step)
        assert seqs(got) == list(range(3, s.next_seq))
        assert follower.gaps == 0 and follower.restarts == 0
        s.close()
        follower.close()
    finally:
        shutil.rmtree(folder)


@settings(max_examples=40, deadline=None)
@given(steps=STEPS)
def test_what_rotation_removed_before_it_was_read_is_counted_never_hidden(
        steps: list[int | None]) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / "app.jsonl"
        s = sink(path, keep=1)
        follower = JsonlFollower(path)
        follower.start_after(0)
        got = []
        for step in [*steps, None]:
            if step is None:
                got += follower.read()
            else:
                write(s, step)
        got_seqs = seqs(got)
        assert got_seqs == sorted(set(got_seqs))  # once each, in order
        assert len(got) + follower.gaps == s.next_seq - 1  # the rest is counted as gaps
        assert got_seqs[-1:] == [s.next_seq - 1] or not got_seqs
        s.close()
        follower.close()
    finally:
        shutil.rmtree(folder)


def test_a_listing_made_in_the_middle_of_a_rotation_skips_no_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner rotates (`.3` → `.4`, `.2` → `.3`, `.1` → `.2`, the file → `.1`, a new file)
    while a follower catching up lists the rotated files: the listing, made after `.3` → `.4`,
    lacks `.3`; the files are opened after the rotation ended, each name names the file opened,
    and the generation renamed to `.3` meanwhile was skipped, its records counted as "rotated
    away (output.keep)" though all were kept (`matches --follow` lost 57 records in a loaded
    run). The seam: the rest of the rotation happens right after the listing."""
    path = tmp_path / "app.jsonl"
    s = sink(path, keep=10)
    write(s, 4)
    while not Path(f"{path}.3").exists():
        write(s, 1)
    real = records.retained_files
    listed: list[list[str]] = []

    def mid_rotation(where: Path, keep: int | None = None) -> list[Path]:
        if listed:
            return real(where, keep)
        os.rename(f"{path}.3", f"{path}.4")  # the rotation has begun
        found = real(where, keep)
        listed.append([p.name for p in found])
        for n in (2, 1):  # ... and goes on once the listing is made
            os.rename(f"{path}.{n}", f"{path}.{n + 1}")
        os.rename(path, f"{path}.1")
        path.write_bytes(b"")
        return found

    monkeypatch.setattr(records, "retained_files", mid_rotation)
    got = seqs(list(records.iter_records(path)))
    assert "app.jsonl.3" not in listed[0]  # the listing was made mid-rotation
    assert got == list(range(1, s.next_seq)), got
    s.close()


def test_a_writer_rotating_at_every_look_for_a_while_is_waited_for_not_given_up_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner rotating its JSONL faster than a follower looks (64 KiB files at 40k records
    a second, another follower reading too): the names changed between the two listings of
    each of the 10 quick tries, and `matches -f` ended with `read_failed` "files kept rotating
    while reading; try again" (explorer views, item 6). Now the later tries wait a little
    first. The seam: the writer rotates right after each of the first 24 listings (12 tries)."""
    path = tmp_path / "app.jsonl"
    s = sink(path, max_bytes=300, keep=100)
    write(s, 3)
    real = records.retained_files
    listings: list[int] = []

    def rotating(where: Path, keep: int | None = None) -> list[Path]:
        found = real(where, keep)
        listings.append(len(found))
        if len(listings) <= 24:
            write(s, 3)  # past max_bytes: one rotation or more
        return found

    monkeypatch.setattr(records, "retained_files", rotating)
    got = seqs(list(records.iter_records(path)))
    assert len(listings) > 24  # it looked again after the writer stopped rotating at every look
    assert got == list(range(1, s.next_seq)), got
    s.close()


def test_a_second_rotation_at_the_same_step_of_the_listing_skips_no_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, with `output.keep` reached (`.3` → `.4` replaces the oldest), and the next
    rotation begun when the names are listed again to confirm the snapshot: that listing,
    made at the same step, is the first one again, so the names alone pass a snapshot that
    lacks the generation renamed to `.3` by the first rotation. The seams: the rest of the
    first rotation right after the first listing, the first step of the next right before
    the second, and the rest of it right after."""
    path = tmp_path / "app.jsonl"
    s = sink(path, keep=4)
    while not Path(f"{path}.4").exists():
        write(s, 1)
    real = records.retained_files
    calls: list[list[str]] = []

    def rest_of_rotation() -> None:
        for n in (2, 1):
            os.rename(f"{path}.{n}", f"{path}.{n + 1}")
        os.rename(path, f"{path}.1")
        path.write_bytes(b"")

    def mid_rotations(where: Path, keep: int | None = None) -> list[Path]:
        if len(calls) >= 2:
            return real(where, keep)
        os.rename(f"{path}.3", f"{path}.4")  # a rotation has begun
        found = real(where, keep)
        calls.append([p.name for p in found])
        rest_of_rotation()
        return found

    monkeypatch.setattr(records, "retained_files", mid_rotations)
    got = seqs(list(records.iter_records(path)))
    assert calls[0] == calls[1] and "app.jsonl.3" not in calls[0]  # the same step twice
    assert got == list(range(got[0], s.next_seq)), got
    s.close()


def _recs(*items: int | str) -> str:
    """JSONL lines: a record of each int seq, each str as it is (a line that is no record)."""
    return "".join(f"{x}\n" if isinstance(x, str) else json.dumps(
        {"schema": 1, "seq": x, "kind": "match", "line": f"n{x}"}) + "\n" for x in items)


def test_lines_that_are_no_records_are_counted_once_whatever_the_holes(tmp_path: Path) -> None:
    """Explorer views F1: at each seq hole the follower read the kept files again and counted
    their bad lines again (2 garbage lines said as 6 skipped after two holes). Now a line is
    counted by the read that meets it first; the catch-up counts only what lies between the
    records it catches up on, in files this follower never read."""
    path = tmp_path / "w.jsonl"
    path.write_text(_recs("garbage1", "garbage2", 1))
    follower = JsonlFollower(path)
    follower.start_after(0)
    assert seqs(follower.read()) == [1] and follower.stats.invalid == 2
    for seq in (4, 7):  # two holes in the same file
        with path.open("a") as fh:
            fh.write(_recs(seq))
        assert seqs(follower.read()) == [seq]
    assert (follower.stats.invalid, follower.missing) == (2, 4)
    path.rename(tmp_path / "w.jsonl.2")  # rotated twice before the follower looked again:
    (tmp_path / "w.jsonl.1").write_text(_recs(8, "garbage3", 9))  # a bad line it never read
    path.write_text(_recs(10))
    assert seqs(follower.read()) == [8, 9, 10]
    assert (follower.stats.invalid, follower.missing, follower.gaps) == (3, 4, 0)


def test_a_stream_removed_and_begun_again_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    s = sink(path, max_bytes=1 << 20)
    write(s, 5)
    follower = JsonlFollower(path)
    follower.start_after(5)
    assert follower.read() == []
    s.close()
    path.unlink()  # the runner's output dir was cleared while it was stopped
    assert follower.read() == []
    s = sink(path, max_bytes=1 << 20)
    write(s, 3)
    assert seqs(follower.read()) == [1, 2, 3] and follower.restarts == 1
    s.close()


def test_a_stream_that_does_not_exist_yet_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "watchers" / "app.jsonl"
    follower = JsonlFollower(path)
    follower.start_after(0)
    assert follower.read() == []
    path.parent.mkdir()
    s = sink(path)
    write(s, 40)  # rotated several times before the first look
    assert seqs(follower.read()) == list(range(1, 41))
    s.close()


def test_a_record_being_written_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    s = sink(path, max_bytes=1 << 20)
    write(s, 1)
    follower = JsonlFollower(path)
    follower.start_after(0)
    assert seqs(follower.read()) == [1]
    line = s.record("match", {"line": "half"})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, line[:20])
    assert follower.read() == []
    os.write(fd, line[20:])
    os.close(fd)
    assert [r["line"] for r in follower.read()] == ["half"]
    s.close()


def test_tail_follower_counts_lines_that_scrolled_away(tmp_path: Path) -> None:
    path = tmp_path / "app.tail"
    follower = TailFollower(path)
    assert follower.first(10) == [] and follower.read() == ([], 0)
    path.write_bytes(tailfile.render("r1", 3, ["a", "b", "c"]))
    assert follower.read() == (["a", "b", "c"], 0)
    path.write_bytes(tailfile.render("r1", 3, ["a", "b", "c"]))  # rewritten, nothing new
    assert follower.read() == ([], 0)
    path.write_bytes(tailfile.render("r1", 10, ["h", "i", "j"]))  # 7 new, 3 kept
    assert follower.read() == (["h", "i", "j"], 4)
    path.write_bytes(tailfile.render("r2", 2, ["new", "run"]))  # the watcher started again
    assert follower.read() == (["new", "run"], 0)
    assert TailFollower(path).first(1) == ["run"]


def test_a_tail_header_cannot_be_forged_by_a_line() -> None:
    """The header starts with a control character, which a sanitized line never holds."""
    forged = tailfile.MARK.lstrip("\x1e") + '{"run":"x","end":99}'
    parsed = tailfile.parse(f"{forged}\nline\n".encode())
    assert parsed.run is None and parsed.lines == [forged, "line"]
    assert tailfile.parse(tailfile.render("r", 5, ["a", forged])).lines == ["a", forged]


# --- the real CLI against real runners -----------------------------------------------------


def follow(cwd: Path, *args: str, poll: bool = False) -> subprocess.Popen[str]:
    """`watchrun ARGS -c watch.yaml` (a follower; the config named, so stderr says nothing
    about finding it); `poll`: woken by polling, as without inotify."""
    env = {**os.environ, "WATCHRUN_FORCE_POLL": "1"} if poll else None
    return subprocess.Popen([watchrun_bin(), *args, "-c", "watch.yaml"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


class Lines:
    """Reads a follower's stdout line by line, each read bounded by a deadline (from the raw
    descriptor: a buffered reader would hold lines that `select` no longer reports)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc, self.fd, self.buf = proc, proc.stdout.fileno(), b""

    def take(self, n: int, timeout: float = 30.0) -> list[str]:
        end = time.monotonic() + timeout
        while (have := self.buf.count(b"\n")) < n:
            left = end - time.monotonic()
            ready = select.select([self.fd], [], [], max(0.0, left))[0]
            assert ready, f"only {have} of {n} lines after {timeout}s"
            part = os.read(self.fd, 1 << 16)
            assert part, f"the follower ended: {self.buf[-300:]!r}"
            self.buf += part
        lines = self.buf.split(b"\n")
        self.buf = b"\n".join(lines[n:])
        return [x.decode() for x in lines[:n]]


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C: SIGINT, then the exit status and what it said on stderr. A follower still there
    after 30 s fails the test with its signal state (a loaded run once timed out here, and
    what the process was doing was not kept)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        state = [x for x in status.splitlines() if x.startswith(("State", "Sig", "Shd"))]
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
        raise AssertionError(f"the follower did not end on SIGINT: {state}, in {wchan!r}"
                             ) from None
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def recorded_matches(r: LiveRunner, wid: str) -> int:
    """Match records of `wid` in its JSONL and every rotated generation of it."""
    from watchrun.output.records import ReadStats, iter_records

    path = r.out / "watchers" / f"{wid}.jsonl"
    return sum(x["kind"] == "match" for x in iter_records(path, since_seq=0, stats=ReadStats()))


def append(path: Path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.writelines(x + "\n" for x in lines)


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_matches_follow_across_rotation_then_ctrl_c(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.touch()
    config = write_config(tmp_path, {"output": {"maxBytes": "64KiB", "keep": 20}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    proc = None
    try:
        r.wait_running()
        append(log, ["ERROR early 1", "ERROR early 2", "INFO no"])
        wait_for(lambda: len(r.matches("app")) == 2, "two matches")
        proc = follow(tmp_path, "matches", "app", "--follow", "--json", "--lines", "1",
                      poll=mode == "poll")
        out = Lines(proc)
        first = json.loads(out.take(1)[0])
        assert first["line"] == "ERROR early 2" and first["kind"] == "match"
        pad = "p" * 900
        n = 300  # ~330 KiB of records: five rotations at 64 KiB
        for start in range(0, n, 50):
            append(log, [f"ERROR {i:04d} {pad}" for i in range(start, start + 50)])
        try:
            docs = [json.loads(x) for x in out.take(n)]
        except AssertionError as exc:  # whose lag: the runner's records, or the follower's?
            raise AssertionError(f"{exc}; the runner recorded {recorded_matches(r, 'app')} "
                                 "matches in all its generations") from None
        assert [d["line"].split()[1] for d in docs] == [f"{i:04d}" for i in range(n)]
        got = [d["seq"] for d in docs]
        assert got == sorted(set(got))
        assert (r.out / "watchers" / "app.jsonl.1").exists()  # it did rotate under it
        assert interrupt(proc) == (0, "")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        assert r.stop() == 0


def test_matches_follow_across_a_runner_restart_and_a_recreated_stream(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.touch()
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    r.wait_running()
    proc = follow(tmp_path, "matches", "app", "-f")  # human form
    out = Lines(proc)
    try:
        append(log, ["ERROR a"])
        assert out.take(1)[0].endswith("app.log:1  ERROR a")
        assert r.stop() == 0
        append(log, ["ERROR b"])  # while no runner runs: read by the next one
        r = LiveRunner(config)
        r.wait_running()
        append(log, ["ERROR c"])
        assert [x.rsplit("  ", 1)[1] for x in out.take(2)] == ["ERROR b", "ERROR c"]
        assert r.stop() == 0
        shutil.rmtree(r.out / "watchers")  # the stream is removed: a new one starts at seq 1
        append(log, ["ERROR d"])
        r = LiveRunner(config)
        r.wait_running()
        assert out.take(1)[0].endswith("ERROR d")
        code, err = interrupt(proc)
        assert code == 0 and "recreated; it starts over at seq 1" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        assert r.stop() == 0


def test_logs_follow_prints_each_line_once_and_counts_what_it_missed(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.touch()
    config = write_config(tmp_path, {"limits": {"maxLogLines": 3}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    proc = None
    try:
        r.wait_running()
        append(log, ["one", "two"])
        wait_for(lambda: (r.out / "state" / "app.tail").exists()
                 and b"two" in (r.out / "state" / "app.tail").read_bytes(), "the snapshot")
        proc = follow(tmp_path, "logs", "app", "--follow", "--lines", "1", "--json")
        out = Lines(proc)
        assert json.loads(out.take(1)[0]) == {"id": "app", "line": "two"}
        append(log, ["three"])
        assert json.loads(out.take(1)[0])["line"] == "three"
        batch = [f"b{i}" for i in range(10)]  # more than maxLogLines at once
        append(log, batch)
        shown = [json.loads(x)["line"] for x in out.take(3)]
        assert shown == batch[-3:]  # the newest, once, in order
        assert r.control({"cmd": "restart", "id": "app"})["ok"]
        append(log, ["after restart"])
        assert json.loads(out.take(1)[0])["line"] == "after restart"
        code, err = interrupt(proc)
        assert code == 0 and "7 lines of app not shown" in err and "its last 3" in err
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        assert r.stop() == 0


@pytest.mark.parametrize("writes", [True, False])
def test_a_closed_pipe_ends_the_follower_quietly(tmp_path: Path, writes: bool) -> None:
    """`watchrun matches app -f | head -1`: once head has its line and exits, the follower ends
    (141, no traceback), whether more matches are written or none (before, with none it hung
    for as long as the watcher matched nothing: only a write found the pipe closed), as with
    `tail -f | head -1`."""
    log = tmp_path / "app.log"
    log.touch()
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    proc = None
    try:
        r.wait_running()
        append(log, ["ERROR 1"])
        wait_for(lambda: r.matches("app"), "the match")
        proc = follow(tmp_path, "matches", "app", "-f")
        Lines(proc).take(1)
        assert proc.stdout is not None
        proc.stdout.close()  # as `| head -1` does once it has its line

        def ended() -> bool:
            if writes:
                append(log, ["ERROR more"])
            return proc.poll() is not None
        wait_for(ended, "the follower to end")
        assert proc.returncode == 141
        assert proc.stderr is not None and proc.stderr.read() == ""  # quietly, no traceback
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        assert r.stop() == 0


def raw(path: Path, seq: int, kind: str = "match", **fields: Any) -> None:
    """Appends one record as a runner writes it (a `gap{unwritten}` needs no full disk)."""
    rec = {"schema": 1, "seq": seq, "cursor": f"app:{seq:016x}",
           "ts": "2026-12-05T23:10:00.000Z", "kind": kind, **fields}
    with path.open("a") as f:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def unwritten(path: Path, lo: int, hi: int) -> None:
    raw(path, hi, "gap", reason="unwritten", fromSeq=lo, toSeq=hi, records=hi - lo + 1,
        kinds={"match": hi - lo + 1}, message=f"seq {lo} to {hi} could not be written")


def test_seqs_a_gap_unwritten_accounts_for_are_not_rotated_away(tmp_path: Path) -> None:
    """A full disk at shutdown leaves seqs unwritten and one `gap{unwritten}` record that says
    so: the follower counted them as "rotated away (output.keep)"; a hole no record explains,
    in a file never rotated, is damage, not rotation."""
    path = tmp_path / "app.jsonl"
    s = sink(path, max_bytes=1 << 20)
    write(s, 3)
    s.close()
    follower = JsonlFollower(path)
    follower.start_after(3)
    unwritten(path, 4, 8)
    raw(path, 9, line="after the gap")
    assert seqs(follower.read()) == [8, 9]
    assert (follower.gaps, follower.missing) == (0, 0)
    raw(path, 13, line="after a hole")  # 10 to 12: in no file, and no record says why
    assert seqs(follower.read()) == [13]
    assert (follower.gaps, follower.missing) == (0, 3)


def test_matches_follow_says_what_a_hole_is(tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = out / "watchers" / "app.jsonl"
    path.parent.mkdir(parents=True)
    s = sink(path, max_bytes=1 << 20)
    write(s, 2)
    s.close()
    proc = subprocess.Popen([watchrun_bin(), "matches", "app", "-f", "--output-dir", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = Lines(proc)
        lines.take(2)
        unwritten(path, 3, 7)
        raw(path, 8, line="after the gap")
        assert lines.take(1)[0].endswith("after the gap")
        raw(path, 12, line="after a hole")
        assert lines.take(1)[0].endswith("after a hole")
        code, err = interrupt(proc)
        assert code == 0
        assert "rotated away" not in err, err
        assert err == ("watchrun: app: 3 records are missing from its JSONL and no record says "
                       "why (the file may be damaged)\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
