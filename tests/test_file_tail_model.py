"""Model-based test (after Vector's file_watcher tests): random writes, rotations (also several
while the tailer is stopped or stalled), truncations (copies kept, or compressed while the
tailer looks), rewrites that keep the head, clean and crash restarts, against real files and
the real pipeline and sink; rotateWait passes only in a step of its own (the model's clock).
Every complete line is recorded exactly once, in order; no `gap` or `rotate` record claims a
byte was lost, nor an archive lines never read (the writer waits for the tailer before a
copytruncate, so nothing is)."""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filehelpers import spec_for, wait_for
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from liverunner import read_records

from watchrun.clock import SystemClock
from watchrun.config.model import Limits
from watchrun.events import SourceContext
from watchrun.match.matcher import Matcher
from watchrun.match.redact import Redactor, redactor
from watchrun.match.sanitize import raw_text, sanitize
from watchrun.notify import Notifier
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.file import FileSource
from watchrun.sources.generation import Generation

LIMITS = Limits(rotate_wait_ms=200)


class FreezableStore(CheckpointStore):
    """A crash: saves after `frozen` was set never reach the disk (SIGKILL)."""

    frozen = False

    def save(self, watcher_id: str, state: FileState, ticket: int | None = None, *,
             first: Callable[[], None] | None = None) -> bool:
        return False if self.frozen else super().save(watcher_id, state, ticket, first=first)


