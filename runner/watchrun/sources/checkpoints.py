"""Atomic per-watcher checkpoint files (device, inode, head fingerprint, offset) under state/."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchrun.output import safefs

VERSION = 1
FINGERPRINT_BYTES = 1024
"""A file is identified by the hash of (up to) its first 1024 bytes, plus device and inode."""
MAX_FILE_BYTES = 1 << 20
"""A checkpoint file is read up to this size (a larger one is not a checkpoint: corrupt)."""

log = logging.getLogger("watchrun.checkpoints")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def fingerprint(head: bytes) -> str:
    """sha256 hex of a file's first bytes; compare only over the same number of bytes."""
    return hashlib.sha256(head).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a file watcher is: the next unread complete line of one file generation."""

    dev: int
    inode: int
    fingerprint: str
    """sha256 hex of the first `fingerprint_len` bytes of the file."""
    offset: int
    """Byte offset just past the last line whose record was written."""
    line_no: int
    """Line number of the line starting at `offset` (1-based)."""
    path: str
    fingerprint_len: int
    """How many head bytes `fingerprint` covers (a small file that grows keeps its prefix)."""


_FIELDS: dict[str, type] = {
    "dev": int,
    "inode": int,
    "fingerprint": str,
    "fingerprintLen": int,
    "offset": int,
    "lineNo": int,
    "path": str,
}


def _decode(text: str) -> Checkpoint:
    """Parse a checkpoint file's text; ValueError naming what is wrong."""
    if "\x00" in text:
        raise ValueError("contains NUL bytes")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("version") != VERSION:
        raise ValueError(f"unknown version {doc.get('version')!r} (expected {VERSION})")
    for key, typ in _FIELDS.items():
        val = doc.get(key)
        if not isinstance(val, typ) or isinstance(val, bool):
            raise ValueError(f"field {key!r} missing or not a {typ.__name__}")
    if doc["offset"] < 0 or doc["lineNo"] < 1 or not 0 <= doc["fingerprintLen"] <= 1 << 20:
        raise ValueError("offset, lineNo or fingerprintLen out of range")
    return Checkpoint(
        dev=doc["dev"],
        inode=doc["inode"],
        fingerprint=doc["fingerprint"],
        offset=doc["offset"],
        line_no=doc["lineNo"],
        path=doc["path"],
        fingerprint_len=doc["fingerprintLen"],
    )


def _encode(cp: Checkpoint) -> bytes:
    doc: dict[str, Any] = {
        "version": VERSION,
        "dev": cp.dev,
        "inode": cp.inode,
        "fingerprint": cp.fingerprint,
        "fingerprintLen": cp.fingerprint_len,
        "offset": cp.offset,
        "lineNo": cp.line_no,
        "path": cp.path,
    }
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode()


