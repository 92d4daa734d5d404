"""Atomic per-watcher checkpoint files under state/: the positions of the last generations of a
file, and the seq from which records may be read again after a crash. Saves run off the loop."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from watchrun.config.loader import file_kind
from watchrun.output import safefs
from watchrun.output.notefile import set_aside
from watchrun.sources.checkpoint_doc import NEWER, FileState, LoadProblem, decode, encode
from watchrun.sources.savebatch import Ask, Outcome, SaveBatch
from watchrun.sources.saveorder import SaveOrder

MAX_FILE_BYTES = 1 << 20
"""A checkpoint file is read up to this size (a larger one is not a checkpoint: corrupt)."""

SUFFIX = ".checkpoint.json"
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A watcher id (whole: `fullmatch`), as the config schema allows it."""


class CheckpointStore:
    """One JSON file per watcher: `<state_dir>/<id>.checkpoint.json`, replaced atomically.

    Write order is tmp file, fsync(file), rename, fsync(dir), so a crash at any point leaves
    either the old or the new checkpoint (a batch of saves, `save_all`, fsyncs the directory
    once after its last rename; none of them counts as saved before). A leftover tmp file is
    used only when it parses (it was complete, just not renamed yet). Corrupt files are set
    aside, never fatal. Saves are ordered by ticket (`SaveOrder`): a save older than one
    already written is dropped, so a slow worker thread can never put an old position back.
    """

    def __init__(self, state_dir: Path, *, fsync_dir: Callable[[int], None] | None = None
                 ) -> None:
        """`fsync_dir`: the fsync of state/ that ends a batch of saves (a test's seam)."""
        self.dir = state_dir
        self._fsync_dir = fsync_dir or os.fsync  # (looked up now: a test may replace os.fsync)
        self._identity = safefs.dir_identity(state_dir)  # (never another runner's state/)
        self._problems: dict[str, list[LoadProblem]] = {}  # watcher id → what its loads met
        self.order = SaveOrder()
        self._lock = self.order.lock
        self.batch = SaveBatch(self.save_all)
        """How a keeper saves from its loop: with the other saves of the same turn."""
        self._held = threading.local()  # .fd: state/, open while a `save_all` runs

    def path(self, watcher_id: str) -> Path:
        if not ID.fullmatch(watcher_id):
            raise ValueError(f"invalid watcher id for a checkpoint file: {watcher_id!r}")
        return self.dir / f"{watcher_id}{SUFFIX}"

    def load(self, watcher_id: str) -> FileState | None:
        path = self.path(watcher_id)
        tmp = path.with_name(path.name + ".tmp")
        with self._lock(watcher_id):
            recovered = self._read_tmp(watcher_id, tmp)
            if recovered is not None:
                with contextlib.suppress(OSError):
                    safefs.replace(tmp, path)
                return recovered
            try:  # (owned: a checkpoint decides what is read, so another user's is no guide)
                text = safefs.read_bytes(path, MAX_FILE_BYTES, owned=True).decode(
                    "utf-8", errors="replace")
            except FileNotFoundError:
                return None
            except OSError as exc:
                kind = _planted(path)
                if kind is not None:  # in the way of every save too: moved out of it
                    self._set_aside(watcher_id, path, f"it is {kind}, not a checkpoint file")
                elif isinstance(exc, safefs.UnsafePathError) and exc.errno == errno.EPERM:
                    self._set_aside(watcher_id, path, f"it {exc.strerror}: not trusted")
                else:
                    code = errno.errorcode.get(exc.errno or 0, "EIO")
                    self._met(watcher_id, f"cannot read checkpoint {path}: {exc.strerror}", code)
                return None
            try:
                return decode(text)
            except ValueError as exc:
                self._set_aside(watcher_id, path, str(exc))
                return None

    def taken(self, watcher_id: str) -> list[LoadProblem]:
        """The problems `watcher_id`'s loads met since it last took them (another watcher's
        are never among them), no longer kept."""
        return self._problems.pop(watcher_id, [])

    def _met(self, watcher_id: str, problem: str, code: str = "checkpoint-corrupt") -> None:
        self._problems.setdefault(watcher_id, []).append(LoadProblem(code, problem))

    def save(self, watcher_id: str, state: FileState, ticket: int | None = None, *,
             first: Callable[[], None] | None = None) -> bool:
        """Write `state`; False (nothing written) when a newer ticket was written already.
        `first`: what makes the records `state` covers durable (`Keeper`), run before."""
        if first is not None:
            first()
        path = self.path(watcher_id)
        tmp = path.with_name(path.name + ".tmp")
        data = encode(state)
        held = getattr(self._held, "fd", None)  # (-1: in a batch, state/ not open yet)
        with self._lock(watcher_id):
            if ticket is not None and not self.order.newer(watcher_id, ticket):
                return False
            try:
                if held is None or held < 0:
                    safefs.make_dir(self.dir)
                    safefs.same_dir(self.dir, self._identity)
                if held is not None and held < 0:
                    held = self._held.fd = safefs.open_dir(self.dir)
                safefs.write_atomic(path, data, tmp=tmp, sync_dir=held is None, dfd=held)
            except OSError as exc:  # the same error, naming the checkpoint it is about
                raise OSError(exc.errno, f"{path}: {exc.strerror or exc}") from exc
            return True

    def save_all(self, asks: Sequence[Ask]) -> list[Outcome]:
        """Several saves in this worker thread (`SaveBatch`), each by `save`, with state/
        checked and opened once and fsynced once, after the last rename: no save counts as
        written before that fsync (if it fails, each save renamed before it fails with it)."""
        self._held.fd = -1
        out: list[Outcome] = []
        try:
            for ask in asks:
                try:
                    out.append(self.save(ask.watcher_id, ask.state, ask.ticket, first=ask.first))
                except Exception as exc:  # (that save's error: the others go on)
                    out.append(exc)
            if self._held.fd >= 0 and True in out:
                try:
                    self._fsync_dir(self._held.fd)
                except OSError as exc:
                    out = [OSError(exc.errno, f"{self.path(a.watcher_id)}: {exc.strerror}")
                           if o is True else o for a, o in zip(asks, out, strict=True)]
        finally:
            if self._held.fd >= 0:
                os.close(self._held.fd)
            self._held.fd = None
        return out

    def adopt(self, old_id: str, new_id: str) -> bool:
        """Rename `old_id`'s checkpoint to `new_id` (a watcher's `previousId`), unless `new_id`
        has one already. True when it was adopted."""
        old, new = self.path(old_id), self.path(new_id)
        first, second = sorted((old_id, new_id))
        with self._lock(first), self._lock(second):
            if os.path.lexists(new) or not os.path.lexists(old):
                return False
            safefs.replace(old, new)  # names under state/'s fd: no symlink followed
            safefs.fsync_dir(self.dir)
            return True

    def forget(self, watcher_id: str) -> None:
        """Delete the watcher's checkpoint (and a leftover tmp file): `watchrun clear` of a
        watcher added at runtime, gone for good. A save asked for before this is not written
        after it (it takes an older ticket); what the store held for the watcher goes too."""
        path = self.path(watcher_id)
        self._problems.pop(watcher_id, None)
        with self._lock(watcher_id):
            self.order.forgotten(watcher_id)
            for p in (path, path.with_name(path.name + ".tmp")):
                with contextlib.suppress(FileNotFoundError):
                    safefs.unlink(p)
            with contextlib.suppress(OSError):
                safefs.fsync_dir(self.dir)

    def _read_tmp(self, watcher_id: str, tmp: Path) -> FileState | None:
        try:
            text = safefs.read_bytes(tmp, MAX_FILE_BYTES, owned=True).decode(
                "utf-8", errors="replace")
        except OSError:
            kind = _planted(tmp)
            if kind is not None:  # a save could neither replace nor remove it
                self._set_aside(watcher_id, tmp, f"it is {kind}, not a checkpoint file")
            return None
        try:
            return decode(text)
        except ValueError:
            with contextlib.suppress(OSError):
                safefs.unlink(tmp)  # an interrupted write: the stable file is the truth
            return None

    def _set_aside(self, watcher_id: str, path: Path, reason: str) -> None:
        said = reason if reason.startswith(NEWER) else f"is corrupt: {reason}"
        self._met(watcher_id, f"checkpoint {path} {said}; {set_aside(path)}; starting without a "
                             "checkpoint")


def _planted(path: Path) -> str | None:
    """What is at `path` when it is neither a regular file nor a symlink (a directory, a FIFO,
    ...): something no save can replace. None otherwise, or when nothing is there."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return file_kind(mode)