class ModelClock(SystemClock):
    """The model's time: it passes only in the `time_passes` step, so a late write comes
    within rotateWait however slow the host is (on a loaded one, 200 ms of real time could
    pass between the tailer's switch and the writer's late line: a `late-write` gap, right
    for such a writer, not the one modelled)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


class TailModel(RuleBasedStateMachine):
    """The model is the list of lines a writer completed; the runner must record exactly it.

    The writer waits for the tailer to catch up before a copytruncate: lines written between
    the copy and the truncation are lost by design (documented as unrecoverable)."""

    force_poll = False
    generations = False
    redactor: Redactor | None = None
    source_class: type[FileSource] = FileSource
    """Add the rules of several generations at once (stopped, stalled, crashed, rewritten)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tailmodel-"))
        self.path = self.dir / "app.log"
        self.path.write_bytes(b"")
        self.jsonl = self.dir / "out" / "watchers" / "w.jsonl"
        self.jsonl.parent.mkdir(parents=True)
        self.loop = asyncio.new_event_loop()
        self.notifier = Notifier(10, force_poll=self.force_poll)
        self.store = FreezableStore(self.dir / "state")
        self.clock = ModelClock()
        self.expected: list[str] = []
        self.partial: str | None = None  # an unterminated line at the end of the file
        self.n = 0
        self.rotations = 0
        self.task: asyncio.Task[None] | None = None
        self._start()

    # -- harness ------------------------------------------------------------------------------
    def _start(self) -> None:
        spec = spec_for(self.path)
        self.sink = JsonlSink(self.jsonl, "w", max_bytes=1 << 30, keep=1, clock=SystemClock())
        pipeline = WatcherPipeline(spec, LIMITS, self.sink, AsyncWriter(self.sink),
                                   Matcher("."), RunLog(stream=io.StringIO(), quiet=True),
                                   redactor=self.redactor)
        self.source = self.source_class(spec, LIMITS, self.store, self.notifier, self.clock)
        self.task = self.loop.create_task(self.source.run(pipeline))
        self._run(wait_for(lambda: self._parked(), 30, "source started"))

    def _stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        self._run(asyncio.gather(self.task, return_exceptions=True))
        self.task = None
        self.sink.close()

    def _run(self, coro: object) -> None:
        self.loop.run_until_complete(coro)  # type: ignore[arg-type]
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()

    def _parked(self) -> bool:
        return bool(self.notifier.watches) and all(w.waiting for w in self.notifier.watches)

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.jsonl)

    def texts(self) -> list[str]:
        return [r["line"] for r in self.records() if r["kind"] == "match"]

    def _catch_up(self) -> None:
        """Wait until every line is recorded and the tailer follows the file now at the path.
        (A generation created and removed before the tailer ever looked cannot be read.)"""
        want, inode = len(self.expected), self.path.stat().st_ino

        def done() -> bool:
            return len(self.texts()) >= want and self.source.inode == inode

        try:
            self._run(wait_for(done, 30, f"{want} lines from inode {inode}"))  # (a loaded host)
        except AssertionError as exc:  # (what differs, to tell a lost line from a missed switch)
            got = self.texts()
            raise AssertionError(
                f"{exc}: {len(got)} recorded, following inode {self.source.inode}; missing "
                f"{[x for x in self.expected if x not in got]}; records "
                f"{[(r['kind'], r.get('line') or r.get('path')) for r in self.records()][-12:]}"
            ) from None

    def _settle(self) -> None:
        """Let the tailer see an intermediate state (one more wake-up, then parked)."""
        before = self.notifier.wakeups
        self._run(wait_for(lambda: self.notifier.wakeups > before and self._parked(), 10))

    def _write(self, text: str, path: Path | None = None) -> None:
        with open(path or self.path, "a") as f:
            f.write(text)

    def _lines(self, k: int, pad: int = 0) -> str:
        out = []
        for _ in range(k):
            self.n += 1
            out.append(f"L{self.n}" + "." * pad)
        self.expected.extend(out)
        return "".join(line + "\n" for line in out)

    def _complete_partial(self, path: Path | None = None) -> None:
        if self.partial is not None:
            self._write("-end\n", path)
            self.expected.append(self.partial + "-end")
            self.partial = None

    def _rename_away(self) -> None:
        self.rotations += 1
        os.rename(self.path, self.dir / f"app.log.{self.rotations}")

    # -- rules --------------------------------------------------------------------------------
    @rule(k=st.integers(1, 5), pad=st.sampled_from([0, 300]))
    def write_lines(self, k: int, pad: int) -> None:
        self._complete_partial()
        self._write(self._lines(k, pad))
        self._catch_up()

    @precondition(lambda self: self.partial is None)
    @rule()
    def partial_write(self) -> None:
        self.n += 1
        self.partial = f"P{self.n}"
        self._write(self.partial)

    @rule(k=st.integers(0, 3), late=st.booleans(), settle=st.sampled_from(["no", "1", "2"]))
    def rename_rotate(self, k: int, late: bool, settle: str) -> None:
        self._complete_partial()
        old_fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._rename_away()
        if settle != "no":
            self._settle()
        self.path.write_bytes(b"")
        if settle == "2":
            self._settle()
        if late:  # a writer that has not reopened yet
            os.write(old_fd, self._lines(1).encode())
        os.close(old_fd)
        self._write(self._lines(k))
        self._catch_up()

    @rule()
    def time_passes(self) -> None:
        """rotateWait passes with no write: the rotated and deleted files are released."""
        self.clock.t += LIMITS.rotate_wait_ms / 1000 + 0.001
        before = self.notifier.wakeups
        for watch in self.notifier.watches:
            watch.poke()
        self._run(wait_for(lambda: self.notifier.wakeups > before and self._parked(), 10))

    @rule(k=st.integers(0, 4))
    def copytruncate(self, k: int) -> None:
        self._complete_partial()
        self._catch_up()  # the writer waits for the tailer (the copy/truncate race is lost)
        self.rotations += 1
        truncations, size = self._truncations(), self.path.stat().st_size
        shutil.copy(self.path, self.dir / f"app.log.{self.rotations}")
        os.truncate(self.path, 0)
        self._write(self._lines(k))
        self._catch_up()
        if size:
            self._run(wait_for(lambda: self._truncations() > truncations, 10, "the truncation"))

    @precondition(lambda self: self.generations)
    @rule(k=st.integers(0, 3), settle=st.booleans())
    def copytruncate_compressed(self, k: int, settle: bool) -> None:
        """logrotate `copytruncate` + `compress`, the copy straight to the compressor: the
        tailer sees the truncation while half the archive is written, then it is whole (and,
        `settle`, rotateWait passes: it is judged then; else later, at a stop or a crash's
        start, say). Every line in it was read: no loss is claimed."""
        self._complete_partial()
        self._catch_up()
        self.rotations += 1
        truncations, data = self._truncations(), self.path.read_bytes()
        whole = gzip.compress(data)
        archive = self.dir / f"app.log.{self.rotations}.gz"
        os.truncate(self.path, 0)
        archive.write_bytes(whole[: len(whole) // 2])
        if data:
            self._run(wait_for(lambda: self._truncations() > truncations, 10, "the truncation"))
        archive.write_bytes(whole)
        if settle:
            self.time_passes()
        self._write(self._lines(k))
        self._catch_up()

    def _truncations(self) -> int:
        return sum(1 for r in self.records() if r.get("reason") == "truncate")

    @rule(k=st.integers(0, 3), settle=st.booleans())
    def delete_recreate(self, k: int, settle: bool) -> None:
        self._complete_partial()
        self.path.unlink()
        if settle:
            self._settle()
        self.path.write_bytes(b"")
        self._write(self._lines(k))
        self._catch_up()

    @rule(k=st.integers(0, 3), rotate=st.booleans())
    def restart(self, k: int, rotate: bool) -> None:
        self._stop()
        if k or rotate:
            self._complete_partial()
            self._write(self._lines(k))
        if rotate:  # rename rotation while stopped: the rotated file is found again
            self._rename_away()
            self._write(self._lines(1))
        self._start()
        self._catch_up()

    @precondition(lambda self: self.generations)
    @rule(times=st.integers(2, 4), k=st.integers(0, 3), how=st.sampled_from(["stop", "stall"]))
    def rotate_many(self, times: int, k: int, how: str) -> None:
        """Several rename rotations while the tailer is stopped, or frozen (a SIGSTOP: its loop
        does not run), each generation with lines: every one is read, oldest first."""
        if how == "stop":
            self._stop()
        self._complete_partial()
        for _ in range(times):
            self._write(self._lines(k))
            self._rename_away()
            self.path.write_bytes(b"")
        self._write(self._lines(1))
        if how == "stop":
            self._start()
        self._catch_up()

    @precondition(lambda self: self.generations and self.path.stat().st_size > 1100)
    @rule(k=st.integers(1, 3))
    def rewrite_same_head(self, k: int) -> None:
        """While stopped, the file is rewritten in place: the same first KiB, other bytes
        before the checkpointed offset, and bigger than it was. Read again from the start."""
        self._complete_partial()
        self._write(self._lines(2, pad=300))  # lines past the kept first KiB, to be rewritten
        self._catch_up()
        self._stop()
        self._complete_partial()
        data = self.path.read_bytes()
        kept = data.index(b"\n", 1024) + 1
        self.expected.extend(data[:kept].decode().splitlines())  # read again, then the new
        more = max(k, (len(data) - kept) // 300 + 1)  # lines of ~300 bytes: past the old end
        body = data[:kept].decode() + self._lines(more, pad=300)  # (one line as long as the
        # file grew past maxLineBytes after a few rewrites: clipped, not the model's text)
        with open(self.path, "r+") as f:
            f.write(body)
        self._start()
        self._catch_up()

    @precondition(lambda self: self.generations)
    @rule(times=st.integers(1, 3), k=st.integers(1, 3))
    def copytruncate_while_down(self, times: int, k: int) -> None:
        """Right after a copytruncate the runner checkpoints the emptied file (nothing in it
        to recognise it by) and crashes; while it is down the file is written, copied and
        truncated `times` times. Every copy is read, oldest first, then the file."""
        self._complete_partial()
        self._write(self._lines(1))
        self.copytruncate(0)  # seen live: the emptied file is checkpointed
        self.store.frozen = True
        self._stop()  # SIGKILL
        self.store.frozen = False
        for _ in range(times):
            self._write(self._lines(k))
            self.rotations += 1
            shutil.copy(self.path, self.dir / f"app.log.{self.rotations}")
            os.truncate(self.path, 0)
        self._write(self._lines(1))
        self._start()
        self._catch_up()

    @precondition(lambda self: self.generations)
    @rule(k=st.integers(1, 4), rotate=st.booleans())
    def crash(self, k: int, rotate: bool) -> None:
        """SIGKILL: lines are recorded, then the checkpoint saves stop reaching the disk, more
        lines (and maybe a rotation) are recorded, and the runner dies. The next start reads
        again from the older checkpoint and records nothing twice."""
        self.store.frozen = True
        self._complete_partial()
        self._write(self._lines(k))
        if rotate:
            self._rename_away()
            self._write(self._lines(1))
        self._catch_up()
        self._stop()
        self.store.frozen = False
        self._start()
        self._catch_up()

    @invariant()
    def every_complete_line_exactly_once_in_order(self) -> None:
        assert self.texts() == self.expected

    @invariant()
    def no_loss_is_claimed(self) -> None:
        for r in self.records():
            assert r.get("unreadBytes", 0) == 0, r
            assert r.get("reason") != "compressed", r  # (every archive holds lines read)

    def teardown(self) -> None:
        try:
            if self.task is not None:
                self._complete_partial()
                self._write(self._lines(1))
                self._catch_up()
                assert self.texts() == self.expected
        finally:
            if self.task is not None:
                self.task.cancel()
                self.loop.run_until_complete(asyncio.gather(self.task, return_exceptions=True))
                self.sink.close()
            self.notifier.close()
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)


SETTINGS = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class InotifyTailModel(TailModel):
    force_poll = False


class PollTailModel(TailModel):
    force_poll = True


class InotifyGenerationsModel(TailModel):
    generations = True


class PollGenerationsModel(TailModel):
    force_poll = True
    generations = True


TestTailModelInotify = InotifyTailModel.TestCase
TestTailModelInotify.settings = SETTINGS
TestTailModelPoll = PollTailModel.TestCase
TestTailModelPoll.settings = SETTINGS
GENERATIONS = settings(SETTINGS, max_examples=10, stateful_step_count=8)
TestGenerationsInotify = InotifyGenerationsModel.TestCase
TestGenerationsInotify.settings = GENERATIONS
TestGenerationsPoll = PollGenerationsModel.TestCase
TestGenerationsPoll.settings = GENERATIONS


def test_a_copy_with_a_deleted_files_inode_number_is_not_read_twice_after_a_crash() -> None:
    """The steps the generations model found (CI, 2026-12-04): after a delete and recreate,
    a copytruncate while down made a copy that got the deleted file's inode number (ext4), and
    a crash after it was read made the next start record its line again."""
    m = PollGenerationsModel()
    try:
        for times in (2, 1, 3):
            m.copytruncate_while_down(k=1, times=times)
        m.delete_recreate(k=0, settle=False)
        m.copytruncate_while_down(k=1, times=1)
        m.crash(k=1, rotate=False)
        m.every_complete_line_exactly_once_in_order()
        m.no_loss_is_claimed()
    finally:
        m.teardown()


def test_a_rotation_announced_before_a_crash_is_not_announced_again() -> None:
    """A checkpoint saved while a new generation's `rotate` record was still to be written,
    then that record and a line written, then a crash: the next start writes no second
    `rotate` record, and a line after a second crash is not recorded twice."""
    m = PollGenerationsModel()
    try:
        m._write(m._lines(1))
        m._catch_up()
        m._rename_away()
        m.path.write_bytes(b"")
        m._catch_up()  # the new, empty generation is followed: its `rotate` record waits
        m._stop()  # a clean stop saves that
        m._start()
        for _ in range(2):  # a line, then a crash (saves lost), twice
            m.crash(1, False)
        assert m.texts() == m.expected == ["L1", "L2", "L3"]
        rotates = [(r["inode"], r["oldInode"]) for r in m.records() if r["kind"] == "rotate"]
        assert len(rotates) == len(set(rotates)) == 1, rotates
    finally:
        m.teardown()


class RedactingModel(PollGenerationsModel):
    redactor = redactor()


@pytest.mark.parametrize("last", [b"L2 key=AKIAIOSFODNN7EXAMPLE",
                                  b"L2 \xff\xfe not UTF-8 \x1b[31m"])
def test_a_line_recorded_changed_before_a_crash_is_not_recorded_again(last: bytes) -> None:
    """The last line recorded before a crash was redacted (`output.redact`), or not valid UTF-8
    and escaped: its record's text is not the file's bytes. The next start still finds it in
    the file and goes on after it (it compared the texts and read both lines again)."""
    m = RedactingModel()
    try:
        m._write(m._lines(1))
        m._catch_up()
        m._stop()  # a clean stop: the checkpoint is past L1
        m._start()
        m.store.frozen = True  # from here on, no checkpoint reaches the disk
        m._write(m._lines(1))
        with open(m.path, "ab") as f:
            f.write(last + b"\n")
        assert m.redactor is not None
        m.expected.append(m.redactor.redact(sanitize(raw_text(last))[0])[0])
        m._catch_up()
        m._stop()  # SIGKILL
        m.store.frozen = False
        m._start()
        m._write(m._lines(1))
        m._catch_up()
        assert m.texts() == m.expected
        assert "AKIAIOSFODNN7EXAMPLE" not in m.jsonl.read_text()
    finally:
        m.teardown()


class RacingSource(FileSource):
    """Runs `race` (the writer) once, right after a read of the followed file."""

    race: Callable[[], None] | None = None

    async def _drain(self, ctx: SourceContext, gen: Generation, end: int | None = None,
                     held: int | None = None) -> int:
        n = await super()._drain(ctx, gen, end, held)
        if self.race is not None and gen is self._cur:
            race, self.race = self.race, None
            race()
        return n


class RacingModel(PollGenerationsModel):
    source_class = RacingSource


def test_lines_written_as_the_file_is_replaced_are_read_before_the_new_file() -> None:
    """Just after the tailer read the file, the writer appends to it, deletes it and starts a
    new one. The old file's last lines are recorded before the new file's `rotate` record and
    lines (they came after them, at the next look: a crash in between lost them)."""
    m = RacingModel()
    try:
        m._write(m._lines(1))
        m._catch_up()

        def writer() -> None:
            m._write(m._lines(2))
            m.path.unlink()
            m._write(m._lines(1))

        assert isinstance(m.source, RacingSource)
        m.source.race = writer
        m._write(m._lines(1))
        m._run(wait_for(lambda: m.source.race is None, 10, "the writer's race"))
        m._catch_up()
        kinds = [r["kind"] if r["kind"] != "match" else r["line"] for r in m.records()]
        assert kinds == ["start", "L1", "L2", "L3", "L4", "rotate", "L5"], kinds
    finally:
        m.teardown()


@pytest.mark.parametrize("model", [InotifyGenerationsModel, PollGenerationsModel])
def test_copies_made_while_down_after_a_crash_at_a_truncation_are_read(
        model: type[TailModel]) -> None:
    """The model's rule, once for certain: three copytruncates while the runner is down after
    a crash that left the emptied file's checkpoint. Every line once; no loss claimed."""
    m = model()
    try:
        m.copytruncate_while_down(3, 2)
        assert m.texts() == m.expected
        assert not [r for r in m.records() if r["kind"] == "gap" or r.get("unreadBytes")]
    finally:
        m.teardown()


def test_a_rotation_pending_at_a_crash_is_found_among_several_into_the_same_inode() -> None:
    """Found by the model: crash restarts after copytruncates (one inode, truncated again and
    again), then a crash before any checkpoint of the newest truncation. Its `rotate` record was
    looked for from an old seq, an earlier truncation of the inode taken for it, and the lines
    after it recorded twice."""
    m = InotifyGenerationsModel()
    try:
        m.copytruncate_while_down(k=1, times=1)
        m.copytruncate_while_down(k=1, times=2)
        m.rotate_many(how="stop", k=0, times=2)
        m.copytruncate_while_down(k=1, times=3)
        m.crash(k=1, rotate=False)
        assert m.texts() == m.expected
    finally:
        m.teardown()


@pytest.mark.parametrize("model", [InotifyGenerationsModel, PollGenerationsModel])
def test_an_empty_copy_made_after_the_checkpoint_of_an_empty_file(
        model: type[TailModel]) -> None:
    """Found by the model: the empty file is copied and "truncated" (a copy of nothing), a line
    is written and recorded, the runner crashes. The empty copy is no sign that the file was
    emptied after the line: it is not read again (it was, as a file truncated since)."""
    m = model()
    try:
        m.copytruncate(0)
        m.crash(1, False)
        assert m.texts() == m.expected == ["L1"]
    finally:
        m.teardown()


def test_a_truncation_whose_archive_was_already_whole_is_saved_before_a_crash() -> None:
    """The steps the copytruncate + compress rule found (2026-12-07): lines read from a file
    whose last saved checkpoint was taken while it was empty, then copytruncate with the archive
    whole before the tailer looked (judged at once: no gap), then a crash. The truncation was
    not saved, so the next start, from the empty file's checkpoint, took the archive for lines
    never read (a false `gap{compressed}`) and recorded the new line again."""
    m = InotifyGenerationsModel()
    try:
        m.store.frozen = True  # (no save lands while the lines are read)
        m._write(m._lines(2))
        m._catch_up()
        m.store.frozen = False
        data = m.path.read_bytes()
        (m.dir / "app.log.1.gz").write_bytes(gzip.compress(data))
        os.truncate(m.path, 0)
        m._run(wait_for(lambda: m._truncations() == 1, 10, "the truncation"))
        m.crash(k=1, rotate=False)
        m.every_complete_line_exactly_once_in_order()
        m.no_loss_is_claimed()
    finally:
        m.teardown()