class CheckpointStore:
    """One JSON file per watcher: `<state_dir>/<id>.checkpoint.json`, replaced atomically.

    Write order is tmp file, fsync(file), rename, fsync(dir), so a crash at any point leaves
    either the old or the new checkpoint. A leftover tmp file is used only when it parses (it
    was complete, just not renamed yet). Corrupt files are set aside, never fatal.
    """

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.problems: list[str] = []
        self._lock = threading.Lock()  # periodic saves run in a worker thread

    def path(self, watcher_id: str) -> Path:
        if not _ID.match(watcher_id):
            raise ValueError(f"invalid watcher id for a checkpoint file: {watcher_id!r}")
        return self.dir / f"{watcher_id}.checkpoint.json"

    def load(self, watcher_id: str) -> Checkpoint | None:
        path = self.path(watcher_id)
        tmp = path.with_name(path.name + ".tmp")
        with self._lock:
            recovered = self._read_tmp(tmp)
            if recovered is not None:
                with contextlib.suppress(OSError):
                    safefs.replace(tmp, path)
                return recovered
            try:
                text = safefs.read_bytes(path, MAX_FILE_BYTES).decode("utf-8", errors="replace")
            except FileNotFoundError:
                return None
            except OSError as exc:
                self.problems.append(f"cannot read checkpoint {path}: {exc.strerror}")
                return None
            try:
                return _decode(text)
            except ValueError as exc:
                self._set_aside(path, str(exc))
                return None

    def save(self, watcher_id: str, cp: Checkpoint) -> None:
        path = self.path(watcher_id)
        tmp = path.with_name(path.name + ".tmp")
        data = _encode(cp)
        with self._lock:
            safefs.make_dirs(self.dir)
            fd = safefs.create_exclusive(tmp, 0o640)
            try:
                os.fchmod(fd, 0o640)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            safefs.replace(tmp, path)
            safefs.fsync_dir(self.dir)

    def _read_tmp(self, tmp: Path) -> Checkpoint | None:
        try:
            text = safefs.read_bytes(tmp, MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return None
        try:
            return _decode(text)
        except ValueError:
            with contextlib.suppress(OSError):
                safefs.unlink(tmp)  # an interrupted write: the stable file is the truth
            return None

    def _set_aside(self, path: Path, reason: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while os.path.lexists(target):
            n += 1
            target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        try:
            safefs.replace(path, target)
            where = f"set aside as {target.name}"
        except OSError as exc:
            where = f"could not be set aside ({exc.strerror})"
        self.problems.append(
            f"checkpoint {path} is corrupt: {reason}; {where}; starting without a checkpoint"
        )


class Keeper:
    """Persists one watcher's checkpoint: at most once per `interval` seconds while it moves
    (the timer is armed by activity, so an idle watcher costs nothing), and on demand."""

    def __init__(self, store: CheckpointStore, watcher_id: str, interval: float) -> None:
        self.store, self.id, self.interval = store, watcher_id, interval
        self.saved: Checkpoint | None = None
        self.dirty = asyncio.Event()

    async def run(
        self,
        current: Callable[[], Checkpoint | None],
        report: Callable[[OSError], Awaitable[None]],
    ) -> None:
        while True:
            await self.dirty.wait()
            await asyncio.sleep(self.interval)
            self.dirty.clear()
            cp = current()
            if cp is not None and cp != self.saved:
                try:
                    await asyncio.to_thread(self.store.save, self.id, cp)  # fsync off the loop
                    self.saved = cp
                except OSError as exc:
                    await report(exc)

    def save_now(self, cp: Checkpoint | None) -> None:
        if cp is not None and cp != self.saved:
            try:
                self.store.save(self.id, cp)
                self.saved = cp
            except OSError as exc:
                log.error("%s: cannot save checkpoint: %s", self.id, exc)


def identifies(cp: Checkpoint, fd: int, st: os.stat_result) -> bool:
    """True when the open file is the checkpoint's generation: same device and inode, the same
    first `fingerprint_len` bytes (an inode can be reused), and at least `offset` bytes long."""
    if (st.st_dev, st.st_ino) != (cp.dev, cp.inode) or st.st_size < cp.offset:
        return False
    head = os.pread(fd, cp.fingerprint_len, 0)
    return len(head) == cp.fingerprint_len and fingerprint(head) == cp.fingerprint


def find_moved(
    directory: Path, cp: Checkpoint, prefix: str
) -> tuple[int, os.stat_result, bool] | None:
    """The checkpoint's file under another name in `directory` (rotated by rename while the
    runner was stopped), opened for reading, or None when it is gone. The flag says whether
    the checkpoint's offset still applies; it does not for a file with the inode and a rotated
    name (`prefix`...) whose head changed: it was truncated after the checkpoint, read it all."""
    try:
        entries = [e for e in os.scandir(directory) if e.inode() == cp.inode]
    except OSError:
        return None
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_dev == cp.dev:
                if identifies(cp, fd, st):
                    return fd, st, True
                if entry.name.startswith(prefix):
                    return fd, st, False
        except OSError:
            pass
        os.close(fd)
    return None
