"""A generation whose descriptor no longer reads: on a network file system, its file deleted by
another host (NFS: ESTALE, the file handle names no file any more), or, rotated away, reads that
fail (EIO) until it has not been read for limits.rotateWait. It is released and the file at the
path is read on (`Rotation._lost`); the `gap{missing}` it gets is built here."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import Any

from watchrun.sources.generation import Generation
from watchrun.sources.identity import Checkpoint


class Stale(OSError):
    """ESTALE from an operation on one generation's descriptor: that generation's file is gone
    (no other host's write reaches it again, no read of it will work again)."""

    def __init__(self, gen: Generation, exc: OSError) -> None:
        super().__init__(exc.errno, exc.strerror)
        self.gen = gen


class Unread(OSError):
    """Another failure of a read of the generation followed at the path (EIO: a bad block, a
    failing disk): the watcher's `error` says from which offset on it does not read."""

    def __init__(self, gen: Generation, exc: OSError, name: str) -> None:
        super().__init__(exc.errno, exc.strerror)
        self.message = f"cannot read {name} from offset {gen.pos} on: {exc.strerror}"


@contextlib.contextmanager
def reading(gen: Generation, followed: str | None = None) -> Iterator[None]:
    """ESTALE raised within (by an operation on `gen`'s descriptor) is raised as `Stale(gen)`;
    a `Stale` already naming a generation (read within: a copy, a rotated one) stays as it is.
    With `followed` (`gen` is the generation followed at that path), another OSError is raised
    as `Unread`."""
    try:
        yield
    except (Stale, Unread):
        raise
    except OSError as exc:
        if exc.errno == errno.ESTALE:
            raise Stale(gen, exc) from exc
        if followed is None:
            raise
        raise Unread(gen, exc, followed) from exc


def named(gen: Generation) -> str | None:
    """Where `gen`'s file is now (renamed since it was opened), by its descriptor; None when
    it has no name left, or that is not known."""
    with contextlib.suppress(OSError):
        name = os.readlink(f"/proc/self/fd/{gen.fd}")
        if os.path.isabs(name) and not name.endswith(" (deleted)"):
            return name
    return None


def known_size(gen: Generation) -> int:
    """The size `gen` is known to have had, NUL bytes not written yet at its end left out: the
    largest seen, or what an fstat still says (an attribute cache, after its reads failed),
    when that is of its file (a path-based FUSE file system, sshfs, gives the attributes of the
    file at its path now)."""
    size = gen.seen_size
    with contextlib.suppress(OSError):
        st = os.fstat(gen.fd)
        if gen.is_file(st):
            size = max(size, st.st_size)
    return size - min(gen.nul.ahead, max(0, size - gen.pos))


def lost_gap(read: Checkpoint, path: str, size: int, exc: OSError, *,
             followed: bool) -> dict[str, Any] | None:
    """The `gap{missing}` of a generation released because its descriptor no longer reads
    (`read`: its checkpoint at its read position): the bytes of it known past there (`size`).
    For the generation `followed` at the path, also when none are known: what was written to
    it since the last look cannot be read (`unreadBytes` 0: not known). None for a rotated one
    with none known (read to its end when it was rotated away, as a release after rotateWait
    assumes)."""
    unread = max(0, size - read.offset)
    if not unread and not followed:
        return None
    why = ("its file was deleted, by another host of its network file system"
           if exc.errno == errno.ESTALE else "rotated away, its reads failed until it was released")
    since = ", nor what was written to it after the runner last looked" if followed else ""
    return {"reason": "missing", "path": path, "inode": read.inode, "offset": read.offset,
            "lineNo": read.line_no, "unreadBytes": unread,
            "message": f"the generation being read (inode {read.inode}) can no longer be read "
                       f"({exc.strerror}: {why}) from line {read.line_no} (offset "
                       f"{read.offset}) on: {unread} bytes of it seen were not read{since}"}
