"""Model-based test (after Vector's file_watcher tests): random writes, rotations, truncations
and restarts against real files; every complete line is delivered exactly once, in order."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from filehelpers import Recorder, spec_for, wait_for
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from watchrun.clock import SystemClock
from watchrun.config.model import Limits
from watchrun.notify import Notifier
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.file import FileSource


class TailModel(RuleBasedStateMachine):
    """The model is the list of lines a writer completed; the tailer must deliver exactly it.

    The writer waits for the tailer to catch up before a copytruncate: lines written between
    the copy and the truncation are lost by design (documented as unrecoverable)."""

    force_poll = False

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tailmodel-"))
        self.path = self.dir / "app.log"
        self.path.write_bytes(b"")
        self.loop = asyncio.new_event_loop()
        self.notifier = Notifier(10, force_poll=self.force_poll)
        self.store = CheckpointStore(self.dir / "state")
        self.rec = Recorder()
        self.expected: list[str] = []
        self.partial: str | None = None  # an unterminated line at the end of the file
        self.n = 0
        self.rotations = 0
        self.task: asyncio.Task[None] | None = None
        self._start()

    # -- harness ------------------------------------------------------------------------------
    def _start(self) -> None:
        self.source = FileSource(
            spec_for(self.path), Limits(), self.store, self.notifier, SystemClock()
        )
        self.task = self.loop.create_task(self.source.run(self.rec))
        self._run(wait_for(lambda: self._parked(), 10, "source started"))

    def _stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        self._run(asyncio.gather(self.task, return_exceptions=True))
        self.task = None

    def _run(self, coro: object) -> None:
        self.loop.run_until_complete(coro)  # type: ignore[arg-type]
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()

    def _parked(self) -> bool:
        return bool(self.notifier.watches) and all(w.waiting for w in self.notifier.watches)

    def _catch_up(self) -> None:
        """Wait until the tailer delivered every line and follows the file now at the path. (A
        generation created and removed before the tailer ever looked cannot be read by anyone.)"""
        want, inode = len(self.expected), self.path.stat().st_ino

        def done() -> bool:
            return len(self.rec.lines()) >= want and self.source.inode == inode

        self._run(wait_for(done, 10, f"{want} lines from inode {inode}"))

    def _settle(self) -> None:
        """Let the tailer see an intermediate state (one more wake-up, then parked)."""
        before = self.notifier.wakeups
        self._run(wait_for(lambda: self.notifier.wakeups > before and self._parked(), 10))

    def _write(self, text: str, path: Path | None = None) -> None:
        with open(path or self.path, "a") as f:
            f.write(text)

    def _lines(self, k: int) -> str:
        out = []
        for _ in range(k):
            self.n += 1
            out.append(f"L{self.n}")
        self.expected.extend(out)
        return "".join(line + "\n" for line in out)

    def _complete_partial(self, path: Path | None = None) -> None:
        if self.partial is not None:
            self._write("-end\n", path)
            self.expected.append(self.partial + "-end")
            self.partial = None

    # -- rules --------------------------------------------------------------------------------
    @rule(k=st.integers(1, 5))
    def write_lines(self, k: int) -> None:
        self._complete_partial()
        self._write(self._lines(k))
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
        self.rotations += 1
        os.rename(self.path, self.dir / f"app.log.{self.rotations}")
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

    @rule(k=st.integers(0, 4))
    def copytruncate(self, k: int) -> None:
        self._complete_partial()
        self._catch_up()  # the writer waits for the tailer (the copy/truncate race is lost)
        self.rotations += 1
        shutil.copy(self.path, self.dir / f"app.log.{self.rotations}")
        os.truncate(self.path, 0)
        self._write(self._lines(k))
        self._catch_up()

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
            self.rotations += 1
            os.rename(self.path, self.dir / f"app.log.{self.rotations}")
            self._write(self._lines(1))
        self._start()
        self._catch_up()

    @invariant()
    def every_complete_line_exactly_once_in_order(self) -> None:
        assert self.rec.texts() == self.expected

    def teardown(self) -> None:
        try:
            if self.task is not None:
                self._complete_partial()
                self._write(self._lines(1))
                self._catch_up()
                assert self.rec.texts() == self.expected
        finally:
            if self.task is not None:
                self.task.cancel()
                self.loop.run_until_complete(asyncio.gather(self.task, return_exceptions=True))
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


TestTailModelInotify = InotifyTailModel.TestCase
TestTailModelInotify.settings = SETTINGS
TestTailModelPoll = PollTailModel.TestCase
TestTailModelPoll.settings = SETTINGS
