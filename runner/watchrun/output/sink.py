"""Append records to a JSONL stream: whole lines, rotation, crash repair, no loss on disk errors."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from watchrun.clock import Clock, iso_ts
from watchrun.output import safefs
from watchrun.output.jsonl import batch_end, batch_ends, dumps, match_records
from watchrun.output.livefile import last_record, let_go, open_live, rotate, size_if_same
from watchrun.output.notefile import note_path
from watchrun.output.records import format_cursor
from watchrun.output.syncer import Syncer
from watchrun.output.unwritten import Unwritten, seq_of

__all__ = ["JsonlSink", "SinkWriteError"]

BATCH_BYTES = 1 << 20
"""At most this many bytes per `write` call (a single record may be bigger; it is not split)."""
_RESERVED = frozenset({"schema", "seq", "cursor", "ts", "kind"})


class SinkWriteError(Exception):
    """A JSONL file could not be opened, written or rotated. The first `written` lines of the
    failed call are in the file, whole; the rest are not: the caller retries them (or gives
    them up with `JsonlSink.give_up`)."""

    def __init__(self, errno_name: str, message: str, *, written: int = 0) -> None:
        super().__init__(f"{errno_name}: {message}")
        self.errno_name = errno_name
        self.message = message
        self.written = written


def _error(exc: OSError, doing: str) -> SinkWriteError:
    code = exc.errno if exc.errno is not None else errno.EIO
    why = exc.strerror if isinstance(exc, safefs.UnsafePathError) else os.strerror(code)
    return SinkWriteError(errno.errorcode.get(code, str(code)), f"{doing}: {why}")


class JsonlSink:
    """The JSONL file of one watcher or agent, written from the event loop's thread.

    Durability: records are in the page cache when a write returns (they survive a crash of
    the runner, not of the machine); a file rotated away is fsynced in a thread (`Syncer`),
    what a checkpoint covers before it is saved (`durable`), the live file on close, which also
    waits for those. `syncer`: its fsync and fdatasync (the seam tests inject).
    """

    def __init__(self, path: Path, stream_id: str, *, max_bytes: int, keep: int, clock: Clock,
                 syncer: Syncer | None = None) -> None:
        self._prefix = format_cursor(stream_id, 0)[:-16]  # validates the id
        self._prefix_b = self._prefix.encode()
        self.path, self.stream_id, self.clock = path, stream_id, clock
        self.max_bytes, self.keep = max(1, max_bytes), max(0, keep)
        self.repaired_bytes = 0
        """Bytes of a torn last record cut off on open (a crash mid-write); 0 normally."""
        self.reopens = 0
        """Times the live file was found removed or replaced by someone else and reopened."""
        self.rotations = 0
        self._syncer = syncer or Syncer()
        self._fd, self._size, self._closed = -1, 0, False
        self._inode = (0, 0)  # (st_ino, st_dev) of the open live file
        self._torn = False  # a failed write left bytes past _size that could not be cut yet
        self._dir: safefs.DirPin | None = None  # its directory's identity, once opened
        line = self._open()
        self._dir = safefs.dir_identity(path.parent)
        try:
            self.last_record = last_record(path, line, self.keep)
            """The last record in the stream when it was opened (None for a new stream)."""
        except OSError as exc:
            self._close_fd()
            doing = f"cannot read the last record of {path}"
            if exc.filename and exc.filename != str(path):  # a rotated file of the stream
                doing += f": its older file {exc.filename}"
            raise _error(exc, doing) from exc
        self.unwritten = Unwritten(note_path(path))
        try:
            self.next_seq = self.unwritten.prepare(int(self.last_record["seq"])
                                                   if self.last_record else 0)
        except safefs.UnsafePathError as exc:
            self._close_fd()
            raise _error(exc, f"cannot read the note of records given up {exc.filename}") from exc
        """Records given up at the last shutdown keep their seqs: none is used twice."""
        self.unkept = 0  # (see `close`)
        self.kept: list[tuple[int, int]] = []
        """At close: the runs of seqs given up unwritten, left to the note for the next start."""

    @property
    def cursor_prefix(self) -> str:
        """`<id>:`, the start of every cursor of this stream."""
        return self._prefix

    # -- building ---------------------------------------------------------------------------
    def record(self, kind: str, fields: Mapping[str, Any]) -> bytes:
        """Build one record line (consuming a seq); nothing is written yet."""
        clash = _RESERVED.intersection(fields)
        if clash:
            raise ValueError(f"record fields may not set {sorted(clash)}")
        line = self._line(self.next_seq, kind, fields)
        self.next_seq += 1
        return line

    def _line(self, seq: int, kind: str, fields: Mapping[str, Any]) -> bytes:
        cursor, ts = f"{self._prefix}{seq:016x}", iso_ts(self.clock.now())
        return dumps({"schema": 1, "seq": seq, "cursor": cursor, "ts": ts, "kind": kind, **fields})

    def give_up(self, lines: Sequence[bytes]) -> None:
        """These built lines will never be written: their seqs are explained by a `gap` record
        before the next record (or, at close, by a note the next start turns into one)."""
        self.unwritten.give_up(list(lines))

    def _gaps(self, lines: Sequence[bytes]) -> list[tuple[int, int, bytes]]:
        """`gap` records for seqs given up below the first of `lines`: (lo, hi, line)."""
        below = seq_of(lines[0])[0] if lines else None
        return [(lo, hi, self._line(hi, "gap", self.unwritten.gap_fields(lo, hi, kinds)))
                for lo, hi, kinds in self.unwritten.runs(below)]

    def match_records(self, lines: Sequence[bytes], line_nos: Iterable[int],
                      offsets: Iterable[int], rest: Sequence[bytes]) -> list[bytes]:
        """`match` records (consuming seqs), the bytes `record("match", …)` would build, from
        columns (`jsonl.match_records`)."""
        out = match_records(self._prefix_b, self.next_seq, iso_ts(self.clock.now()).encode(),
                            lines, line_nos, offsets, rest)
        self.next_seq += len(lines)
        return out

    def write(self, kind: str, fields: Mapping[str, Any]) -> int:
        """Build and write one record; return its seq. On failure the seq is given back."""
        line = self.record(kind, fields)
        seq = self.next_seq - 1
        try:
            self.write_lines([line])
        except SinkWriteError:
            if self.next_seq == seq + 1:
                self.next_seq = seq
            raise
        return seq

    def durable(self) -> Callable[[], None] | None:
        """A job for a worker thread that makes every record written so far durable
        (`Syncer.barrier`), run before a checkpoint that covers them is saved; None when no
        record was written since the last one."""
        return self._syncer.barrier(self._fd, self._inode, self._size, self.path)

    # -- writing ----------------------------------------------------------------------------
    def write_lines(self, lines: Sequence[bytes]) -> None:
        """Append whole lines, up to `BATCH_BYTES` per `write` call, rotating before a line that
        would pass `max_bytes`. On `SinkWriteError`, `exc.written` lines are in the file, whole,
        and the rest are not (a torn last line is cut off): a retry neither tears nor
        duplicates. `gap` records for seqs given up go first."""
        if self._closed:
            raise ValueError(f"{self.path}: sink is closed")
        gaps = self._gaps(lines) if self.unwritten.lost or self.unwritten.noted else []
        if gaps:
            lines = [*(g for _, _, g in gaps), *lines]
        i, ends = 0, batch_ends(lines)
        try:
            self._check_file()
            while i < len(lines):
                if self._size > 0 and self._size + len(lines[i]) > self.max_bytes:
                    self._rotate(seq_of(lines[i])[0] - 1)
                j = batch_end(ends, i, min(BATCH_BYTES, self.max_bytes - self._size))
                try:
                    self._write_all(b"".join(lines[i:j]) if j > i + 1 else lines[i])
                except SinkWriteError as exc:
                    i += exc.written  # whole records of the failed batch are kept
                    raise
                i = j
        except SinkWriteError as exc:
            exc.written = max(0, i - len(gaps))
            self.unwritten.written(gaps[:i])
            self.unwritten.write_failed()
            raise
        self.unwritten.written(gaps)
        if self.unwritten.retry:  # the note could not be allocated: space may be back
            self.unwritten.reserve()

    def _write_all(self, data: bytes) -> None:
        """Write `data` (whole lines). When only part of it fits, the whole lines that were
        written stay (`SinkWriteError.written` of them) and a torn last one is cut off, so a
        batch bigger than the free space still makes progress."""
        start, done = self._size, 0
        view = memoryview(data)
        try:
            while done < len(data):
                n = os.write(self._fd, view[done:])
                if n == 0:
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                done += n
        except OSError as exc:
            keep = data.rfind(b"\n", 0, done) + 1
            if done > keep:
                try:
                    os.ftruncate(self._fd, start + keep)
                except OSError:
                    self._torn = True  # cut on the next attempt, before anything else
            self._size = start + keep
            err = _error(exc, f"cannot write {self.path}")
            err.written = data.count(b"\n", 0, keep)
            raise err from exc
        self._size = start + done

    def _check_file(self) -> None:
        """Reopen the live file when it was removed or replaced by someone else (an operator's
        `rm` or `mv`), so records never go into an unlinked file; cut a leftover torn batch."""
        if self._fd < 0:
            self._open()
            return
        if self._torn:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError as exc:
                raise _error(exc, f"cannot repair {self.path}") from exc
            self._torn = False
        try:
            size = size_if_same(self.path, self._inode)
        except OSError as exc:
            raise _error(exc, f"cannot stat {self.path}") from exc
        if size is None:
            self._close_fd()
            self.reopens += 1
            self._open()
        else:
            self._size = size

    def _open(self) -> bytes:
        """Open the live file, a torn last record cut off (`livefile.open_live`; refused:
        SinkWriteError); return its last line (b"" when there is none at hand)."""
        try:
            safefs.same_dir(self.path.parent, self._dir)  # (never another runner's stream)
            live = open_live(self.path)
        except OSError as exc:
            raise _error(exc, f"cannot open {self.path}") from exc
        self.repaired_bytes += live.cut
        self._fd, self._size, self._inode = live.fd, live.size, live.inode
        return live.last_line

    def _rotate(self, last: int) -> None:
        """Rotate the live file away (`livefile.rotate`) and open a new one. The file rotated
        away is made durable in a thread (`Syncer`), not on the event loop. With none kept, its
        `last` seq is noted first: a crash before the new file has a record does not begin
        the stream again at seq 1."""
        if self.keep == 0:
            self.unwritten.reached(last)
        fd, self._fd = self._fd, -1
        let_go(self._inode)
        try:
            rotate(self.path, self.keep)
        except OSError as exc:
            raise _error(exc, f"cannot rotate {self.path}") from exc
        finally:
            if fd >= 0:
                self._syncer.hand_over(fd, self.path.parent)
        self._open()
        self.rotations += 1

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, -1
        let_go(self._inode)
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        """Write the `gap` records of lines given up (one try; else keep them in the note for
        the next start), fsync and close. Idempotent; later writes raise ValueError. Seqs given
        up and kept nowhere (the next start may use them again): `unkept`, and SinkWriteError."""
        if self._closed:
            return
        if self.unwritten.lost or self.unwritten.noted:
            with contextlib.suppress(SinkWriteError):
                self.write_lines([])
        self.kept = [(lo, hi) for lo, hi, _ in self.unwritten.runs()]
        self.unkept, why = self.unwritten.keep()
        self._closed = True
        fd = self._fd
        try:
            if fd >= 0:
                self._syncer.fsync(fd)
            self._syncer.wait()
        except OSError as exc:
            raise _error(exc, f"cannot sync {self.path}") from exc
        finally:
            self._close_fd()
        if why is not None:
            raise _error(why, f"{self.unkept} records given up {self.unwritten.unkept}")

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
